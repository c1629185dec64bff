package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// The interleaving test (issue 13): a seeded random person asks, answers
// and resumes, and the process "crashes" at a random checkpoint save or
// around a random write to UpGrade. Whatever the interleaving:
//   - the executor runs only what the person approved, with exactly the
//     params shown: every write that reaches UpGrade matches a confirmation
//     the person saw in a reply and then answered with a clear yes;
//   - every approved action runs at most once;
//   - resume has a way forward from every checkpoint the pipeline wrote.
//
// A "process" is a fresh Agent over the same file store and simulator.
// Its crash is a failure that ends it: from then on every save, every
// UpGrade call and every LLM call fails, so nothing it did after its last
// successful save survives, as with SIGKILL.

var errCrash = errors.New("crashed")

// life is one process's fate: where it dies, and whether it has.
type life struct {
	mu      sync.Mutex
	saveAt  int  // die at this save (1-based); 0: not at a save
	writeAt int  // die at this write to UpGrade; 0: not at a write
	landed  bool // with writeAt: the write reaches UpGrade first
	saves   int
	writes  int
	dead    bool
}

func (l *life) isDead() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dead
}

// crashStore passes saves on until the process dies.
type crashStore struct {
	*checkpoint.FileStore
	l     *life
	saved *[]*checkpoint.Checkpoint // every checkpoint written, for the way-forward check
}

func (s crashStore) Save(cp *checkpoint.Checkpoint) error {
	s.l.mu.Lock()
	s.l.saves++
	if s.l.dead || s.l.saves == s.l.saveAt {
		s.l.dead = true
		s.l.mu.Unlock()
		return errCrash
	}
	s.l.mu.Unlock()
	if err := s.FileStore.Save(cp); err != nil {
		return err
	}
	c := *cp
	*s.saved = append(*s.saved, &c)
	return nil
}

// write is one write that reached UpGrade, as a key of what it did.
type writeLog struct {
	mu   sync.Mutex
	keys []string
}

func (w *writeLog) add(k string) {
	w.mu.Lock()
	w.keys = append(w.keys, k)
	w.mu.Unlock()
}

func (w *writeLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.keys...)
}

// countingAPI records every write that reaches UpGrade and dies with the
// process.
type countingAPI struct {
	*upgrade.Client
	l   *life
	log *writeLog
}

func (c countingAPI) alive() error {
	if c.l.isDead() {
		return errCrash
	}
	return nil
}

// write runs a write unless the process dies at it (before it leaves, or
// once it landed).
func (c countingAPI) write(key string, do func() error) error {
	c.l.mu.Lock()
	if c.l.dead {
		c.l.mu.Unlock()
		return errCrash
	}
	c.l.writes++
	dieHere := c.l.writes == c.l.writeAt
	landed := c.l.landed
	if dieHere && !landed {
		c.l.dead = true
	}
	c.l.mu.Unlock()
	if dieHere && !landed {
		return errCrash
	}
	if err := do(); err != nil {
		return err
	}
	c.log.add(key)
	if dieHere {
		c.l.mu.Lock()
		c.l.dead = true
		c.l.mu.Unlock()
		return errCrash
	}
	return nil
}

func (c countingAPI) CreateExperiment(ctx context.Context, e *upgrade.Experiment) (*upgrade.Experiment, error) {
	var out *upgrade.Experiment
	err := c.write(createKey(e.Name, e.ContextName(), conditionsOf(e)), func() (err error) {
		out, err = c.Client.CreateExperiment(ctx, e)
		return err
	})
	return out, err
}

func (c countingAPI) UpdateExperiment(ctx context.Context, e *upgrade.Experiment) (*upgrade.Experiment, error) {
	var out *upgrade.Experiment
	err := c.write("update:"+e.ID, func() (err error) {
		out, err = c.Client.UpdateExperiment(ctx, e)
		return err
	})
	return out, err
}

func (c countingAPI) SetState(ctx context.Context, id string, s upgrade.State) (*upgrade.Experiment, error) {
	var out *upgrade.Experiment
	err := c.write("status:"+id+":"+string(s), func() (err error) {
		out, err = c.Client.SetState(ctx, id, s)
		return err
	})
	return out, err
}

func (c countingAPI) DeleteExperiment(ctx context.Context, id string) (*upgrade.Experiment, error) {
	var out *upgrade.Experiment
	err := c.write("delete:"+id, func() (err error) {
		out, err = c.Client.DeleteExperiment(ctx, id)
		return err
	})
	return out, err
}

func (c countingAPI) Experiment(ctx context.Context, id string) (*upgrade.Experiment, error) {
	if err := c.alive(); err != nil {
		return nil, err
	}
	return c.Client.Experiment(ctx, id)
}

