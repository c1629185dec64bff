package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

func fixedNow() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }

// harness wires an Agent to the embedded simulator over HTTP, the scripted
// LLM server through the real go-openai client, and a file checkpoint store.
type harness struct {
	t     *testing.T
	sim   *sim.Server
	api   *upgrade.Client
	llm   *llmtest.Server
	store *checkpoint.FileStore
	agent *Agent
	sess  *Session
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	srv, err := sim.Start(sim.Options{Seed: 7, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	api, err := upgrade.New(upgrade.Config{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	ls := llmtest.NewServer(t)
	t.Cleanup(ls.Close)
	client, err := llm.New(llm.Options{BaseURL: ls.URL(), APIKey: "test-key", Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	a, err := New(Deps{LLM: client, API: api, Store: store, Now: fixedNow,
		NewID: func() string { return fmt.Sprintf("id%04d", n.Add(1)) }}, Settings{Model: "test-model", ReplyWording: WordingLLM}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, sim: srv, api: api, llm: ls, store: store, agent: a, sess: NewSession("sess1", fixedNow())}
}

// ask runs one turn with the given scripted replies and checks that every
// reply was used.
func (h *harness) ask(msg string, replies ...llmtest.Reply) *Result {
	h.t.Helper()
	res, err := h.tryAsk(msg, replies...)
	if err != nil {
		h.t.Fatalf("ask %q: %v", msg, err)
	}
	return res
}

func (h *harness) tryAsk(msg string, replies ...llmtest.Reply) (*Result, error) {
	h.t.Helper()
	h.llm.Enqueue(replies...)
	res, err := h.agent.Ask(context.Background(), h.sess, msg)
	if verr := h.llm.Verify(); verr != nil {
		h.t.Fatalf("scripted LLM: %v", verr)
	}
	if err == nil {
		// Every turn leaves a checkpoint that loads.
		loaded, lerr := LoadSession(h.store, h.sess.cp.SessionID)
		if lerr != nil {
			h.t.Fatalf("reload checkpoint: %v", lerr)
		}
		h.sess = loaded
	}
	return res, err
}

func call(name string, args any) llmtest.Call { return llmtest.NewCall(name, args) }

func calls(cs ...llmtest.Call) llmtest.Reply { return llmtest.CallReply(cs...) }

func text(s string) llmtest.Reply { return llmtest.TextReply(s) }

func analyze(intent, summary string, extra map[string]any) llmtest.Reply {
	args := map[string]any{"intent_type": intent, "confidence": 0.9, "user_request_summary": summary, "reasoning": "test"}
	for k, v := range extra {
		args[k] = v
	}
	return calls(call("analyze_user_request", args))
}

func (h *harness) createExperiment(name, ctx string, state upgrade.State, description string) upgrade.Experiment {
	h.t.Helper()
	e := upgrade.Experiment{
		Name: name, Description: description, Context: []string{ctx}, State: upgrade.StateInactive,
		ConsistencyRule: "individual", AssignmentUnit: "individual", PostExperimentRule: "continue",
		Tags: []string{}, FilterMode: "includeAll", Type: "Simple", AssignmentAlgorithm: "random",
		Conditions: []upgrade.Condition{
			{ID: upgrade.NewID(), ConditionCode: "control", AssignmentWeight: 50, Order: 1},
			{ID: upgrade.NewID(), ConditionCode: "variant", AssignmentWeight: 50, Order: 2},
		},
		Partitions: []upgrade.DecisionPoint{{ID: upgrade.NewID(), Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1}},
	}
	created, err := h.api.CreateExperiment(context.Background(), &e)
	if err != nil {
		h.t.Fatal(err)
	}
	if state != upgrade.StateInactive {
		if _, err := h.api.SetState(context.Background(), created.ID, state); err != nil {
			h.t.Fatal(err)
		}
	}
	return *created
}

func (h *harness) experimentNames() []string {
	var out []string
	for _, e := range h.sim.Sim().Experiments() {
		out = append(out, e.Name)
	}
	return out
}

func requireTrace(t *testing.T, res *Result, want ...string) {
	t.Helper()
	if strings.Join(res.Trace, ",") != strings.Join(want, ",") {
		t.Fatalf("trace = %v, want %v", res.Trace, want)
	}
}
