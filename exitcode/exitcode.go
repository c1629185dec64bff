// Package exitcode is the one place where an outcome becomes a process exit
// status (the table of spec/cli.md). The CLI and the scenario runner both use
// it, so a scenario's exit_code means exactly what the command would return.
//
// It must not print anything or call os.Exit.
package exitcode

import (
	"context"
	"errors"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The exit codes of spec/cli.md.
const (
	OK          = 0
	Failure     = 1
	Usage       = 2
	Auth        = 3
	Paused      = 10
	Suspended   = 11
	Locked      = 12
	statusFail  = "failed"
	statusPause = "awaiting_confirmation"
	statusWait  = "waiting_job"
)

// UsageError marks bad usage or bad input (exit 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ErrUsage can be wrapped (errors.Join or %w) to mark bad input.
var ErrUsage = errors.New("bad usage")

// Coder is implemented by errors that carry their own exit code (a silent
// exit after output was printed).
type Coder interface{ ExitCode() int }

// Of maps an error to its exit code.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	var ue *UsageError
	if errors.As(err, &ue) || errors.Is(err, ErrUsage) {
		return Usage
	}
	var re *upgrade.RefError
	if errors.As(err, &re) {
		return Usage // an experiment reference that names none, or several
	}
	if errors.Is(err, checkpoint.ErrLocked) || errors.Is(err, checkpoint.ErrConflict) {
		return Locked
	}
	if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
		return Usage
	}
	if errors.Is(err, llm.ErrNotConfigured) {
		return Usage
	}
	if upgrade.CategoryOf(err) == upgrade.CategoryAuth {
		return Auth
	}
	var le *llm.Error
	if errors.As(err, &le) && le.Kind == llm.KindAuth {
		return Auth
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Failure
	}
	return Failure
}

// ForTurn maps the status of an agent turn (and its error, if any) to the
// exit code: paused 10, suspended 11, an auth failure 3.
func ForTurn(status string, authFailed bool, err error) int {
	if err != nil {
		return Of(err)
	}
	switch status {
	case statusPause:
		return Paused
	case statusWait:
		return Suspended
	case statusFail:
		if authFailed {
			return Auth
		}
		return Failure
	}
	return OK
}
