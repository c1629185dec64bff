package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// NewCmdExperimentsHistory builds "experiments history REF".
func NewCmdExperimentsHistory(f *Factory, runF func(context.Context, *ExperimentRefOptions) error) *cobra.Command {
	c := newRefCmd(f, "history", "List the state changes of one experiment, oldest first", `  upgrade-agent experiments history "Math hints"
  upgrade-agent experiments history 6c31 -o json`, runF, runExperimentsHistory)
	return withOutputs(c, "json", "yaml")
}

func runExperimentsHistory(ctx context.Context, opts *ExperimentRefOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	names, err := client.ExperimentNames(ctx)
	if err != nil {
		return err
	}
	id, err := upgrade.ResolveExperiment(names, opts.Ref)
	if err != nil {
		return experimentNotFound(err)
	}
	e, err := client.Experiment(ctx, id)
	if err != nil {
		return err
	}
	return renderHistory(opts.Output, opts.IO, readmodel.HistoryOf(e))
}
