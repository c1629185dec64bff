package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The round-trip levers of the cost issue, each on its own.

func TestAnalyzerLookupsRunAsTheGatherersFirstRound(t *testing.T) {
	h := newHarness(t)
	h.createExperiment("Math Hints", "assign-prog", upgrade.StateEnrolling, "")
	res := h.ask("list all experiments",
		calls(call("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.9,
			"user_request_summary": "list experiments", "reasoning": "needs the list", "needs_action": false}),
			call("get_all_experiments", map[string]any{})),
		text("There is one experiment, Math Hints."),
	)
	requireTrace(t, res, NodeAnalyzer, NodeGatherer, NodeResponder)
	if res.Usage.LLMCalls != 2 {
		t.Fatalf("a question with one lookup took %d calls, want 2", res.Usage.LLMCalls)
	}
	reqs := h.llm.Requests()
	if reqs[1].Node != NodeResponder || !strings.Contains(string(reqs[1].Body), "Math Hints") {
		t.Fatalf("the responder did not get the lookup's result: %s %s", reqs[1].Node, reqs[1].Body)
	}
}

func TestAnalyzerLookupsOfAnActionGoOnInTheGatherer(t *testing.T) {
	h := newHarness(t)
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	res := h.ask("start Math Hints",
		calls(call("analyze_user_request", map[string]any{"intent_type": "needs_info", "confidence": 0.9,
			"user_request_summary": "start Math Hints", "reasoning": "a status change", "needs_action": true}),
			call("find_experiment", map[string]any{"name": "Math Hints"})),
		// The gatherer continues the conversation the analyzer's lookup began.
		llmtest.Reply{MessagesContain: []string{`"details"`, e.ID},
			Calls: []llmtest.Call{call("set_action_needed", map[string]any{"action": "update_experiment_status", "reasoning": "start"}),
				call("set_action_params", map[string]any{"action_params": map[string]any{"experiment_id": e.ID, "status": "enrolling"}})}},
		text("Starting it enrolls students."),
	)
	requireTrace(t, res, NodeAnalyzer, NodeGatherer, NodeConfirmation, NodeResponder)
	if res.Usage.LLMCalls != 3 || res.Status != StatusAwaitingConfirmation {
		t.Fatalf("an action proposal took %d calls (%s), want 3", res.Usage.LLMCalls, res.Status)
	}
}

func TestLookupsWithoutAClassification(t *testing.T) {
	h := newHarness(t)
	res := h.ask("what contexts are there?",
		calls(call("get_available_contexts", map[string]any{})),
		text("I looked them up."), // the gatherer: no needs_action, so it decides itself
		text("assign-prog, livehint-ai and mathstream."),
	)
	requireTrace(t, res, NodeAnalyzer, NodeGatherer, NodeResponder)
	if res.Status != StatusCompleted {
		t.Fatalf("got %+v", res)
	}
}

func TestProviderIgnoringToolChoiceAnswersInOneCall(t *testing.T) {
	h := newHarness(t)
	res := h.ask("hi", text("Hello! I run experiments on UpGrade."))
	requireTrace(t, res, NodeAnalyzer)
	if res.Usage.LLMCalls != 1 || res.Response != "Hello! I run experiments on UpGrade." {
		t.Fatalf("a plain-text analyzer answer took %d calls: %+v", res.Usage.LLMCalls, res)
	}
}

func TestFindExperimentBringsTheDetailsOfItsOneMatch(t *testing.T) {
	h := newHarness(t)
	h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	h.createExperiment("Reading Aid", "assign-prog", upgrade.StateInactive, "")
	h.ask("show Math Hints",
		analyze(IntentNeedsInfo, "show Math Hints", map[string]any{"needs_action": false}),
		calls(call("find_experiment", map[string]any{"name": "math hints"})),
		text("Math Hints is inactive."),
	)
	reqs := h.llm.Requests()
	if !strings.Contains(string(reqs[2].Body), `\"details\"`) || !strings.Contains(string(reqs[2].Body), "absolute_value_plot_equality") {
		t.Fatalf("find_experiment did not bring the details of its one match: %s", reqs[2].Body)
	}
	h.ask("any hints experiments?",
		analyze(IntentNeedsInfo, "find", map[string]any{"needs_action": false}),
		calls(call("find_experiment", map[string]any{"name": "a"})),
		text("Two match."),
	)
	all := h.llm.Requests()
	if body := string(all[len(all)-1].Body); strings.Contains(body, `\"details\"`) {
		t.Fatalf("several matches must not bring details: %s", body)
	}
}

