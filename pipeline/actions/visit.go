package actions

import (
	"context"
	"fmt"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// VisitDecisionPoint simulates one user visiting a decision point.
const VisitDecisionPoint Name = "visit_decision_point"

// VisitDecisionPointParams are the params of visit_decision_point.
type VisitDecisionPointParams struct {
	UserID       string              `json:"user_id"`
	Context      string              `json:"context"`
	Site         string              `json:"site"`
	Target       string              `json:"target"`
	Group        map[string][]string `json:"group,omitempty"`
	WorkingGroup map[string]string   `json:"working_group,omitempty"`
}

// Action implements Params.
func (VisitDecisionPointParams) Action() Name { return VisitDecisionPoint }

func (p VisitDecisionPointParams) canonical() VisitDecisionPointParams {
	return VisitDecisionPointParams{UserID: strings.TrimSpace(p.UserID), Context: strings.TrimSpace(p.Context),
		Site: strings.TrimSpace(p.Site), Target: strings.TrimSpace(p.Target),
		Group: normGroupMap(p.Group), WorkingGroup: normWorkingGroup(p.WorkingGroup)}
}

// declareVisit declares this file's action in r.
func declareVisit(r *Registry) {
	Add(r, Def[VisitDecisionPointParams]{
		Name: VisitDecisionPoint, Order: 80, Destructive: true, Invalidates: []Cache{CacheEnrollment},
		Object:      ObjectExperiment,
		Description: "Simulate one user visiting a decision point: init, assign, then mark what was assigned.",
		Canonical:   VisitDecisionPointParams.canonical,
		Validate: func(c *Checker, p VisitDecisionPointParams) error {
			c.userID(p.UserID)
			err := c.siteTarget(p.Context, p.Site, p.Target)
			c.groups(p.Group, p.WorkingGroup)
			return err
		},
		Plan:      planVisit,
		Execute:   executeVisit,
		Reconcile: repeatUserCall[VisitDecisionPointParams],
		Report: ReportAs(func(r visitResult) string {
			dp := siteTarget(r.Site, r.Target)
			if r.Assigned == nil {
				return fmt.Sprintf("User %q visited %s in %s and got no condition (the default); marked %q.", r.UserID, dp, r.Context, r.Status)
			}
			return fmt.Sprintf("User %q visited %s in %s and got condition %s of experiment %s; marked %q.",
				r.UserID, dp, r.Context, r.Assigned.ConditionCode, r.Assigned.ExperimentID, r.Status)
		}),
	})
}

func planVisit(b *Planner, p VisitDecisionPointParams) error {
	dp := ident(siteTarget(p.Site, p.Target))
	b.Line("simulate user %s visiting decision point %s in context %s:", quote(p.UserID), dp, ident(p.Context))
	b.Line("  1. init the user (groups: %s; working groups: %s)", fmtGroupMap(p.Group), fmtWorkingGroups(p.WorkingGroup))
	b.Line("  2. ask UpGrade for the user's conditions in %s", ident(p.Context))
	b.Line("  3. mark %s with the condition assigned there, or %s", dp, quote(upgrade.MarkNoConditionAssigned))
	es, err := experimentsAt(b.ctx, b.api, p.Context, p.Site, p.Target)
	if err != nil {
		return err
	}
	b.Line("Experiments at this decision point: %s.", fmtExperiments(es))
	for _, e := range es {
		switch {
		case e.Type == upgrade.TypeFactorial:
			b.Line("%s is factorial: the mark names the stored condition whose levels UpGrade assigns (its assign code is not a stored code).", quote(e.Name))
		case e.AssignmentUnit == upgrade.UnitWithinSubjects:
			b.Line("%s is within-subjects: the mark names the first condition of the user's order, with uniquifier 1; each visit moves the user on to the next.", quote(e.Name))
		}
	}
	b.Line("This writes 1 synthetic user into UpGrade and may enroll them in an experiment.")
	return nil
}

// AssignedRef names the condition a visit got.
type AssignedRef struct {
	ExperimentID  string `json:"experiment_id"`
	ConditionCode string `json:"condition_code"`
}

type visitResult struct {
	UserID   string       `json:"user_id"`
	Context  string       `json:"context"`
	Site     string       `json:"site"`
	Target   string       `json:"target"`
	Assigned *AssignedRef `json:"assigned"`
	Status   string       `json:"status"`
}

func executeVisit(ctx context.Context, env Env, p VisitDecisionPointParams, _ string) (Outcome, error) {
	ac, err := visit(ctx, env.API, p.UserID, p.Context, p.Site, p.Target, p.Group, p.WorkingGroup)
	if err != nil {
		return Outcome{}, err
	}
	res := visitResult{UserID: p.UserID, Context: p.Context, Site: p.Site, Target: p.Target, Status: upgrade.MarkNoConditionAssigned}
	if ac != nil {
		res.Assigned = &AssignedRef{ExperimentID: ac.ExperimentID, ConditionCode: ac.ConditionCode}
		res.Status = upgrade.MarkConditionApplied
	}
	return Result(res)
}
