package exitcode

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

type coded int

func (c coded) Error() string { return "coded" }
func (c coded) ExitCode() int { return int(c) }

func TestOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, OK},
		{"own code", fmt.Errorf("wrapped: %w", coded(10)), 10},
		{"usage error", &UsageError{Err: errors.New("bad flag")}, Usage},
		{"usage sentinel", fmt.Errorf("x: %w", ErrUsage), Usage},
		{"locked", fmt.Errorf("x: %w", checkpoint.ErrLocked), Locked},
		{"unknown session", fmt.Errorf("x: %w", checkpoint.ErrNotFound), Usage},
		{"corrupt checkpoint", &checkpoint.CorruptError{Path: "p", Reason: "r"}, Usage},
		{"no LLM", llm.ErrNotConfigured, Usage},
		{"experiment ref matches nothing", &upgrade.RefError{Ref: "x"}, Usage},
		{"UpGrade 401", &upgrade.Error{Category: upgrade.CategoryAuth, Status: 401}, Auth},
		{"UpGrade 500", &upgrade.Error{Category: upgrade.CategoryAPI, Status: 500}, Failure},
		{"LLM 401", &llm.Error{Kind: llm.KindAuth, Status: 401}, Auth},
		{"LLM 500", &llm.Error{Kind: llm.KindServer, Status: 500}, Failure},
		{"deadline", context.DeadlineExceeded, Failure},
		{"anything else", errors.New("boom"), Failure},
	}
	for _, tt := range tests {
		if got := Of(tt.err); got != tt.want {
			t.Errorf("%s: Of = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestForTurn(t *testing.T) {
	tests := []struct {
		status string
		auth   bool
		err    error
		want   int
	}{
		{"completed", false, nil, OK},
		{"terminated", false, nil, OK},
		{"awaiting_confirmation", false, nil, Paused},
		{"waiting_job", false, nil, Suspended},
		{"failed", true, nil, Auth},
		{"failed", false, nil, Failure},
		{"failed", false, &llm.Error{Kind: llm.KindAuth}, Auth},
	}
	for _, tt := range tests {
		if got := ForTurn(tt.status, tt.auth, tt.err); got != tt.want {
			t.Errorf("ForTurn(%s, %v, %v) = %d, want %d", tt.status, tt.auth, tt.err, got, tt.want)
		}
	}
}
