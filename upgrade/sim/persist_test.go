package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func TestPersistenceRoundTrip(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state", "sim.json")
	a := startSim(t, Options{Seed: 1, DataFile: file})
	e := a.create(expBody("Persisted", func(m map[string]any) {
		m["experimentSegmentExclusion"] = segment([]string{"nobody"}, [][2]string{{"classId", "c0"}})
	}))
	a.setState(e.ID, "enrolling")
	a.initUser("p1", map[string][]string{"classId": {"c1"}}, map[string]string{"classId": "c1"})
	code := codeAt(t, a.assign("p1", ctx), site, target)
	a.mark("p1", site, target, code, e.ID, "condition applied")
	if err := a.srv.Close(); err != nil {
		t.Fatal(err)
	}

	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("data file mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(file))
	var names []string
	for _, de := range entries {
		names = append(names, de.Name())
	}
	if diff := cmp.Diff([]string{"sim.json", "sim.json.lock"}, names); diff != "" {
		t.Errorf("files left next to the data (-want +got):\n%s", diff)
	}

	// A new simulator (another seed: the file's own state wins) sees it all.
	b := startSim(t, Options{Seed: 999, DataFile: file})
	got, ok := b.srv.Sim().Experiment(e.ID)
	if !ok {
		t.Fatalf("experiment %s lost", e.ID)
	}
	want, _ := a.srv.Sim().Experiment(e.ID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("experiment after reload (-before +after):\n%s", diff)
	}
	if u, ok := b.srv.Sim().User("p1"); !ok || u.WorkingGroup["classId"] != "c1" {
		t.Errorf("user after reload: %+v %v", u, ok)
	}
	if again := codeAt(t, b.assign("p1", ctx), site, target); again != code {
		t.Errorf("p1 had %s, after reload %s", code, again)
	}
	st, err := b.srv.Sim().EnrollmentStats(e.ID)
	if err != nil || st.Users != 1 {
		t.Errorf("stats after reload: %+v %v", st, err)
	}
}

func TestMemoryModeWritesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ts := startSim(t, Options{})
	ts.create(expBody("In memory"))
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("memory mode wrote %d files", len(entries))
	}
}

func TestTwoSimulatorsShareADataFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shared.json")
	a := startSim(t, Options{Seed: 1, DataFile: file})
	b := startSim(t, Options{Seed: 2, DataFile: file})

	x := a.create(expBody("From A"))
	if _, ok := b.srv.Sim().Experiment(x.ID); !ok {
		t.Fatal("B does not see A's experiment")
	}
	var single upgrade.Experiment
	b.must("GET", "/experiments/single/"+x.ID, nil).decode(t, &single)
	b.setState(x.ID, "enrolling")
	if got, _ := a.srv.Sim().Experiment(x.ID); got.State != upgrade.StateEnrolling {
		t.Errorf("A sees state %s after B started it", got.State)
	}

	// A user initialised and enrolled (marked) through one keeps the
	// condition through the other.
	a.initUser("shared-user", nil, nil)
	code := codeAt(t, a.assign("shared-user", ctx), site, target)
	// Draws are keyed by the file's seed, not each process's own.
	if got := codeAt(t, b.assign("shared-user", ctx), site, target); got != code {
		t.Fatalf("unmarked draw through B: %s, through A: %s", got, code)
	}
	a.mark("shared-user", site, target, code, x.ID, "condition applied")
	for i := 0; i < 3; i++ {
		if got := codeAt(t, b.assign("shared-user", ctx), site, target); got != code {
			t.Fatalf("through B: %s, through A: %s", got, code)
		}
	}

	// Concurrent writes through both lose nothing.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ts := a
			if i%2 == 1 {
				ts = b
			}
			if err := post(ts, "/v6/init", fmt.Sprintf("w%02d", i), map[string]any{}, nil); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if na, nb := len(a.srv.Sim().Users()), len(b.srv.Sim().Users()); na != 41 || nb != 41 {
		t.Errorf("users seen: A %d, B %d, want 41", na, nb)
	}
}