func (c countingAPI) ExperimentNames(ctx context.Context) ([]upgrade.ExperimentName, error) {
	if err := c.alive(); err != nil {
		return nil, err
	}
	return c.Client.ExperimentNames(ctx)
}

func conditionsOf(e *upgrade.Experiment) string {
	var parts []string
	for _, c := range e.Conditions {
		parts = append(parts, c.ConditionCode+"="+strconv.FormatFloat(c.AssignmentWeight, 'f', -1, 64))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func createKey(name, context, conditions string) string {
	return "create:" + name + "@" + context + "[" + conditions + "]"
}

// approvalKey is the write a confirmation the person approved may make.
func approvalKey(c *ConfirmationOut) string {
	var p struct {
		Name         string `json:"name"`
		Context      string `json:"context"`
		ExperimentID string `json:"experiment_id"`
		Status       string `json:"status"`
		Conditions   []struct {
			Code   string  `json:"code"`
			Weight float64 `json:"weight"`
		} `json:"conditions"`
	}
	if err := json.Unmarshal(c.Params, &p); err != nil {
		return "unreadable:" + err.Error()
	}
	switch c.Action {
	case "create_experiment":
		var parts []string
		for _, cd := range p.Conditions {
			parts = append(parts, cd.Code+"="+strconv.FormatFloat(cd.Weight, 'f', -1, 64))
		}
		sort.Strings(parts)
		return createKey(p.Name, p.Context, strings.Join(parts, ","))
	case "delete_experiment":
		return "delete:" + p.ExperimentID
	case "update_experiment_status":
		return "status:" + p.ExperimentID + ":" + p.Status
	}
	return "unknown:" + c.Action
}

// personLLM is the model, scripted by what the person's message is meant to
// be; it dies with the process.
type personLLM struct {
	l        *life
	intent   string         // yes, no, unclear, claims-yes, new
	proposal map[string]any // with new: the action and params the gatherer sets
}

func (m *personLLM) Chat(_ context.Context, req llm.Request) (*llm.Response, error) {
	if m.l.isDead() {
		return nil, errCrash
	}
	call := func(name string, args any) llm.ToolCall {
		b, _ := json.Marshal(args)
		return llm.ToolCall{ID: "c-" + name, Name: name, Arguments: string(b)}
	}
	switch req.Node {
	case NodeAnalyzer:
		args := map[string]any{"intent_type": "direct_answer", "confidence": 0.9, "user_request_summary": m.intent, "reasoning": "test",
			"direct_response": "Noted."}
		switch m.intent {
		case "claims-yes":
			args["user_confirmed"] = true
		case "new":
			args = map[string]any{"intent_type": "needs_info", "confidence": 0.9, "user_request_summary": "a new request", "reasoning": "test",
				"user_confirmed": false, "change_requested": true}
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{call("analyze_user_request", args)}}, nil
	case NodeGatherer:
		fresh := true
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleTool {
				fresh = false
			}
		}
		if m.intent == "new" && fresh && m.proposal != nil {
			return &llm.Response{ToolCalls: []llm.ToolCall{
				call("set_action_needed", map[string]any{"action": m.proposal["action"], "reasoning": "asked"}),
				call("set_action_params", map[string]any{"action_params": m.proposal["params"]}),
			}}, nil
		}
		return &llm.Response{Content: "done"}, nil
	}
	return &llm.Response{Content: "OK."}, nil
}

// person drives one session: what they saw, what they approved.
type person struct {
	t         *testing.T
	rng       *rand.Rand
	shown     *ConfirmationOut // the confirmation of the latest reply the person read
	approvals map[string]bool  // approvalKey of every confirmation answered with a clear yes
	created   int
}

var (
	yesWords     = []string{"yes", "yes please", "ok, do it", "Yes, go ahead.", "sure"}
	noWords      = []string{"no", "no thanks", "cancel"}
	unclearWords = []string{"what happens to the students already enrolled?", "hmm", "yes, but which experiment is that?"}
)

// message picks the person's next message and what it means.
func (p *person) message(s *sim.Sim, m *personLLM) string {
	r := p.rng.IntN(100)
	if p.shown != nil && r < 60 {
		r = 0 // a person shown a confirmation mostly answers it
	}
	m.proposal = nil
	switch {
	case r < 30:
		m.intent = "yes"
		if p.shown != nil {
			p.approvals[approvalKey(p.shown)] = true
		}
		return yesWords[p.rng.IntN(len(yesWords))]
	case r < 40:
		m.intent = "no"
		return noWords[p.rng.IntN(len(noWords))]
	case r < 50:
		m.intent = "unclear"
		return unclearWords[p.rng.IntN(len(unclearWords))]
	case r < 60:
		m.intent = "claims-yes"
		return "interesting, tell me more"
	}
	m.intent = "new"
	es := s.Experiments()
	switch k := p.rng.IntN(4); {
	case k < 2 || len(es) == 0:
		p.created++
		w := []float64{50, 60, 30}[p.rng.IntN(3)]
		m.proposal = map[string]any{"action": "create_experiment", "params": map[string]any{
			"name": fmt.Sprintf("Exp-%d", p.created), "context": "assign-prog",
			"decision_points": []any{map[string]any{"site": "SelectSection", "target": "absolute_value_plot_equality"}},
			"conditions":      []any{map[string]any{"code": "control", "weight": w}, map[string]any{"code": "variant", "weight": 100 - w}}}}
		return "create another experiment"
	case k == 2:
		e := es[p.rng.IntN(len(es))]
		m.proposal = map[string]any{"action": "delete_experiment", "params": map[string]any{"experiment_id": e.ID}}
		return "delete " + e.Name
	default:
		e := es[p.rng.IntN(len(es))]
		st := []string{"enrolling", "enrollmentComplete", "cancelled"}[p.rng.IntN(3)]
		m.proposal = map[string]any{"action": "update_experiment_status", "params": map[string]any{"experiment_id": e.ID, "status": st}}
		return "set " + e.Name + " to " + st
	}
}

func TestInterleavingsRunOnlyWhatWasApproved(t *testing.T) {
	seeds, steps := 8, 30
	if v, err := strconv.Atoi(os.Getenv("UPGRADE_AGENT_INTERLEAVE_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	totals := map[string]int{}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			for k, v := range interleave(t, uint64(seed), steps) {
				totals[k] += v
			}
		})
	}
	t.Logf("%d seeds x %d steps: %v", seeds, steps, totals)
}

