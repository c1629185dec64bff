//go:build unix

package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

func TestWorkerArgsCarryNoSecret(t *testing.T) {
	o := &GlobalOptions{StateDir: "/s", ConfigFile: "cfg.yaml", UpgradeURL: "http://127.0.0.1:9/api",
		UpgradeToken: "tok-very-secret-1", UpgradeTimeout: 7 * time.Second, Verbose: true}
	abs, _ := filepath.Abs("cfg.yaml")
	want := []string{"--state-dir", "/s", "--config=" + abs, "--upgrade-url", "http://127.0.0.1:9/api", "--upgrade-timeout", "7s", "--verbose"}
	if d := cmp.Diff(want, workerArgs(o)); d != "" {
		t.Errorf("args (-want +got):\n%s", d)
	}
	base := []string{"PATH=/bin", "UPGRADE_API_TOKEN=old", "OPENAI_API_KEY=sk-x", "UPGRADE_API_URL=http://other/api", "UPGRADE_AGENT_HOME=/elsewhere"}
	wantEnv := []string{"PATH=/bin", "UPGRADE_API_TOKEN=tok-very-secret-1"}
	if d := cmp.Diff(wantEnv, workerEnv(o, base)); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}

	// No config file read: the worker must read none either. A URL with
	// credentials travels in the environment, not on the command line.
	o = &GlobalOptions{StateDir: "/s", UpgradeURL: "http://u:pw@127.0.0.1:9/api"}
	if d := cmp.Diff([]string{"--state-dir", "/s", "--config="}, workerArgs(o)); d != "" {
		t.Errorf("args (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"UPGRADE_API_URL=http://u:pw@127.0.0.1:9/api"}, workerEnv(o, nil)); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
}

func running(done int) pipeline.JobStatus {
	return pipeline.JobStatus{ID: "j1", State: "running", Done: done, Total: 300}
}

func TestTurnViewProgressPlainLines(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var errOut bytes.Buffer
	v := NewTurnView("text", &IOStreams{Out: &bytes.Buffer{}, ErrOut: &errOut}, func() time.Time { return now })
	for _, st := range []pipeline.JobStatus{running(0), running(50), running(50), running(200), {ID: "j1", State: "succeeded", Done: 300, Total: 300}} {
		v.Progress(st)
		now = now.Add(time.Second)
	}
	want := "job j1: 0/300\njob j1: 50/300\njob j1: 200/300\njob j1: 300/300 succeeded\n"
	if d := cmp.Diff(want, errOut.String()); d != "" {
		t.Errorf("progress lines (-want +got):\n%s", d)
	}
}

func TestTurnViewJSONKeepsProgressOffStdout(t *testing.T) {
	var out, errOut bytes.Buffer
	v := NewTurnView("json", &IOStreams{Out: &out, ErrOut: &errOut, StderrTTY: true}, time.Now)
	v.Progress(running(10))
	if out.Len() != 0 || errOut.String() != "job j1: 10/300\n" {
		t.Errorf("json view: stdout %q, stderr %q", out.String(), errOut.String())
	}
}

func TestWaitForJobPlainLinesAtMostOncePerSecond(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var errOut bytes.Buffer
	p := newJobProgress(&errOut, false, "j1", func() time.Time { return now })
	p.update(running(1))
	now = now.Add(300 * time.Millisecond)
	p.update(running(2)) // too soon
	now = now.Add(700 * time.Millisecond)
	p.update(running(3))
	p.update(pipeline.JobStatus{ID: "j1", State: "failed", Done: 3, Total: 300}) // the end is always shown
	want := "job j1: 1/300\njob j1: 3/300\njob j1: 3/300 failed\n"
	if d := cmp.Diff(want, errOut.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestTurnViewProgressBarOnTerminal(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var errOut bytes.Buffer
	v := NewTurnView("text", &IOStreams{Out: &bytes.Buffer{}, ErrOut: &errOut, StderrTTY: true}, func() time.Time { return now })
	v.Progress(running(100))
	v.Progress(pipeline.JobStatus{ID: "j1", State: "succeeded", Done: 300, Total: 300})
	out := errOut.String()
	if !strings.Contains(out, "job j1") || !strings.Contains(out, "300/300") || !strings.Contains(out, "\r") {
		t.Errorf("no progress bar: %q", out)
	}
	if strings.Contains(out, "job j1: ") {
		t.Errorf("plain lines on a terminal: %q", out)
	}
}

// ---- end to end: real detached workers ----

// agentEnv is the environment of the upgrade-agent processes of a test:
// nothing from the developer's own settings.
func agentEnv(t *testing.T, extra ...string) []string {
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"TMPDIR=" + os.TempDir()}
	if v := os.Getenv("GOCOVERDIR"); v != "" {
		env = append(env, "GOCOVERDIR="+v)
	}
	return append(env, extra...)
}

// agentRun runs the test binary as upgrade-agent (TestMain dispatches on
// argv[0]) and returns its exit code and output. Workers it starts find
// the same binary through os.Executable, with the same argv[0].
func agentRun(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Args[0] = "upgrade-agent"
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("upgrade-agent %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// balanceScripts writes the scripted LLM of the ask (analyzer, then the
// gatherer proposing test_condition_balance) and of the resume (the
// responder's reply).
func balanceScripts(t *testing.T, expID string, users int) (ask, resume string) {
	dir := t.TempDir()
	ask = writeTestFile(t, dir, "ask.yaml", fmt.Sprintf(`- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.95, user_request_summary: simulate students, reasoning: a balance test}
- call:
    set_action_needed: {action: test_condition_balance, reasoning: asked}
    set_action_params: {action_params: {num_users: %d, context: mathstream, site: lesson-stream, target: question-hint, experiment_id: %q}}
`, users, expID))
	resume = writeTestFile(t, dir, "resume.yaml", "- reply: The balance test is done.\n")
	return ask, resume
}

func createBalanceExperiment(t *testing.T, c *upgrade.Client) string {
	t.Helper()
	ctx := context.Background()
	w := 50.0
	raw, err := actions.Run(ctx, c, actions.CreateExperimentParams{Name: "Hints", Context: "mathstream",
		DecisionPoints: []actions.DecisionPointParam{{Site: "lesson-stream", Target: "question-hint"}},
		Conditions:     []actions.ConditionParam{{Code: "question-hint-default", Weight: &w}, {Code: "question-hint-tutorbot", Weight: &w}}})
	if err != nil {
		t.Fatal(err)
	}
	var res actions.ExperimentResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetState(ctx, res.ID, upgrade.StateEnrolling); err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// askBalance runs the ask that starts the job and must suspend at once.
func askBalance(t *testing.T, env []string, script string, extra ...string) (sessionID, jobID string) {
	t.Helper()
	args := append([]string{"ask", "--yes", "--wait-jobs", "0", "-o", "json", "--llm", "script:" + script}, extra...)
	args = append(args, "simulate the students and show me the condition balance")
	code, stdout, stderr := agentRun(t, env, args...)
	if code != 11 {
		t.Fatalf("ask: exit %d, want 11\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var res pipeline.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("ask output: %v\n%s", err, stdout)
	}
	if res.Status != pipeline.StatusWaitingJob || res.Job == nil || res.Job.Action != "test_condition_balance" || res.Job.State != "running" {
		t.Fatalf("ask result: %s", stdout)
	}
	return res.SessionID, res.Job.ID
}

// resumeBalance runs resume --wait and returns the balance result it
// reports, after checking that its counts add up to exactly users.
func resumeBalance(t *testing.T, env []string, script, session string, users int, extra ...string) actions.BalanceResult {
	t.Helper()
	args := append([]string{"resume", session, "--wait", "--timeout", "2m", "-o", "json", "--llm", "script:" + script}, extra...)
	code, stdout, stderr := agentRun(t, env, args...)
	if code != 0 {
		t.Fatalf("resume --wait: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, fmt.Sprintf("/%d succeeded", users)) {
		t.Errorf("resume --wait showed no final progress line: %s", stderr)
	}
	var res pipeline.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("resume output: %v\n%s", err, stdout)
	}
	if res.Status != pipeline.StatusCompleted || len(res.Actions) != 1 || res.Actions[0].Status != "success" {
		t.Fatalf("resume result: %s", stdout)
	}
	var bal actions.BalanceResult
	if err := json.Unmarshal(res.Actions[0].Result, &bal); err != nil {
		t.Fatal(err)
	}
	sum := bal.Unassigned + bal.Errors
	for _, c := range bal.Conditions {
		sum += c.Count
	}
	if bal.Users != users || sum != users || bal.Assigned != users || bal.Errors != 0 {
		t.Errorf("balance result: users %d, counts sum %d, assigned %d, errors %d (%s); want %d", bal.Users, sum, bal.Assigned, bal.Errors, bal.FirstError, users)
	}
	return bal
}

func loadJob(t *testing.T, state, id string) *jobs.Record {
	t.Helper()
	s, err := jobs.OpenStore(state)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// pidGone: no such process, or a zombie nobody reaped yet.
func pidGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// poll checks cond until it holds or the bound passes. The processes under
// test are separate, so there is no event to wait on.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitClosed waits, bounded, for ch to be closed.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// stopWorkerAtEnd kills a worker a failed test may leave behind.
func stopWorkerAtEnd(t *testing.T, state, id string) {
	t.Cleanup(func() {
		s, err := jobs.OpenStore(state)
		if err != nil {
			return
		}
		if rec, err := s.Load(id); err == nil && rec.PID > 0 && !pidGone(rec.PID) && rec.PID != os.Getpid() {
			_ = syscall.Kill(rec.PID, syscall.SIGKILL)
		}
	})
}

// checkNoSecrets fails when a planted secret was written anywhere in dir.
func checkNoSecrets(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s contains a secret", path)
			}
		}
		return nil
	})
}

const (
	e2eToken = "tok-SECRET-e2e-0123456789"
	e2eKey   = "sk-SECRET-e2e-9876543210"
)

// With the embedded simulator: ask starts the job in a detached worker and
// suspends (exit 11); the worker starts its own simulator on the same data
// file; resume --wait reports exactly 300 users, as the simulator's own
// enrollment statistics do.
func TestJobEndToEndEmbeddedSimulator(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	srv, err := sim.Start(sim.Options{DataFile: filepath.Join(state, "sim", "data.json")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := upgrade.New(upgrade.Config{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	expID := createBalanceExperiment(t, c)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_TOKEN="+e2eToken, "OPENAI_API_KEY="+e2eKey)
	askScript, resumeScript := balanceScripts(t, expID, 300)

	session, jobID := askBalance(t, env, askScript)
	stopWorkerAtEnd(t, state, jobID)
	rec := loadJob(t, state, jobID)
	if rec.SessionID != session || rec.Progress.Total != 300 || rec.PID <= 0 || rec.Attempts != 1 {
		t.Errorf("job record after ask: %+v", rec)
	}

	code, stdout, _ := agentRun(t, env, "jobs", "list", "-o", "json")
	var rows []JobRow
	if code != 0 || json.Unmarshal([]byte(stdout), &rows) != nil || len(rows) != 1 || rows[0].ID != jobID || rows[0].SessionID != session {
		t.Errorf("jobs list: exit %d: %s", code, stdout)
	}

	bal := resumeBalance(t, env, resumeScript, session, 300)

	code, stdout, stderr := agentRun(t, env, "experiments", "stats", expID, "-o", "json")
	var stats StatsReport
	if code != 0 || json.Unmarshal([]byte(stdout), &stats) != nil {
		t.Fatalf("experiments stats: exit %d: %s %s", code, stdout, stderr)
	}
	if stats.Users != 300 {
		t.Errorf("the simulator enrolled %d users, want 300", stats.Users)
	}
	for _, cond := range stats.Conditions {
		for _, share := range bal.Conditions {
			if share.Code == cond.Condition && share.Count != cond.Users {
				t.Errorf("condition %s: the job counted %d, the simulator enrolled %d", cond.Condition, share.Count, cond.Users)
			}
		}
	}

	rec = loadJob(t, state, jobID)
	if rec.State != actions.JobSucceeded || rec.Progress.Done != 300 || tallyDone(t, rec) != 300 {
		t.Errorf("job record at the end: %+v", rec)
	}
	for _, p := range []string{filepath.Join(state, "jobs", jobID+".json"), filepath.Join(state, "jobs", jobID+".log")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", p, fi, err)
		}
	}
	poll(t, "the worker to exit", func() bool { return pidGone(rec.PID) })
	checkNoSecrets(t, state, e2eToken, e2eKey)
}

// gate wraps a simulator: the marks of synthetic users with an index of
// at least from wait until the gate opens; it also counts /v6/init calls
// per user.
type gate struct {
	mu      sync.Mutex
	from    int
	inits   map[string]int
	open    chan struct{}
	blocked chan struct{}
	once    sync.Once
}

func newGate(from int) *gate {
	return &gate{from: from, inits: map[string]int{}, open: make(chan struct{}), blocked: make(chan struct{})}
}

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.Header.Get("User-Id")
		switch {
		case strings.HasSuffix(r.URL.Path, "/v6/init"):
			g.mu.Lock()
			g.inits[user]++
			g.mu.Unlock()
		case strings.HasSuffix(r.URL.Path, "/v6/mark"):
			i := strings.LastIndexByte(user, '-')
			if n, err := strconv.Atoi(user[i+1:]); err == nil && n >= g.from {
				g.once.Do(func() { close(g.blocked) })
				select {
				case <-g.open:
				case <-r.Context().Done():
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (g *gate) initsOf(user string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inits[user]
}

// gatedSim serves a simulator behind a gate that holds the job at exactly
// one committed batch (50 users): users from index 60 on cannot be marked,
// so the second batch can never complete while the gate is shut.
func gatedSim(t *testing.T) (*sim.Sim, *gate, string, string) {
	t.Helper()
	s, err := sim.New(sim.Options{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(60)
	hs := httptest.NewServer(g.wrap(s.Handler()))
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		select {
		case <-g.open:
		default:
			close(g.open)
		}
	})
	c, err := upgrade.New(upgrade.Config{BaseURL: hs.URL + "/api"})
	if err != nil {
		t.Fatal(err)
	}
	return s, g, hs.URL + "/api", createBalanceExperiment(t, c)
}

// A worker killed with SIGKILL after its first committed batch is restarted
// by resume --wait from that batch: the first 50 users are never simulated
// again and the counts still add up to exactly 300.
func TestJobEndToEndKilledWorker(t *testing.T) {
	s, g, url, expID := gatedSim(t)
	state := filepath.Join(t.TempDir(), "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+url, "UPGRADE_API_TOKEN="+e2eToken)
	askScript, resumeScript := balanceScripts(t, expID, 300)

	session, jobID := askBalance(t, env, askScript)
	stopWorkerAtEnd(t, state, jobID)
	waitClosed(t, g.blocked, "the worker to reach the gate")
	var rec *jobs.Record
	poll(t, "the first batch to be committed", func() bool {
		rec = loadJob(t, state, jobID)
		return rec.Progress.Done == 50 && rec.PID > 0
	})
	pid := rec.PID

	// The token reaches the worker through its environment only.
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		if bytes.Contains(cmdline, []byte(e2eToken)) {
			t.Errorf("the token is on the worker's command line")
		}
		if !bytes.Contains(cmdline, []byte(url)) || !bytes.Contains(cmdline, []byte("jobs\x00work\x00"+jobID)) {
			t.Errorf("worker command line %q", cmdline)
		}
	}
	if environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil && !bytes.Contains(environ, []byte("UPGRADE_API_TOKEN="+e2eToken)) {
		t.Errorf("the worker did not get the token in its environment")
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(t, "the killed worker to be gone", func() bool { return pidGone(pid) })
	close(g.open)
	if rec := loadJob(t, state, jobID); rec.State != actions.JobRunning || rec.Progress.Done != 50 {
		t.Fatalf("after the kill: %+v", rec)
	}

	bal := resumeBalance(t, env, resumeScript, session, 300)

	st, err := s.EnrollmentStats(expID)
	if err != nil {
		t.Fatal(err)
	}
	enrolled := map[string]int{}
	for _, c := range st.Conditions {
		enrolled[c.ID] = c.Users
	}
	e, _ := s.Experiment(expID)
	for _, c := range e.Conditions {
		for _, share := range bal.Conditions {
			if share.Code == c.ConditionCode && share.Count != enrolled[c.ID] {
				t.Errorf("condition %s: the job counted %d, the simulator enrolled %d", c.ConditionCode, share.Count, enrolled[c.ID])
			}
		}
	}
	if st.Users != 300 {
		t.Errorf("the simulator enrolled %d users, want 300", st.Users)
	}
	users := 0
	for _, u := range s.Users() {
		if strings.HasPrefix(u.ID, jobs.Key(jobID)+"-") {
			users++
		}
	}
	if users != 300 {
		t.Errorf("the simulator knows %d users of the job, want 300", users)
	}
	for i := 0; i < 50; i++ {
		if n := g.initsOf(actions.BalanceUserID(jobs.Key(jobID)+"-", i)); n != 1 {
			t.Errorf("user %d of the committed batch was initialised %d times, want once", i, n)
		}
	}
	rec = loadJob(t, state, jobID)
	if rec.State != actions.JobSucceeded || rec.Attempts != 2 || tallyDone(t, rec) != 300 {
		t.Errorf("job record at the end: %+v", rec)
	}
	poll(t, "the second worker to exit", func() bool { return pidGone(rec.PID) })
	checkNoSecrets(t, state, e2eToken)
}

// jobs cancel stops a running worker (SIGTERM to its process group) and the
// waiting session reports the cancellation as the action's result.
func TestJobEndToEndCancel(t *testing.T) {
	s, g, url, expID := gatedSim(t)
	state := filepath.Join(t.TempDir(), "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+url)
	askScript, resumeScript := balanceScripts(t, expID, 300)

	session, jobID := askBalance(t, env, askScript)
	stopWorkerAtEnd(t, state, jobID)
	waitClosed(t, g.blocked, "the worker to reach the gate")
	var rec *jobs.Record
	poll(t, "the first batch to be committed", func() bool {
		rec = loadJob(t, state, jobID)
		return rec.Progress.Done == 50 && rec.HeartbeatAt != nil
	})

	code, stdout, stderr := agentRun(t, env, "jobs", "cancel", jobID)
	if code != 0 || !strings.Contains(stdout, "job "+jobID+" cancelled at 50/300") || !strings.Contains(stderr, "upgrade-agent resume "+session) {
		t.Fatalf("jobs cancel: exit %d\n%s\n%s", code, stdout, stderr)
	}
	poll(t, "the cancelled worker to exit", func() bool { return pidGone(rec.PID) })
	close(g.open)
	if log, err := os.ReadFile(filepath.Join(state, "jobs", jobID+".log")); err != nil || !strings.Contains(string(log), "job cancelled") {
		t.Errorf("worker log: %v\n%s", err, log)
	}

	code, stdout, stderr = agentRun(t, env, "resume", session, "-o", "json", "--llm", "script:"+resumeScript)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res pipeline.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 1 || res.Actions[0].Status != "cancelled" || !strings.Contains(res.Actions[0].Error, "cancelled") {
		t.Errorf("resume after cancel: %s", stdout)
	}
	if rec := loadJob(t, state, jobID); rec.State != actions.JobCancelled || rec.Progress.Done != 50 || rec.Attempts != 1 {
		t.Errorf("job record: %+v", rec)
	}
	if st, _ := s.EnrollmentStats(expID); st.Users >= 300 {
		t.Errorf("the cancelled job went on: %d users enrolled", st.Users)
	}
	code, _, stderr = agentRun(t, env, "jobs", "cancel", jobID)
	if code != 0 || !strings.Contains(stderr, "already cancelled") {
		t.Errorf("second cancel: exit %d, %s", code, stderr)
	}
}

// tallyDone is the done count of a record's committed balance tally.
func tallyDone(t *testing.T, rec *jobs.Record) int {
	t.Helper()
	var tally actions.BalanceTally
	if err := json.Unmarshal(rec.Tally, &tally); err != nil {
		t.Fatalf("tally of job %s: %v (%s)", rec.ID, err, rec.Tally)
	}
	return tally.Done
}
