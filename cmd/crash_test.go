//go:build unix

package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
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

// crashWrite is one confirmed write under test: the session that proposes
// it, the request that writes, and what the server holds once it ran.
type crashWrite struct {
	name    string
	setup   func(t *testing.T, c *upgrade.Client) // experiments the write needs
	propose string                                // the scripted LLM of the ask
	method  string                                // the write request
	path    string                                // its path suffix
	check   func(t *testing.T, s *sim.Sim)        // the server after the write ran once
	// checkAPI checks what the Sim has no accessor for, through the API.
	checkAPI func(t *testing.T, c *upgrade.Client)
	// before, when set, is a scripted LLM of an `ask --yes` run first (an
	// undo needs a change to undo); changes, when not 0, is how many
	// changes `changes list` must show at the end.
	before  string
	changes int
}

const proposeDelete = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: delete Doomed, reasoning: action}
- call:
    set_action_needed: {action: delete_experiment, reasoning: asked}
    set_action_params: {action_params: {experiment_id: Doomed}}
- reply: About to delete Doomed.
`

const proposeStatus = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: start Paused, reasoning: action}
- call:
    set_action_needed: {action: update_experiment_status, reasoning: asked}
    set_action_params: {action_params: {experiment_id: Paused, status: enrolling}}
- reply: About to start Paused.
`

var crashWrites = []crashWrite{
	{name: "create", propose: crashPropose, method: http.MethodPost, path: "/experiments",
		check: func(t *testing.T, s *sim.Sim) {
			if n := countNamed(s, "Crash Test"); n != 1 {
				t.Errorf("%d experiments named Crash Test, want exactly 1", n)
			}
		}},
	{name: "delete", propose: proposeDelete, method: http.MethodDelete, path: "",
		setup: func(t *testing.T, c *upgrade.Client) { mkExperiment(t, c, "Doomed", upgrade.StateEnrolling) },
		check: func(t *testing.T, s *sim.Sim) {
			if n := countNamed(s, "Doomed"); n != 0 {
				t.Errorf("Doomed still exists")
			}
		}},
	{name: "status", propose: proposeStatus, method: http.MethodPost, path: "/experiments/state",
		setup: func(t *testing.T, c *upgrade.Client) { mkExperiment(t, c, "Paused", upgrade.StateInactive) },
		check: func(t *testing.T, s *sim.Sim) {
			if e := findByName(s, "Paused"); e == nil || e.State != upgrade.StateEnrolling {
				t.Errorf("Paused is %+v, want enrolling", e)
			}
		}},
}

// writeKillPoints are the kill points of a confirmed write: on its request
// (held on arrival; served with the answer held), at times after it
// arrived, and when the responder's LLM call arrives (the executor has run
// and recorded the write).
func writeKillPoints(w crashWrite, n int) []killPoint {
	match := is(w.method, w.path)
	kps := []killPoint{
		{name: "write arrived", at: func(tp *tap) *stop { return tp.stopAt(match, onArrival, 0) }},
		{name: "write landed, answer held", at: func(tp *tap) *stop { return tp.stopAt(match, onServed, 0) }},
		{name: "responder called", llm: true, at: func(tp *tap) *stop { return tp.stopAt(llmNode("responder"), onArrival, 0) }},
	}
	for _, d := range spread(n, 20*time.Millisecond) {
		kps = append(kps, killPoint{name: "write arrived + " + d.String(), d: d,
			at: func(tp *tap) *stop { return tp.watchFor(match) }})
	}
	return kps
}

// TestCrashConfirmedWrites kills `resume --answer yes` with SIGKILL at many
// points of a confirmed create, delete and status change, then resumes
// (answering yes when asked again) until nothing is left, and counts on the
// server: the write reached UpGrade exactly once, never twice and never
// lost. Every checkpoint left behind loads. A kill after the executor
// (during the responder's LLM call) leaves the session running; a plain
// `resume` finishes that turn and reports what ran (issue 15, finding 4).
func TestCrashConfirmedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, w := range crashWrites {
		for _, kp := range writeKillPoints(w, soak(2)) {
			t.Run(w.name+"/"+kp.name, func(t *testing.T) { crashWriteOnce(t, w, kp) })
		}
	}
}