func TestRepliesAfterAClearYesOrNoAreRenderedInGo(t *testing.T) {
	h := newHarness(t)
	h.agent.set.ReplyWording = WordingGo
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	proposeDeleteInGo(t, h, e.ID)
	res := h.ask("no thanks")
	if res.Usage.LLMCalls != 0 || !strings.Contains(res.Response, `Cancelled, nothing was run: delete experiment "Math Hints"`) {
		t.Fatalf("a denial's reply: %d calls, %q", res.Usage.LLMCalls, res.Response)
	}
	asked := proposeDeleteInGo(t, h, e.ID)
	res = h.ask("yes please")
	if res.Usage.LLMCalls != 0 || !strings.Contains(res.Response, `Deleted experiment "Math Hints" (id `+e.ID+`)`) {
		t.Fatalf("a yes's reply: %d calls, %q", res.Usage.LLMCalls, res.Response)
	}
	if res.Turn != asked.Turn {
		t.Fatalf("the yes counted as turn %d; the decision completes turn %d", res.Turn, asked.Turn)
	}
}

// proposeDeleteInGo proposes a delete with reply_wording go: two LLM calls
// (analyzer, gatherer); the reply is the confirmation Go rendered, led by
// the facts that help the decision, with no responder call.
func proposeDeleteInGo(t *testing.T, h *harness, id string) *Result {
	t.Helper()
	res := h.ask("delete Math Hints",
		analyze(IntentNeedsInfo, "delete Math Hints", nil),
		calls(call("set_action_needed", map[string]any{"action": "delete_experiment", "reasoning": "asked"}),
			call("set_action_params", map[string]any{"action_params": map[string]any{"experiment_id": id}})),
	)
	requireTrace(t, res, NodeAnalyzer, NodeGatherer, NodeConfirmation, NodeResponder)
	if res.Usage.LLMCalls != 2 || res.Confirmation == nil {
		t.Fatalf("a proposal: %d calls, %+v", res.Usage.LLMCalls, res.Confirmation)
	}
	if want := "Currently: 0 users are enrolled.\n\n" + res.Confirmation.Message; res.Response != want {
		t.Fatalf("a proposal's reply:\n%s\nwant:\n%s", res.Response, want)
	}
	return res
}

func TestReplyWordingLLMKeepsTheResponder(t *testing.T) {
	h := newHarness(t) // the harness words replies with the LLM
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	res := proposeDelete(h, e.ID, nil)
	if res.Usage.LLMCalls != 3 || !strings.HasPrefix(res.Response, "About to delete Math Hints.\n\n") || !strings.Contains(res.Response, res.Confirmation.Message) {
		t.Fatalf("a proposal worded by the responder: %d calls, %q", res.Usage.LLMCalls, res.Response)
	}
	res = h.ask("yes", text("Math Hints is gone."))
	if res.Usage.LLMCalls != 1 || res.Response != "Math Hints is gone." {
		t.Fatalf("got %d calls, %q", res.Usage.LLMCalls, res.Response)
	}
}

func TestNewRejectsAnUnknownWording(t *testing.T) {
	h := newHarness(t)
	_, err := New(Deps{LLM: h.agent.deps.LLM, API: h.api}, Settings{ReplyWording: "poetry"})
	if err == nil || !strings.Contains(err.Error(), "reply_wording") {
		t.Fatalf("err = %v", err)
	}
}

