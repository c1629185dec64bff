//go:build unix

package cmd

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// jobSession is a session awaiting the confirmation of a balance job of
// jobUsers users, against a simulator behind a tap.
type jobSession struct {
	s      *sim.Sim
	tp     *tap
	expID  string
	state  string
	env    []string
	id     string
	script string // the LLM of the resumes
}

const jobUsers = 30

func newJobSession(t *testing.T) *jobSession {
	t.Helper()
	s, tp, c := simTap(t, 3)
	js := &jobSession{s: s, tp: tp, state: filepath.Join(t.TempDir(), "state")}
	js.expID = createBalanceExperiment(t, c)
	js.env = agentEnv(t, "UPGRADE_AGENT_HOME="+js.state, "UPGRADE_API_URL="+js.tp.URL()+"/api")
	askScript, resumeScript := balanceScripts(t, js.expID, jobUsers)
	askScript = writeTestFile(t, t.TempDir(), "ask.yaml", readFile(t, askScript)+"- reply: Shall I?\n")
	if code, o, e := agentIn(t, js.env, "ask", "--llm", "script:"+askScript, "simulate the students"); code != 10 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, o, e)
	}
	js.id, js.script = latestSession(t, js.state), resumeScript
	return js
}

// start runs the confirmed `resume --answer yes --wait-jobs 0` in a process.
func (js *jobSession) start(t *testing.T) *proc {
	return startAgent(t, js.env, "resume", js.id, "--answer", "yes", "--wait-jobs", "0", "--llm", "script:"+js.script)
}

// planRead watches the executor's read of the experiment: the plan shown
// must still hold right before it starts the job, and resume makes no
// other read of it before that.
func planRead(tp *tap) *stop { return tp.watchFor(within(http.MethodGet, "/experiments/single/")) }

// jobWindow measures, in a run nobody kills, how long the CLI lives after
// the executor's read: the effect is saved, the job record written, the
// worker launched and the turn suspended within it.
func jobWindow(t *testing.T) time.Duration {
	js := newJobSession(t)
	at := planRead(js.tp)
	p := js.start(t)
	waitClosed(t, at.hit, "the executor's read")
	t0 := time.Now()
	if code := p.wait(t); code != 11 {
		t.Fatalf("resume --answer yes --wait-jobs 0: exit %d, want 11\n%s", code, p.out.String())
	}
	w := time.Since(t0)
	if rec := loadJob(t, js.state, jobOf(t, js.state)); rec.PID > 0 {
		poll(t, "the worker to exit", func() bool { return pidGone(rec.PID) })
	}
	return w
}