func crashWriteOnce(t *testing.T, w crashWrite, kp killPoint) {
	s, tp, c := simTap(t, 1)
	if w.setup != nil {
		w.setup(t, c)
	}
	ls := llmtest.NewServer(nil)
	t.Cleanup(ls.Close)
	lt := newTap(t, proxyTo(t, ls.URL()))
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	propose := writeTestFile(t, dir, "propose.yaml", w.propose)
	done := writeTestFile(t, dir, "done.yaml", "- reply: Done.\n")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+tp.URL()+"/api", "OPENAI_API_KEY=sk-crash-test-key-0123456789")
	if kp.llm {
		// The reply after a yes is rendered in Go by default, with no LLM
		// call between the executor and the last save; with the model
		// wording it, the kill lands in that window.
		env = append(env, "UPGRADE_AGENT_CONFIG="+writeTestFile(t, dir, "config.yaml", "reply_wording: llm\n"))
	}
	served := 0
	if w.before != "" {
		if code, out, errOut := agentIn(t, env, "ask", "--yes", "--llm", "script:"+writeTestFile(t, dir, "before.yaml", w.before), "first"); code != 0 {
			t.Fatalf("ask --yes before: exit %d\n%s\n%s", code, out, errOut)
		}
		served = tp.countServed(w.method, w.path)
	}
	if code, out, errOut := agentIn(t, env, "ask", "--llm", "script:"+propose, "please"); code != 10 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, out, errOut)
	}
	id := latestSession(t, state)

	// The confirmed write, killed at the kill point. Its LLM is a loopback
	// server, so that a kill can land on the responder's call.
	ls.Enqueue(llmtest.TextReply("Done."))
	srv := tp
	if kp.llm {
		srv = lt
	}
	at := kp.at(srv)
	p := startAgent(t, env, "resume", "--llm", "openai", "--llm-base-url", lt.URL()+"/v1", "--model", "m",
		"--answer", "yes", id)
	if at.watch {
		p.killAfterHit(t, at, kp.d)
	} else if !p.killOn(t, at) {
		t.Fatalf("the run ended before the kill point:\n%s", p.out.String())
	}
	checkAllCheckpoints(t, state, id)

	if kp.llm {
		// The executor ran; the turn stopped before the responder. It is
		// not stuck: plain resume finishes it and reports the write.
		if st := sessionStatus(t, env, id); st != "running" {
			t.Errorf("status after a kill in the responder: %s, want running", st)
		}
		code, o, e := agentIn(t, env, "resume", id, "-o", "json", "--llm", "script:"+done)
		if code != 0 {
			t.Fatalf("resume of the interrupted turn: exit %d\n%s\n%s", code, o, e)
		}
		res := decodeResult(t, o)
		if res.Status != pipeline.StatusCompleted || len(res.Actions) != 1 || res.Actions[0].Status != "success" || res.Response != "Done." {
			t.Errorf("resume of the interrupted turn: %s", o)
		}
		if st := sessionStatus(t, env, id); st != "idle" {
			t.Errorf("status after resume: %s, want idle", st)
		}
	}
	resumeUntilDone(t, env, id, "--llm", "script:"+done)

	if n := tp.countServed(w.method, w.path) - served; n != 1 {
		t.Errorf("the write reached UpGrade %d times, want exactly once (requests: %v)\nkilled run:\n%s", n, tp.requests(), p.out.String())
	}
	if w.changes != 0 {
		code, o, e := agentIn(t, env, "changes", "list", "-o", "json")
		var rows []ChangeRow
		if code != 0 || json.Unmarshal([]byte(o), &rows) != nil || len(rows) != w.changes {
			t.Errorf("changes list: exit %d, want %d changes:\n%s\n%s", code, w.changes, o, e)
		}
	}
	w.check(t, s)
	if w.checkAPI != nil {
		w.checkAPI(t, c)
	}
}

// checkAllCheckpoints loads a session's checkpoint and every history entry.
func checkAllCheckpoints(t *testing.T, state, id string) {
	t.Helper()
	loadCheckpoint(t, state, id)
	store, err := checkpoint.OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
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
}