// TestBalanceReportNeverInventsANumber: the rendered balance reply carries
// the result's own figures.
func TestBalanceReportNeverInventsANumber(t *testing.T) {
	res := actions.BalanceResult{ExperimentName: "Math Hints", ExperimentState: "enrolling", Users: 200, Assigned: 200,
		Conditions: []actions.ConditionShare{{Code: "control", Count: 107, Share: 0.535, ExpectedShare: 0.5}, {Code: "variant", Count: 93, Share: 0.465, ExpectedShare: 0.5}},
		ChiSquare:  0.98, DF: 1, PValue: 0.3222}
	raw, _ := json.Marshal(res)
	act, _ := actions.Builtin().Lookup(string(actions.TestConditionBalance))
	text := act.(actions.Reporter).Report(raw)
	for _, want := range []string{"Simulated 200 users", "| control | 107 | 53.5% | 50% |", "| variant | 93 | 46.5% | 50% |", "p = 0.3222", "consistent with the weights"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// scriptedJob answers Poll with the next status of a list and moves a fake
// clock by the time it was asked to wait.
type scriptedJob struct {
	actions.JobAction
	now    *time.Time
	states []JobStatus
	waits  []time.Duration
}

func (s *scriptedJob) Poll(_ context.Context, _ actions.Env, _ actions.JobRef, d time.Duration) (JobStatus, error) {
	s.waits = append(s.waits, d)
	*s.now = s.now.Add(d)
	st := s.states[0]
	if len(s.states) > 1 {
		s.states = s.states[1:]
	}
	return st, nil
}

// TestPollJobChecksAtOnceThenEverySecond: resume --wait asks at once, then
// about once a second, reports every status, and stops at the deadline.
func TestPollJobChecksAtOnceThenEverySecond(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := &Agent{deps: Deps{Now: func() time.Time { return now }}}
	running := func(done int) JobStatus {
		return JobStatus{ID: "j1", State: actions.JobRunning, Done: done, Total: 300}
	}
	job := &scriptedJob{now: &now, states: []JobStatus{running(0), running(50), running(200), {ID: "j1", State: actions.JobSucceeded, Done: 300, Total: 300}}}
	var seen []int
	st, err := a.pollJob(context.Background(), job, actions.Env{}, &JobWait{Ref: actions.JobRef{ID: "j1"}},
		JobCheck{Wait: time.Minute, Progress: func(s JobStatus) { seen = append(seen, s.Done) }})
	if err != nil || st.State != actions.JobSucceeded {
		t.Fatalf("got %+v, %v", st, err)
	}
	if fmtInts(seen) != "[0,50,200,300]" {
		t.Errorf("progress reported %v", seen)
	}
	if fmtDurations(job.waits) != "[0s 1s 1s 1s]" {
		t.Errorf("waits %v, want at once, then steps of a second", job.waits)
	}

	now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	job = &scriptedJob{now: &now, states: []JobStatus{running(10)}}
	st, err = a.pollJob(context.Background(), job, actions.Env{}, &JobWait{Ref: actions.JobRef{ID: "j1"}}, JobCheck{Wait: 2500 * time.Millisecond})
	if err != nil || st.State != actions.JobRunning {
		t.Fatalf("got %+v, %v", st, err)
	}
	if got := fmtDurations(job.waits); got != "[0s 1s 1s 500ms]" {
		t.Errorf("waits %v, want at once, 1s, 1s, 0.5s up to the deadline", got)
	}
}

func fmtDurations(v []time.Duration) string {
	parts := make([]string, len(v))
	for i, d := range v {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtInts(v []int) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestToolErrorsLeaveOutTheUpGradeURL: the model reads the status and the
// server's message of a failed lookup, never the method and the URL.
func TestToolErrorsLeaveOutTheUpGradeURL(t *testing.T) {
	ue := &upgrade.Error{Category: upgrade.CategoryNotFound, Method: "GET", URL: "http://127.0.0.1:9/api/experiments/x", Status: 404, Message: "Experiment not found"}
	got := modelErrorText(fmt.Errorf("experiment x: %w", ue))
	want := "experiment x: UpGrade answered 404 Not Found: Experiment not found"
	if got != want {
		t.Errorf("modelErrorText = %q, want %q", got, want)
	}
	if got := modelErrorText(errors.New("plain")); got != "plain" {
		t.Errorf("a plain error changed: %q", got)
	}
}

// TestKeyByKeyEndsWhenAReplyChangesNothing: a model building an action it
// chose in this turn key by key is asked once more after the action is
// complete (its optional keys may follow), and the loop ends at the first
// such reply that changes nothing.
func TestKeyByKeyEndsWhenAReplyChangesNothing(t *testing.T) {
	h := newHarness(t)
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	upd := func(key string, v any) llmtest.Call {
		return call("update_action_params", map[string]any{"key": key, "value": v})
	}
	res := h.ask("start Math Hints",
		analyze(IntentNeedsInfo, "start Math Hints", map[string]any{"needs_action": true}),
		calls(call("set_action_needed", map[string]any{"action": "update_experiment_status", "reasoning": "start"}),
			upd("experiment_id", e.ID), upd("status", "enrolling")),
		calls(upd("status", "enrolling")), // the one more round: it changes nothing
		text("Starting it enrolls students."),
	)
	requireTrace(t, res, NodeAnalyzer, NodeGatherer, NodeConfirmation, NodeResponder)
	if res.Status != StatusAwaitingConfirmation || res.Usage.LLMCalls != 4 {
		t.Fatalf("got %s after %d calls, want a confirmation after 4", res.Status, res.Usage.LLMCalls)
	}
}

// TestADecisionResumesTheGraph: resume --answer yes is a Decision that
// enters the graph at the executor: the reply chain is not asked (neither
// a registered reply function nor the termination words, here "yes"), the
// words are not read again, and the turn counter stays at the turn that
// asked.
func TestADecisionResumesTheGraph(t *testing.T) {
	pending := func(rc *ReplyContext) bool { return rc.PendingAction != "" }
	deciding := false
	h := newHarness(t, WithReply("must-not-run", pending, func(context.Context, *ReplyContext) (Reply, error) {
		t.Error("a decision went through the reply chain")
		return Pass(), nil
	}, 0), WithMessageHook(func(s string) string {
		if deciding {
			t.Error("a decision went through the hooks")
		}
		return s
	}))
	h.agent.set.ReplyWording = WordingGo
	h.agent.set.TerminationWords = []string{"yes", "no"}
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	proposeDeleteInGo(t, h, e.ID)
	deciding = true
	res, err := h.agent.Resume(context.Background(), h.sess, ResumeRequest{Answer: "yes", HasAnswer: true})
	if err != nil {
		t.Fatal(err)
	}
	requireTrace(t, res, NodeExecutor, NodeResponder)
	if res.Turn != 1 || res.Usage.LLMCalls != 0 || res.Status != StatusCompleted || len(res.Actions) != 1 || res.Actions[0].Status != "success" {
		t.Fatalf("decision: turn %d, %d calls, %s, %+v", res.Turn, res.Usage.LLMCalls, res.Status, res.Actions)
	}
	if hist := h.sess.History(); len(hist) != 2 || hist[1].User != "yes" {
		t.Fatalf("history: %+v", hist)
	}
	if names := h.experimentNames(); len(names) != 0 {
		t.Fatalf("experiments left: %v", names)
	}
	// Nothing is pending any more: a decision has nothing to answer.
	if _, err := h.agent.Run(context.Background(), h.sess, Decision{Approve: true}); !errors.Is(err, ErrNothingToResume) {
		t.Fatalf("a decision with nothing pending: %v", err)
	}
}

func TestParseDecision(t *testing.T) {
	const approve, deny, unclear = 1, 2, 0
	for text, want := range map[string]int{"yes": approve, "Yes, go ahead please.": approve, "no thanks": deny, "nope": deny,
		"yes, but what about the students?": unclear, "no, use 60/40": unclear, "": unclear} {
		yes, ok := ParseDecision(text)
		got := unclear
		if ok && yes {
			got = approve
		} else if ok {
			got = deny
		}
		if got != want {
			t.Errorf("ParseDecision(%q) = %v, %v; want %v", text, yes, ok, want)
		}
	}
}
