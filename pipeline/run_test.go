package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestAStaleDecisionIsRefused: a decision names the confirmation it
// answers. One addressed to another id (an older proposal, a typo) is
// refused with ErrStaleDecision, as bad input, before anything is written
// or run: the experiment stays, the checkpoint is the one the proposal
// left, and the right id still approves.
func TestAStaleDecisionIsRefused(t *testing.T) {
	h := newHarness(t)
	h.agent.set.ReplyWording = WordingGo
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	res := proposeDeleteInGo(t, h, e.ID)
	id := h.sess.PendingConfirmation()
	if id == "" || id != res.Confirmation.ID {
		t.Fatalf("pending confirmation %q, the turn showed %q", id, res.Confirmation.ID)
	}
	before, err := h.store.Load(h.sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, stale := range []string{"id9999", "", " " + id, strings.ToUpper(id)} {
		_, err := h.agent.Run(context.Background(), h.sess, Decision{ConfirmationID: stale, Approve: true, Note: "yes"})
		if !errors.Is(err, ErrStaleDecision) || !errors.Is(err, ErrBadInput) {
			t.Fatalf("decision for %q: %v, want ErrStaleDecision (exit 2)", stale, err)
		}
	}
	after, err := h.store.Load(h.sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	if after.Seq != before.Seq || after.Status != before.Status {
		t.Fatalf("a refused decision wrote the checkpoint: seq %d -> %d, %s -> %s", before.Seq, after.Seq, before.Status, after.Status)
	}
	if names := h.experimentNames(); len(names) != 1 {
		t.Fatalf("a refused decision ran the delete: %v", names)
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Fatalf("a refused decision called the LLM: %d requests", n)
	}
	res, err = h.agent.Run(context.Background(), h.sess, Decision{ConfirmationID: id, Approve: true, Note: "yes"})
	if err != nil || res.Status != StatusCompleted || len(res.Actions) != 1 || res.Usage.LLMCalls != 0 {
		t.Fatalf("the right id: %+v, %v", res, err)
	}
	if names := h.experimentNames(); len(names) != 0 {
		t.Fatalf("experiments left: %v", names)
	}
}

// TestResumeInput: resume builds the input at the boundary: a clear yes
// or no, or --yes, is a Decision addressed to the confirmation the session
// shows; free text is a Message; no answer is refused.
func TestResumeInput(t *testing.T) {
	h := newHarness(t)
	h.agent.set.ReplyWording = WordingGo
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	proposeDeleteInGo(t, h, e.ID)
	id := h.sess.PendingConfirmation()
	for _, tt := range []struct {
		req  ResumeRequest
		want Input
	}{
		{ResumeRequest{Answer: "yes", HasAnswer: true}, Decision{ConfirmationID: id, Approve: true, Note: "yes"}},
		{ResumeRequest{Answer: " No thanks. ", HasAnswer: true}, Decision{ConfirmationID: id, Note: " No thanks. "}},
		{ResumeRequest{Yes: true}, Decision{ConfirmationID: id, Approve: true}},
		{ResumeRequest{Answer: "no, keep it but rename it", HasAnswer: true, Yes: true}, Message{Text: "no, keep it but rename it"}},
	} {
		got, err := ResumeInput(h.sess, tt.req)
		if err != nil || got != tt.want {
			t.Errorf("ResumeInput(%+v) = %#v, %v; want %#v", tt.req, got, err, tt.want)
		}
	}
	if _, err := ResumeInput(h.sess, ResumeRequest{HasAnswer: true}); !errors.Is(err, ErrAnswerRequired) {
		t.Errorf("no answer: %v", err)
	}
	if _, err := h.agent.Run(context.Background(), h.sess, nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("no input: %v", err)
	}
	// A turn a crash stopped: an approval does not outlive its process, so
	// --yes answers nothing there; the person's own answer may.
	h.sess.cp.Status = checkpoint.StatusRunning
	for _, tt := range []struct {
		req  ResumeRequest
		want Input
	}{
		{ResumeRequest{Yes: true}, Continue{}},
		{ResumeRequest{Answer: "no", HasAnswer: true, Yes: true}, Continue{Answer: Decision{ConfirmationID: id, Note: "no"}}},
	} {
		if got, err := ResumeInput(h.sess, tt.req); err != nil || got != tt.want {
			t.Errorf("running, ResumeInput(%+v) = %#v, %v; want %#v", tt.req, got, err, tt.want)
		}
	}
}

// deleteByName is a model that proposes to delete the experiment a
// message names ("delete NAME"), whatever the session: turns of several
// sessions may ask it at once.
type deleteByName struct{ calls atomic.Int64 }

func (m *deleteByName) Chat(_ context.Context, req llm.Request) (*llm.Response, error) {
	m.calls.Add(1)
	last := req.Messages[len(req.Messages)-1].Content
	_, name, _ := strings.Cut(last, "Message: delete ")
	var tc []llm.ToolCall
	add := func(tool string, args any) {
		b, _ := json.Marshal(args)
		tc = append(tc, llm.ToolCall{ID: fmt.Sprintf("c%d", len(tc)), Name: tool, Arguments: string(b)})
	}
	switch req.Node {
	case NodeAnalyzer:
		add("analyze_user_request", map[string]any{"intent_type": IntentNeedsInfo, "confidence": 1, "user_request_summary": "delete " + name,
			"reasoning": "asked", "needs_action": true})
	case NodeGatherer:
		add("set_action_needed", map[string]any{"action": "delete_experiment", "reasoning": "asked"})
		add("set_action_params", map[string]any{"action_params": map[string]any{"experiment_id": name}})
	default:
		return &llm.Response{Content: "Done."}, nil
	}
	return &llm.Response{ToolCalls: tc}, nil
}

// TestOneAgentTwoSessionsAtOnce: nothing in an agent changes after New,
// so one agent runs turns of two sessions at the same time (go test
// -race checks it): each proposes and deletes its own experiment.
func TestOneAgentTwoSessionsAtOnce(t *testing.T) {
	h := newHarness(t)
	model := &deleteByName{}
	a, err := New(Deps{LLM: model, API: h.api, Store: h.store, Now: fixedNow}, Settings{Model: "m", ReplyWording: WordingGo},
		WithStateHook(func(rc *ReplyContext) { rc.Extra = append(rc.Extra, "a hook") }))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"Math Hints", "Reading Aid"}
	for _, n := range names {
		h.createExperiment(n, "assign-prog", upgrade.StateInactive, "")
	}
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, n := range names {
		wg.Go(func() {
			sess := NewSession(fmt.Sprintf("conc%d", i), fixedNow())
			res, err := a.Ask(context.Background(), sess, "delete "+n)
			if err == nil && res.Status != StatusAwaitingConfirmation {
				err = fmt.Errorf("proposal: %s %s", res.Status, res.Response)
			}
			if err == nil {
				res, err = a.Run(context.Background(), sess, Decision{ConfirmationID: sess.PendingConfirmation(), Approve: true})
			}
			if err == nil && (res.Status != StatusCompleted || len(res.Actions) != 1 || res.Actions[0].Status != "success") {
				err = fmt.Errorf("decision: %s %+v", res.Status, res.Actions)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if left := h.experimentNames(); len(left) != 0 || model.calls.Load() != 4 {
		t.Fatalf("experiments left %v after %d LLM calls (want none after 4)", left, model.calls.Load())
	}
}