// sessionStatus is a session's status as `sessions list` shows it.
func sessionStatus(t *testing.T, env []string, id string) string {
	t.Helper()
	code, o, e := agentIn(t, env, "sessions", "list", "-o", "json")
	var rows []SessionRow
	if code != 0 || json.Unmarshal([]byte(o), &rows) != nil {
		t.Fatalf("sessions list: exit %d\n%s\n%s", code, o, e)
	}
	for _, r := range rows {
		if r.ID == id {
			return r.Status
		}
	}
	t.Fatalf("sessions list has no %s:\n%s", id, o)
	return ""
}

// proxyTo forwards every request to base (a URL whose path is dropped).
func proxyTo(t *testing.T, base string) http.Handler {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = ""
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed client's requests end in errors, by design
	return rp
}

func countNamed(s *sim.Sim, name string) int {
	n := 0
	for _, e := range s.Experiments() {
		if e.Name == name {
			n++
		}
	}
	return n
}

// mkExperiment creates a two-condition experiment in assign-prog.
func mkExperiment(t *testing.T, c *upgrade.Client, name string, st upgrade.State) string {
	t.Helper()
	ctx := ctxTimeout(t)
	w := 50.0
	raw, err := actions.Run(ctx, c, actions.CreateExperimentParams{Name: name, Context: "assign-prog",
		DecisionPoints: []actions.DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []actions.ConditionParam{{Code: "control", Weight: &w}, {Code: "variant", Weight: &w}}})
	if err != nil {
		t.Fatal(err)
	}
	var res actions.ExperimentResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if st != upgrade.StateInactive {
		if _, err := c.SetState(ctx, res.ID, st); err != nil {
			t.Fatal(err)
		}
	}
	return res.ID
}

// killPoint is where a crash test kills the CLI: at a request the tap
// holds, or d after a request it only watches.
type killPoint struct {
	name string
	at   func(tp *tap) *stop
	d    time.Duration
	llm  bool // at is a request to the LLM
}

// createKillPoints are the kill points of a confirmed create: on the
// events around its one write, then at times after the write arrived.
func createKillPoints(n int) []killPoint {
	kps := []killPoint{
		{name: "POST arrived", at: func(tp *tap) *stop { return tp.stopAt(is(http.MethodPost, "/experiments"), onArrival, 0) }},
		{name: "POST landed, answer held", at: func(tp *tap) *stop { return tp.stopAt(is(http.MethodPost, "/experiments"), onServed, 0) }},
		{name: "read-back after POST", at: func(tp *tap) *stop {
			return tp.stopAfter("POST /experiments", is(http.MethodGet, ""), onArrival, 0)
		}},
		{name: "POST lands after the kill", at: func(tp *tap) *stop { return tp.stopLate(is(http.MethodPost, "/experiments")) }},
	}
	for _, d := range spread(n, 20*time.Millisecond) {
		kps = append(kps, killPoint{name: "POST arrived + " + d.String(), d: d,
			at: func(tp *tap) *stop { return tp.watchFor(is(http.MethodPost, "/experiments")) }})
	}
	return kps
}

