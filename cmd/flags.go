package cmd

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// NewCmdFlags builds the "flags" group.
func NewCmdFlags(f *Factory) *cobra.Command {
	c := groupCmd("flags", "List, inspect and explain feature flags")
	c.Aliases = []string{"flag", "featureflags"}
	c.Example = `  upgrade-agent flags list --status enabled
  upgrade-agent flags show MATH_HINTS
  upgrade-agent flags explain MATH_HINTS u12 --group classId=c7`
	c.AddCommand(NewCmdFlagsList(f, nil), NewCmdFlagsShow(f, nil), NewCmdFlagsExplain(f, nil), NewCmdFlagsExport(f), NewCmdFlagsImport(f))
	return c
}

// FlagsListOptions are the inputs of "flags list".
type FlagsListOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc

	Context string // flags serving this context
	Status  string // enabled, disabled, archived
	Key     string // substring of the key, any case
}

// NewCmdFlagsList builds "flags list".
func NewCmdFlagsList(f *Factory, runF func(context.Context, *FlagsListOptions) error) *cobra.Command {
	opts := &FlagsListOptions{IO: f.IO, Upgrade: f.Upgrade}
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List feature flags, sorted by key",
		Long: `List feature flags, sorted by key. INCLUDE and EXCLUDE count the flag's
enabled lists and all its lists (UpGrade ignores disabled lists).`,
		Example: `  upgrade-agent flags list
  upgrade-agent flags list --context assign-prog --status enabled
  upgrade-agent flags list --key hint -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Output = f.opts().Output
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runFlagsList(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Context, "context", "", "only flags serving this app `context`")
	c.Flags().StringVar(&opts.Status, "status", "", "only flags with this `status` (enabled, disabled, archived)")
	c.Flags().StringVar(&opts.Key, "key", "", "only flags whose key contains this `text` (any case)")
	return withOutputs(c, "wide", "json", "yaml")
}

func runFlagsList(ctx context.Context, opts *FlagsListOptions) error {
	status := upgrade.FlagStatusOf(opts.Status)
	if status != "" && !slices.Contains(upgrade.FlagStatuses(), status) {
		return Usagef("invalid --status %q: use one of %s", opts.Status, strings.Join(upgrade.FlagStatuses(), ", "))
	}
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	flags, err := client.Flags(ctx)
	if err != nil {
		return err
	}
	segs, err := client.Segments(ctx)
	if err != nil {
		return err
	}
	key := strings.ToLower(opts.Key)
	var keep []upgrade.FeatureFlag
	for _, fl := range flags {
		switch {
		case opts.Context != "" && !fl.HasContext(opts.Context):
		case status != "" && fl.Status != status:
		case key != "" && !strings.Contains(strings.ToLower(fl.Key), key):
		default:
			keep = append(keep, fl)
		}
	}
	list := readmodel.SummarizeFlags(keep, readmodel.CountLists(segs.SegmentUsage))
	filtered := opts.Context != "" || opts.Status != "" || opts.Key != ""
	return renderFlags(opts.Output, opts.IO, list, filtered)
}

// FlagRefOptions are the inputs of "flags show".
type FlagRefOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc
	Ref     string // id, exact key, exact name, or unique prefix
}

const flagRefHelp = `

REF is a flag id, its exact key, its exact name, or a prefix of the name (or of
the id) that matches one flag only.`

// NewCmdFlagsShow builds "flags show REF".
func NewCmdFlagsShow(f *Factory, runF func(context.Context, *FlagRefOptions) error) *cobra.Command {
	opts := &FlagRefOptions{IO: f.IO, Upgrade: f.Upgrade}
	return withOutputs(&cobra.Command{
		Use:   "show REF",
		Short: "Show one feature flag with its include and exclude lists",
		Long:  "Show one feature flag with its include and exclude lists, members by name, and who it reaches." + flagRefHelp,
		Example: `  upgrade-agent flags show MATH_HINTS
  upgrade-agent flags show "Math hints" -o yaml`,
		Args: exactArgs("REF"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Output = f.opts().Output
			opts.Ref = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runFlagsShow(c.Context(), opts)
		},
	}, "json", "yaml")
}

// resolveFlagRef reads every flag and finds the one ref names.
func resolveFlagRef(ctx context.Context, client *upgrade.Client, ref string) (string, error) {
	flags, err := client.Flags(ctx)
	if err != nil {
		return "", err
	}
	return upgrade.ResolveFlag(flags, ref)
}

func runFlagsShow(ctx context.Context, opts *FlagRefOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	id, err := resolveFlagRef(ctx, client, opts.Ref)
	if err != nil {
		return err
	}
	snap, err := client.FlagSnapshot(ctx, id)
	if err != nil {
		return err
	}
	names := readmodel.NamesOf(append(snap.Segments, snap.Global...)...)
	return renderFlag(opts.Output, opts.IO, readmodel.FlagDetailsOf(snap.Flag, names))
}

// FlagsExplainOptions are the inputs of "flags explain".
type FlagsExplainOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc

	Ref    string
	User   string
	Groups []string // TYPE=ID
	// WorkingGroups are TYPE=ID, or the one value "none"; empty: the first
	// group of each type is the working group.
	WorkingGroups []string
	Context       string // "" = the flag's first context
}

// NewCmdFlagsExplain builds "flags explain REF USER".
func NewCmdFlagsExplain(f *Factory, runF func(context.Context, *FlagsExplainOptions) error) *cobra.Command {
	opts := &FlagsExplainOptions{IO: f.IO, Upgrade: f.Upgrade}
	c := &cobra.Command{
		Use:   "explain REF USER",
		Short: "Say whether USER gets a feature flag, and which rule decided",
		Long: `Say whether USER gets a feature flag, and which rule decided.

It evaluates in Go with UpGrade 6.5's logic: the flag must be enabled and serve
the context; the context's global exclusion comes first; then, over enabled
lists only (sub-segments at any depth), the user id excluded, the user id
included, a group excluded and (filter mode excludeAll) a group included
decide in that order; otherwise includeAll serves and excludeAll does not.
Groups are matched on type and id against every --group given. The working
group matters only for the context's global exclusion: a group on it
excludes a user whose working group of that type is that group, and a user
initialised with no working group is excluded by any group on it (UpGrade's
rule). --working-group TYPE=ID says what the user was initialised with
(repeatable, one per type), --working-group none that they have none;
without it, the first --group of each type is the working group.

It reads the flag through the admin API only and never calls the client API,
so no exposure is recorded.` + flagRefHelp,
		Example: `  upgrade-agent flags explain MATH_HINTS u12
  upgrade-agent flags explain MATH_HINTS u12 --group classId=c7 --group schoolId=s1
  upgrade-agent flags explain 6c31 u12 --context mathstream -o json
  upgrade-agent flags explain MATH_HINTS u12 --group classId=c7 --working-group none`,
		Args: exactArgs("REF", "USER"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Output = f.opts().Output
			opts.Ref, opts.User = args[0], args[1]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runFlagsExplain(c.Context(), opts)
		},
	}
	c.Flags().StringArrayVar(&opts.Groups, "group", nil, "a group of the user, `TYPE=ID` (repeatable), e.g. classId=c7")
	c.Flags().StringArrayVar(&opts.WorkingGroups, "working-group", nil, "the user's working group, `TYPE=ID` (repeatable, one per type), or none (default: the first --group of each type)")
	c.Flags().StringVar(&opts.Context, "context", "", "the app `context` asked for (default: the flag's first context)")
	return withOutputs(c, "json", "yaml")
}

func runFlagsExplain(ctx context.Context, opts *FlagsExplainOptions) error {
	user := strings.TrimSpace(opts.User)
	if user == "" {
		return Usagef("USER is empty")
	}
	var groups []upgrade.GroupRef
	for _, g := range opts.Groups {
		ref, err := flageval.ParseGroup(g)
		if err != nil {
			return Usagef("invalid --group: %v", err)
		}
		groups = append(groups, ref)
	}
	working, err := parseWorkingGroups(opts.WorkingGroups)
	if err != nil {
		return err
	}
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	id, err := resolveFlagRef(ctx, client, opts.Ref)
	if err != nil {
		return err
	}
	snap, err := client.FlagSnapshot(ctx, id)
	if err != nil {
		return err
	}
	u := flageval.UserWithGroups(user, groups)
	if working != nil {
		u.WorkingGroup = working
	}
	res := flageval.Evaluate(flageval.FromSnapshot(snap, strings.TrimSpace(opts.Context), u))
	return renderExplain(opts.Output, opts.IO, res)
}

// parseWorkingGroups reads --working-group: nil when none was given (the
// default applies), an empty map for "none", else one id per type.
func parseWorkingGroups(values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	none := false
	for _, v := range values {
		if strings.EqualFold(strings.TrimSpace(v), "none") {
			none = true
			continue
		}
		ref, err := flageval.ParseGroup(v)
		if err != nil {
			return nil, Usagef("invalid --working-group: %v, or none", err)
		}
		if prev, ok := out[ref.Type]; ok && prev != ref.GroupID {
			return nil, Usagef("invalid --working-group: two working groups of type %s (%s and %s); a user has one per type", ref.Type, prev, ref.GroupID)
		}
		out[ref.Type] = ref.GroupID
	}
	if none && len(out) > 0 {
		return nil, Usagef("invalid --working-group: none cannot be given with a TYPE=ID")
	}
	return out, nil
}
