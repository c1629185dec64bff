package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// RemoveExperimentQuery is the name of the remove_experiment_query action.
const RemoveExperimentQuery Name = "remove_experiment_query"

// RemoveExperimentQueryParams are the params of remove_experiment_query.
type RemoveExperimentQueryParams struct {
	ExperimentID string `json:"experiment_id" jsonschema:"id (UUID) of the experiment" ref:"experiment"`
	QueryID      string `json:"query_id" jsonschema:"the query's id (its exact name is also accepted)"`
}

// Action implements Params.
func (RemoveExperimentQueryParams) Action() Name { return RemoveExperimentQuery }

func (p RemoveExperimentQueryParams) canonical() RemoveExperimentQueryParams {
	return RemoveExperimentQueryParams{ExperimentID: idValue(p.ExperimentID), QueryID: idValue(p.QueryID)}
}

// declareQueryRemove declares this file's action in r.
func declareQueryRemove(r *Registry) {
	Add(r, Def[RemoveExperimentQueryParams]{
		Name: RemoveExperimentQuery, Order: 330, Object: ObjectExperiment, Invalidates: []Cache{CacheExperiments},
		Description: "Remove one query from an experiment (the metric and its logs stay).",
		Canonical:   RemoveExperimentQueryParams.canonical,
		Validate:    validateRemoveQuery,
		Plan:        planRemoveQuery,
		Execute:     executeRemoveQuery,
		Reconcile:   reconcileRemoveQuery,
		Report: ReportAs(func(r queryResult) string {
			return fmt.Sprintf("Removed query %q from experiment %q; its other queries are kept.", r.Name, r.Experiment)
		}),
	})
}

// findQuery finds a query by id, or else by its name in any case when
// one query has it.
func findQuery(e *upgrade.Experiment, ref string) (upgrade.Query, bool, error) {
	qs, err := e.QueryList()
	if err != nil {
		return upgrade.Query{}, false, err
	}
	var byName []upgrade.Query
	for _, q := range qs {
		if q.ID == ref {
			return q, true, nil
		}
		if strings.EqualFold(strings.TrimSpace(q.Name), ref) {
			byName = append(byName, q)
		}
	}
	if len(byName) == 1 {
		return byName[0], true, nil
	}
	return upgrade.Query{}, false, nil
}

func queryNames(e *upgrade.Experiment) string {
	qs, _ := e.QueryList()
	var out []string
	for _, q := range qs {
		out = append(out, fmt.Sprintf("%s (%s)", q.ID, q.Name))
	}
	return listOrNone(out)
}

func validateRemoveQuery(c *Checker, p RemoveExperimentQueryParams) error {
	e, err := c.Experiment("experiment_id", p.ExperimentID)
	if err != nil || e == nil {
		return err
	}
	if p.QueryID == "" {
		c.Missing("query_id", "query_id is required; experiment %q has queries %s", e.Name, queryNames(e))
		return nil
	}
	if _, ok, err := findQuery(e, p.QueryID); err != nil {
		return err
	} else if !ok {
		c.NotFound("query_id", "experiment %q has no query %q; its queries: %s", e.Name, p.QueryID, queryNames(e))
	}
	return nil
}

func planRemoveQuery(b *Planner, p RemoveExperimentQueryParams) error {
	e, err := b.Experiment(p.ExperimentID)
	if err != nil {
		return err
	}
	b.Pin(e)
	q, ok, err := findQuery(e, p.QueryID)
	if err != nil || !ok {
		return fmt.Errorf("experiment %q has no query %q", e.Name, p.QueryID)
	}
	b.Line("remove query %s (id %s: %s) from experiment %s (id %s).", quote(q.Name), q.ID, q.Summary(), quote(e.Name), e.ID)
	b.Line("The metric and the values logged for it stay; the experiment's other queries are kept.")
	return nil
}

func executeRemoveQuery(ctx context.Context, env Env, p RemoveExperimentQueryParams, _ string) (Outcome, error) {
	e, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		return Outcome{}, err
	}
	q, ok, err := findQuery(e, p.QueryID)
	if err != nil {
		return Outcome{}, err
	}
	if !ok {
		return Outcome{}, fmt.Errorf("experiment %q has no query %q", e.Name, p.QueryID)
	}
	res := queryResult{ID: q.ID, Name: q.Name, Experiment: e.Name, MetricKey: q.MetricKey, Operation: q.Query.OperationType}
	e.RemoveQuery(q.ID)
	if _, err := env.API.UpdateExperiment(ctx, e); err != nil {
		return Outcome{}, err
	}
	back, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		return Outcome{}, fmt.Errorf("query %q was removed, but reading experiment %q back failed: %w", q.Name, e.Name, err)
	}
	if hasQuery(back, q.ID) {
		return Outcome{}, fmt.Errorf("experiment %q: the server answered the update, but still has query %q", e.Name, q.Name)
	}
	return Result(res)
}

func reconcileRemoveQuery(ctx context.Context, env Env, p RemoveExperimentQueryParams, _ string, _ time.Time) (Reconciliation, error) {
	e, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		if isNotFound(err) {
			return Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("experiment %s no longer exists", p.ExperimentID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile remove_experiment_query: reading experiment %s: %w", p.ExperimentID, err)
	}
	if _, ok, err := findQuery(e, p.QueryID); err != nil {
		return Reconciliation{}, err
	} else if ok {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("experiment %q still has query %q: the remove did not happen", e.Name, p.QueryID)}, nil
	}
	raw, _ := json.Marshal(queryResult{ID: p.QueryID, Experiment: e.Name})
	return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("experiment %q has no query %q: the remove happened", e.Name, p.QueryID)}, nil
}