// Issue 15, finding 2: a create killed after its POST landed, then the
// experiment renamed, started and 20 students enrolled, then `resume
// --answer yes`. The resume settles the create by its derived id (done, not
// run again), and no later run ever POSTs that id again: UpGrade upserts,
// so a second POST would rename the experiment back, reset it to inactive
// and wipe its enrollment. The POST that lands only after the kill (and
// after resume found nothing) is the case for the executor's own check:
// the person's next yes finds the experiment and writes nothing. At every
// kill point the server ends with exactly one experiment, and a live one is
// left exactly as its users made it.
func TestCrashCreateNeverOverwritesLive(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	landed := 0
	kps := createKillPoints(soak(6))
	for _, kp := range kps {
		t.Run(kp.name, func(t *testing.T) {
			s, tp, state, env, id, done := newCreateSession(t)

			at := kp.at(tp)
			p := startAgent(t, env, "resume", "--llm", "script:"+done, "--answer", "yes", id)
			if at.watch {
				p.killAfterHit(t, at, kp.d)
			} else if !p.killOn(t, at) {
				t.Fatalf("the run ended before the kill point:\n%s", p.out.String())
			}
			loadCheckpoint(t, state, id) // whatever the kill left loads

			if at.late {
				// Resume finds nothing under the derived id and asks again;
				// then the POST the dead process sent lands.
				if code, o, e := agentIn(t, env, "resume", "--llm", "script:"+done, id); code != 10 {
					t.Fatalf("resume after the kill: exit %d, want 10 (asked again)\n%s\n%s", code, o, e)
				}
				at.release()
				waitClosed(t, at.landed, "the late POST to land")
			}
			c, err := upgrade.New(upgrade.Config{BaseURL: tp.URL() + "/api"})
			if err != nil {
				t.Fatal(err)
			}
			live := ""
			if e := findByName(s, "Crash Test"); e != nil {
				landed++
				live = e.ID
				// The people using the experiment change it before anyone resumes.
				goLive(t, c, e.ID, "Crash Test (live)", 20)
			}
			posts := tp.count(http.MethodPost, "/experiments")

			resumeUntilDone(t, env, id, "--llm", "script:"+done)

			n := 0
			for _, e := range s.Experiments() {
				if strings.HasPrefix(e.Name, "Crash Test") {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d experiments named Crash Test..., want exactly 1 (requests: %v)\nkilled run:\n%s", n, tp.requests(), p.out.String())
			}
			if live == "" {
				return
			}
			if after := tp.count(http.MethodPost, "/experiments"); after != posts {
				t.Errorf("resume sent %d more POST /experiments after the create had landed", after-posts)
			}
			e, ok := s.Experiment(live)
			if !ok {
				t.Fatalf("the live experiment %s is gone", live)
			}
			st, err := s.EnrollmentStats(live)
			if err != nil {
				t.Fatal(err)
			}
			if e.Name != "Crash Test (live)" || e.State != upgrade.StateEnrolling || st.Users != 20 {
				t.Errorf("resume changed the live experiment: name %q, state %s, %d users enrolled; want %q, enrolling, 20",
					e.Name, e.State, st.Users, "Crash Test (live)")
			}
			if at.watch || at.late {
				return
			}
			// Landed before the kill: the interrupted effect was settled as
			// done by the derived id; the create never ran a second time.
			var creates []checkpoint.Effect
			for _, ef := range loadCheckpoint(t, state, id).CP.Effects {
				if ef.Action == "create_experiment" {
					creates = append(creates, ef)
				}
			}
			if len(creates) != 1 || creates[0].State != checkpoint.EffectDone {
				t.Errorf("effects of the create after resume: %+v; want the interrupted one, done", creates)
			}
		})
	}
	t.Logf("%d kill points, %d left a created experiment that went live before the resume", len(kps), landed)
	if landed == 0 {
		t.Errorf("no kill point left a created experiment behind: the test did not reach the case it is about")
	}
}

// newCreateSession is a session awaiting the confirmation of the create of
// "Crash Test", against a simulator behind a tap; done is the LLM script of
// the resumes.
func newCreateSession(t *testing.T) (s *sim.Sim, tp *tap, state string, env []string, id, done string) {
	t.Helper()
	s, tp, _ = simTap(t, 1)
	dir := t.TempDir()
	state = filepath.Join(dir, "state")
	propose := writeTestFile(t, dir, "propose.yaml", crashPropose)
	done = writeTestFile(t, dir, "done.yaml", "- reply: Done.\n")
	env = agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+tp.URL()+"/api")
	if code, o, e := agentIn(t, env, "ask", "--llm", "script:"+propose, "create Crash Test"); code != 10 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, o, e)
	}
	return s, tp, state, env, latestSession(t, state), done
}

func findByName(s *sim.Sim, name string) *upgrade.Experiment {
	for _, e := range s.Experiments() {
		if e.Name == name {
			return &e
		}
	}
	return nil
}

