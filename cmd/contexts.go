package cmd

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// ContextsOptions are the inputs of "contexts".
type ContextsOptions struct {
	IO      *IOStreams
	Output  string
	Upgrade UpgradeFunc
	Name    string // "" lists them all
}

// NewCmdContexts builds "contexts [NAME]".
func NewCmdContexts(f *Factory, runF func(context.Context, *ContextsOptions) error) *cobra.Command {
	opts := &ContextsOptions{IO: f.IO, Upgrade: f.Upgrade}
	return withOutputs(&cobra.Command{
		Use:   "contexts [NAME]",
		Short: "List app contexts with their conditions, sites, targets and group types",
		Long: `List the app contexts the UpGrade server knows, with the condition codes,
decision point sites and targets, and group types each one allows. With NAME,
show that context alone.`,
		Example: `  upgrade-agent contexts
  upgrade-agent contexts assign-prog
  upgrade-agent contexts -o wide
  upgrade-agent contexts -o json`,
		Aliases: []string{"context"},
		Args:    maxArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Output = f.opts().Output
			opts.Name = ""
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runContexts(c.Context(), opts)
		},
	}, "wide", "json", "yaml")
}

func runContexts(ctx context.Context, opts *ContextsOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	meta, err := client.ContextMetadata(ctx)
	if err != nil {
		return err
	}
	list := readmodel.Contexts(meta)
	view := NewReadView(opts.Output, opts.IO)
	if opts.Name == "" {
		return view.Contexts(list)
	}
	names := make([]string, len(list))
	for i, c := range list {
		if c.Name == opts.Name {
			return view.Context(c)
		}
		names[i] = c.Name
	}
	if len(names) == 0 {
		return Usagef("unknown context %q: the server has no contexts", opts.Name)
	}
	return Usagef("unknown context %q; known contexts: %s", opts.Name, strings.Join(names, ", "))
}
