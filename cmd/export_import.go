package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/internal/atomicfile"
	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// maxImportFile bounds one export file read by an import.
const maxImportFile = 8 << 20

// NewCmdExperimentsExport builds "experiments export REF...".
func NewCmdExperimentsExport(f *Factory) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "export REF...",
		Short: "Write experiments as UpGrade's export JSON",
		Long: `Write experiments as UpGrade's export JSON (GET /experiments/export), for
backups and for moving designs between servers with "experiments import": one
experiment is one JSON object, several are an array. Stdout unless -f FILE.`,
		Example: `  upgrade-agent experiments export "Math Hints" -f math-hints.json`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			client, done, err := f.Upgrade(ctx)
			if err != nil {
				return err
			}
			defer done()
			names, err := client.ExperimentNames(ctx)
			if err != nil {
				return err
			}
			ids := make([]string, len(args))
			for i, ref := range args {
				if ids[i], err = upgrade.ResolveExperiment(names, ref); err != nil {
					return experimentNotFound(err)
				}
			}
			raw, err := client.ExportExperiments(ctx, ids)
			if err != nil {
				return err
			}
			var list []json.RawMessage
			if err := json.Unmarshal(raw, &list); err != nil {
				return fmt.Errorf("reading UpGrade's export: %w", err)
			}
			var out any = list
			if len(list) == 1 {
				out = list[0]
			}
			return writeExport(f, file, out)
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "write to `FILE` instead of stdout")
	return withOutputs(c) // UpGrade's own export JSON, not an -o format
}

// writeExport writes v as indented JSON to file (atomically) or stdout.
func writeExport(f *Factory, file string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	if file == "" {
		_, err := f.IO.Out.Write(buf.Bytes())
		return err
	}
	if err := atomicfile.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "wrote %s\n", file)
	return nil
}

// NewCmdExperimentsImport builds "experiments import FILE...".
func NewCmdExperimentsImport(f *Factory) *cobra.Command {
	return newImportCmd(f, "Import experiments from export files, through a confirmation",
		`Import experiments from UpGrade export files. UpGrade validates every file
first (compatible, warning for another server version, incompatible with the
reason: exit 2); then import_experiments is proposed in a new session, listing
what will be created (inactive, new ids) and warning of every name that already
exists in its context (UpGrade would create a twin silently). Exit 10 until
"upgrade-agent resume SESSION --answer yes" (or --yes).`,
		`  upgrade-agent experiments import math-hints.json --yes`,
		actions.ImportExperiments, func(files []actions.ImportFileParam) any { return actions.ImportExperimentsParams{Files: files} })
}

// NewCmdFlagsImport builds "flags import FILE...".
func NewCmdFlagsImport(f *Factory) *cobra.Command {
	return newImportCmd(f, "Import feature flags from export files, through a confirmation",
		`Import feature flags from UpGrade export files ("flags export"). UpGrade
validates every file first; an incompatible one stops the command (exit 2)
with the reason, which UpGrade does not give: a key the context already has,
an unknown context, a field missing. Then import_feature_flags is proposed in
a new session, listing the flags to be created (disabled, new ids, include
lists disabled) and warning of lists UpGrade drops and of names the context
has already. Exit 10 until "upgrade-agent resume SESSION --answer yes" (or
--yes).`,
		`  upgrade-agent flags import hint-panel.json --yes`,
		actions.ImportFeatureFlags, func(files []actions.ImportFileParam) any { return actions.ImportFeatureFlagsParams{Files: files} })
}

// NewCmdSegmentsImport builds "segments import FILE...".
func NewCmdSegmentsImport(f *Factory) *cobra.Command {
	return newImportCmd(f, "Import segments from export files, through a confirmation",
		`Import segments from UpGrade export files ("segments export"; an array is
split, one segment each). UpGrade validates every file first; an incompatible
one stops the command (exit 2) with the reason. A segment whose name a public
segment of its context has is refused too: UpGrade reports it incompatible
but imports it anyway, as a second segment of that name. Then import_segments
is proposed in a new session, listing the segments to be created (new ids)
and warning of sub-segments this server lacks (UpGrade drops them). Exit 10
until "upgrade-agent resume SESSION --answer yes" (or --yes).`,
		`  upgrade-agent segments import pilot.json --yes`,
		actions.ImportSegments, func(files []actions.ImportFileParam) any { return actions.ImportSegmentsParams{Files: files} })
}

// newImportCmd builds an "import FILE..." command that proposes action
// with the files read into params.
func newImportCmd(f *Factory, short, long, example string, action actions.Name, params func([]actions.ImportFileParam) any) *cobra.Command {
	o := &ProposeOptions{}
	c := &cobra.Command{
		Use:     "import FILE...",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.confirmSet = c.Flags().Changed("confirm")
			files, err := readImportFiles(args)
			if err != nil {
				return err
			}
			return runProposal(c.Context(), f, o, "import "+strings.Join(args, " "), action, params(files))
		},
	}
	addProposeFlags(c, o)
	return withOutputs(c, "json")
}

func readImportFiles(paths []string) ([]actions.ImportFileParam, error) {
	out := make([]actions.ImportFileParam, len(paths))
	for i, p := range paths {
		data, err := safefile.ReadFile(p, maxImportFile)
		if err != nil {
			return nil, &UsageError{Err: fmt.Errorf("%s: %w", p, err)}
		}
		out[i] = actions.ImportFileParam{Name: filepath.Base(p), Content: string(data)}
	}
	return out, nil
}

// NewCmdFlagsExport builds "flags export REF".
func NewCmdFlagsExport(f *Factory) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:     "export REF",
		Short:   "Write a flag with its lists as UpGrade's export JSON",
		Long:    `Write a feature flag with its include and exclude lists as UpGrade exports it (GET /flags/export/:id). Stdout unless -f FILE.`,
		Example: `  upgrade-agent flags export HINT_PANEL -f hint-panel.json`,
		Args:    exactArgs("REF"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			client, done, err := f.Upgrade(ctx)
			if err != nil {
				return err
			}
			defer done()
			id, err := resolveFlagRef(ctx, client, args[0])
			if err != nil {
				return err
			}
			raw, err := client.ExportFlag(ctx, id)
			if err != nil {
				return err
			}
			return writeExport(f, file, raw)
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "write to `FILE` instead of stdout")
	return withOutputs(c) // UpGrade's own export JSON, not an -o format
}

// NewCmdSegmentsExport builds "segments export REF...".
func NewCmdSegmentsExport(f *Factory) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:     "export REF...",
		Short:   "Write public segments as UpGrade's export JSON",
		Long:    `Write public segments with their members as UpGrade exports them (GET /segments/export/json), an array. Stdout unless -f FILE.`,
		Example: `  upgrade-agent segments export "pilot schools" -f pilot.json`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			client, done, err := f.Upgrade(ctx)
			if err != nil {
				return err
			}
			defer done()
			all, err := client.Segments(ctx)
			if err != nil {
				return err
			}
			ids := make([]string, len(args))
			for i, ref := range args {
				if ids[i], err = upgrade.ResolveSegment(all.Segments, ref); err != nil {
					return err
				}
			}
			raw, err := client.ExportSegments(ctx, ids)
			if err != nil {
				return err
			}
			return writeExport(f, file, raw)
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "write to `FILE` instead of stdout")
	return withOutputs(c) // UpGrade's own export JSON, not an -o format
}
