package cmd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// NewCmdSim builds the "sim" group.
func NewCmdSim(f *Factory) *cobra.Command {
	c := groupCmd("sim", "Run the embedded UpGrade simulator")
	c.AddCommand(NewCmdSimServe(f, nil), NewCmdSimSeed(f, nil))
	return c
}

// SimSeedOptions are the inputs of "sim seed".
type SimSeedOptions struct {
	IO     *IOStreams
	Output string
}

// NewCmdSimSeed builds "sim seed".
func NewCmdSimSeed(f *Factory, runF func(context.Context, *SimSeedOptions) error) *cobra.Command {
	opts := &SimSeedOptions{IO: f.IO}
	c := &cobra.Command{
		Use:   "seed",
		Short: "Fill the embedded simulator with sample data for a tour",
		Long: `Fill the embedded simulator (the one in the state dir) with a small, realistic
set of data: three experiments in different states (one enrolling with
enrolments, one whose enrolment is complete, one inactive) and their state
history, two feature flags with include and exclude lists, and three public
segments, one nested in another and used by a flag and an experiment.

Seeding again adds only what is missing: objects are found by name (flags by
key). It never touches a real server: with UPGRADE_API_URL or --upgrade-url
set it is refused (exit 2).`,
		Example: `  upgrade-agent sim seed
  upgrade-agent experiments list`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Output = f.opts().Output
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runSimSeed(c.Context(), f, opts)
		},
	}
	return withOutputs(c, "json")
}

func runSimSeed(ctx context.Context, f *Factory, opts *SimSeedOptions) error {
	if u := f.opts().UpgradeURL; u != "" {
		return Usagef("sim seed fills only the embedded simulator, and UpGrade is set to %s (UPGRADE_API_URL or --upgrade-url): unset it to seed the simulator in the state dir", u)
	}
	api, cleanup, err := f.Upgrade(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	rep, err := sim.Seed(ctx, api, &http.Client{})
	if err != nil {
		return fmt.Errorf("seed the simulator: %w", err)
	}
	if opts.Output == "json" {
		return WriteData(opts.IO.Out, "json", rep)
	}
	switch {
	case len(rep.Created) == 0:
		fmt.Fprintf(opts.IO.Out, "the sample data is already there (%d objects); nothing to add\n", len(rep.Present))
	default:
		for _, what := range rep.Created {
			fmt.Fprintf(opts.IO.Out, "created %s\n", what)
		}
		if len(rep.Present) > 0 {
			fmt.Fprintf(opts.IO.Out, "%d already there\n", len(rep.Present))
		}
	}
	return nil
}

// SimServeOptions are the inputs of "sim serve".
type SimServeOptions struct {
	IO              *IOStreams
	Addr            string
	DataFile        string // "" keeps the state in memory
	Seed            int64
	ContextMetadata string // JSON file; "" = the default contexts
	Version         string
	Token           string // bearer token the admin routes demand; "" = none
}

// NewCmdSimServe builds "sim serve".
func NewCmdSimServe(f *Factory, runF func(context.Context, *SimServeOptions) error) *cobra.Command {
	opts := &SimServeOptions{IO: f.IO}
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the simulator's REST API under /api until interrupted",
		Long: `Serve an in-memory UpGrade (the same simulator upgrade-agent uses when no
UPGRADE_API_URL is set) over HTTP under /api, until SIGINT or SIGTERM.

It listens on loopback unless --addr names another interface. The simulator
has no login by default: anyone who can reach the address can change its data,
so only give a non-loopback --addr on a network you trust (or set
--require-token). --data keeps the state in a JSON file, written atomically
after every change; without it the state is lost when the server stops.`,
		Example: `  upgrade-agent sim serve --addr 127.0.0.1:3030 --data sim.json
  UPGRADE_API_URL=http://127.0.0.1:3030/api upgrade-agent experiments list`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := f.opts().Config
			if !c.Flags().Changed("seed") && cfg != nil && cfg.SimSeed != nil {
				opts.Seed = *cfg.SimSeed
			}
			if !c.Flags().Changed("context-metadata") && cfg != nil {
				opts.ContextMetadata = cfg.ContextMetadata
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runSimServe(c.Context(), opts)
		},
	}
	withOutputs(c)
	c.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:3030", "`host:port` to listen on (port 0 picks a free one)")
	c.Flags().StringVar(&opts.DataFile, "data", "", "JSON `file` to keep the state in (default: memory only)")
	c.Flags().Int64Var(&opts.Seed, "seed", 0, "random seed for condition choices and ids (config sim_seed)")
	c.Flags().StringVar(&opts.ContextMetadata, "context-metadata", "", "JSON `file` of context metadata, as in UpGrade's CONTEXT_METADATA (config context_metadata)")
	c.Flags().StringVar(&opts.Version, "version", sim.DefaultVersion, "server `version` to report; 6.2.x answers in the 6.2 shapes")
	c.Flags().StringVar(&opts.Token, "require-token", "", "bearer `token` the admin routes demand (default: no login)")
	return c
}

func runSimServe(ctx context.Context, opts *SimServeOptions) error {
	so := sim.Options{Seed: opts.Seed, Version: opts.Version, Token: opts.Token}
	if opts.DataFile != "" {
		abs, err := filepath.Abs(opts.DataFile)
		if err != nil {
			return Usagef("--data: %v", err)
		}
		so.DataFile = abs
	}
	if opts.ContextMetadata != "" {
		meta, err := sim.LoadMetadataFile(opts.ContextMetadata)
		if err != nil {
			return &UsageError{Err: err}
		}
		so.Metadata = meta
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return Usagef("invalid --addr %q: want host:port, e.g. 127.0.0.1:3030", opts.Addr)
	}
	srv, err := sim.StartAddr(opts.Addr, so)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "UpGrade simulator listening on %s\n", srv.URL())
	if !isLoopback(srv.Addr()) {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s is reachable from other machines and the simulator has no login unless --require-token is set\n", srv.Addr())
	}
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return err
	}
	fmt.Fprintln(opts.IO.ErrOut, "UpGrade simulator stopped")
	return nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
