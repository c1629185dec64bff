package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// goReply renders the reply in Go when the turn is a confirmed action, a
// denial or a finished job that no LLM had to understand (the person's
// clear yes or no, or a job's end): everything to say is in the results,
// and a template never invents a number. It declines (ok false) whenever a
// model is needed: the analyzer ran, data was looked up, a confirmation is
// shown, or errors besides the actions' own need explaining. With
// reply_wording llm the responder always writes.
func (a *Agent) goReply(t *turn) (string, bool) {
	if a.set.ReplyWording == WordingLLM || t.showing != nil || len(t.toolResults) > 0 || slices.Contains(t.trace, NodeAnalyzer) {
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
		lines = append(lines, "Cancelled, nothing was run: "+planHeadline(p.Plan))
	}
	for _, ao := range acts {
		lines = append(lines, a.actionReport(ao))
	}
	return strings.Join(lines, "\n\n"), true
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
func planHeadline(p *actions.Plan) string {
	line, _, _ := strings.Cut(strings.TrimPrefix(p.Message, actions.DestructiveMarker), "\n")
	return strings.TrimSpace(line)
}
