package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// UpgradeFunc returns a client for the UpGrade server and a cleanup to
// call when done (Factory.Upgrade).
type UpgradeFunc func(context.Context) (*upgrade.Client, func(), error)

// HealthOptions are the inputs of "health".
type HealthOptions struct {
	IO       *IOStreams
	Output   string
	Upgrade  UpgradeFunc
	Embedded bool // no server configured: the embedded simulator answers
}

// NewCmdHealth builds "health".
func NewCmdHealth(f *Factory, runF func(context.Context, *HealthOptions) error) *cobra.Command {
	opts := &HealthOptions{IO: f.IO, Upgrade: f.Upgrade}
	return withOutputs(&cobra.Command{
		Use:   "health",
		Short: "Show the UpGrade server's name and version",
		Example: `  upgrade-agent health
  upgrade-agent health --upgrade-url http://localhost:3030/api -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Output = f.opts().Output
			opts.Embedded = f.opts().UpgradeURL == ""
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runHealth(c.Context(), opts)
		},
	}, "json", "yaml")
}

func runHealth(ctx context.Context, opts *HealthOptions) error {
	client, done, err := opts.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer done()
	info, err := client.Health(ctx)
	if err != nil {
		return err
	}
	return NewReadView(opts.Output, opts.IO).Health(HealthInfo{
		URL:         client.BaseURL(),
		Embedded:    opts.Embedded,
		Name:        info.Name,
		Version:     info.Version,
		Description: info.Description,
	})
}
