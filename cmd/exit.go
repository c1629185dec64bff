package cmd

import (
	"fmt"

	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// ExitError makes a command end with a chosen code. An ExitError with a nil
// Err is silent: ask and resume print their result themselves and then use
// it to exit 10, 11 or 12.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode makes ExitError an exitcode.Coder.
func (e *ExitError) ExitCode() int { return e.Code }

// UsageError is bad input a person must fix before running again: an
// unknown context, an invalid setting, a bad file. It exits 2.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }
func (e *UsageError) ExitCode() int { return exitcode.Usage }

// Usagef builds a *UsageError from a format.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// FlagError is a command line that cobra could not take: an unknown flag or
// command, a bad flag value, the wrong number of arguments. Besides exit 2,
// it earns the "Run '... --help' for usage." hint.
type FlagError struct {
	Err     error
	CmdPath string // the command the line was meant for, for the hint
}

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }
func (e *FlagError) ExitCode() int { return exitcode.Usage }

// ExitCode is the exit code of an error: exitcode.Code, the one mapping
// shared with the scenario runner, decides.
func ExitCode(err error) int { return exitcode.Code("", err) }

const (
	upgradeAuthHint = "UpGrade refused the credentials: set UPGRADE_API_TOKEN (or --upgrade-token) to a valid admin token"
	llmAuthHint     = "the LLM provider refused the API key: check OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint)"
)

// authHint says what to set when a server refused the credentials (exit 3).
func authHint(err error) string {
	switch {
	case upgrade.CategoryOf(err) == upgrade.CategoryAuth:
		return upgradeAuthHint
	case llm.KindOf(err) == llm.KindAuth:
		return llmAuthHint
	}
	return ""
}
