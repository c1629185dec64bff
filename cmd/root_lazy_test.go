package cmd

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

func quietFactory() *Factory {
	return NewFactory(&IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}, In: &bytes.Buffer{}}, func(string) string { return "" })
}

// TestTopCommands: the table rootFor selects from names every command of
// the whole tree, in its order, with the name and aliases the command
// itself has.
func TestTopCommands(t *testing.T) {
	f := quietFactory()
	var got, want []string
	for _, tc := range topCommands {
		c := tc.build(f)
		if c.Name() != tc.name || !slices.Equal(c.Aliases, tc.aliases) {
			t.Errorf("topCommands says %s %q, the command is %s %q", tc.name, tc.aliases, c.Name(), c.Aliases)
		}
		want = append(want, c.Name())
	}
	for _, c := range NewRootCmd(f).Commands() {
		if !c.Hidden {
			got = append(got, c.Name())
		}
	}
	slices.Sort(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("root commands (-topCommands +tree):\n%s", d)
	}
}

// TestRootForBuildsOneCommand: a command line that names a command builds
// only that command under the root; help, completion, no command and an
// unknown one build every command.
func TestRootForBuildsOneCommand(t *testing.T) {
	all := len(NewRootCmd(quietFactory()).Commands())
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"version"}, 1},
		{[]string{"-o", "json", "version"}, 1},
		{[]string{"--output=json", "-v", "version", "--help"}, 1},
		{[]string{"exp", "list", "--state", "enrolling"}, 1},
		{[]string{"--config", "c.yaml", "flags", "show", "x"}, 1},
		{nil, all},
		{[]string{"--help"}, all},
		{[]string{"help", "version"}, all},
		{[]string{"completion", "bash"}, all},
		{[]string{cobra.ShellCompRequestCmd, "exp", ""}, all},
		{[]string{"versoin"}, all},
		{[]string{"--config", "version"}, all}, // version is the flag's value
		{[]string{"--", "version"}, all},
	} {
		if got := len(rootFor(quietFactory(), tc.args).Commands()); got != tc.want {
			t.Errorf("%q: %d commands under the root, want %d", tc.args, got, tc.want)
		}
	}
}

// commandPaths are the argument lists of every command of the tree.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		if sub.Name() == "help" {
			continue
		}
		p := append(slices.Clone(prefix), sub.Name())
		out = append(out, p)
		out = append(out, commandPaths(sub, p)...)
	}
	return out
}

// TestLazyRootAsFullTree: Run with rootFor gives, for every command, the
// same help, usage errors and exit codes as with the whole tree.
func TestLazyRootAsFullTree(t *testing.T) {
	full := func(f *Factory, _ []string) *cobra.Command { return NewRootCmd(f) }
	run := func(build func(*Factory, []string) *cobra.Command, args []string) string {
		var out, errOut bytes.Buffer
		code := runWith(t.Context(), build, args, &IOStreams{Out: &out, ErrOut: &errOut, In: &bytes.Buffer{}},
			func(string) string { return "" })
		return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", code, out.String(), errOut.String())
	}
	lines := [][]string{nil, {"--help"}, {"help"}, {"help", "experiments", "list"}, {"versoin"}, {"version"},
		{"-o", "json", "version"}, {"version", "-o", "table"}, {"completion", "bash"}, {"completion", "zsh"},
		{"completion", "fish"}, {"completion", "powershell"}, {"exp", "lsit"},
		{cobra.ShellCompRequestCmd, "exp", ""}, {cobra.ShellCompRequestCmd, "-o", ""}}
	paths := commandPaths(NewRootCmd(quietFactory()), nil)
	if len(paths) < 40 {
		t.Fatalf("%d command paths, want the whole tree", len(paths))
	}
	for _, p := range paths {
		lines = append(lines, append(slices.Clone(p), "--help"), append(slices.Clone(p), "--no-such-flag"),
			append([]string{"-v", "--output", "yaml"}, append(slices.Clone(p), "-h")...),
			append([]string{"help"}, p...))
		if c, _, _ := NewRootCmd(quietFactory()).Find(p); c.HasSubCommands() {
			lines = append(lines, p, append(slices.Clone(p), "no-such-command"))
		}
	}
	t.Logf("%d command lines", len(lines))
	for _, args := range lines {
		want, got := run(full, args), run(rootFor, args)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("upgrade-agent %s (-whole tree +rootFor):\n%s", strings.Join(args, " "), d)
		}
	}
}
