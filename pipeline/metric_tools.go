package pipeline

import (
	"context"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

type metricsArgs struct {
	Context string `json:"context,omitempty" jsonschema:"app context"`
}

// metricTools are the built-in lookups of issue 29 (results.md), each in
// its object's scope only: the experiment and flag scopes stay as short as
// they were.
func metricTools() []*toolDef {
	return []*toolDef{
		newTool("get_metrics", "Metrics and the queries using them.", true,
			func(ctx context.Context, t *turn, a metricsArgs) (any, error) {
				out, err := actions.MetricsInfo(ctx, t.a.deps.API, a.Context)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("metrics", "", out) })
				return out, nil
			}).about(actions.ObjectMetric),
		newTool("get_experiment_results", "Query results per condition.", true,
			func(ctx context.Context, t *turn, a experimentRef) (any, error) {
				id, err := t.resolveID(ctx, a.ExperimentID)
				if err != nil {
					return nil, err
				}
				out, err := actions.ExperimentResults(ctx, t.a.deps.API, id)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("experiment_results", id, out) })
				return out, nil
			}).about(actions.ObjectExperiment),
	}
}
