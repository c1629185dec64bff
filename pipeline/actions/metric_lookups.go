package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// The read-only lookups of issue 29: get_metrics (object metric) and
// get_experiment_results (object experiment), offered only in their
// object's scope.

// MetricsArgs are get_metrics' arguments.
type MetricsArgs struct {
	Context string `json:"context,omitempty" jsonschema:"only metrics of this app context"`
}

// ResultsArgs are get_experiment_results' arguments.
type ResultsArgs struct {
	ExperimentID string `json:"experiment_id" jsonschema:"experiment id (a name is also accepted)"`
}

// MetricInfo is one metric as get_metrics shows it: its stored key, type,
// allowed values, contexts and the queries that use it.
type MetricInfo struct {
	upgrade.Metric
	UsedBy []string `json:"used_by"`
}

// resultsAPI is what the lookups read.
type resultsAPI interface {
	MetricAPI
	ExperimentAPI
}

func init() {
	RegisterLookup(LookupDef[MetricsArgs]{
		Name: "get_metrics", Object: ObjectMetric,
		Description: "Metrics (key, type, allowed values, contexts, queries using them).",
		Run: func(ctx context.Context, env Env, a MetricsArgs) (any, error) {
			return MetricsInfo(ctx, env.API, a.Context)
		},
	})
	RegisterLookup(LookupDef[ResultsArgs]{
		Name: "get_experiment_results", Object: ObjectExperiment,
		Description: "An experiment's query results per condition with intervals, enrollment and the sample-ratio check.",
		Run: func(ctx context.Context, env Env, a ResultsArgs) (any, error) {
			return ExperimentResults(ctx, env.API, a.ExperimentID)
		},
	})
}

// MetricsInfo lists the metrics, of appContext when given (any case,
// blanks trimmed), each with the experiment queries that use it.
func MetricsInfo(ctx context.Context, api resultsAPI, appContext string) ([]MetricInfo, error) {
	ms, err := metricsNow(ctx, api)
	if err != nil {
		return nil, err
	}
	es, err := api.Experiments(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the experiments: %w", err)
	}
	used := map[string][]string{}
	for i := range es {
		qs, err := es[i].QueryList()
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			if q.MetricKey != "" {
				used[q.MetricKey] = append(used[q.MetricKey], metricQuery{Experiment: es[i].Name, Query: q}.String())
			}
		}
	}
	appContext = strings.TrimSpace(appContext)
	out := []MetricInfo{}
	for _, m := range ms {
		if appContext != "" && !slices.ContainsFunc(m.Context, func(c string) bool { return strings.EqualFold(c, appContext) }) {
			continue
		}
		by := used[m.Key]
		if by == nil {
			by = []string{}
		}
		out = append(out, MetricInfo{Metric: m, UsedBy: by})
	}
	return out, nil
}

// ExperimentResults reads and computes an experiment's results
// (readmodel.ResultsOf); ref is its id or name.
func ExperimentResults(ctx context.Context, api resultsAPI, ref string) (readmodel.Results, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return readmodel.Results{}, &ParseError{Action: "get_experiment_results", Problems: []Problem{{Field: "experiment_id", Message: "experiment_id is required"}}}
	}
	id := ref
	if !upgrade.IsUUID(ref) {
		names, err := api.ExperimentNames(ctx)
		if err != nil {
			return readmodel.Results{}, fmt.Errorf("reading experiment names: %w", err)
		}
		if id, err = upgrade.ResolveExperiment(names, ref); err != nil {
			return readmodel.Results{}, &ParseError{Action: "get_experiment_results", Problems: []Problem{{Field: "experiment_id", Message: err.Error()}}}
		}
	}
	in, err := api.ReadResults(ctx, strings.ToLower(id))
	if err != nil {
		return readmodel.Results{}, err
	}
	return readmodel.ResultsOf(in.Experiment, in.Analyses, in.Stats, readmodel.EditedWhileEnrolling(in.Experiment, in.Audit))
}
