package cmd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/config"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func TestExitCode(t *testing.T) {
	plain := errors.New("boom")
	upAuth := &upgrade.Error{Category: upgrade.CategoryAuth, Status: 401, Method: "GET", URL: "http://h/api/experiments"}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain error", plain, 1},
		{"silent exit 10", &ExitError{Code: 10}, 10},
		{"silent exit 11", &ExitError{Code: 11}, 11},
		{"exit 12 with message", &ExitError{Code: 12, Err: plain}, 12},
		{"explicit code wins over its cause", &ExitError{Code: 10, Err: upAuth}, 10},
		{"usage", Usagef("bad %s", "thing"), 2},
		{"wrapped usage", fmt.Errorf("ask: %w", Usagef("bad")), 2},
		{"flag", &FlagError{Err: plain}, 2},
		{"config", &config.Error{File: "c.yaml", Line: 3, Key: "model", Msg: "x"}, 2},
		{"joined config", errors.Join(&config.Error{File: "c.yaml", Line: 1}, &config.Error{File: "c.yaml", Line: 2}), 2},
		{"no experiment", &upgrade.RefError{Ref: "x"}, 2},
		{"ambiguous experiment", &upgrade.RefError{Ref: "x", Candidates: []upgrade.ExperimentName{{ID: "1", Name: "xa"}, {ID: "2", Name: "xb"}}}, 2},
		{"upgrade auth", upAuth, 3},
		{"wrapped upgrade auth", fmt.Errorf("list: %w", upAuth), 3},
		{"upgrade api", &upgrade.Error{Category: upgrade.CategoryAPI, Status: 500}, 1},
		{"upgrade not found", &upgrade.Error{Category: upgrade.CategoryNotFound, Status: 404}, 1},
		{"upgrade validation", &upgrade.Error{Category: upgrade.CategoryValidation, Status: 400}, 1},
		{"upgrade network", &upgrade.Error{Category: upgrade.CategoryAPI, Err: plain}, 1},
		{"llm auth", &llm.Error{Kind: llm.KindAuth, Status: 401}, 3},
		{"llm server", &llm.Error{Kind: llm.KindServer, Status: 503}, 1},
		{"llm rate limit", &llm.Error{Kind: llm.KindRateLimit, Status: 429}, 1},
		{"llm not configured", llm.ErrNotConfigured, 2},
		{"wrapped llm not configured", fmt.Errorf("ask: %w", llm.ErrNotConfigured), 2},
		{"llm invalid spec", fmt.Errorf("%w %q", llm.ErrInvalidSpec, "x"), 2},
		{"session locked", checkpoint.ErrLocked, 12},
		{"wrapped session locked", fmt.Errorf("resume: %w", checkpoint.ErrLocked), 12},
		{"unknown session", checkpoint.ErrNotFound, 2},
		{"corrupt checkpoint", &checkpoint.CorruptError{Path: "p", Reason: "bad checksum"}, 2},
		{"deadline", context.DeadlineExceeded, 1},
		{"deadline inside upgrade error", &upgrade.Error{Category: upgrade.CategoryAPI, Err: context.DeadlineExceeded}, 1},
		{"interrupted", context.Canceled, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
