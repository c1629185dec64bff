package actions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// InitExperimentUser registers a user with their groups.
const InitExperimentUser Name = "init_experiment_user"

// InitExperimentUserParams are the params of init_experiment_user.
type InitExperimentUserParams struct {
	UserID       string              `json:"user_id" jsonschema:"the user id"`
	Group        map[string][]string `json:"group,omitempty" jsonschema:"group type -> ids of the groups the user belongs to"`
	WorkingGroup map[string]string   `json:"working_group,omitempty" jsonschema:"group type -> the id of the user's current group (must be one of group)"`
}

// Action implements Params.
func (InitExperimentUserParams) Action() Name { return InitExperimentUser }

func (p InitExperimentUserParams) canonical() InitExperimentUserParams {
	return InitExperimentUserParams{UserID: strings.TrimSpace(p.UserID), Group: normGroupMap(p.Group), WorkingGroup: normWorkingGroup(p.WorkingGroup)}
}

// declareInitUser declares this file's action in r.
func declareInitUser(r *Registry) {
	Add(r, Def[InitExperimentUserParams]{
		Name: InitExperimentUser, Order: 50,
		Object:      ObjectExperiment,
		Description: "Register a user with UpGrade, with their groups and working groups.",
		Canonical:   InitExperimentUserParams.canonical,
		Validate: func(c *Checker, p InitExperimentUserParams) error {
			c.userID(p.UserID)
			c.groups(p.Group, p.WorkingGroup)
			return nil
		},
		Plan: func(b *Planner, p InitExperimentUserParams) error {
			b.Line("Initialise user %s in UpGrade.", quote(p.UserID))
			b.Line("  Groups: %s", fmtGroupMap(p.Group))
			b.Line("  Working groups: %s", fmtWorkingGroups(p.WorkingGroup))
			return nil
		},
		Execute:   executeInit,
		Reconcile: repeatUserCall[InitExperimentUserParams],
		Report: ReportAs(func(r initResult) string {
			return fmt.Sprintf("Initialised user %q. Groups: %s. Working groups: %s.", r.UserID, fmtGroupMap(r.Group), fmtWorkingGroups(r.WorkingGroup))
		}),
	})
}

type initResult struct {
	UserID       string              `json:"user_id"`
	Group        map[string][]string `json:"group"`
	WorkingGroup map[string]string   `json:"working_group"`
}

func executeInit(ctx context.Context, env Env, p InitExperimentUserParams, _ string) (Outcome, error) {
	out, err := env.API.Init(ctx, p.UserID, upgrade.InitRequest{Group: p.Group, WorkingGroup: p.WorkingGroup})
	if err != nil {
		return Outcome{}, err
	}
	return Result(initResult{UserID: p.UserID, Group: nonNilGroup(out.Group), WorkingGroup: nonNilWorking(out.WorkingGroup)})
}

// repeatUserCall reconciles the client calls of one user (init, assign,
// mark, visit): UpGrade treats a repeat for the same user as the same call,
// so the executor simply runs it again (spec/durability.md).
func repeatUserCall[P any](context.Context, Env, P, string, time.Time) (Reconciliation, error) {
	return Reconciliation{Outcome: OutcomeRepeat, Note: "user calls are idempotent for the same user: safe to run again"}, nil
}
