package cmd

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// CompletionOptions are the inputs of "completion".
type CompletionOptions struct {
	IO    *IOStreams
	Shell string
	Root  *cobra.Command
}

var shells = []string{"bash", "zsh", "fish", "powershell"}

// NewCmdCompletion builds "completion SHELL".
func NewCmdCompletion(f *Factory, runF func(context.Context, *CompletionOptions) error) *cobra.Command {
	opts := &CompletionOptions{IO: f.IO}
	return withOutputs(&cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print the completion script for a shell. For example:

  bash:        source <(upgrade-agent completion bash)
  zsh:         upgrade-agent completion zsh > "${fpath[1]}/_upgrade-agent"
  fish:        upgrade-agent completion fish > ~/.config/fish/completions/upgrade-agent.fish
  powershell:  upgrade-agent completion powershell | Out-String | Invoke-Expression`,
		Example: `  source <(upgrade-agent completion bash)
  upgrade-agent completion fish > ~/.config/fish/completions/upgrade-agent.fish`,
		ValidArgs:   shells,
		Args:        oneShell,
		Annotations: map[string]string{annotationNoGlobals: "true"},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Shell = args[0]
			opts.Root = c.Root()
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runCompletion(c.Context(), opts)
		},
	})
}

func oneShell(c *cobra.Command, args []string) error {
	if err := exactArgs("SHELL")(c, args); err != nil {
		return err
	}
	if !oneOf(args[0], shells) {
		return fmt.Errorf("unknown shell %q: use bash, zsh, fish or powershell", args[0])
	}
	return nil
}

func runCompletion(_ context.Context, opts *CompletionOptions) error {
	var w io.Writer = opts.IO.Out
	switch opts.Shell {
	case "bash":
		return opts.Root.GenBashCompletionV2(w, true)
	case "zsh":
		return opts.Root.GenZshCompletion(w)
	case "fish":
		return opts.Root.GenFishCompletion(w, true)
	default:
		return opts.Root.GenPowerShellCompletionWithDesc(w)
	}
}
