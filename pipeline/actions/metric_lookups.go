package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// What the read-only lookups of issue 29 compute: get_metrics (object
// metric) and get_experiment_results (object experiment) are offered by
// the pipeline, among its built-in lookups, in their object's scope.

// resultsAPI is what the lookups read.
type resultsAPI interface {
	MetricAPI
	ExperimentAPI
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
