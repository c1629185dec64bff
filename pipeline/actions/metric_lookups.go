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
	Context string `json:"context,omitempty" jsonschema:"app context"`
}

// ResultsArgs are get_experiment_results' arguments.
type ResultsArgs struct {
	ExperimentID string `json:"experiment_id" jsonschema:"id or name"`
}

// resultsAPI is what the lookups read.
type resultsAPI interface {
	MetricAPI
	ExperimentAPI
}

func init() {
	RegisterLookup(LookupDef[MetricsArgs]{
		Name: "get_metrics", Object: ObjectMetric,
		Description: "Metrics and their queries.",
		Run: func(ctx context.Context, env Env, a MetricsArgs) (any, error) {
			return MetricsInfo(ctx, env.API, a.Context)
		},
	})
	RegisterLookup(LookupDef[ResultsArgs]{
		Name: "get_experiment_results", Object: ObjectExperiment,
		Description: "Results per condition, with intervals.",
		Run: func(ctx context.Context, env Env, a ResultsArgs) (any, error) {
			return ExperimentResults(ctx, env.API, a.ExperimentID)
		},
	})
}

// metricInfos reads the metrics with the queries that use each.
func metricInfos(ctx context.Context, api resultsAPI) ([]readmodel.MetricInfo, error) {
	trees, err := api.Metrics(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the metrics: %w", err)
	}
	es, err := api.Experiments(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the experiments: %w", err)
	}
	return readmodel.MetricsOf(trees, es), nil
}

// MetricsInfo lists the metrics, of appContext when given (any case,
// blanks trimmed), each with the experiment queries that use it.
func MetricsInfo(ctx context.Context, api resultsAPI, appContext string) ([]readmodel.MetricInfo, error) {
	ms, err := metricInfos(ctx, api)
	if err != nil {
		return nil, err
	}
	appContext = strings.TrimSpace(appContext)
	if appContext == "" {
		return ms, nil
	}
	return slices.DeleteFunc(ms, func(m readmodel.MetricInfo) bool {
		return !slices.ContainsFunc(m.Context, func(c string) bool { return strings.EqualFold(c, appContext) })
	}), nil
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
