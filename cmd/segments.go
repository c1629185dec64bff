package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// NewCmdSegments builds the "segments" group.
func NewCmdSegments(f *Factory) *cobra.Command {
	c := groupCmd("segments", "List and inspect segments")
	c.Aliases = []string{"segment", "seg"}
	c.Example = `  upgrade-agent segments list --context assign-prog
  upgrade-agent segments show "pilot schools"`
	c.AddCommand(NewCmdSegmentsList(f, nil), NewCmdSegmentsShow(f, nil), NewCmdSegmentsExport(f), NewCmdSegmentsImport(f))
	return c
}

// SegmentsListOptions are the inputs of "segments list".
type SegmentsListOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc
	Context string
}

// NewCmdSegmentsList builds "segments list".
func NewCmdSegmentsList(f *Factory, runF func(context.Context, *SegmentsListOptions) error) *cobra.Command {
	opts := &SegmentsListOptions{IO: f.IO, Upgrade: f.Upgrade}
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List public segments, sorted by name",
		Long: `List public segments, sorted by name. USERS, GROUPS and SEGMENTS count the
segment's own members; USED BY names the flags and experiments whose lists
include it, directly or through another segment.`,
		Example: `  upgrade-agent segments list
  upgrade-agent segments list --context assign-prog -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Output = f.opts().Output
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runSegmentsList(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Context, "context", "", "only segments of this app `context`")
	return withOutputs(c, "wide", "json", "yaml")
}

func runSegmentsList(ctx context.Context, opts *SegmentsListOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	all, err := client.Segments(ctx)
	if err != nil {
		return err
	}
	var keep []upgrade.SegmentRecord
	for _, s := range all.Segments {
		if opts.Context == "" || s.Context == opts.Context {
			keep = append(keep, s)
		}
	}
	list := readmodel.SummarizeSegments(keep, all.SegmentUsage)
	return renderSegments(opts.Output, opts.IO, list, opts.Context != "")
}

// SegmentRefOptions are the inputs of "segments show".
type SegmentRefOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc
	Ref     string
}

// NewCmdSegmentsShow builds "segments show REF".
func NewCmdSegmentsShow(f *Factory, runF func(context.Context, *SegmentRefOptions) error) *cobra.Command {
	opts := &SegmentRefOptions{IO: f.IO, Upgrade: f.Upgrade}
	return withOutputs(&cobra.Command{
		Use:   "show REF",
		Short: "Show one segment with its members and where it is used",
		Long: `Show one segment with its members (sub-segments by name) and the flags and
experiments whose lists include it.

REF is a segment id, its exact name, or a prefix of the name (or of the id)
that matches one segment only. Public and global exclusion segments are found
by name; a flag's private list only by its id.`,
		Example: `  upgrade-agent segments show "pilot schools"
  upgrade-agent segments show 0af2 -o yaml`,
		Args: exactArgs("REF"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Output = f.opts().Output
			opts.Ref = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runSegmentsShow(c.Context(), opts)
		},
	}, "json", "yaml")
}

func runSegmentsShow(ctx context.Context, opts *SegmentRefOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	all, err := client.Segments(ctx)
	if err != nil {
		return err
	}
	global, err := client.GlobalSegments(ctx)
	if err != nil {
		return err
	}
	known := append(append([]upgrade.SegmentRecord{}, all.Segments...), global...)
	var seg *upgrade.SegmentRecord
	if upgrade.IsUUID(opts.Ref) {
		// Any segment by id, private lists included.
		st, err := client.SegmentStatus(ctx, opts.Ref)
		switch {
		case err == nil:
			seg = &st.Segment
		case upgrade.CategoryOf(err) != upgrade.CategoryNotFound:
			return err
		}
	}
	if seg == nil {
		id, err := upgrade.ResolveSegment(known, opts.Ref)
		if err != nil {
			return err
		}
		for i := range known {
			if known[i].ID == id {
				seg = &known[i]
			}
		}
	}
	return renderSegment(opts.Output, opts.IO, readmodel.SegmentDetailsOf(seg, all.SegmentUsage, known))
}
