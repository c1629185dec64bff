package pipeline

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

func TestRouteAfterAnalyzer(t *testing.T) {
	tests := []struct {
		name, intent, direct, want string
	}{
		{"direct answer written by the analyzer ends the turn", IntentDirectAnswer, "hi", nodeEnd},
		{"direct answer without text goes to the responder", IntentDirectAnswer, "", NodeResponder},
		{"needs info goes to the gatherer", IntentNeedsInfo, "", NodeGatherer},
		{"needs info with text still gathers", IntentNeedsInfo, "hi", NodeGatherer},
	}
	for _, tt := range tests {
		if got := routeAfterAnalyzer(tt.intent, tt.direct); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestReadAnswerNeverApproves: the analyzer can deny, or deny with a
// change; whatever it says, it never approves.
func TestReadAnswerNeverApproves(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name    string
		args    analyzeArgs
		message string
		want    answerKind
	}{
		{"a model claiming a yes is unclear", analyzeArgs{IntentType: IntentNeedsInfo, UserConfirmed: &yes}, "hmm, what happens to enrolled students?", answerUnclear},
		{"a model claiming a yes with a direct answer is unclear", analyzeArgs{IntentType: IntentDirectAnswer, UserConfirmed: &yes}, "sounds great", answerUnclear},
		{"null is unclear", analyzeArgs{IntentType: IntentNeedsInfo}, "what?", answerUnclear},
		{"false is a denial", analyzeArgs{IntentType: IntentDirectAnswer, UserConfirmed: &no}, "No! I never asked for that.", answerDenied},
		{"false with a request but no change cue is a denial", analyzeArgs{IntentType: IntentNeedsInfo, UserConfirmed: &no}, "No! I never asked for that.", answerDenied},
		{"false with change_requested is a change", analyzeArgs{IntentType: IntentNeedsInfo, UserConfirmed: &no, ChangeRequested: &yes}, "no, rather the other one", answerChanged},
		{"change_requested false wins over a cue", analyzeArgs{IntentType: IntentNeedsInfo, UserConfirmed: &no, ChangeRequested: &no}, "no, use nothing", answerDenied},
		{"a change cue without the field", analyzeArgs{IntentType: IntentNeedsInfo, UserConfirmed: &no}, "no, use 60/40 instead", answerChanged},
	}
	for _, tt := range tests {
		args := tt.args
		if got := readAnswer(&args, tt.message); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRouteAfterGatherer(t *testing.T) {
	tests := []struct {
		hasAction, ready bool
		want             string
	}{
		{true, true, NodeConfirmation},
		{true, false, NodeResponder},
		{false, false, NodeResponder},
	}
	for _, tt := range tests {
		if got := routeAfterGatherer(tt.hasAction, tt.ready); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt, got, tt.want)
		}
	}
}

func TestRouteAfterExecution(t *testing.T) {
	tests := []struct {
		name   string
		next   string
		failed bool
		want   string
	}{
		{"single step goes to the responder", "", false, NodeResponder},
		{"multi step goes back to the analyzer", "then show assignments", false, NodeAnalyzer},
		{"a failed step ends the request", "then show assignments", true, NodeResponder},
	}
	for _, tt := range tests {
		if got := routeAfterExecution(tt.next, tt.failed); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestRouteInterrupted(t *testing.T) {
	tests := []struct {
		next   string
		stands bool
		want   string
	}{
		{NodeGatherer, false, NodeGatherer},
		{NodeAnalyzer, false, NodeAnalyzer},
		{NodeResponder, false, NodeResponder},
		{NodeOutput, false, NodeOutput},
		{NodeConfirmation, false, NodeConfirmation},
		{NodeExecutor, false, NodeResponder}, // settled by crash recovery
		{"", false, NodeResponder},
		{NodeExecutor, true, NodeResponder}, // an approval does not outlive its process: asked again
		{NodeGatherer, true, NodeResponder},
	}
	for _, tt := range tests {
		if got := routeInterrupted(tt.next, tt.stands); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt, got, tt.want)
		}
	}
}

func TestRouteAfterResponderNeverLoops(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		got := routeAfterResponder(enabled)
		if got == NodeAnalyzer || got == NodeGatherer || got == NodeResponder {
			t.Fatalf("responder routed to %q", got)
		}
	}
	if routeAfterResponder(true) != NodeOutput || routeAfterResponder(false) != nodeEnd {
		t.Fatal("output node routing wrong")
	}
}

