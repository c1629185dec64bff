package pipeline

import "testing"

func TestRouteAfterAnalyzer(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name string
		d    analyzerDecision
		want string
	}{
		{"direct answer written by the analyzer ends the turn", analyzerDecision{intent: IntentDirectAnswer, directResponse: "hi"}, nodeEnd},
		{"direct answer without text goes to the responder", analyzerDecision{intent: IntentDirectAnswer}, NodeResponder},
		{"needs info goes to the gatherer", analyzerDecision{intent: IntentNeedsInfo}, NodeGatherer},
		{"pending + confirmed runs the executor", analyzerDecision{intent: IntentNeedsInfo, pendingAtStart: true, userConfirmed: &yes}, NodeExecutor},
		{"pending + denied goes to the responder", analyzerDecision{intent: IntentNeedsInfo, pendingAtStart: true, userConfirmed: &no}, NodeResponder},
		{"pending + unclear asks again", analyzerDecision{intent: IntentNeedsInfo, pendingAtStart: true}, NodeResponder},
		{"user_confirmed without a pending confirmation is ignored", analyzerDecision{intent: IntentNeedsInfo, userConfirmed: &yes}, NodeGatherer},
		{"a continuation never confirms", analyzerDecision{intent: IntentNeedsInfo, pendingAtStart: true, continuation: true, userConfirmed: &yes}, NodeGatherer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := routeAfterAnalyzer(tt.d); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRouteAfterGatherer(t *testing.T) {
	tests := []struct {
		o    gathererOutcome
		want string
	}{
		{gathererOutcome{actionComplete: true, valid: true}, NodeConfirmation},
		{gathererOutcome{actionComplete: true, valid: false}, NodeResponder},
		{gathererOutcome{}, NodeResponder},
	}
	for _, tt := range tests {
		if got := routeAfterGatherer(tt.o); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.o, got, tt.want)
		}
	}
}

func TestRouteAfterConfirmation(t *testing.T) {
	if got := routeAfterConfirmation(true); got != NodeResponder {
		t.Errorf("needs human: got %q", got)
	}
	if got := routeAfterConfirmation(false); got != NodeExecutor {
		t.Errorf("approved by policy: got %q", got)
	}
}

func TestRouteAfterExecutor(t *testing.T) {
	tests := []struct {
		name       string
		jobPending bool
		next       string
		pausing    bool
		want       string
	}{
		{"single step goes to the responder", false, "", false, NodeResponder},
		{"multi step goes back to the analyzer", false, "then show assignments", false, NodeAnalyzer},
		{"a running job suspends", true, "then x", false, nodeEnd},
		{"a refused stale plan is shown again", false, "then x", true, NodeResponder},
	}
	for _, tt := range tests {
		if got := routeAfterExecutor(tt.jobPending, tt.next, tt.pausing); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
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
	tests := map[string]answer{
		"yes": answerYes, " Yes! ": answerYes, "OK.": answerYes, "go ahead": answerYes, "Do it!": answerYes, "y": answerYes,
		"no": answerNo, "Cancel": answerNo, "don't": answerNo, "Don’t.": answerNo, "abort": answerNo,
		"yes but change the weights": answerUnclear, "maybe": answerUnclear, "": answerUnclear, "sure thing, go for it": answerUnclear,
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
	s.ActionParams = map[string]any{"name": "X"}
	s.MissingParams = []string{"context"}
	s.IntentType, s.Confidence, s.UserRequestSummary = IntentNeedsInfo, 0.9, "create X"
	s.addError(ErrTypeValidation, "bad")
	s.resetTurn("in assign-prog")
	if s.IntentType != "" || s.Confidence != 0 || s.UserRequestSummary != "" || len(s.Errors) != 0 {
		t.Fatalf("per-turn fields not reset: %+v", s)
	}
	if s.ActionNeeded != "create_experiment" || s.ActionParams["name"] != "X" || len(s.MissingParams) != 1 {
		t.Fatalf("progressive gathering lost: %+v", s)
	}
}

func TestClearPending(t *testing.T) {
	s := NewState()
	s.ActionNeeded, s.ActionParams, s.MissingParams = "delete_experiment", map[string]any{"experiment_id": "x"}, []string{"y"}
	s.NeedsConfirmation, s.ConfirmationMessage, s.NextStep = true, "delete?", "then"
	s.clearPending()
	if s.ActionNeeded != "" || s.ActionParams != nil || len(s.MissingParams) != 0 || s.NeedsConfirmation || s.ConfirmationMessage != "" || s.NextStep != "" {
		t.Fatalf("not cleared: %+v", s)
	}
}
