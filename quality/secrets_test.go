//go:build unix

package quality

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// The planted secrets. Each is distinctive enough that finding it anywhere
// can only mean a leak.
const (
	plantedKey   = "sk-planted-OPENAI-9f4c2a7e1b3d5c8a"
	plantedToken = "upg-planted-TOKEN-6e1d9b3f7a2c4e8b"
)

// keyedLLM is a scripted LLM behind a front door that demands the planted
// key as a bearer token, so the key is really sent on every call.
type keyedLLM struct {
	script *llmtest.Server
	url    string
	bad    atomic.Int64 // calls without the right Authorization
}

func newKeyedLLM(t *testing.T) *keyedLLM {
	t.Helper()
	k := &keyedLLM{script: llmtest.NewServer(t)}
	target, err := url.Parse(k.script.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+plantedKey {
			k.bad.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"bad key","type":"invalid_request_error"}}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	k.url = front.URL + "/v1"
	return k
}

func call(name string, args any) llmtest.Call { return llmtest.NewCall(name, args) }

func calls(cs ...llmtest.Call) llmtest.Reply { return llmtest.CallReply(cs...) }

// TestSecretsNeverWritten plants an OpenAI key and an UpGrade token that are
// really used (the LLM and the simulator refuse calls without them), runs a
// whole flow with -v (a create proposed and confirmed, a balance job run by
// a real worker process, listings, an error, a scenario recorded to a
// cassette with its golden file written), then reads every file written and
// every line printed: neither value is anywhere.
func TestSecretsNeverWritten(t *testing.T) {
	t.Parallel()
	srv, err := sim.Start(sim.Options{Seed: 5, Token: plantedToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	admin, err := upgrade.New(upgrade.Config{BaseURL: srv.URL(), Token: plantedToken})
	if err != nil {
		t.Fatal(err)
	}
	lm := newKeyedLLM(t)

	c := newCLI(t)
	c.env["OPENAI_API_KEY"] = plantedKey
	c.env["OPENAI_BASE_URL"] = lm.url
	c.env["UPGRADE_API_URL"] = srv.URL()
	c.env["UPGRADE_API_TOKEN"] = plantedToken
	var printed []result
	run := func(code int, args ...string) result {
		t.Helper()
		r := c.run(args...)
		printed = append(printed, r)
		wantCode(t, r, code)
		if err := lm.script.Verify(); err != nil {
			t.Fatalf("scripted LLM after %v: %v", args, err)
		}
		return r
	}

	// 1. A create is proposed. The message itself carries both secrets, as a
	// careless person might paste them.
	lm.script.Enqueue(
		calls(call("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.95,
			"user_request_summary": "Create Math Hints in assign-prog.", "reasoning": "A complete create request."})),
		calls(call("set_action_needed", map[string]any{"action": "create_experiment", "reasoning": "Asked for."}),
			call("set_action_params", map[string]any{"action_params": map[string]any{
				"name": "Math Hints", "context": "assign-prog",
				"decision_points": []any{map[string]any{"site": "SelectSection", "target": "absolute_value_plot_equality"}},
				"conditions":      []any{map[string]any{"code": "control", "weight": 50}, map[string]any{"code": "variant", "weight": 50}},
			}})),
	)
	r := run(10, "ask", "-v", "Create Math Hints in assign-prog at SelectSection / absolute_value_plot_equality, control and variant 50/50. "+
		"In case you need them: my UpGrade token is "+plantedToken+" and my OpenAI key is "+plantedKey+".")
	id := sessionOf(t, r)

	// 2. Confirmed: the create goes to the server with the token (the
	// reply is rendered from the result, with no LLM call).
	run(0, "resume", "-v", id, "--answer", "yes")
	es, err := admin.Experiments(context.Background())
	if err != nil || len(es) != 1 || es[0].Name != "Math Hints" {
		t.Fatalf("experiments on the server: %v, %v", es, err)
	}
	if _, err := admin.SetState(context.Background(), es[0].ID, upgrade.StateEnrolling); err != nil {
		t.Fatal(err)
	}

	// 3. A balance job, run by a detached worker process that gets the
	// token through its environment and writes a job record and a log.
	lm.script.Enqueue(
		calls(call("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.95,
			"user_request_summary": "Simulate 40 students for Math Hints.", "reasoning": "A balance test."})),
		calls(call("set_action_needed", map[string]any{"action": "test_condition_balance", "reasoning": "Asked for."}),
			call("set_action_params", map[string]any{"action_params": map[string]any{
				"num_users": 40, "context": "assign-prog", "site": "SelectSection", "target": "absolute_value_plot_equality",
				"experiment_id": es[0].ID}})),
	)
	run(10, "ask", "-v", "--session", id, "Simulate 40 students at SelectSection / absolute_value_plot_equality.")
	run(0, "resume", "-v", id, "--answer", "yes", "--wait-jobs", "45s")
	r = run(0, "jobs", "list", "-o", "json")
	var jobs []struct {
		ID, State string
	}
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil || len(jobs) != 1 || jobs[0].State != "succeeded" {
		t.Fatalf("jobs: %v (%v)\n%s", jobs, err, r)
	}
	waitWorkerGone(t, filepath.Join(c.env["UPGRADE_AGENT_HOME"], "jobs", jobs[0].ID+".json"))
	run(0, "jobs", "show", "-v", jobs[0].ID)

	// 4. Everything that reads.
	run(0, "sessions", "list", "-v")
	run(0, "sessions", "show", "-v", id)
	run(0, "sessions", "show", "-v", "-o", "json", id)
	run(0, "experiments", "list", "-v")
	run(0, "experiments", "show", "-v", "Math Hints")
	run(0, "experiments", "stats", "-v", "-o", "json", "Math Hints")
	run(0, "contexts", "-v")
	run(0, "health", "-v")
	// An error message.
	r = run(2, "experiments", "show", "-v", "No Such Experiment")
	if !strings.Contains(r.stderr, "Error:") {
		t.Errorf("no error message:\n%s", r)
	}

	// 5. A scenario against the same server, recorded live into a cassette,
	// its golden transcript written.
	scen := filepath.Join(c.dir, "scen")
	if err := os.MkdirAll(scen, 0o700); err != nil {
		t.Fatal(err)
	}
	c.file("scen/secrets.yaml", `name: secrets-recorded
description: A health question recorded live into a cassette.
golden: true
backend: url
llm: record:cassette.json
steps:
  - say: Is UpGrade up? (token `+plantedToken+`)
    expect:
      status: completed
`)
	lm.script.Enqueue(
		calls(call("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.9,
			"user_request_summary": "Is UpGrade up?", "reasoning": "Needs the health check."})),
		calls(call("check_upgrade_health", nil)),
		llmtest.TextReply("I have the answer."),
		llmtest.TextReply("UpGrade is up."),
	)
	run(0, "scenario", "run", "-v", "--update", scen)
	for _, p := range []string{filepath.Join(scen, "cassette.json"), filepath.Join(c.dir, "golden", "secrets-recorded.txt")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the scenario run did not write %s: %v", p, err)
		}
	}

	if n := lm.bad.Load(); n > 0 {
		t.Errorf("%d LLM calls came without the planted key", n)
	}
	for _, req := range lm.script.Requests() {
		for _, s := range []string{plantedKey, plantedToken} {
			if strings.Contains(string(req.Body), s) {
				t.Errorf("LLM call %d (%s) carried a planted secret to the model", req.Call, req.Node)
			}
		}
	}

	// Every byte written and printed.
	files := 0
	err = filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || c.inputs[path] {
			return err // the test's own inputs (the scenario file) hold the secrets on purpose
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range []string{plantedKey, plantedToken} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s contains a planted secret", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("only %d files under %s: the flow wrote less than it should", files, c.dir)
	}
	for _, r := range printed {
		for _, s := range []string{plantedKey, plantedToken} {
			if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
				t.Errorf("a planted secret was printed by\n%s", r)
			}
		}
		if strings.Contains(r.stderr, "Bearer ") && !strings.Contains(r.stderr, "Bearer [REDACTED]") {
			t.Errorf("an Authorization header was printed by\n%s", r)
		}
	}
}

// waitWorkerGone waits until the worker named in a job record has exited
// (the test process reaps it), so nothing writes in the temp dir while it
// is removed. Bounded: a worker that does not end fails the test.
func waitWorkerGone(t *testing.T, record string) {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.PID <= 0 {
		t.Fatalf("job record %s: pid %d (%v)", record, rec.PID, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := syscall.Kill(rec.PID, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(rec.PID, syscall.SIGKILL)
			t.Fatalf("worker %d still runs 30s after its job ended", rec.PID)
		}
		time.Sleep(20 * time.Millisecond) // polling a process we cannot wait on
	}
}
