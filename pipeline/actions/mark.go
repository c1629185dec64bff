package actions

import (
	"context"
	"fmt"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// MarkDecisionPoint records that a user reached a decision point.
const MarkDecisionPoint Name = "mark_decision_point"

// MarkDecisionPointParams are the params of mark_decision_point. A nil
// AssignedCondition means no condition was assigned; Status then defaults to
// "no condition assigned", otherwise to "condition applied".
type MarkDecisionPointParams struct {
	UserID            string                  `json:"user_id"`
	DecisionPoint     SiteTarget              `json:"decision_point"`
	AssignedCondition *AssignedConditionParam `json:"assigned_condition" jsonschema:"the condition applied, or null when none was assigned"`
	Status            string                  `json:"status,omitempty" jsonschema:"condition applied, condition not applied (excludes the user) or no condition assigned"`
}

// Action implements Params.
func (MarkDecisionPointParams) Action() Name { return MarkDecisionPoint }

func (p MarkDecisionPointParams) canonical() MarkDecisionPointParams {
	c := MarkDecisionPointParams{
		UserID:        strings.TrimSpace(p.UserID),
		DecisionPoint: SiteTarget{Site: strings.TrimSpace(p.DecisionPoint.Site), Target: strings.TrimSpace(p.DecisionPoint.Target)},
		Status:        enumValue(p.Status, markStatuses),
	}
	if ac := p.AssignedCondition; ac != nil {
		n := AssignedConditionParam{ConditionCode: strings.TrimSpace(ac.ConditionCode), ExperimentID: idValue(ac.ExperimentID)}
		if n != (AssignedConditionParam{}) {
			c.AssignedCondition = &n // an empty object is no condition
		}
	}
	if c.Status == "" {
		c.Status = upgrade.MarkNoConditionAssigned
		if c.AssignedCondition != nil {
			c.Status = upgrade.MarkConditionApplied
		}
	}
	return c
}

// declareMark declares this file's action in r.
func declareMark(r *Registry) {
	Add(r, Def[MarkDecisionPointParams]{
		Name: MarkDecisionPoint, Order: 70, Destructive: true, Invalidates: []Cache{CacheEnrollment},
		Object:      ObjectExperiment,
		Description: "Record that a user reached a decision point and which condition they saw (enrolls or excludes the user).",
		Canonical:   MarkDecisionPointParams.canonical,
		Validate:    validateMark,
		Plan:        planMark,
		Execute:     executeMark,
		Reconcile:   repeatUserCall[MarkDecisionPointParams],
		Report: ReportAs(func(r markResult) string {
			what := "no condition"
			if r.Condition != "" {
				what = fmt.Sprintf("condition %s of experiment %s", r.Condition, r.ExperimentID)
			}
			return fmt.Sprintf("Marked %s for user %q: %s, status %q.", siteTarget(r.Site, r.Target), r.UserID, what, r.Status)
		}),
	})
}

func validateMark(c *Checker, p MarkDecisionPointParams) error {
	c.userID(p.UserID)
	if p.DecisionPoint.Site == "" {
		c.Missing("decision_point.site", "decision_point.site is required")
	}
	if p.DecisionPoint.Target == "" {
		c.Missing("decision_point.target", "decision_point.target is required (UpGrade refuses a mark without one)")
	}
	status := p.Status
	switch status {
	case upgrade.MarkConditionApplied, upgrade.MarkConditionNotApplied, upgrade.MarkNoConditionAssigned:
	default:
		c.AddValue("status", status, "unknown mark status; use %q, %q or %q",
			upgrade.MarkConditionApplied, upgrade.MarkConditionNotApplied, upgrade.MarkNoConditionAssigned)
		status = ""
	}
	ac := p.AssignedCondition
	if ac == nil {
		if status != "" && status != upgrade.MarkNoConditionAssigned {
			c.Add("status", "status %q needs assigned_condition (the condition the user saw)", status)
		}
		return nil
	}
	if status == upgrade.MarkNoConditionAssigned {
		c.Add("status", "status %q contradicts assigned_condition; drop one of them", status)
	}
	if ac.ConditionCode == "" {
		c.Missing("assigned_condition.condition_code", "assigned_condition.condition_code is required")
	}
	e, err := c.Experiment("assigned_condition.experiment_id", ac.ExperimentID)
	if err != nil || e == nil {
		return err
	}
	if ac.ConditionCode != "" && e.ConditionByCode(ac.ConditionCode) == nil {
		c.AddValue("assigned_condition.condition_code", ac.ConditionCode, "experiment %q has no such condition; its conditions: %s",
			e.Name, listOrNone(experimentCodes(e)))
	}
	if p.DecisionPoint.Site != "" && !hasPartition(e, p.DecisionPoint.Site, p.DecisionPoint.Target) {
		c.Add("decision_point", "experiment %q has no decision point %s; its decision points: %s",
			e.Name, siteTarget(p.DecisionPoint.Site, p.DecisionPoint.Target), listOrNone(partitionNames(e)))
	}
	return nil
}

func planMark(b *Planner, p MarkDecisionPointParams) error {
	dp := ident(siteTarget(p.DecisionPoint.Site, p.DecisionPoint.Target))
	if p.AssignedCondition == nil {
		b.Line("mark decision point %s for user %s: no condition, status %s.", dp, quote(p.UserID), quote(p.Status))
		b.Line("This records that the user reached the decision point without a condition.")
		return nil
	}
	e, err := b.Experiment(p.AssignedCondition.ExperimentID)
	if err != nil {
		return err
	}
	b.Pin(e)
	b.Line("mark decision point %s for user %s: condition %s of experiment %s (id %s), status %s.",
		dp, quote(p.UserID), ident(p.AssignedCondition.ConditionCode), quote(e.Name), e.ID, quote(p.Status))
	if p.Status == upgrade.MarkConditionNotApplied {
		b.Line("This excludes the user from the experiment for good.")
	} else {
		b.Line("This records the user's enrollment in the experiment.")
	}
	return nil
}

type markResult struct {
	UserID       string `json:"user_id"`
	Site         string `json:"site"`
	Target       string `json:"target"`
	ExperimentID string `json:"experiment_id,omitempty"`
	Condition    string `json:"condition,omitempty"`
	Status       string `json:"status"`
	MarkID       string `json:"mark_id,omitempty"`
}

func executeMark(ctx context.Context, env Env, p MarkDecisionPointParams, _ string) (Outcome, error) {
	api := env.API
	req := upgrade.MarkRequest{Data: upgrade.MarkData{Site: p.DecisionPoint.Site, Target: p.DecisionPoint.Target}, Status: p.Status}
	if ac := p.AssignedCondition; ac != nil {
		mc := &upgrade.MarkCondition{ConditionCode: ac.ConditionCode, ExperimentID: ac.ExperimentID}
		// The condition id makes the mark unambiguous; a failed lookup
		// is not worth failing the mark for, the code is enough.
		if e, err := api.Experiment(ctx, ac.ExperimentID); err == nil {
			if c := e.ConditionByCode(ac.ConditionCode); c != nil {
				mc.ID = c.ID
			}
		}
		req.Data.AssignedCondition = mc
	}
	out, err := api.Mark(ctx, p.UserID, req)
	if err != nil {
		return Outcome{}, err
	}
	res := markResult{UserID: p.UserID, Site: req.Data.Site, Target: req.Data.Target, Status: req.Status, MarkID: out.ID,
		ExperimentID: out.ExperimentID, Condition: out.Condition}
	if res.ExperimentID == "" && req.Data.AssignedCondition != nil {
		res.ExperimentID = req.Data.AssignedCondition.ExperimentID
	}
	if res.Condition == "" && req.Data.AssignedCondition != nil {
		res.Condition = req.Data.AssignedCondition.ConditionCode
	}
	return Result(res)
}
