package cmd

import (
	"context"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at link time:
//
//	go build -ldflags "-X github.com/upgrade-agent/upgrade-agent/cmd.version=1.2.0 -X github.com/upgrade-agent/upgrade-agent/cmd.commit=abc1234"
var (
	version = "dev"
	commit  = ""
)

// VersionOptions are the inputs of "version".
type VersionOptions struct {
	IO     *IOStreams
	Output string
	Info   VersionInfo
}

// NewCmdVersion builds "version".
func NewCmdVersion(f *Factory, runF func(context.Context, *VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: f.IO}
	return withOutputs(&cobra.Command{
		Use:   "version",
		Short: "Print the version of upgrade-agent",
		Example: `  upgrade-agent version
  upgrade-agent version -o json`,
		Args: noArgs,
		// The version must print even when the settings are broken.
		Annotations: map[string]string{annotationNoGlobals: "true"},
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Output = f.opts().Output
			opts.Info = BuildInfo()
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runVersion(c.Context(), opts)
		},
	}, "json", "yaml")
}

func runVersion(_ context.Context, opts *VersionOptions) error {
	return NewReadView(opts.Output, opts.IO).Version(opts.Info)
}

// BuildInfo describes this binary: the linked-in version, else the module
// version and VCS revision Go recorded at build time.
func BuildInfo() VersionInfo {
	info := VersionInfo{
		Version:   version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if info.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Commit == "" {
		var rev string
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && dirty {
			rev += "-dirty"
		}
		info.Commit = rev
	}
	return info
}
