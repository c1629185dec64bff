package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// DeleteMetric is the name of the delete_metric action.
const DeleteMetric Name = "delete_metric"

// DeleteMetricParams are the params of delete_metric.
type DeleteMetricParams struct {
	Key string `json:"key" jsonschema:"the metric's key (a group's name deletes the whole group)"`
}

// Action implements Params.
func (DeleteMetricParams) Action() Name { return DeleteMetric }

func (p DeleteMetricParams) canonical() DeleteMetricParams {
	return DeleteMetricParams{Key: strings.TrimSpace(p.Key)}
}

// declareMetricDelete declares this file's action in r.
func declareMetricDelete(r *Registry) {
	Add(r, Def[DeleteMetricParams]{
		Name: DeleteMetric, Order: 310, Object: ObjectMetric, Destructive: true, Invalidates: []Cache{CacheExperiments},
		Description: "Delete a metric, its logged values and every experiment query that uses it.",
		Canonical:   DeleteMetricParams.canonical,
		Validate:    validateDeleteMetric,
		Plan:        planDeleteMetric,
		Execute:     executeDeleteMetric,
		Reconcile:   reconcileDeleteMetric,
		Report: ReportAs(func(r metricDeleteResult) string {
			s := fmt.Sprintf("Deleted metric %s.", r.Key)
			if len(r.Queries) > 0 {
				s += " UpGrade deleted with it the queries " + strings.Join(r.Queries, "; ") + "."
			}
			return s
		}),
	})
}

// underKey reports whether a stored key is key or lies in its subtree.
func underKey(stored, key string) bool {
	return stored == key || strings.HasPrefix(stored, key+upgrade.MetricKeySep)
}

// queriesOf lists the experiment queries on metric key or its subtree,
// as "name" of experiment "name".
func queriesOf(ctx context.Context, api resultsAPI, key string) ([]string, error) {
	ms, err := metricInfos(ctx, api)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range readmodel.QueriesUsing(key, ms) {
		out = append(out, fmt.Sprintf("%q of experiment %q", u.QueryName, u.ExperimentName))
	}
	return out, nil
}

func validateDeleteMetric(c *Checker, p DeleteMetricParams) error {
	if p.Key == "" {
		c.Missing("key", "key is required: the metric to delete (get_metrics lists them)")
		return nil
	}
	ms, err := metricsNow(c.ctx, c.api)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if underKey(m.Key, p.Key) {
			return nil
		}
	}
	c.NotFound("key", "no metric %q%s", p.Key, metricHint(ms, p.Key))
	return nil
}

func planDeleteMetric(b *Planner, p DeleteMetricParams) error {
	ms, err := metricsNow(b.ctx, b.api)
	if err != nil {
		return err
	}
	var leaves []string
	for _, m := range ms {
		if underKey(m.Key, p.Key) {
			leaves = append(leaves, m.Key+" ("+m.Type+")")
		}
	}
	b.Line("delete metric %s: %s, with every value clients logged for it.", quote(p.Key), strings.Join(leaves, ", "))
	qs, err := queriesOf(b.ctx, b.api, p.Key)
	if err != nil {
		return err
	}
	if len(qs) == 0 {
		b.Line("No experiment query uses it.")
		return nil
	}
	b.Line("UpGrade silently deletes these experiment queries with it:")
	for _, q := range qs {
		b.Line("  %s", q)
	}
	b.Warn("%s", plural(len(qs), "experiment query and its results disappear", "experiment queries and their results disappear"))
	return nil
}

type metricDeleteResult struct {
	Key     string   `json:"key"`
	Queries []string `json:"deleted_queries,omitempty"`
	Deleted bool     `json:"deleted"`
}

func executeDeleteMetric(ctx context.Context, env Env, p DeleteMetricParams, _ string) (Outcome, error) {
	qs, err := queriesOf(ctx, env.API, p.Key)
	if err != nil {
		return Outcome{}, err
	}
	if _, err := env.API.DeleteMetric(ctx, p.Key); err != nil {
		return Outcome{}, err
	}
	ms, err := metricsNow(ctx, env.API)
	if err != nil {
		return Outcome{}, fmt.Errorf("metric %s was deleted, but %w", p.Key, err)
	}
	for _, m := range ms {
		if underKey(m.Key, p.Key) {
			return Outcome{}, fmt.Errorf("metric %s: the server answered the delete, but still has %s", p.Key, m.Key)
		}
	}
	return Result(metricDeleteResult{Key: p.Key, Queries: qs, Deleted: true})
}

func reconcileDeleteMetric(ctx context.Context, env Env, p DeleteMetricParams, _ string, _ time.Time) (Reconciliation, error) {
	ms, err := metricsNow(ctx, env.API)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile delete_metric: %w", err)
	}
	for _, m := range ms {
		if underKey(m.Key, p.Key) {
			return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("metric %s still exists: the delete did not happen", m.Key)}, nil
		}
	}
	raw, _ := json.Marshal(metricDeleteResult{Key: p.Key, Deleted: true})
	return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("metric %s no longer exists: the delete happened", p.Key)}, nil
}