// TestHelperWriter is not a test: the multi-process test runs the test
// binary with SIM_HELPER_FILE set, and this body then acts as another
// process writing to the shared data file.
func TestHelperWriter(t *testing.T) {
	file := os.Getenv("SIM_HELPER_FILE")
	if file == "" {
		t.Skip("helper process only")
	}
	n, _ := strconv.Atoi(os.Getenv("SIM_HELPER_N"))
	prefix := os.Getenv("SIM_HELPER_PREFIX")
	s, err := New(Options{Seed: 5, DataFile: file})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	for i := 0; i < n; i++ {
		body, _ := json.Marshal(expBody(fmt.Sprintf("%s-%03d", prefix, i)))
		req := httptest.NewRequest("POST", "/api/experiments", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("create %d: %d %s", i, rec.Code, rec.Body)
		}
	}
}

func TestProcessesShareADataFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	file := filepath.Join(t.TempDir(), "multi.json")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const perProcess = 15
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for _, p := range []string{"one", "two"} {
		cmd := exec.Command(exe, "-test.run=^TestHelperWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SIM_HELPER_FILE="+file, "SIM_HELPER_N="+strconv.Itoa(perProcess), "SIM_HELPER_PREFIX="+p)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	// This process writes at the same time.
	here := startSim(t, Options{Seed: 6, DataFile: file})
	for i := 0; i < perProcess; i++ {
		here.create(expBody(fmt.Sprintf("here-%03d", i)))
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i])
		}
	}
	var names []upgrade.ExperimentName
	here.must("GET", "/experiments/names", nil).decode(t, &names)
	got := map[string]bool{}
	ids := map[string]bool{}
	for _, n := range names {
		got[n.Name] = true
		ids[n.ID] = true
	}
	if len(names) != 3*perProcess || len(got) != 3*perProcess || len(ids) != 3*perProcess {
		var list []string
		for n := range got {
			list = append(list, n)
		}
		sort.Strings(list)
		t.Errorf("%d experiments (%d names, %d ids), want %d: %v", len(names), len(got), len(ids), 3*perProcess, list)
	}
}

