package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// NewCmdMetrics builds the "metrics" group.
func NewCmdMetrics(f *Factory) *cobra.Command {
	c := groupCmd("metrics", "List the metrics experiments can measure")
	c.Aliases = []string{"metric"}
	c.AddCommand(NewCmdMetricsList(f, nil))
	return c
}

// MetricsListOptions are the inputs of "metrics list".
type MetricsListOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc
	Context string
}

// NewCmdMetricsList builds "metrics list".
func NewCmdMetricsList(f *Factory, runF func(context.Context, *MetricsListOptions) error) *cobra.Command {
	opts := &MetricsListOptions{IO: f.IO, Upgrade: f.Upgrade}
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List metrics with their type, allowed values, contexts and the queries that use them",
		Long: `List metrics with their type, allowed values, contexts and the queries that use them.

A grouped metric shows one row per attribute, under its full key
(group@__@key@__@attribute). UpGrade keeps a client's logged values only for
metrics that a query of a non-archived experiment uses: USED BY empty means
values logged for it are dropped.`,
		Example: `  upgrade-agent metrics list
  upgrade-agent metrics list --context assign-prog -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Output = f.opts().Output
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runMetricsList(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Context, "context", "", "only metrics of this app `context`")
	return withOutputs(c, "wide", "json", "yaml")
}

func runMetricsList(ctx context.Context, opts *MetricsListOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	trees, err := client.MetricsInContext(ctx, strings.TrimSpace(opts.Context))
	if err != nil {
		return err
	}
	exps, err := client.Experiments(ctx)
	if err != nil {
		return err
	}
	list := readmodel.MetricsOf(trees, exps)
	if opts.Output == "json" || opts.Output == "yaml" {
		return WriteData(opts.IO.Out, opts.Output, list)
	}
	if len(list) == 0 {
		if opts.Context != "" {
			fmt.Fprintf(opts.IO.ErrOut, "no metrics in context %q\n", opts.Context)
		} else {
			fmt.Fprintln(opts.IO.ErrOut, "no metrics")
		}
		return nil
	}
	t := Table{Columns: []Column{{Header: "KEY", Shrink: true}, {Header: "TYPE"}, {Header: "ALLOWED", Shrink: true},
		{Header: "CONTEXT", Shrink: true}, {Header: "USED BY", Shrink: true}}}
	for _, m := range list {
		used := make([]string, 0, len(m.UsedBy))
		for _, u := range m.UsedBy {
			used = append(used, u.ExperimentName+": "+u.QueryName)
		}
		t.Rows = append(t.Rows, []string{m.Key, m.Type, orDash(strings.Join(m.Allowed, ", ")),
			orDash(strings.Join(m.Context, ", ")), orDash(strings.Join(used, "; "))})
	}
	return t.Write(opts.IO.Out, opts.Output, opts.IO.Width)
}
