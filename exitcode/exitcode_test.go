package exitcode

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/config"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

type coded int

func (c coded) Error() string { return "coded" }
func (c coded) ExitCode() int { return int(c) }

func TestCodeOfErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"own code", fmt.Errorf("wrapped: %w", coded(10)), 10},
		{"bad input", fmt.Errorf("x: %w", pipeline.ErrBadInput), Usage},
		{"config file", &config.Error{File: "c.yaml", Line: 3, Msg: "unknown key"}, Usage},
		{"locked", fmt.Errorf("x: %w", checkpoint.ErrLocked), Locked},
		{"written meanwhile", fmt.Errorf("x: %w", checkpoint.ErrConflict), Locked},
		{"unknown session", fmt.Errorf("x: %w", checkpoint.ErrNotFound), Usage},
		{"corrupt checkpoint", &checkpoint.CorruptError{Path: "p", Reason: "r"}, Usage},
		{"an import over a local session", fmt.Errorf("x: %w", checkpoint.ErrExists), Usage},
		{"no LLM", llm.ErrNotConfigured, Usage},
		{"bad --llm", fmt.Errorf("x: %w", llm.ErrInvalidSpec), Usage},
		{"experiment ref matches nothing", &upgrade.RefError{Ref: "x"}, Usage},
		{"UpGrade 401", &upgrade.Error{Category: upgrade.CategoryAuth, Status: 401}, Auth},
		{"UpGrade 500", &upgrade.Error{Category: upgrade.CategoryAPI, Status: 500}, Failure},
		{"LLM 401", &llm.Error{Kind: llm.KindAuth, Status: 401}, Auth},
		{"LLM 500", &llm.Error{Kind: llm.KindServer, Status: 500}, Failure},
		{"deadline", context.DeadlineExceeded, Failure},
		{"anything else", errors.New("boom"), Failure},
	}
	for _, tt := range tests {
		for _, status := range []pipeline.Status{"", pipeline.StatusCompleted, pipeline.StatusAwaitingConfirmation, pipeline.StatusFailed} {
			if got := Code(status, tt.err); got != tt.want {
				t.Errorf("%s: Code(%q, err) = %d, want %d (an error decides, whatever the status)", tt.name, status, got, tt.want)
			}
		}
	}
}

func TestCodeOfStatus(t *testing.T) {
	tests := []struct {
		status pipeline.Status
		want   int
	}{
		{"", OK},
		{pipeline.StatusCompleted, OK},
		{pipeline.StatusTerminated, OK},
		{pipeline.StatusAwaitingConfirmation, Paused},
		{pipeline.StatusWaitingJob, Suspended},
		{pipeline.StatusFailed, Failure},
	}
	for _, tt := range tests {
		if got := Code(tt.status, nil); got != tt.want {
			t.Errorf("Code(%q, nil) = %d, want %d", tt.status, got, tt.want)
		}
	}
}
