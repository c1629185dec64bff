//go:build unix

package cmd

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

const crashPropose = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: create Crash Test, reasoning: action}
- call:
    set_action_needed: {action: create_experiment, reasoning: asked}
    set_action_params:
      action_params:
        name: Crash Test
        context: assign-prog
        decision_points: [{site: SelectSection, target: absolute_value_plot_equality}]
        conditions: [{code: control, weight: 50}, {code: variant, weight: 50}]
- reply: Ready to create Crash Test.
`

// slowCreate widens the window around the non-idempotent write: the create
// request waits before it reaches the simulator and again before its answer
// leaves, so a kill can land before, during or after the write.
func slowCreate(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slow := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/experiments")
		if slow {
			time.Sleep(d)
		}
		h.ServeHTTP(w, r)
		if slow {
			time.Sleep(d)
		}
	})
}

// TestCrashDuringConfirmedCreate kills `resume --answer yes` with SIGKILL at
// many points of a confirmed create, resumes, and counts: the simulator always
// ends with exactly one experiment of that name, and every checkpoint left
// behind loads.
func TestCrashDuringConfirmedCreate(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const window = 150 * time.Millisecond
	kills := []time.Duration{0, 30 * time.Millisecond, 80 * time.Millisecond, 130 * time.Millisecond,
		180 * time.Millisecond, 230 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond}
	for _, after := range kills {
		t.Run(after.String(), func(t *testing.T) {
			s, err := sim.New(sim.Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(slowCreate(s.Handler(), window))
			defer srv.Close()
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			propose := writeTestFile(t, dir, "propose.yaml", crashPropose)
			done := writeTestFile(t, dir, "done.yaml", "- reply: Created.\n")
			env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+srv.URL+"/api")

			if code, out, errOut := agentRun(t, env, "ask", "--llm", "script:"+propose, "create Crash Test"); code != 10 {
				t.Fatalf("ask: exit %d\n%s\n%s", code, out, errOut)
			}
			store, err := checkpoint.OpenFileStore(state)
			if err != nil {
				t.Fatal(err)
			}
			id, err := store.Latest()
			if err != nil {
				t.Fatal(err)
			}

			// The confirmed create, killed after `after`.
			cmd := exec.Command(exe, "resume", "--llm", "script:"+done, "--answer", "yes", id)
			cmd.Args[0] = "upgrade-agent"
			cmd.Env = env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			select {
			case <-time.After(after):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-exited
			case <-exited:
			}

			// Every checkpoint left behind loads.
			if _, err := pipeline.LoadSession(store, id); err != nil {
				t.Fatalf("checkpoint after the kill: %v", err)
			}
			hist, err := store.History(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, seq := range hist {
				if _, err := store.LoadHistory(id, seq); err != nil {
					t.Fatalf("history %d: %v", seq, err)
				}
			}

			// Resume until nothing is left to do.
			for i := 0; i < 3; i++ {
				code, o, e := agentRun(t, env, "resume", "--llm", "script:"+done, "--answer", "yes", id)
				if code == 2 && strings.Contains(e, "nothing to resume") {
					break
				}
				if code != 0 {
					t.Fatalf("resume after kill at %v: exit %d\n%s\n%s\nkilled run:\n%s", after, code, o, e, out.String())
				}
			}
			n := 0
			for _, e := range s.Experiments() {
				if e.Name == "Crash Test" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("kill at %v: %d experiments named Crash Test, want exactly 1\nkilled run:\n%s", after, n, out.String())
			}
		})
	}
}
