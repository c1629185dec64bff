package cmd

import (
	"context"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// NewCmdExperiments builds the "experiments" group.
func NewCmdExperiments(f *Factory) *cobra.Command {
	c := groupCmd("experiments", "List and inspect experiments")
	c.Aliases = []string{"experiment", "exp"}
	c.AddCommand(
		NewCmdExperimentsList(f, nil),
		NewCmdExperimentsShow(f, nil),
		NewCmdExperimentsStats(f, nil),
		NewCmdExperimentsHistory(f, nil),
		NewCmdExperimentsResults(f, nil),
		NewCmdExperimentsExport(f), NewCmdExperimentsImport(f),
	)
	return c
}

// ExperimentsListOptions are the inputs of "experiments list".
type ExperimentsListOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc

	Context string // exact context name
	Status  string // internal or display state name
	Name    string // substring of the name, any case
}

// NewCmdExperimentsList builds "experiments list".
func NewCmdExperimentsList(f *Factory, runF func(context.Context, *ExperimentsListOptions) error) *cobra.Command {
	opts := &ExperimentsListOptions{IO: f.IO, Upgrade: f.Upgrade}
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List experiments, sorted by name",
		Example: `  upgrade-agent experiments list --context assign-prog --status enrolling
  upgrade-agent experiments list -o wide
  upgrade-agent experiments list --name hint -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Output = f.opts().Output
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runExperimentsList(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Context, "context", "", "only experiments in this app `context`")
	c.Flags().StringVar(&opts.Status, "status", "", "only experiments in this `state` (internal names such as enrolling, or display names such as running)")
	c.Flags().StringVar(&opts.Name, "name", "", "only experiments whose name contains this `text` (any case)")
	return withOutputs(c, "wide", "json", "yaml")
}

// statusFilter turns a --status value into an internal state name.
func statusFilter(s string) (upgrade.State, error) {
	st := upgrade.NormalizeState(s)
	if st.Valid() {
		return st, nil
	}
	names := make([]string, 0, len(upgrade.AllStates)+3)
	for _, a := range upgrade.AllStates {
		names = append(names, string(a))
	}
	names = append(names, "running", "paused", "completed")
	return "", Usagef("invalid --status %q: use one of %s", s, strings.Join(names, ", "))
}

func runExperimentsList(ctx context.Context, opts *ExperimentsListOptions) error {
	var want upgrade.State
	if opts.Status != "" {
		st, err := statusFilter(opts.Status)
		if err != nil {
			return err
		}
		want = st
	}
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	all, err := client.Experiments(ctx)
	if err != nil {
		return err
	}
	name := strings.ToLower(opts.Name)
	list := make([]ExperimentInfo, 0, len(all))
	for i := range all {
		e := &all[i]
		if opts.Context != "" && !containsString(e.Context, opts.Context) {
			continue
		}
		if want != "" && e.State != want {
			continue
		}
		if name != "" && !strings.Contains(strings.ToLower(e.Name), name) {
			continue
		}
		list = append(list, readmodel.ExperimentOf(e))
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Name != list[j].Name {
			return list[i].Name < list[j].Name
		}
		return list[i].ID < list[j].ID
	})
	filtered := opts.Context != "" || opts.Status != "" || opts.Name != ""
	return NewReadView(opts.Output, opts.IO).Experiments(list, filtered)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ExperimentRefOptions are the inputs of "experiments show" and "stats".
type ExperimentRefOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc
	Ref     string // id, exact name, or unique name prefix
}

func newRefCmd(f *Factory, use, short, example string, runF, run func(context.Context, *ExperimentRefOptions) error) *cobra.Command {
	opts := &ExperimentRefOptions{IO: f.IO, Upgrade: f.Upgrade}
	return withOutputs(&cobra.Command{
		Use:     use + " REF",
		Short:   short,
		Example: example,
		Long: short + `.

REF is an experiment id, its exact name, or a prefix of the name (or of the id)
that matches one experiment only.`,
		Args: exactArgs("REF"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Output = f.opts().Output
			opts.Ref = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return run(c.Context(), opts)
		},
	}, "json", "yaml", "raw")
}

// NewCmdExperimentsShow builds "experiments show REF".
func NewCmdExperimentsShow(f *Factory, runF func(context.Context, *ExperimentRefOptions) error) *cobra.Command {
	return newRefCmd(f, "show", "Show one experiment in full", `  upgrade-agent experiments show "Math Hints"
  upgrade-agent experiments show 3f2a -o json   # the shape of a list item, with every detail
  upgrade-agent experiments show "Math Hints" -o raw   # the server's own object`, runF, runExperimentsShow)
}

// NewCmdExperimentsStats builds "experiments stats REF".
func NewCmdExperimentsStats(f *Factory, runF func(context.Context, *ExperimentRefOptions) error) *cobra.Command {
	return newRefCmd(f, "stats", "Show enrollment per condition of one experiment", `  upgrade-agent experiments stats "Math Hints"
  upgrade-agent experiments stats math -o json`, runF, runExperimentsStats)
}

// fetchExperiment resolves ref against the server's experiment names and
// reads that experiment.
func fetchExperiment(ctx context.Context, client *upgrade.Client, ref string) (*upgrade.Experiment, error) {
	names, err := client.ExperimentNames(ctx)
	if err != nil {
		return nil, err
	}
	id, err := upgrade.ResolveExperiment(names, ref)
	if err != nil {
		return nil, experimentNotFound(err)
	}
	return upgrade.ExperimentWithLists(ctx, client, id)
}

func runExperimentsShow(ctx context.Context, opts *ExperimentRefOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	e, err := fetchExperiment(ctx, client, opts.Ref)
	if err != nil {
		return err
	}
	return NewReadView(opts.Output, opts.IO).Experiment(e)
}

func runExperimentsStats(ctx context.Context, opts *ExperimentRefOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	e, err := fetchExperiment(ctx, client, opts.Ref)
	if err != nil {
		return err
	}
	st, err := client.EnrollmentStats(ctx, e.ID)
	if err != nil {
		return err
	}
	report := readmodel.EnrollmentOf(e, st)
	sr := readmodel.SampleRatioOf(report, readmodel.EditedWhileEnrolling(e, client.ExperimentAudit(ctx, e.ID)))
	report.SampleRatio = &sr
	if err := NewReadView(opts.Output, opts.IO).Stats(report, st); err != nil {
		return err
	}
	return writeSampleRatioLine(opts, sr)
}
