package actions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestFactorialComesBackFromItsExport: UpGrade 6.5 exports a factorial
// level made without a payload as {"type":"string","value":null} and its
// own import refuses that, so an exported factorial cannot be imported as
// it is (checked on the simulator here, and on a real 6.5 with
// UPGRADE_REAL_URL). import_experiments leaves those payloads out, says so
// in the plan, and the copy reads back with the source's levels and
// payloads.
func TestFactorialComesBackFromItsExport(t *testing.T) {
	t.Run("simulator", func(t *testing.T) {
		factorialRoundTrip(t, startSim(t, "6.5.0"), startSim(t, "6.5.0"), "sim")
	})
	t.Run("real", func(t *testing.T) {
		c, tag := realServer(t)
		factorialRoundTrip(t, c, c, tag)
	})
}

// realServer is a client of the real UpGrade of UPGRADE_REAL_URL (the
// test is skipped without one) and a tag that makes this run's names its
// own.
func realServer(t *testing.T) (*upgrade.Client, string) {
	t.Helper()
	u := strings.TrimRight(os.Getenv("UPGRADE_REAL_URL"), "/")
	if u == "" {
		t.Skip("UPGRADE_REAL_URL not set: no real UpGrade server (see docs/upgrade-real.md)")
	}
	c, err := upgrade.New(upgrade.Config{BaseURL: u, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	return c, "real-" + hex.EncodeToString(rb[:])
}

func factorialRoundTrip(t *testing.T, src, dst *upgrade.Client, tag string) {
	ctx := context.Background()
	name := "Roundtrip 2x2 " + tag
	p := parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"`+name+`","context":"assign-prog","design":"factorial",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],
		"factors":[{"name":"Color","levels":[{"name":"Red","payload":"#f00"},{"name":"Blue"}]},{"name":"Shape","levels":["Circle","Square"]}]}`)
	_, raw := run(t, src, p)
	created := decode[ExperimentResult](t, raw)
	t.Cleanup(func() { _, _ = src.DeleteExperiment(context.Background(), created.ID) })
	export, err := src.ExportExperiments(ctx, []string{created.ID})
	if err != nil {
		t.Fatal(err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(export, &list); err != nil || len(list) != 1 {
		t.Fatalf("export: %v, %d experiments", err, len(list))
	}

	// The trap: the server refuses its own export.
	res, err := dst.ValidateExperimentImport(ctx, []upgrade.ImportFile{{FileName: "as-exported.json", FileContent: string(list[0])}})
	if err != nil || len(res) != 1 || res[0].CompatibilityType != upgrade.Incompatible || !strings.Contains(res[0].ErrorText(), "payload.value") {
		t.Fatalf("the export as it is: %+v, %v; want incompatible on payload.value", res, err)
	}

	imp := ImportExperimentsParams{Files: []ImportFileParam{{Name: "hints.json", Content: string(list[0])}}}
	before, err := dst.Experiments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := run(t, dst, imp)
	if !strings.Contains(plan.Message, "3 factor level payload(s) without a value are left out") {
		t.Errorf("plan does not say what is left out:\n%s", plan.Message)
	}
	after, err := dst.Experiments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var copyID string
	for _, e := range after {
		if e.Name == name && e.ID != created.ID && !containsID(before, e.ID) {
			copyID = e.ID
		}
	}
	if copyID == "" {
		t.Fatalf("no new experiment named %q after the import", name)
	}
	t.Cleanup(func() { _, _ = dst.DeleteExperiment(context.Background(), copyID) })
	e, err := dst.Experiment(ctx, copyID)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != "inactive" || e.Type != upgrade.TypeFactorial || len(e.Conditions) != 4 {
		t.Fatalf("copy: state %s, type %s, %d conditions", e.State, e.Type, len(e.Conditions))
	}
	got := map[string]string{}
	for _, f := range e.Factors {
		for _, l := range f.Levels {
			got[f.Name+"/"+l.Name] = l.PayloadText()
		}
	}
	want := map[string]string{"Color/Red": "#f00", "Color/Blue": "", "Shape/Circle": "", "Shape/Square": ""}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("level %s: payload %q (present %v), want %q; all %v", k, g, ok, v, got)
		}
	}
}

func containsID(es []upgrade.Experiment, id string) bool {
	for _, e := range es {
		if e.ID == id {
			return true
		}
	}
	return false
}

// TestImportable: only what 6.5 cannot import changes: a factorial level
// payload whose value is null goes, missing or null queries and
// levelCombinationElements become []; a file that needs nothing is sent
// byte for byte as it came.
func TestImportable(t *testing.T) {
	same := `{"name": "x", "queries": [], "conditions": [{"conditionCode": "a", "levelCombinationElements": []}], "factors": [{"name":"A","levels":[{"name":"a1","payload":{"type":"string","value":"v"}},{"name":"a2"}]}]}`
	if got, fx := importable(same); got != same || fx != (importFixes{}) {
		t.Errorf("nothing to change: %+v, %s", fx, got)
	}
	for _, s := range []string{`not json`, `[1,2]`, `null`} {
		if got, fx := importable(s); got != s || fx != (importFixes{}) {
			t.Errorf("%s: %+v, %s", s, fx, got)
		}
	}
	in := `{"name":"x","backendVersion":"6.5.0","queries":null,"conditions":[{"conditionCode":"a"},{"conditionCode":"b","levelCombinationElements":null},{"conditionCode":"c","levelCombinationElements":[]}],` +
		`"factors":[{"name":"A","levels":[{"name":"a1","payload":{"type":"string","value":null}},{"name":"a2","payload":{"type":"string"}},{"name":"a3","payload":{"type":"string","value":"v"}}]}]}`
	got, fx := importable(in)
	if fx != (importFixes{unset: 2, queries: true, elements: 2}) {
		t.Fatalf("fixes %+v: %s", fx, got)
	}
	var e struct {
		Name       string                       `json:"name"`
		Version    string                       `json:"backendVersion"`
		Queries    json.RawMessage              `json:"queries"`
		Conditions []map[string]json.RawMessage `json:"conditions"`
		Factors    []struct {
			Levels []map[string]json.RawMessage `json:"levels"`
		} `json:"factors"`
	}
	if err := json.Unmarshal([]byte(got), &e); err != nil {
		t.Fatal(err)
	}
	ls := e.Factors[0].Levels
	if e.Name != "x" || e.Version != "6.5.0" || string(e.Queries) != "[]" || len(ls) != 3 || ls[0]["payload"] != nil || ls[1]["payload"] != nil || string(ls[2]["payload"]) != `{"type":"string","value":"v"}` {
		t.Errorf("result: %s", got)
	}
	for i, c := range e.Conditions {
		if string(c["levelCombinationElements"]) != "[]" {
			t.Errorf("condition %d: %s", i, c["levelCombinationElements"])
		}
	}
	lines := fx.lines()
	if len(lines) != 2 || !strings.Contains(lines[0], "2 factor level payload(s)") || !strings.Contains(lines[1], "queries, levelCombinationElements of 2 condition(s)") {
		t.Errorf("plan lines: %q", lines)
	}
}

// TestFileWithoutQueriesImports: a file without queries and with a
// condition without levelCombinationElements (written by hand or by
// another tool) is refused by 6.5 with an empty error; import_experiments
// adds them as [] and the experiment is created. On the simulator, and on
// a real 6.5 with UPGRADE_REAL_URL.
func TestFileWithoutQueriesImports(t *testing.T) {
	t.Run("simulator", func(t *testing.T) {
		fileWithoutQueries(t, startSim(t, "6.5.0"), "sim")
	})
	t.Run("real", func(t *testing.T) {
		c, tag := realServer(t)
		fileWithoutQueries(t, c, tag)
	})
}

func fileWithoutQueries(t *testing.T, api *upgrade.Client, tag string) {
	ctx := context.Background()
	name := "Handwritten " + tag
	_, raw := run(t, api, parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"`+name+`","context":"assign-prog",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`))
	created := decode[ExperimentResult](t, raw)
	export, err := api.ExportExperiments(ctx, []string{created.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.DeleteExperiment(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal(export, &list); err != nil || len(list) != 1 {
		t.Fatalf("export: %v, %d experiments", err, len(list))
	}
	delete(list[0], "queries")
	for _, c := range list[0]["conditions"].([]any) {
		delete(c.(map[string]any), "levelCombinationElements")
	}
	file, err := json.Marshal(list[0])
	if err != nil {
		t.Fatal(err)
	}
	res, err := api.ValidateExperimentImport(ctx, []upgrade.ImportFile{{FileName: "hand.json", FileContent: string(file)}})
	if err != nil || len(res) != 1 || res[0].CompatibilityType != upgrade.Incompatible || res[0].ErrorText() != "" {
		t.Fatalf("the file as it is: %+v, %v; want incompatible with an empty error", res, err)
	}
	plan, _ := run(t, api, ImportExperimentsParams{Files: []ImportFileParam{{Name: "hand.json", Content: string(file)}}})
	if !strings.Contains(plan.Message, "added as empty lists, which UpGrade 6.5 needs to import the file") {
		t.Errorf("plan does not say what is added:\n%s", plan.Message)
	}
	all, err := api.Experiments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range all {
		if e.Name == name {
			found = true
			id := e.ID
			t.Cleanup(func() { _, _ = api.DeleteExperiment(context.Background(), id) })
			if e.State != "inactive" || len(e.Conditions) != 2 {
				t.Errorf("imported: state %s, %d conditions", e.State, len(e.Conditions))
			}
		}
	}
	if !found {
		t.Errorf("no experiment %q after the import", name)
	}
}
