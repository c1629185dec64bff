package pipeline

// Routing rules of pipeline.md, one named function each, so that every rule
// is tested on its own (routing_test.go).

// analyzerDecision is what routing needs from the analyzer's call.
type analyzerDecision struct {
	intent         string
	directResponse string
	userConfirmed  *bool
	pendingAtStart bool // a confirmation from an earlier turn is waiting
	continuation   bool // the analyzer runs after the executor (next step)
}

// routeAfterAnalyzer: a pending confirmation is decided first (true runs the
// executor, false denies, null asks again); otherwise a direct answer goes to
// the responder, or ends the turn when the analyzer already wrote it, and
// anything else goes to the gatherer. user_confirmed is ignored when nothing
// from an earlier turn is pending: the model can never approve an action it
// proposed itself.
func routeAfterAnalyzer(d analyzerDecision) string {
	if d.pendingAtStart && !d.continuation {
		switch {
		case d.userConfirmed == nil:
			return NodeResponder // unclear: ask again, execute nothing
		case *d.userConfirmed:
			return NodeExecutor
		default:
			return NodeResponder // denial: the caller clears the pending action
		}
	}
	if d.intent == IntentDirectAnswer {
		if d.directResponse != "" {
			return nodeEnd
		}
		return NodeResponder
	}
	return NodeGatherer
}

// gathererOutcome is what routing needs from the gatherer loop.
type gathererOutcome struct {
	actionComplete bool // action set, params set, nothing missing
	valid          bool // Go validation passed
}

// routeAfterGatherer: a complete and valid action goes to the confirmation
// node; missing or invalid params and information-only requests go to the
// responder.
func routeAfterGatherer(o gathererOutcome) string {
	if o.actionComplete && o.valid {
		return NodeConfirmation
	}
	return NodeResponder
}

// routeAfterConfirmation: an action the policy (or --yes) lets through runs
// at once; otherwise the responder shows the confirmation and the turn
// pauses.
func routeAfterConfirmation(needsHuman bool) string {
	if needsHuman {
		return NodeResponder
	}
	return NodeExecutor
}

// routeAfterExecutor: a job still running suspends the turn; a multi-step
// request (next_step set by the original request) goes back to the analyzer;
// a single step goes straight to the responder without an LLM call.
func routeAfterExecutor(jobPending bool, nextStep string, pausing bool) string {
	switch {
	case jobPending:
		return nodeEnd
	case pausing:
		return NodeResponder // stale plan re-shown, or refused
	case nextStep != "":
		return NodeAnalyzer
	default:
		return NodeResponder
	}
}

// routeAfterResponder: the responder ends the turn. It never routes back to
// the analyzer; only the optional output node may follow.
func routeAfterResponder(outputEnabled bool) string {
	if outputEnabled {
		return NodeOutput
	}
	return nodeEnd
}

// maxTransitions bounds the node transitions of one turn.
const maxTransitions = 24
