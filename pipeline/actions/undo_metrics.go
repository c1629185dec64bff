package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// How undo puts back metrics (spec/undo.md's table): a created metric is
// deleted; a deleted one is saved again, and the experiment queries UpGrade
// deleted with it are added back to their experiments.

// KindMetric is a metric (or a group), by its stored key.
const KindMetric = "metric"

// declareUndoMetrics registers this file's undo kinds and tracking (not per registry).
func declareUndoMetrics(*Registry) {
	RegisterKind(KindMetric, Kind{Read: readMetricSnap, Name: metricSnapName, Restore: restoreMetric, Refuse: func(_, _ json.RawMessage) string { return "" },
		Recreated: "It is saved again with its type, values and context; the experiment queries UpGrade deleted with it are added back to their experiments (new query ids where the server gives them).",
		Lost:      "a query's results logged before the delete"})
	Track(CreateMetric, Tracking{Kind: KindMetric, IDOf: func(raw json.RawMessage) string {
		var p CreateMetricParams
		_ = json.Unmarshal(raw, &p)
		if p.Group != "" {
			return p.Group
		}
		return p.Key
	}})
	Track(DeleteMetric, Tracking{Kind: KindMetric, IDParam: "key"})
}

// metricSnap is a metric's leaves with the experiment queries on them.
type metricSnap struct {
	Key     string           `json:"key"`
	Leaves  []upgrade.Metric `json:"leaves"`
	Queries []metricQuery    `json:"queries,omitempty"`
}

// metricQuery is one experiment query as the server has it.
type metricQuery struct {
	ExperimentID string          `json:"experiment_id"`
	Query        json.RawMessage `json:"query"`
}

func metricSnapName(obj json.RawMessage) string {
	var s metricSnap
	_ = json.Unmarshal(obj, &s)
	return s.Key
}

func readMetricSnap(ctx context.Context, env Env, key string) (json.RawMessage, error) {
	ms, err := metricsNow(ctx, env.API)
	if err != nil {
		return nil, err
	}
	s := metricSnap{Key: key}
	for _, m := range ms {
		if underKey(m.Key, key) {
			s.Leaves = append(s.Leaves, m)
		}
	}
	if len(s.Leaves) == 0 {
		return nil, nil
	}
	es, err := env.API.Experiments(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the experiments: %w", err)
	}
	for _, e := range es {
		for _, raw := range e.Queries {
			var q struct {
				Metric *struct {
					Key string `json:"key"`
				} `json:"metric"`
			}
			if json.Unmarshal(raw, &q) == nil && q.Metric != nil && underKey(q.Metric.Key, key) {
				s.Queries = append(s.Queries, metricQuery{ExperimentID: e.ID, Query: raw})
			}
		}
	}
	return snapshot(s)
}

// metricUnits are the saves that make leaves again: simple metrics as they
// are, grouped ones as their group with its keys and attributes.
func metricUnits(leaves []upgrade.Metric) []upgrade.MetricUnit {
	var out []upgrade.MetricUnit
	groups := map[string]int{}
	for _, m := range leaves {
		parts := strings.Split(m.Key, upgrade.MetricKeySep)
		if len(parts) != 3 {
			out = append(out, upgrade.MetricUnit{Metric: m.Key, Datatype: m.Type, AllowedValues: m.Allowed})
			continue
		}
		i, ok := groups[parts[0]]
		if !ok {
			i = len(out)
			groups[parts[0]] = i
			out = append(out, upgrade.MetricUnit{GroupClass: parts[0]})
		}
		u := &out[i]
		if !slices.Contains(u.AllowedKeys, parts[1]) {
			u.AllowedKeys = append(u.AllowedKeys, parts[1])
		}
		if !slices.ContainsFunc(u.Attributes, func(a upgrade.MetricUnit) bool { return a.Metric == parts[2] }) {
			u.Attributes = append(u.Attributes, upgrade.MetricUnit{Metric: parts[2], Datatype: m.Type, AllowedValues: m.Allowed})
		}
	}
	return out
}

func restoreMetric(ctx context.Context, env Env, key string, want, now json.RawMessage) (string, error) {
	if want == nil {
		_, err := env.API.DeleteMetric(ctx, key)
		return key, err
	}
	var w metricSnap
	if err := json.Unmarshal(want, &w); err != nil || len(w.Leaves) == 0 {
		return key, fmt.Errorf("reading the recorded metric: %v", err)
	}
	if now == nil {
		if _, err := env.API.SaveMetrics(ctx, metricUnits(w.Leaves), w.Leaves[0].Context); err != nil {
			return key, fmt.Errorf("saving metric %s again: %w", key, err)
		}
	}
	for _, q := range w.Queries {
		if err := putBackQuery(ctx, env, q); err != nil {
			return key, err
		}
	}
	return key, nil
}

// putBackQuery adds a recorded query to its experiment when the experiment
// is still there and lacks it (by id).
func putBackQuery(ctx context.Context, env Env, q metricQuery) error {
	e, err := env.API.Experiment(ctx, q.ExperimentID)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	var id struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(q.Query, &id)
	for _, raw := range e.Queries {
		var have struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &have) == nil && have.ID == id.ID {
			return nil
		}
	}
	e.Queries = append(e.Queries, q.Query)
	if _, err := env.API.UpdateExperiment(ctx, e); err != nil {
		return fmt.Errorf("adding query %s back to experiment %q: %w", id.ID, e.Name, err)
	}
	return nil
}