func TestClearAnswer(t *testing.T) {
	tests := map[string]answerKind{
		"yes": answerApproved, " Yes! ": answerApproved, "OK.": answerApproved, "go ahead": answerApproved, "Do it!": answerApproved, "y": answerApproved,
		"yes please": answerApproved, "Yes, go ahead.": answerApproved, "ok, do it": answerApproved, "sure, thanks!": answerApproved, "yep": answerApproved,
		"Confirm": answerApproved, "yes?": answerApproved,
		"no": answerDenied, "Cancel": answerDenied, "don't": answerDenied, "Don’t.": answerDenied, "abort": answerDenied, "no thanks": answerDenied, "No, thank you.": answerDenied,
		"yes but change the weights": answerUnclear, "maybe": answerUnclear, "": answerUnclear, "   ": answerUnclear,
		"hmm, what would happen to the students already enrolled?": answerUnclear,
		"yes, but use 60/40": answerUnclear, "no, use 60/40 instead": answerUnclear, "yes no": answerUnclear,
		"ok delete everything": answerUnclear, "do it for all experiments": answerUnclear,
	}
	for in, want := range tests {
		if got := clearAnswer(in); got != want {
			t.Errorf("clearAnswer(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestResetTurnKeepsProgressiveGathering(t *testing.T) {
	s := NewState()
	s.ActionNeeded = "create_experiment"
	s.ActionParams = json.RawMessage(`{"name":"X"}`)
	s.MissingParams = []string{"context"}
	s.IntentType, s.Confidence, s.UserRequestSummary = IntentNeedsInfo, 0.9, "create X"
	s.addError(ErrTypeValidation, "bad")
	s.resetTurn("in assign-prog")
	if s.IntentType != "" || s.Confidence != 0 || s.UserRequestSummary != "" || len(s.Errors) != 0 {
		t.Fatalf("per-turn fields not reset: %+v", s)
	}
	if s.ActionNeeded != "create_experiment" || string(s.ActionParams) != `{"name":"X"}` || len(s.MissingParams) != 1 {
		t.Fatalf("progressive gathering lost: %+v", s)
	}
}

// TestSessionWritesTheDerivedFields: the state's action fields and the
// confirmation interrupt are written from the draft and the pending
// confirmation, and done clears them all.
func TestSessionWritesTheDerivedFields(t *testing.T) {
	sess := NewSession("s1", time.Now())
	if err := sess.bind(func(string) (actions.Action, bool) { return nil, false }); err != nil {
		t.Fatal(err)
	}
	b, err := actions.Bind("delete_experiment", json.RawMessage(`{"experiment_id":"0b1c2d3e-0000-4000-8000-000000000001"}`))
	if err != nil {
		t.Fatal(err)
	}
	sess.chooseAction("delete_experiment")
	sess.setDraftParams(b)
	sess.setMissing([]string{"y"})
	sess.st.NextStep = "then"
	sess.sync()
	s := sess.st
	if s.ActionNeeded != "delete_experiment" || !hasParam(s.ActionParams, "experiment_id") || len(s.MissingParams) != 1 || s.NeedsConfirmation {
		t.Fatalf("draft not written: %+v", s)
	}
	sess.await(&Pending{ID: "c1", Bound: b, Message: "delete?", NeedsHuman: true})
	if ic := sess.confirmationRef(); ic == nil || ic.Confirmation.ParamsHash != b.Hash || !s.NeedsConfirmation || s.ConfirmationMessage != "delete?" {
		t.Fatalf("pending not written: %+v, %+v", sess.cp.Interrupt, s)
	}
	sess.done()
	if s.ActionNeeded != "" || s.ActionParams != nil || len(s.MissingParams) != 0 || s.NeedsConfirmation || s.ConfirmationMessage != "" || s.NextStep != "" || sess.cp.Interrupt != nil {
		t.Fatalf("not cleared: %+v", s)
	}
}
