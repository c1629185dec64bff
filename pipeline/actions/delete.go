package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// DeleteExperiment deletes an experiment.
const DeleteExperiment Name = "delete_experiment"

// DeleteExperimentParams are the params of delete_experiment.
type DeleteExperimentParams struct {
	ExperimentID string `json:"experiment_id" jsonschema:"id (UUID) of the experiment to delete" ref:"experiment"`
}

// Action implements Params.
func (DeleteExperimentParams) Action() Name { return DeleteExperiment }

func (p DeleteExperimentParams) canonical() DeleteExperimentParams {
	return DeleteExperimentParams{ExperimentID: idValue(p.ExperimentID)}
}

// declareDelete declares this file's action in r.
func declareDelete(r *Registry) {
	Add(r, Def[DeleteExperimentParams]{
		Name: DeleteExperiment, Order: 40, Destructive: true, Invalidates: []Cache{CacheExperiments, CacheEnrollment},
		Object:      ObjectExperiment,
		Description: "Delete an experiment and its enrollment data for good.",
		Canonical:   DeleteExperimentParams.canonical,
		Validate: func(c *Checker, p DeleteExperimentParams) error {
			_, err := c.Experiment("experiment_id", p.ExperimentID)
			return err
		},
		Plan:      planDelete,
		Execute:   executeDelete,
		Reconcile: reconcileDelete,
		Report: ReportAs(func(r deleteResult) string {
			if r.Name == "" {
				return fmt.Sprintf("Deleted experiment %s with its enrollment data.", r.ID)
			}
			return fmt.Sprintf("Deleted experiment %q (id %s) with its enrollment data.", r.Name, r.ID)
		}),
	})
}

func planDelete(b *Planner, p DeleteExperimentParams) error {
	e, err := upgrade.ExperimentWithLists(b.ctx, b.api, p.ExperimentID) // its lists naming segments are named
	if err != nil {
		return fmt.Errorf("reading experiment %s: %w", p.ExperimentID, err)
	}
	b.Pin(e)
	b.Line("delete experiment %s (id %s, context %s, state %s).", quote(e.Name), e.ID, identOrNone(e.ContextName()), e.State)
	b.Line("It has %s (%s), %s (%s); the experiment and its enrollment data are removed for good.",
		plural(len(e.Conditions), "condition", "conditions"), listOrNone(experimentCodes(e)),
		plural(len(e.Partitions), "decision point", "decision points"), listOrNone(partitionNames(e)))
	b.segmentListLines(e, "", " (the list goes with the experiment; the segment stays)")
	// The enrollment count helps the decision, but it changes while users
	// arrive: it is a fact for the reply, not part of the text the approval
	// binds to. A server that cannot compute it still lets the person decide.
	if st, err := b.api.EnrollmentStats(b.ctx, e.ID); err == nil && st != nil {
		b.Fact("%s enrolled", plural(st.Users, "user is", "users are"))
	}
	if e.State == upgrade.StateEnrolling {
		b.Warn("the experiment is enrolling: its users get the default condition from now on")
	}
	return nil
}

type deleteResult struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

func executeDelete(ctx context.Context, env Env, p DeleteExperimentParams, _ string) (Outcome, error) {
	out, err := env.API.DeleteExperiment(ctx, p.ExperimentID)
	if err != nil {
		return Outcome{}, err
	}
	id := out.ID
	if id == "" {
		id = p.ExperimentID
	}
	return Result(deleteResult{ID: id, Name: out.Name, Deleted: true})
}

func reconcileDelete(ctx context.Context, env Env, p DeleteExperimentParams, _ string, _ time.Time) (Reconciliation, error) {
	e, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		if upgrade.CategoryOf(err) == upgrade.CategoryNotFound {
			raw, _ := json.Marshal(deleteResult{ID: p.ExperimentID, Deleted: true})
			return Reconciliation{Outcome: OutcomeDone, Result: raw,
				Note: fmt.Sprintf("experiment %s no longer exists: the delete happened", p.ExperimentID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile delete: reading experiment %s: %w", p.ExperimentID, err)
	}
	return Reconciliation{Outcome: OutcomeNotDone,
		Note: fmt.Sprintf("experiment %q still exists: the delete did not happen", e.Name)}, nil
}