// Issue 15, finding 3: the CLI killed while it starts a balance job. The
// next `resume --answer yes` never asks again with no word of the job, and
// never starts a second one: the job's id derives from the approved
// confirmation, so resume re-attaches to the job the dead process started
// (or starts it, if it never was). Afterwards there is exactly one job
// record, no temp file in jobs/, and the server has exactly N synthetic
// users of that job, N enrolled. The kill points are spread over the
// window a run nobody kills spends between the executor's read and its
// exit (3 points; UPGRADE_AGENT_CRASH_SOAK=N for N), and one lands when the
// worker's first request reaches UpGrade.
func TestCrashWhileStartingJob(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	window := jobWindow(t)
	var kps []killPoint
	for _, d := range spread(soak(3), window*3/4) { // the end of the window is the process's exit
		kps = append(kps, killPoint{name: "plan read + " + d.String(), at: planRead, d: d})
	}
	kps = append(kps, killPoint{name: "worker's first request", at: func(tp *tap) *stop { return tp.watchFor(is(http.MethodPost, "/v6/init")) }})
	kinds := map[string]int{}
	for _, kp := range kps {
		t.Run(kp.name, func(t *testing.T) {
			js := newJobSession(t)
			state, id, env, s := js.state, js.id, js.env, js.s
			at := kp.at(js.tp)
			p := js.start(t)
			killed := p.killAfterHit(t, at, kp.d)
			waitUnlocked(t, state, id)
			checkAllCheckpoints(t, state, id)
			kind := afterKill(t, state, id, killed)
			kinds[kind]++
			t.Logf("kill landed: %s", kind)
			jobID := jobOf(t, state)
			if jobID != "" {
				stopWorkerAtEnd(t, state, jobID)
			}

			// The next yes goes on with the job; never a confirmation
			// again without a word of it.
			code, o, e := agentIn(t, env, "resume", id, "--answer", "yes", "--wait-jobs", "0", "-o", "json", "--llm", "script:"+js.script)
			if code != 0 && code != 11 {
				t.Fatalf("resume after the kill: exit %d, want 11 or 0\n%s\n%s\nkilled run:\n%s", code, o, e, p.out.String())
			}
			res := decodeResult(t, o)
			if res.Job == nil && len(res.Actions) == 0 {
				t.Fatalf("resume after the kill says nothing of the job: %s", o)
			}
			if jobID == "" {
				jobID = jobOf(t, state)
				stopWorkerAtEnd(t, state, jobID)
			}
			if res.Job != nil && res.Job.ID != jobID {
				t.Errorf("resume reports job %s, the job record is %s", res.Job.ID, jobID)
			}
			if code == 11 {
				if code, o, e := agentIn(t, env, "resume", id, "--wait", "--timeout", "2m", "--llm", "script:"+js.script); code != 0 {
					t.Fatalf("resume --wait: exit %d\n%s\n%s", code, o, e)
				}
			}

			// Counts on the server and in the state dir.
			recs, err := mustJobs(t, state).List()
			if err != nil || len(recs) != 1 || recs[0].ID != jobID || recs[0].State != actions.JobSucceeded || recs[0].Progress.Done != jobUsers {
				t.Errorf("job records: %v %s", err, describeJobs(recs))
			}
			n := 0
			for _, u := range s.Users() {
				if strings.HasPrefix(u.ID, "job-") {
					n++
					if !strings.HasPrefix(u.ID, jobs.Key(jobID)+"-") {
						t.Errorf("user %s belongs to another job than %s", u.ID, jobID)
					}
				}
			}
			st, err := s.EnrollmentStats(js.expID)
			if err != nil {
				t.Fatal(err)
			}
			if n != jobUsers || st.Users != jobUsers {
				t.Errorf("the server has %d synthetic users and %d enrolled, want %d and %d", n, st.Users, jobUsers, jobUsers)
			}
			rec := loadJob(t, state, jobID)
			poll(t, "the worker to exit", func() bool { return rec.PID == 0 || pidGone(rec.PID) })
			checkNoTempFiles(t, filepath.Join(state, "jobs"))
		})
	}
	t.Logf("window %v; where the kills landed: %v", window, kinds)
}

// afterKill says what a kill left: how far the start of the job got.
func afterKill(t *testing.T, state, id string, killed bool) string {
	t.Helper()
	if !killed {
		return "not killed (the run had ended)"
	}
	sess := loadCheckpoint(t, state, id)
	started := len(sess.CP.PendingEffects()) > 0
	jobID := jobOf(t, state)
	switch {
	case sess.CP.Status == "waiting_job":
		return "after the turn suspended"
	case !started && jobID == "":
		return "before the effect was saved"
	case jobID == "":
		return "effect saved, no job record"
	}
	rec := loadJob(t, state, jobID)
	if rec.State == actions.JobQueued && rec.Attempts == 0 && rec.PID == 0 {
		return "job record written, no worker launched"
	}
	return "worker launched, turn not suspended"
}

// jobOf is the id of the only job in the state dir, or "".
func jobOf(t *testing.T, state string) string {
	t.Helper()
	recs, err := mustJobs(t, state).List()
	if err != nil {
		t.Fatal(err)
	}
	switch len(recs) {
	case 0:
		return ""
	case 1:
		return recs[0].ID
	}
	t.Fatalf("%d job records, want at most one: %s", len(recs), describeJobs(recs))
	return ""
}

func mustJobs(t *testing.T, state string) *jobs.Store {
	t.Helper()
	s, err := jobs.OpenStore(state)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func describeJobs(recs []*jobs.Record) string {
	var parts []string
	for _, r := range recs {
		b, _ := json.Marshal(map[string]any{"id": r.ID, "state": r.State, "progress": r.Progress, "attempts": r.Attempts})
		parts = append(parts, string(b))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkNoTempFiles fails when a temp file of an atomic write is left in dir.
func checkNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temp file left in %s: %s", dir, e.Name())
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
