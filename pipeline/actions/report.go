package actions

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Reporter is an action that can say in plain words what an execution
// produced, from its result alone: the reply after a single confirmed
// action needs no LLM call, and a template never invents a number.
type Reporter interface {
	Report(result json.RawMessage) string
}

// Report renders the result of a registered action, or "" when it has no
// words for it (the caller then shows the result as it is).
func (a *builtin[P]) Report(result json.RawMessage) string {
	if a.def.Report == nil || len(result) == 0 {
		return ""
	}
	return a.def.Report(result)
}

// ReportAs decodes a result into T and renders it with fn (Def.Report); a
// result that does not decode gets no words.
func ReportAs[T any](fn func(T) string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		var v T
		if json.Unmarshal(raw, &v) != nil {
			return ""
		}
		return fn(v)
	}
}

// designSummary is the lines of an experiment result a person checks.
func designSummary(r ExperimentResult) string {
	var b strings.Builder
	conds := make([]string, len(r.Conditions))
	for i, c := range r.Conditions {
		conds[i] = fmt.Sprintf("%s %s%%", c.Code, fmtNum(c.Weight))
	}
	dps := make([]string, len(r.DecisionPoints))
	for i, d := range r.DecisionPoints {
		dps[i] = siteTarget(d.Site, d.Target)
		if d.ExcludeIfReached {
			dps[i] += " (exclude if reached)"
		}
	}
	fmt.Fprintf(&b, "Conditions: %s\n", joinOrNone(conds))
	fmt.Fprintf(&b, "Decision points: %s\n", joinOrNone(dps))
	if r.PostExperimentRule != "" {
		fmt.Fprintf(&b, "Post-experiment rule: %s\n", r.PostExperimentRule)
	}
	return b.String()
}