// goLive renames an experiment, starts it and enrolls n students through
// the API, as its users would.
func goLive(t *testing.T, c *upgrade.Client, id, name string, n int) {
	t.Helper()
	ctx := ctxTimeout(t)
	e, err := c.Experiment(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	e.Name = name
	if _, err := c.UpdateExperiment(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetState(ctx, id, upgrade.StateEnrolling); err != nil {
		t.Fatal(err)
	}
	p := e.Partitions[0]
	for i := range n {
		if _, err := actions.Run(ctx, c, actions.VisitDecisionPointParams{UserID: fmt.Sprintf("student-%d", i),
			Context: e.Context[0], Site: p.Site, Target: p.Target}); err != nil {
			t.Fatal(err)
		}
	}
}

// A create killed before its POST landed, and meanwhile someone else made
// an experiment of that name: resume cannot tell whether that is this
// confirmation's experiment, so it reports the outcome unknown and asks
// again, even when `--answer yes` came with it (that yes was given before
// the person could read the note). Nothing is created until a yes after it.
func TestCrashCreateUnknownOutcomeAsksFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	s, tp, state, env, id, done := newCreateSession(t)
	at := tp.stopAt(is(http.MethodPost, "/experiments"), onArrival, 0)
	p := startAgent(t, env, "resume", id, "--answer", "yes", "--llm", "script:"+done)
	if !p.killOn(t, at) {
		t.Fatalf("the run ended before the kill point:\n%s", p.out.String())
	}
	checkAllCheckpoints(t, state, id)
	c, err := upgrade.New(upgrade.Config{BaseURL: tp.URL() + "/api"})
	if err != nil {
		t.Fatal(err)
	}
	mkExperiment(t, c, "Crash Test", upgrade.StateEnrolling) // someone else's
	posts := tp.countServed(http.MethodPost, "/experiments")

	code, o, e := agentIn(t, env, "resume", id, "--answer", "yes", "-o", "json", "--llm", "script:"+done)
	res := decodeResult(t, o)
	if code != 10 || res.Confirmation == nil || len(res.Actions) != 0 {
		t.Fatalf("resume --answer yes: exit %d, want 10 (outcome unknown, asked again)\n%s\n%s", code, o, e)
	}
	if n := tp.countServed(http.MethodPost, "/experiments") - posts; n != 0 || countNamed(s, "Crash Test") != 1 {
		t.Fatalf("resume created %d experiments before the person read the note; %d named Crash Test", n, countNamed(s, "Crash Test"))
	}
}

// A proposal killed after its confirmation was recorded but before the
// reply that shows it: the person never read it, so the yes they give with
// the next resume (they asked for the create, after all) does not run it.
// It is shown first; only a yes after that runs it. (Found by the
// interleaving test of pipeline.)
func TestCrashBeforeConfirmationShown(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	s, tp, _ := simTap(t, 1)
	ls := llmtest.NewServer(nil)
	t.Cleanup(ls.Close)
	lt := newTap(t, proxyTo(t, ls.URL()))
	replies, err := llmtest.ParseScript([]byte(crashPropose), "propose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ls.Enqueue(replies...)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	done := writeTestFile(t, dir, "done.yaml", "- reply: Done.\n")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "UPGRADE_API_URL="+tp.URL()+"/api", "OPENAI_API_KEY=sk-crash-test-key-0123456789")

	// The responder words the proposal (reply_wording llm), so the run can
	// be stopped at its call, after the confirmation node and before the
	// reply that shows it.
	llmWords := writeTestFile(t, dir, "config.yaml", "reply_wording: llm\n")
	at := lt.stopAt(llmNode("responder"), onArrival, 0)
	p := startAgent(t, env, "--config", llmWords, "ask", "--llm", "openai", "--llm-base-url", lt.URL()+"/v1", "--model", "m", "create Crash Test")
	if !p.killOn(t, at) {
		t.Fatalf("the run ended before the responder:\n%s", p.out.String())
	}
	id := latestSession(t, state)
	if ic := loadCheckpoint(t, state, id).CP.Interrupt; ic == nil || ic.Confirmation == nil {
		t.Fatalf("the kill left no confirmation: the test does not start where it should")
	}

	code, o, e := agentIn(t, env, "resume", id, "--answer", "yes", "-o", "json", "--llm", "script:"+done)
	res := decodeResult(t, o)
	if code != 10 || res.Confirmation == nil || !strings.Contains(res.Response, res.Confirmation.Message) || len(res.Actions) != 0 {
		t.Fatalf("resume --answer yes of a confirmation never shown: exit %d, want 10 showing it\n%s\n%s", code, o, e)
	}
	if n := countNamed(s, "Crash Test"); n != 0 {
		t.Fatalf("created before the person read the confirmation")
	}
	if code, o, e := agentIn(t, env, "resume", id, "--answer", "yes", "--llm", "script:"+done); code != 0 || countNamed(s, "Crash Test") != 1 {
		t.Fatalf("yes after reading it: exit %d, %d created\n%s\n%s", code, countNamed(s, "Crash Test"), o, e)
	}
}
