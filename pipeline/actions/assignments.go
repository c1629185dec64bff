package actions

import (
	"context"
	"fmt"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// GetDecisionPointAssignments asks which conditions a user gets.
const GetDecisionPointAssignments Name = "get_decision_point_assignments"

// GetDecisionPointAssignmentsParams are the params of
// get_decision_point_assignments.
type GetDecisionPointAssignmentsParams struct {
	UserID  string `json:"user_id" jsonschema:"the user id (initialised before)"`
	Context string `json:"context" jsonschema:"app context"`
}

// Action implements Params.
func (GetDecisionPointAssignmentsParams) Action() Name { return GetDecisionPointAssignments }

func (p GetDecisionPointAssignmentsParams) canonical() GetDecisionPointAssignmentsParams {
	return GetDecisionPointAssignmentsParams{UserID: strings.TrimSpace(p.UserID), Context: strings.TrimSpace(p.Context)}
}

// declareAssignments declares this file's action in r.
func declareAssignments(r *Registry) {
	Add(r, Def[GetDecisionPointAssignmentsParams]{
		Name: GetDecisionPointAssignments, Order: 60,
		Object:      ObjectExperiment,
		Description: "Ask UpGrade which condition a user gets at each decision point of an app context.",
		Canonical:   GetDecisionPointAssignmentsParams.canonical,
		Validate: func(c *Checker, p GetDecisionPointAssignmentsParams) error {
			c.userID(p.UserID)
			_, _, err := c.context(p.Context)
			return err
		},
		Plan: func(b *Planner, p GetDecisionPointAssignmentsParams) error {
			b.Line("Ask UpGrade which conditions user %s gets in context %s.", quote(p.UserID), ident(p.Context))
			b.Line("The user must have been initialised before (init_experiment_user); nothing is marked.")
			return nil
		},
		Execute:   executeAssign,
		Reconcile: repeatUserCall[GetDecisionPointAssignmentsParams],
		Report: ReportAs(func(r assignResult) string {
			if len(r.Assignments) == 0 {
				return fmt.Sprintf("User %q gets no condition at any decision point of %s (every decision point gives the default).", r.UserID, r.Context)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "User %q gets in %s:", r.UserID, r.Context)
			for _, a := range r.Assignments {
				fmt.Fprintf(&b, "\n- %s: %s (experiment %s)", siteTarget(a.Site, a.Target), a.ConditionCode, a.ExperimentID)
			}
			return b.String()
		}),
	})
}

// AssignmentResult is one condition a user gets at a decision point.
type AssignmentResult struct {
	Site          string           `json:"site"`
	Target        string           `json:"target"`
	ExperimentID  string           `json:"experiment_id"`
	ConditionCode string           `json:"condition_code"`
	ConditionID   string           `json:"condition_id,omitempty"`
	Payload       *upgrade.Payload `json:"payload,omitempty"`
}

type assignResult struct {
	UserID      string             `json:"user_id"`
	Context     string             `json:"context"`
	Assignments []AssignmentResult `json:"assignments"`
}

func executeAssign(ctx context.Context, env Env, p GetDecisionPointAssignmentsParams, _ string) (Outcome, error) {
	as, err := env.API.Assign(ctx, p.UserID, p.Context)
	if err != nil {
		return Outcome{}, err
	}
	res := assignResult{UserID: p.UserID, Context: p.Context, Assignments: []AssignmentResult{}}
	for _, a := range as {
		for _, c := range a.AssignedCondition {
			res.Assignments = append(res.Assignments, AssignmentResult{Site: a.Site, Target: a.Target,
				ExperimentID: c.ExperimentID, ConditionCode: c.ConditionCode, ConditionID: c.ID, Payload: c.Payload})
		}
	}
	return Result(res)
}
