package readmodel

import (
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// QueryUse is one experiment query that uses a metric.
type QueryUse struct {
	ExperimentID   string `json:"experiment_id"`
	ExperimentName string `json:"experiment_name"`
	QueryID        string `json:"query_id"`
	QueryName      string `json:"query_name"`
}

// MetricInfo is one metric (a leaf of UpGrade's tree, grouped metrics by
// their full key) with the queries that use it: `metrics list` and the
// agent's get_metrics.
type MetricInfo struct {
	Key     string     `json:"key"`
	Type    string     `json:"type"`
	Allowed []string   `json:"allowed_values"`
	Context []string   `json:"context"`
	UsedBy  []QueryUse `json:"used_by"`
}

// MetricsOf flattens metric trees, sorted by key, and names for each the
// queries of exps that use it. A query whose metric is gone uses nothing.
func MetricsOf(trees []upgrade.MetricNode, exps []upgrade.Experiment) []MetricInfo {
	uses := map[string][]QueryUse{}
	for i := range exps {
		e := &exps[i]
		qs, err := e.QueryList()
		if err != nil {
			continue
		}
		for _, q := range qs {
			if q.MetricKey == "" {
				continue
			}
			uses[q.MetricKey] = append(uses[q.MetricKey], QueryUse{ExperimentID: e.ID, ExperimentName: e.Name, QueryID: q.ID, QueryName: q.Name})
		}
	}
	flat := upgrade.FlattenMetrics(trees)
	out := make([]MetricInfo, 0, len(flat))
	for _, m := range flat {
		u := uses[m.Key]
		if u == nil {
			u = []QueryUse{}
		}
		sort.SliceStable(u, func(i, j int) bool {
			if u[i].ExperimentName != u[j].ExperimentName {
				return u[i].ExperimentName < u[j].ExperimentName
			}
			return u[i].QueryName < u[j].QueryName
		})
		allowed := m.Allowed
		if allowed == nil {
			allowed = []string{}
		}
		out = append(out, MetricInfo{Key: m.Key, Type: m.Type, Allowed: allowed, Context: m.Context, UsedBy: u})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// QueriesUsing lists the queries a metric delete would take with it: those
// on the key itself or, for a group prefix, on any key below it.
func QueriesUsing(key string, metrics []MetricInfo) []QueryUse {
	var out []QueryUse
	for _, m := range metrics {
		if m.Key == key || strings.HasPrefix(m.Key, key+upgrade.MetricKeySep) {
			out = append(out, m.UsedBy...)
		}
	}
	return out
}
