package pipeline

// Routing rules of pipeline.md, one named function each, so that every rule
// is tested on its own (routing_test.go). A node returns the next node (or
// an interrupt, graph.go); where pipeline.md has a rule for that choice,
// the node returns what the rule's function says. Some routes are the
// node's own and have no function here: the analyzer sends a pending
// confirmation's answer to the gatherer (a change) or the responder (a
// no); the gatherer goes straight to the responder for a question whose
// lookups the analyzer made; a Decision enters at the executor or the
// responder (reply.go).

// routeAfterAnalyzer: a direct answer the analyzer already wrote ends the
// turn; a direct answer without text goes to the responder; anything else
// goes to the gatherer. (A pending confirmation is decided by readAnswer.)
func routeAfterAnalyzer(intent, directResponse string) string {
	if intent == IntentDirectAnswer {
		if directResponse != "" {
			return nodeEnd
		}
		return NodeResponder
	}
	return NodeGatherer
}

// routeAfterGatherer: a complete and valid action goes to the confirmation
// node; missing or invalid params and information-only requests go to the
// responder.
func routeAfterGatherer(hasAction, ready bool) string {
	if hasAction && ready {
		return NodeConfirmation
	}
	return NodeResponder
}

// routeAfterExecution: a multi-step request (next_step set by the original
// request, never by the word "yes") goes back to the analyzer; a single
// step, or a failed one, goes straight to the responder without an LLM call.
func routeAfterExecution(nextStep string, failed bool) string {
	if failed || nextStep == "" {
		return NodeResponder
	}
	return NodeAnalyzer
}

// routeAfterResponder: the responder ends the turn. It never routes back to
// the analyzer; only the optional output node may follow.
func routeAfterResponder(outputEnabled bool) string {
	if outputEnabled {
		return NodeOutput
	}
	return nodeEnd
}

// routeInterrupted: where a turn that a crash stopped between two nodes
// goes on. An approval does not outlive its process, so a confirmation
// still standing is shown again; the executor's own work is settled by
// crash recovery before this is asked.
func routeInterrupted(nextNode string, confirmationStands bool) string {
	if confirmationStands {
		return NodeResponder
	}
	switch nextNode {
	case NodeAnalyzer, NodeGatherer, NodeConfirmation, NodeResponder, NodeOutput:
		return nextNode
	}
	return NodeResponder
}
