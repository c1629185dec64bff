package cmd

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// Hidden commands that exist only in the test binary, to drive Run's error
// handling.
func init() {
	testCommands = append(testCommands, func(f *Factory) *cobra.Command {
		return &cobra.Command{
			Use:    "test-fail CODE [MESSAGE]",
			Hidden: true,
			Args:   cobra.RangeArgs(1, 2),
			RunE: func(_ *cobra.Command, args []string) error {
				code, err := strconv.Atoi(args[0])
				if err != nil {
					return Usagef("bad code %q", args[0])
				}
				var cause error
				if len(args) == 2 {
					cause = errors.New(args[1])
				}
				return &ExitError{Code: code, Err: cause}
			},
		}
	})
	testCommands = append(testCommands, func(f *Factory) *cobra.Command {
		return &cobra.Command{
			Use:    "test-panic",
			Hidden: true,
			RunE: func(*cobra.Command, []string) error {
				panic("kaboom " + f.opts().UpgradeToken)
			},
		}
	})
}

func runLine(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["UPGRADE_AGENT_HOME"]; !ok {
		env["UPGRADE_AGENT_HOME"] = t.TempDir()
	}
	code = Run(context.Background(), args, &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"success", nil, []string{"version", "-o", "json"}, 0, ""},
		{"silent explicit code", nil, []string{"test-fail", "10"}, 10, ""},
		{"explicit code with message", nil, []string{"test-fail", "12", "session 3f2a is in use"}, 12, "Error: session 3f2a is in use\n"},
		{"usage error from a run function", nil, []string{"test-fail", "x"}, 2, "Error: bad code \"x\"\n"},
		{"unknown command", nil, []string{"bogus"}, 2,
			"Error: unknown command \"bogus\" for \"upgrade-agent\"\nRun 'upgrade-agent --help' for usage.\n"},
		{"unknown subcommand", nil, []string{"experiments", "lst"}, 2,
			"Error: unknown command \"lst\" for \"upgrade-agent experiments\"; did you mean list?\nRun 'upgrade-agent experiments --help' for usage.\n"},
		{"unknown flag", nil, []string{"health", "--bogus"}, 2,
			"Error: unknown flag: --bogus\nRun 'upgrade-agent health --help' for usage.\n"},
		{"wrong argument count", nil, []string{"experiments", "show"}, 2,
			"Error: \"upgrade-agent experiments show\" needs REF, got 0 argument(s)\nRun 'upgrade-agent experiments show --help' for usage.\n"},
		{"bad global flag value", nil, []string{"health", "--upgrade-url", "nope"}, 2,
			"Error: invalid --upgrade-url: \"nope\" is not an http or https URL (want http://HOST[:PORT]/PATH)\nRun 'upgrade-agent health --help' for usage.\n"},
		{"bad environment", map[string]string{"UPGRADE_API_TIMEOUT": "1 minute"}, []string{"health"}, 2,
			"Error: invalid UPGRADE_API_TIMEOUT: \"1 minute\" is not a duration (use Go syntax such as 30s or 2m)\n"},
		{"bad completion shell", nil, []string{"completion", "tcsh"}, 2,
			"Error: unknown shell \"tcsh\": use bash, zsh, fish or powershell\nRun 'upgrade-agent completion --help' for usage.\n"},
		{"panic becomes an internal error without secrets", map[string]string{"UPGRADE_API_TOKEN": "tok-0123456789"}, []string{"test-panic"}, 1,
			"internal error: kaboom [REDACTED]\n"},
		{"version works with a broken environment", map[string]string{"UPGRADE_API_URL": "nope"}, []string{"version", "-o", "yaml"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runLine(t, tt.env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if diff := cmp.Diff(tt.wantStderr, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunHelpIsNotAnError(t *testing.T) {
	for _, args := range [][]string{{}, {"--help"}, {"experiments"}, {"help", "experiments"}, {"sim", "serve", "--help"}} {
		code, stdout, stderr := runLine(t, nil, args...)
		if code != 0 || !strings.Contains(stdout, "Usage:") || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestRunCompletion(t *testing.T) {
	for _, shell := range shells {
		code, stdout, stderr := runLine(t, nil, "completion", shell)
		if code != 0 || !strings.Contains(stdout, "upgrade-agent") || stderr != "" {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", shell, code, len(stdout), stderr)
		}
	}
}