func TestDataFileErrors(t *testing.T) {
	dir := t.TempDir()
	valid := func() []byte {
		f := filepath.Join(dir, "ok.json")
		s, err := New(Options{DataFile: f})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.InitUser("u", upgrade.InitRequest{}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	tests := []struct {
		name, content string
		want          []string
	}{
		{"syntax", "{\n  \"format\": 1,\n  \"experiments\": [,]\n}", []string{"line 3"}},
		{"unknown field", strings.Replace(string(valid), `"format":1`, `"format":1,"colour":"red"`, 1), []string{"colour"}},
		{"wrong format", strings.Replace(string(valid), `"format":1`, `"format":7`, 1), []string{"format 7"}},
		{"trailing data", string(valid) + "{}", []string{"after the JSON"}},
		{"truncated", string(valid[:len(valid)/2]), []string{"end of JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			if err := os.WriteFile(f, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(Options{DataFile: f})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(tt.want, f) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadMetadataFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	custom := `{
  "reading-app": {
    "CONDITIONS": ["plain", "illustrated"],
    "GROUP_TYPES": ["classId"],
    "EXP_IDS": ["story-1"],
    "EXP_POINTS": ["open-story"]
  }
}`
	want := upgrade.ContextMetadata{"reading-app": {Conditions: []string{"plain", "illustrated"},
		GroupTypes: []string{"classId"}, ExpIDs: []string{"story-1"}, ExpPoints: []string{"open-story"}}}
	for _, tc := range []struct{ name, content string }{
		{"setting.json", custom},
		{"answer.json", `{"contextMetadata": ` + custom + `}`},
	} {
		got, err := LoadMetadataFile(write(tc.name, tc.content))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}

	// The simulator serves it and validates experiments against it.
	meta, _ := LoadMetadataFile(filepath.Join(dir, "setting.json"))
	ts := startSim(t, Options{Metadata: meta})
	var served struct {
		ContextMetadata upgrade.ContextMetadata `json:"contextMetadata"`
	}
	ts.must("GET", "/experiments/contextMetaData", nil).decode(t, &served)
	if diff := cmp.Diff(want, served.ContextMetadata); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
	ts.create(expBody("Stories", func(m map[string]any) { m["context"] = []any{"reading-app"} }))
	if r := ts.do("POST", "/experiments", expBody("Default context")); r.status != http.StatusBadRequest {
		t.Errorf("assign-prog under custom metadata: %d", r.status)
	}

	for _, tc := range []struct{ name, content, want string }{
		{"unknown-key.json", `{"a": {"CONDITIONS": [], "TARGETS": []}}`, "TARGETS"},
		{"syntax.json", "{\n\"a\": {\n\"CONDITIONS\": [1]\n}}", "line 3"},
		{"empty.json", `{}`, "no contexts"},
		{"null.json", `null`, "null"},
		{"blank-value.json", `{"a": {"EXP_POINTS": [""]}}`, "EXP_POINTS[0]"},
		{"trailing.json", `{"a": {}} x`, "after the JSON"},
	} {
		p := write(tc.name, tc.content)
		_, err := LoadMetadataFile(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want it to name the file and %q", tc.name, err, tc.want)
		}
	}
	if _, err := LoadMetadataFile(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestServerURLAndDirectSetup(t *testing.T) {
	srv, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || !strings.HasSuffix(srv.URL(), "/api") {
		t.Errorf("URL %q", srv.URL())
	}
	s := srv.Sim()
	e, err := s.CreateExperiment(upgrade.Experiment{Name: "Direct", Context: []string{ctx}, State: upgrade.StateInactive,
		ConsistencyRule: "individual", AssignmentUnit: "individual", PostExperimentRule: "continue", FilterMode: "includeAll",
		Type: "Simple", Tags: []string{},
		Conditions: []upgrade.Condition{{ID: "a", ConditionCode: "control", AssignmentWeight: 100, Order: 1}},
		Partitions: []upgrade.DecisionPoint{{ID: "d", Site: site, Target: target, Order: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetState(e.ID, "running"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InitUser("d1", upgrade.InitRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateExperiment(upgrade.Experiment{Name: "Broken"})
	var se *Error
	if !asError(err, &se) || se.Status != 400 {
		t.Errorf("invalid direct create: %v", err)
	}
	if _, err := s.SetState("3f0b6a55-1c7e-4c1e-9a53-2b8f0f7d9c11", upgrade.StateEnrolling); err == nil {
		t.Error("SetState of an unknown experiment succeeded")
	}
	ts := &testServer{t: t, srv: srv, base: srv.URL(), client: http.DefaultClient}
	if got := codeAt(t, ts.assign("d1", ctx), site, target); got != "control" {
		t.Errorf("d1 got %q", got)
	}
	if s.Requests() < 1 {
		t.Errorf("Requests() = %d", s.Requests())
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}

func TestFailedWriteLosesOnlyThatChange(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fail.json")
	ts := startSim(t, Options{DataFile: file})
	kept := ts.create(expBody("Kept"))

	orig := atomicWrite
	defer func() { atomicWrite = orig }()
	atomicWrite = func(string, []byte) error { return fmt.Errorf("disk full") }
	r := ts.do("POST", "/experiments", expBody("Lost"))
	var se upgrade.ServerError
	r.decode(t, &se)
	if r.status != 500 || !strings.Contains(se.Message, "disk full") || !strings.Contains(se.Message, file) {
		t.Fatalf("failed write answered %d %s", r.status, r.body)
	}
	atomicWrite = orig

	var names []upgrade.ExperimentName
	ts.must("GET", "/experiments/names", nil).decode(t, &names)
	if diff := cmp.Diff([]upgrade.ExperimentName{{ID: kept.ID, Name: "Kept"}}, names); diff != "" {
		t.Errorf("after the failed write (-want +got):\n%s", diff)
	}
	ts.create(expBody("After"))
	other, err := New(Options{DataFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(other.Experiments()); n != 2 {
		t.Errorf("the file holds %d experiments, want 2", n)
	}
}

func TestConcurrentWritesShareFsyncs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "batch.json")
	var writes atomic.Int64
	orig := atomicWrite
	defer func() { atomicWrite = orig }()
	atomicWrite = func(p string, b []byte) error {
		writes.Add(1)
		return orig(p, b)
	}
	ts := startSim(t, Options{DataFile: file})
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- post(ts, "/v6/init", fmt.Sprintf("b%02d", i), map[string]any{}, nil)
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	other, err := New(Options{DataFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(other.Users()); got != n {
		t.Errorf("file holds %d users, want %d", got, n)
	}
	if w := writes.Load(); w < 1 || w > n {
		t.Errorf("%d writes for %d changes", w, n)
	}
	t.Logf("%d changes, %d writes", n, writes.Load())
	// Unchanged re-inits write nothing.
	before := writes.Load()
	ts.initUser("b00", nil, nil)
	if writes.Load() != before {
		t.Error("an init that changed nothing wrote the file")
	}
}