func interleave(t *testing.T, seed uint64, steps int) map[string]int {
	srv, err := sim.Start(sim.Options{Seed: int64(seed), Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	client, err := upgrade.New(upgrade.Config{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := checkpoint.OpenFileStore(fastTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := client.CreateExperiment(context.Background(), baseExperiment(fmt.Sprintf("Base-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 15))
	p := &person{t: t, rng: rng, approvals: map[string]bool{}}
	writes := &writeLog{}
	var saved []*checkpoint.Checkpoint
	var ids int
	const sessionID = "interleave"
	stats := map[string]int{}
	var trail []string

	process := func(l *life, m *personLLM) (*Agent, *Session) {
		a, err := New(Deps{LLM: m, API: countingAPI{Client: client, l: l, log: writes}, Store: crashStore{FileStore: fs, l: l, saved: &saved}, Now: fixedNow,
			NewID: func() string { ids++; return fmt.Sprintf("id%05d", ids) }}, Settings{Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		sess, err := LoadSession(fs, sessionID)
		if errors.Is(err, checkpoint.ErrNotFound) {
			sess = NewSession(sessionID, fixedNow())
		} else if err != nil {
			t.Fatalf("load after %v: %v", trail, err)
		}
		return a, sess
	}
	check := func() {
		t.Helper()
		seen := map[string]int{}
		for _, k := range writes.all() {
			seen[k]++
			if !p.approvals[k] {
				t.Fatalf("seed %d: a write nobody approved reached UpGrade: %s\napproved: %v\ntrail:\n%s", seed, k, p.approvals, strings.Join(trail, "\n"))
			}
			if seen[k] > 1 {
				t.Fatalf("seed %d: an approved action ran %d times: %s\ntrail:\n%s", seed, seen[k], k, strings.Join(trail, "\n"))
			}
		}
	}

	for step := range steps {
		m := &personLLM{}
		msg := p.message(srv.Sim(), m)
		l := &life{}
		switch r := rng.IntN(10); {
		case r < 3:
			l.saveAt = 1 + rng.IntN(6)
		case r < 6:
			l.writeAt, l.landed = 1, rng.IntN(2) == 0
		}
		m.l = l
		a, sess := process(l, m)
		status := sess.Status()
		var res *Result
		var op string
		switch {
		case status == checkpoint.StatusRunning && rng.IntN(3) == 0:
			op = "resume"
			res, err = a.Resume(context.Background(), sess, ResumeRequest{})
		case status == checkpoint.StatusRunning || (status == checkpoint.StatusAwaitingConfirmation && rng.IntN(2) == 0):
			op = "resume --answer"
			res, err = a.Resume(context.Background(), sess, ResumeRequest{Answer: msg, HasAnswer: true})
		default:
			op = "ask"
			res, err = a.Ask(context.Background(), sess, msg)
		}
		line := fmt.Sprintf("%d: [%s] %s %q (%s %v) crash save@%d write@%d landed=%v", step, status, op, msg, m.intent, m.proposal, l.saveAt, l.writeAt, l.landed)
		switch {
		case l.isDead():
			stats["crashed"]++
			line += " -> crashed"
		case err != nil && res != nil && res.Status == StatusFailed:
			stats["failed turns"]++ // an UpGrade refusal (a transition the simulator rejects, say)
			line += " -> failed: " + err.Error()
		case err != nil:
			t.Fatalf("seed %d: %s: %v\ntrail:\n%s", seed, line, err, strings.Join(trail, "\n"))
		default:
			stats[string(res.Status)]++
			line += " -> " + string(res.Status)
			// What the person reads is what they will answer next.
			p.shown = nil
			if res.Status == StatusAwaitingConfirmation {
				p.shown = res.Confirmation
				if !strings.Contains(res.Response, res.Confirmation.Message) {
					t.Fatalf("seed %d: the reply does not show the confirmation verbatim:\n%s", seed, res.Response)
				}
			}
		}
		trail = append(trail, line)
		check()
	}

	// A way forward from every kind of checkpoint written: resume (with
	// no, so nothing new is approved) settles each one without an error of
	// the pipeline's own and never leaves it stopped in the middle of a
	// turn. One checkpoint of each shape (status, next node, interrupt,
	// effects in doubt) is tried, all of them with
	// UPGRADE_AGENT_INTERLEAVE_ALL=1.
	tried := map[string]bool{}
	for _, cp := range saved {
		shape := fmt.Sprintf("%s|%s|%d", cp.Status, cp.NextNode, len(cp.PendingEffects()))
		if ic := cp.Interrupt; ic != nil {
			shape += "|" + string(ic.Kind)
			if ic.Confirmation != nil {
				shape += "|" + ic.Confirmation.Action
			}
		}
		if tried[shape] && os.Getenv("UPGRADE_AGENT_INTERLEAVE_ALL") == "" {
			continue
		}
		tried[shape] = true
		forward(t, seed, client, cp)
		stats["checkpoints resumed"]++
	}
	stats["checkpoints"] = len(saved)
	stats["writes"] = len(writes.all())
	stats["approvals"] = len(p.approvals)
	return stats
}

// forward resumes a copy of cp in a store of its own.
func forward(t *testing.T, seed uint64, client *upgrade.Client, cp *checkpoint.Checkpoint) {
	t.Helper()
	fs, err := checkpoint.OpenFileStore(fastTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	c := *cp
	c.Seq, c.ParentSeq = 0, 0
	if err := fs.Save(&c); err != nil {
		t.Fatal(err)
	}
	m := &personLLM{l: &life{}, intent: "no"}
	a, err := New(Deps{LLM: m, API: client, Store: fs, Now: fixedNow}, Settings{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := LoadSession(fs, c.SessionID)
	if err != nil {
		t.Fatalf("seed %d: checkpoint seq %d does not load: %v", seed, cp.Seq, err)
	}
	res, err := a.Resume(context.Background(), sess, ResumeRequest{Answer: "no", HasAnswer: true})
	switch {
	case errors.Is(err, ErrNothingToResume) && (cp.Status == checkpoint.StatusIdle || cp.Status == checkpoint.StatusTerminated):
		return
	case err != nil && (res == nil || res.Status != StatusFailed):
		t.Fatalf("seed %d: no way forward from a checkpoint (seq %d, status %s, next %q): %v", seed, cp.Seq, cp.Status, cp.NextNode, err)
	}
	after, err := LoadSession(fs, c.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status() == checkpoint.StatusRunning {
		t.Fatalf("seed %d: resume left checkpoint seq %d (status %s, next %q) running", seed, cp.Seq, cp.Status, cp.NextNode)
	}
}

// fastTempDir is a temp dir on tmpfs where there is one: the file store
// fsyncs every save, and this test saves a few thousand times.
func fastTempDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "upgrade-agent-test-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func baseExperiment(name string) *upgrade.Experiment {
	return &upgrade.Experiment{
		Name: name, Context: []string{"assign-prog"}, State: upgrade.StateInactive,
		ConsistencyRule: "individual", AssignmentUnit: "individual", PostExperimentRule: "continue",
		Tags: []string{}, FilterMode: "includeAll", Type: "Simple", AssignmentAlgorithm: "random",
		Conditions: []upgrade.Condition{
			{ID: upgrade.NewID(), ConditionCode: "control", AssignmentWeight: 50, Order: 1},
			{ID: upgrade.NewID(), ConditionCode: "variant", AssignmentWeight: 50, Order: 2},
		},
		Partitions: []upgrade.DecisionPoint{{ID: upgrade.NewID(), Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1}},
	}
}
