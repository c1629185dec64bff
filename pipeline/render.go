package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// goReply renders the reply in Go when everything to say is already
// written: a confirmation to show (its text is Go's, rendered by the
// action), or a confirmed action, a denial or a finished job that no LLM
// had to understand (the person's clear yes or no, or a job's end). A
// template never invents a number, and the turn saves the responder's LLM
// call. It declines (ok false) whenever a model is needed: for a
// confirmation, when the person's answer to it was a question the analyzer
// left open; otherwise, when the analyzer ran, data was looked up, or
// errors besides the actions' own need explaining. With reply_wording llm the responder
// always writes.
func (a *Agent) goReply(t *turn) (string, bool) {
	if a.set.ReplyWording == WordingLLM {
		return "", false
	}
	if p := t.showing; p != nil {
		if t.answer == answerUnclear && slices.Contains(t.trace, NodeAnalyzer) {
			// The analyzer read the person's answer as no yes or no (a
			// question, a doubt) and did not answer it: a model does.
			return "", false
		}
		return confirmationReply(t, p), true
	}
	if len(t.toolResults) > 0 || slices.Contains(t.trace, NodeAnalyzer) {
		return "", false
	}
	acts := t.st.TurnActions
	if len(acts) == 0 && t.denied == nil {
		return "", false
	}
	failed := 0
	for _, ao := range acts {
		if ao.Status != "success" {
			failed++
		}
	}
	if len(t.st.Errors) > failed {
		return "", false // something else went wrong: a model explains it
	}
	var lines []string
	for _, n := range t.recovered {
		lines = append(lines, fmt.Sprintf("The previous run was interrupted during %v: %v.", n["action"], strings.TrimSuffix(fmt.Sprint(n["note"]), ".")))
	}
	if p := t.denied; p != nil {
		lines = append(lines, "Cancelled, nothing was run: "+planHeadline(p.Message))
	}
	for _, ao := range acts {
		lines = append(lines, a.actionReport(ao))
	}
	return strings.Join(lines, "\n\n"), true
}

// confirmationReply shows a confirmation in Go's words: what happened to
// an earlier one (settled, unclear, changed, never shown), the turn's
// errors and the facts that help the decision lead, then the confirmation
// text, verbatim. It is the reply of a turn that pauses for a yes.
func confirmationReply(t *turn, p *Pending) string {
	var lines []string
	for _, n := range t.recovered {
		lines = append(lines, fmt.Sprintf("The previous run was interrupted during %v: %v.", n["action"], strings.TrimSuffix(fmt.Sprint(n["note"]), ".")))
	}
	if t.answer == answerUnclear {
		lines = append(lines, "I need a clear yes or no to go on; nothing was run.")
	}
	lines = append(lines, t.notes...)
	for _, e := range t.st.Errors {
		lines = append(lines, fmt.Sprintf("Note: %s error: %s", e.Type, e.Message))
	}
	for _, f := range p.Facts {
		lines = append(lines, "Currently: "+f+".")
	}
	lines = append(lines, p.Message)
	return strings.Join(lines, "\n\n")
}

// actionReport is one executed action in words.
func (a *Agent) actionReport(ao ActionOut) string {
	switch ao.Status {
	case "success":
		if act, ok := a.action(ao.Action); ok {
			if r, ok := act.(actions.Reporter); ok {
				if s := r.Report(ao.Result); s != "" {
					return s
				}
			}
		}
		return fmt.Sprintf("%s succeeded: %s", ao.Action, compactJSON(ao.Result))
	case "cancelled":
		return fmt.Sprintf("%s was cancelled: %s", ao.Action, ao.Error)
	}
	return fmt.Sprintf("%s failed: %s", ao.Action, ao.Error)
}

// planHeadline is the first line of a confirmation: what was dropped.
func planHeadline(message string) string {
	line, _, _ := strings.Cut(strings.TrimPrefix(message, actions.DestructiveMarker), "\n")
	return strings.TrimSpace(line)
}
