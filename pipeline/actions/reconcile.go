package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Outcomes of Reconcile.
const (
	OutcomeDone    = "done"     // the effect happened; Result describes it
	OutcomeNotDone = "not_done" // it did not happen (or is safe to repeat): run it
	OutcomeUnknown = "unknown"  // cannot tell: tell the person and ask again
)

// Reconciliation is what Reconcile found out about an interrupted action.
type Reconciliation struct {
	Outcome string          `json:"outcome"`
	Result  json.RawMessage `json:"result,omitempty"`
	Note    string          `json:"note"`
}

// clockSkew is how much earlier than startedAt a server timestamp may be
// and still belong to our write (server and client clocks differ).
const clockSkew = 2 * time.Minute

// Reconcile finds out whether an action whose effect was recorded as
// started, with no outcome (the process died during the call), took place
// on the server. It never writes. The error is non-nil only when the
// server could not be asked.
func Reconcile(ctx context.Context, api API, p Params, startedAt time.Time) (Reconciliation, error) {
	p, err := canonicalParams(p)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile: %w", err)
	}
	switch v := p.(type) {
	case CreateExperimentParams:
		return reconcileCreate(ctx, api, v, startedAt)
	case UpdateExperimentParams:
		return reconcileUpdate(ctx, api, v)
	case UpdateExperimentStatusParams:
		return reconcileStatus(ctx, api, v)
	case DeleteExperimentParams:
		return reconcileDelete(ctx, api, v)
	case InitExperimentUserParams, GetDecisionPointAssignmentsParams, MarkDecisionPointParams, VisitDecisionPointParams:
		return Reconciliation{Outcome: OutcomeNotDone,
			Note: "user calls are idempotent for the same user: safe to run again"}, nil
	case BalanceParams:
		return Reconciliation{Outcome: OutcomeUnknown,
			Note: "a balance run is a job: the job runner resumes it from its last committed batch"}, nil
	}
	return Reconciliation{}, fmt.Errorf("reconcile: %w: %T", ErrUnknownAction, p)
}

func resultOf(e *upgrade.Experiment) json.RawMessage {
	raw, _ := json.Marshal(SummarizeExperiment(e)) // plain struct: cannot fail
	return raw
}

func reconcileCreate(ctx context.Context, api API, p CreateExperimentParams, startedAt time.Time) (Reconciliation, error) {
	names, err := api.ExperimentNames(ctx)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile create: reading experiment names: %w", err)
	}
	var ids []string
	for _, n := range names {
		if strings.EqualFold(strings.TrimSpace(n.Name), p.Name) {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) == 0 {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("no experiment named %q exists: the create did not happen", p.Name)}, nil
	}
	if len(ids) > 1 {
		return Reconciliation{Outcome: OutcomeUnknown,
			Note: fmt.Sprintf("%d experiments are named %q (%s): cannot tell which one, if any, the interrupted create made", len(ids), p.Name, strings.Join(ids, ", "))}, nil
	}
	e, err := api.Experiment(ctx, ids[0])
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile create: reading experiment %s: %w", ids[0], err)
	}
	// Validation refused the name while it existed, so a twin that is
	// clearly older than our write was made by someone else.
	if created, err := time.Parse(time.RFC3339, e.CreatedAt); err == nil && !startedAt.IsZero() && created.Before(startedAt.Add(-clockSkew)) {
		return Reconciliation{Outcome: OutcomeUnknown,
			Note: fmt.Sprintf("an experiment named %q exists (id %s) but was created at %s, before the interrupted create started", p.Name, e.ID, e.CreatedAt)}, nil
	}
	if e.ContextName() != p.Context {
		return Reconciliation{Outcome: OutcomeUnknown,
			Note: fmt.Sprintf("an experiment named %q exists (id %s) but in context %s, not %s", p.Name, e.ID, e.ContextName(), p.Context)}, nil
	}
	return Reconciliation{Outcome: OutcomeDone, Result: resultOf(e),
		Note: fmt.Sprintf("experiment %q exists (id %s): the create happened", e.Name, e.ID)}, nil
}

func reconcileUpdate(ctx context.Context, api API, p UpdateExperimentParams) (Reconciliation, error) {
	e, err := api.Experiment(ctx, p.ExperimentID)
	if err != nil {
		if upgrade.CategoryOf(err) == upgrade.CategoryNotFound {
			return Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("experiment %s no longer exists", p.ExperimentID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile update: reading experiment %s: %w", p.ExperimentID, err)
	}
	cur := designOf(e)
	if changes := designChanges(cur, applyUpdate(cur, p)); len(changes) > 0 {
		return Reconciliation{Outcome: OutcomeNotDone,
			Note: fmt.Sprintf("experiment %q does not have the new values yet (%s): the update did not happen", e.Name, strings.Join(changes, "; "))}, nil
	}
	return Reconciliation{Outcome: OutcomeDone, Result: resultOf(e),
		Note: fmt.Sprintf("experiment %q already has every value of the update", e.Name)}, nil
}

func reconcileStatus(ctx context.Context, api API, p UpdateExperimentStatusParams) (Reconciliation, error) {
	e, err := api.Experiment(ctx, p.ExperimentID)
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

func reconcileDelete(ctx context.Context, api API, p DeleteExperimentParams) (Reconciliation, error) {
	e, err := api.Experiment(ctx, p.ExperimentID)
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
