package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// leafCommands are the commands a person runs: runnable, not hidden, no
// subcommands.
func leafCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" {
			continue
		}
		if sub.HasSubCommands() {
			out = append(out, leafCommands(sub)...)
			continue
		}
		out = append(out, sub)
	}
	return out
}

// TestEveryCommandHelpHasExamples: every leaf command's --help shows
// Examples that start with the binary, and says which -o values it takes.
func TestEveryCommandHelpHasExamples(t *testing.T) {
	root := NewRootCmd(NewFactory(&IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, func(string) string { return "" }))
	leaves := leafCommands(root)
	if len(leaves) < 18 {
		t.Fatalf("found %d leaf commands, want at least 18", len(leaves))
	}
	for _, c := range leaves {
		path := c.CommandPath()
		var out bytes.Buffer
		code := Run(t.Context(), append(strings.Fields(strings.TrimPrefix(path, "upgrade-agent ")), "--help"),
			&IOStreams{Out: &out, ErrOut: &out}, func(string) string { return "" })
		if code != 0 {
			t.Errorf("%s --help: exit %d\n%s", path, code, out.String())
			continue
		}
		help := out.String()
		i := strings.Index(help, "\nExamples:\n")
		if i < 0 {
			t.Errorf("%s --help has no Examples:\n%s", path, help)
			continue
		}
		first := strings.TrimSpace(strings.SplitN(help[i+len("\nExamples:\n"):], "\n", 2)[0])
		if !strings.HasPrefix(first, "upgrade-agent ") && !strings.Contains(first, "upgrade-agent ") {
			t.Errorf("%s: the first example %q does not run upgrade-agent", path, first)
		}
		if c.Annotations[annotationOutputs] == "" {
			t.Errorf("%s declares no -o values (withOutputs)", path)
		}
		want := "output format: " + strings.Join(supportedOutputs(c), ", ") + " (default text)"
		if !strings.Contains(help, want) {
			t.Errorf("%s --help does not list its -o values (%q)", path, want)
		}
	}
}
