package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Results of the actions, in the compact JSON the person's reply and the
// execution log show.

// ExperimentResult is the compact form of an experiment in action results.
type ExperimentResult struct {
	ID                 string                `json:"id"`
	Name               string                `json:"name"`
	Context            string                `json:"context"`
	State              upgrade.State         `json:"state"`
	Conditions         []ConditionResult     `json:"conditions"`
	DecisionPoints     []DecisionPointResult `json:"decision_points"`
	PostExperimentRule string                `json:"post_experiment_rule,omitempty"`
}

// ConditionResult is one condition in an ExperimentResult.
type ConditionResult struct {
	ID     string  `json:"id"`
	Code   string  `json:"code"`
	Weight float64 `json:"weight"`
}

// DecisionPointResult is one decision point in an ExperimentResult.
type DecisionPointResult struct {
	ID               string `json:"id"`
	Site             string `json:"site"`
	Target           string `json:"target"`
	ExcludeIfReached bool   `json:"exclude_if_reached"`
}

// SummarizeExperiment is the compact form of e used in results.
func SummarizeExperiment(e *upgrade.Experiment) ExperimentResult {
	r := ExperimentResult{ID: e.ID, Name: e.Name, Context: e.ContextName(), State: e.State,
		Conditions: []ConditionResult{}, DecisionPoints: []DecisionPointResult{}}
	for _, c := range sortedConditions(e.Conditions) {
		r.Conditions = append(r.Conditions, ConditionResult{ID: c.ID, Code: c.ConditionCode, Weight: c.AssignmentWeight})
	}
	for _, p := range sortedPartitions(e.Partitions) {
		r.DecisionPoints = append(r.DecisionPoints, DecisionPointResult{ID: p.ID, Site: p.Site, Target: p.Target, ExcludeIfReached: p.ExcludeIfReached})
	}
	r.PostExperimentRule = fmtPostRule(designOf(e).PostExperimentRule)
	return r
}

// visit is one simulated user at a decision point: init, assign, mark what
// was assigned there. It returns the condition marked (nil: none). The
// balance job runs it for every synthetic user.
func visit(ctx context.Context, api UserAPI, userID, appContext, site, target string,
	group map[string][]string, working map[string]string) (*upgrade.AssignedCondition, error) {
	if _, err := api.Init(ctx, userID, upgrade.InitRequest{Group: group, WorkingGroup: working}); err != nil {
		return nil, fmt.Errorf("init user %s: %w", userID, err)
	}
	as, err := api.Assign(ctx, userID, appContext)
	if err != nil {
		return nil, fmt.Errorf("assign user %s: %w", userID, err)
	}
	ac, entry := pickAssignment(as, site, target)
	req := upgrade.MarkRequest{Data: upgrade.MarkData{Site: site, Target: target}, Status: upgrade.MarkNoConditionAssigned}
	if ac != nil {
		if ac, err = markable(ctx, api, ac, entry); err != nil {
			return nil, fmt.Errorf("user %s: %w", userID, err)
		}
		req.Status = upgrade.MarkConditionApplied
		req.Data.AssignedCondition = &upgrade.MarkCondition{ID: ac.ID, ConditionCode: ac.ConditionCode, ExperimentID: ac.ExperimentID}
		if len(entry.AssignedCondition) > 1 {
			// Within-subjects: the mark names the condition shown and its
			// uniquifier, which the analysis joins logs on; "1" is the
			// one a client's plain attributes are logged under.
			req.Uniquifier = "1"
		}
	}
	if _, err := api.Mark(ctx, userID, req); err != nil {
		return nil, fmt.Errorf("mark user %s: %w", userID, err)
	}
	return ac, nil
}

// experimentReader is the one read markable needs; the clients the
// actions run with have it.
type experimentReader interface {
	Experiment(ctx context.Context, id string) (*upgrade.Experiment, error)
}

// markable is the condition to mark for an assignment. A factorial's
// assign code ("Color=Red; Shape=Circle", or a one-factor level's payload
// object) is not a stored code, and UpGrade's mark answers 500 to it: the
// mark names the stored condition whose levels match the assignment.
func markable(ctx context.Context, api UserAPI, ac *upgrade.AssignedCondition, entry *upgrade.Assignment) (*upgrade.AssignedCondition, error) {
	if entry.ExperimentType != upgrade.TypeFactorial {
		return ac, nil
	}
	er, ok := api.(experimentReader)
	if !ok {
		return ac, nil
	}
	e, err := er.Experiment(ctx, ac.ExperimentID)
	if err != nil {
		return nil, fmt.Errorf("reading factorial experiment %s to find the assigned condition: %w", ac.ExperimentID, err)
	}
	c := factorialCondition(e, entry.FactorLevels())
	if c == nil {
		c = e.ConditionByID(ac.ID)
	}
	if c == nil {
		return nil, fmt.Errorf("experiment %s has no condition with the assigned levels", ac.ExperimentID)
	}
	out := *ac
	out.ID, out.ConditionCode, out.CodeObject = c.ID, c.ConditionCode, ""
	return &out, nil
}

// factorialCondition is the condition of e whose levels are those named
// (factor name -> level name), or nil.
func factorialCondition(e *upgrade.Experiment, levels map[string]string) *upgrade.Condition {
	if len(levels) == 0 {
		return nil
	}
	names := map[string]string{} // level id -> "factor=level"
	for _, f := range e.Factors {
		for _, l := range f.Levels {
			names[l.ID] = f.Name + "=" + l.Name
		}
	}
	for i, c := range e.Conditions {
		if len(c.LevelCombinationElements) != len(levels) {
			continue
		}
		match := true
		for _, el := range c.LevelCombinationElements {
			fname, lname, _ := strings.Cut(names[el.Level.ID], "=")
			if levels[fname] != lname || lname == "" {
				match = false
				break
			}
		}
		if match {
			return &e.Conditions[i]
		}
	}
	return nil
}

// pickAssignment finds the condition assigned at site/target and its entry.
// UpGrade gives a user one experiment per decision point, so the first
// condition of the matching entry is the one a client would apply. The
// default condition counts as none.
func pickAssignment(as []upgrade.Assignment, site, target string) (*upgrade.AssignedCondition, *upgrade.Assignment) {
	for k, a := range as {
		if a.Site != site || a.Target != target {
			continue
		}
		for i := range a.AssignedCondition {
			c := a.AssignedCondition[i]
			if (c.ConditionCode != "" && c.ConditionCode != "default") || c.CodeObject != "" {
				return &c, &as[k]
			}
		}
	}
	return nil, nil
}

func nonNilGroup(m map[string][]string) map[string][]string {
	if m == nil {
		return map[string][]string{}
	}
	return m
}

func nonNilWorking(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func resultOf(e *upgrade.Experiment) json.RawMessage {
	raw, _ := json.Marshal(SummarizeExperiment(e)) // plain struct: cannot fail
	return raw
}
