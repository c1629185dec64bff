package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// UpdateExperimentStatus starts, stops, cancels or archives an experiment.
const UpdateExperimentStatus Name = "update_experiment_status"

// UpdateExperimentStatusParams are the params of update_experiment_status.
// Status is held in UpGrade's internal naming once parsed.
type UpdateExperimentStatusParams struct {
	ExperimentID string `json:"experiment_id" jsonschema:"id (UUID) of the experiment" ref:"experiment"`
	Status       string `json:"status" jsonschema:"target state: enrolling (start/restart), enrollmentComplete (stop), cancelled, archived; display names running, paused, completed are accepted"`
}

// Action implements Params.
func (UpdateExperimentStatusParams) Action() Name { return UpdateExperimentStatus }

func (p UpdateExperimentStatusParams) canonical() UpdateExperimentStatusParams {
	c := UpdateExperimentStatusParams{ExperimentID: idValue(p.ExperimentID), Status: strings.TrimSpace(p.Status)}
	if st := upgrade.NormalizeState(c.Status); st.Valid() {
		c.Status = string(st)
	}
	return c
}

// declareStatus declares this file's action in r.
func declareStatus(r *Registry) {
	Add(r, Def[UpdateExperimentStatusParams]{
		Name: UpdateExperimentStatus, Order: 30, Destructive: true, Invalidates: []Cache{CacheExperiments, CacheEnrollment},
		Object:      ObjectExperiment,
		Description: "Start, stop, restart, cancel or archive an experiment.",
		Note:        "enrolling = start, enrollmentComplete = stop, cancelled, archived",
		Canonical:   UpdateExperimentStatusParams.canonical,
		Validate:    validateStatus,
		Plan:        planStatus,
		Execute:     executeStatus,
		Reconcile:   reconcileStatus,
		Report:      ReportAs(reportStatus),
	})
}

func reportStatus(r statusResult) string {
	s := fmt.Sprintf("Experiment %q (id %s) is now %s", r.Name, r.ID, r.State)
	if r.PreviousState != "" {
		s += fmt.Sprintf(" (it was %s)", r.PreviousState)
	}
	s += "."
	switch r.State {
	case upgrade.StateEnrolling:
		s += " Users who reach its decision points are assigned conditions."
	case upgrade.StateEnrollmentComplete:
		s += " Enrollment has ended; the post-experiment rule applies."
	case upgrade.StateCancelled:
		s += " Everyone gets the default condition."
	case upgrade.StateArchived:
		s += " It stays readable but no longer runs."
	}
	return s
}

func validateStatus(c *Checker, p UpdateExperimentStatusParams) error {
	e, err := c.Experiment("experiment_id", p.ExperimentID)
	if err != nil {
		return err
	}
	target := upgrade.State(p.Status)
	switch {
	case p.Status == "":
		c.Missing("status", "status is required (enrolling to start, enrollmentComplete to stop, cancelled, archived)")
		return nil
	case !target.Valid():
		c.AddValue("status", p.Status, "unknown status; use one of %s (or running, paused, completed)", stateList())
		return nil
	}
	if e == nil {
		return nil
	}
	if e.State == target {
		c.Add("status", "experiment %q is already %s", e.Name, target)
		return nil
	}
	if _, ok := AllowedTransition(e.State, target); !ok {
		c.Add("status", "cannot change experiment %q from %s to %s; %s", e.Name, e.State, target, describeTransitionsFrom(e.State))
	}
	return nil
}

func planStatus(b *Planner, p UpdateExperimentStatusParams) error {
	e, err := upgrade.ExperimentWithLists(b.ctx, b.api, p.ExperimentID) // the lists decide the excludeAll warning
	if err != nil {
		return fmt.Errorf("reading experiment %s: %w", p.ExperimentID, err)
	}
	b.Pin(e)
	target := upgrade.State(p.Status)
	verb, ok := AllowedTransition(e.State, target)
	if !ok {
		verb = "not an offered change"
	}
	b.Line("change the status of experiment %s (id %s, context %s): %s -> %s (%s).",
		quote(e.Name), e.ID, identOrNone(e.ContextName()), e.State, target, verb)
	b.segmentListLines(e, "", "")
	d := designOf(e)
	switch target {
	case upgrade.StateEnrolling:
		if e.State == upgrade.StateEnrollmentComplete {
			b.Line("Enrollment resumes: users who reach its decision points are assigned conditions again.")
		} else {
			b.Line("Users who reach its decision points from now on are assigned conditions (unit %s, consistency %s).",
				identOrNone(e.AssignmentUnit), identOrNone(e.ConsistencyRule))
		}
		if e.FilterMode == upgrade.FilterExcludeAll && e.Inclusion.Empty() {
			b.Warn("filter mode excludeAll with empty inclusion lists: nobody would be enrolled")
		}
	case upgrade.StateEnrollmentComplete:
		b.Line("Enrollment ends; the post-experiment rule applies: %s.", fmtPostRuleLong(d.PostExperimentRule))
	case upgrade.StateCancelled:
		b.Line("The experiment stops: everyone gets the default condition.")
	case upgrade.StateArchived:
		b.Line("The experiment is archived: it stays readable but no longer runs.")
		b.Warn("the analysis is frozen at this moment: UpGrade keeps the results of its queries as they are now, and archiving again later does not refresh them")
		b.Warn("logs sent for its metrics from now on are dropped")
		b.Warn("assignment stops: its decision points give no condition, and marks there enrol nobody")
		if e.State == upgrade.StateEnrolling {
			b.Warn("it is enrolling now: enrollment stops at once")
		}
	}
	return nil
}

type statusResult struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	PreviousState upgrade.State `json:"previous_state,omitempty"`
	State         upgrade.State `json:"state"`
}

func executeStatus(ctx context.Context, env Env, p UpdateExperimentStatusParams, _ string) (Outcome, error) {
	cur, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		return Outcome{}, err
	}
	target := upgrade.State(p.Status)
	out, err := env.API.SetState(ctx, p.ExperimentID, target)
	if err != nil {
		return Outcome{}, err
	}
	// The server's answer is its state after the write: it must be the one
	// approved.
	if out.State != target {
		return Outcome{}, fmt.Errorf("experiment %q: the server answered state %s after the change to %s", cur.Name, out.State, target)
	}
	return Result(statusResult{ID: cur.ID, Name: cur.Name, PreviousState: cur.State, State: out.State})
}

func reconcileStatus(ctx context.Context, env Env, p UpdateExperimentStatusParams, _ string, _ time.Time) (Reconciliation, error) {
	e, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		if upgrade.CategoryOf(err) == upgrade.CategoryNotFound {
			return Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("experiment %s no longer exists", p.ExperimentID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile status: reading experiment %s: %w", p.ExperimentID, err)
	}
	if e.State == upgrade.State(p.Status) {
		raw, _ := json.Marshal(statusResult{ID: e.ID, Name: e.Name, State: e.State})
		return Reconciliation{Outcome: OutcomeDone, Result: raw,
			Note: fmt.Sprintf("experiment %q is %s: the status change happened", e.Name, e.State)}, nil
	}
	return Reconciliation{Outcome: OutcomeNotDone,
		Note: fmt.Sprintf("experiment %q is still %s, not %s: the status change did not happen", e.Name, e.State, p.Status)}, nil
}
