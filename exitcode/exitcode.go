// Package exitcode is the one place where an outcome becomes a process exit
// status (the table of spec/cli.md). The two front ends, the CLI and the
// scenario runner, use it, so a scenario's exit_code means exactly what the
// command would return. The domain packages (pipeline, checkpoint, llm,
// upgrade, config, mcpclient) never import it: they export error kinds and
// sentinels, and Code maps them.
//
// It must not print anything or call os.Exit.
package exitcode

import (
	"errors"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/config"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The exit codes of spec/cli.md.
const (
	OK        = 0
	Failure   = 1
	Usage     = 2
	Auth      = 3
	Paused    = 10
	Suspended = 11
	Locked    = 12
)

// Coder is implemented by errors that carry their own exit code (a silent
// exit after output was printed, a command-line error).
type Coder interface{ ExitCode() int }

// Code maps an outcome to its exit code. An error decides by its kind: its
// own code, bad input 2, a locked session 12, refused credentials 3,
// anything else 1. Without an error, the status of a turn decides: paused
// for a confirmation 10, suspended on a job 11, otherwise 0.
func Code(status pipeline.Status, err error) int {
	if err == nil {
		switch status {
		case pipeline.StatusAwaitingConfirmation:
			return Paused
		case pipeline.StatusWaitingJob:
			return Suspended
		case pipeline.StatusFailed:
			return Failure
		}
		return OK
	}
	var c Coder
	var cfg *config.Error
	var ref *upgrade.RefError
	var le *llm.Error
	switch {
	case errors.As(err, &c):
		return c.ExitCode()
	case errors.Is(err, checkpoint.ErrLocked), errors.Is(err, checkpoint.ErrConflict):
		return Locked
	case errors.Is(err, pipeline.ErrBadInput), errors.As(err, &cfg), errors.As(err, &ref),
		errors.Is(err, checkpoint.ErrNotFound), errors.Is(err, checkpoint.ErrCorrupt), errors.Is(err, checkpoint.ErrExists),
		errors.Is(err, llm.ErrNotConfigured), errors.Is(err, llm.ErrInvalidSpec):
		return Usage
	case upgrade.CategoryOf(err) == upgrade.CategoryAuth, errors.As(err, &le) && le.Kind == llm.KindAuth:
		return Auth
	}
	return Failure
}
