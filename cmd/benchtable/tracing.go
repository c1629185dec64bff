package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/tracing"
)

// tracingTurns is how many turns each side of the tracing row plays.
const tracingTurns = 200

// tracingFigures plays the same scripted turns without tracing and with
// the file exporter (docs/tracing.md), and reports the median turn of
// each and the difference: the cost of tracing per turn.
func tracingFigures(ctx context.Context) ([]row, error) {
	off, err := play(ctx, newInstantLLM(), nil, tracingTurns)
	if err != nil {
		return nil, fmt.Errorf("tracing off: %w", err)
	}
	dir, err := os.MkdirTemp("", "benchtable-trace-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "trace.jsonl")
	p, err := tracing.New(ctx, tracing.Options{File: file, Getenv: func(string) string { return "" }})
	if err != nil {
		return nil, err
	}
	on, err := play(tracing.With(ctx, p), newInstantLLM(), nil, tracingTurns)
	if serr := p.Shutdown(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("tracing on: %w", err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	spans := bytes.Count(b, []byte("\n"))
	if spans < tracingTurns {
		return nil, fmt.Errorf("tracing on: %d spans written for %d turns", spans, tracingTurns)
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	mOff, mOn := median(off.durations), median(on.durations)
	extra := max(mOn-mOff, 0)
	return []row{
		{"turn, tracing off (median, no checkpoint)", ms(mOff), info, info},
		{"tracing cost per turn, --trace file (median on − off)", fmt.Sprintf("%s (on %s, %d spans/turn)", ms(extra), ms(mOn), spans/tracingTurns), "≤ 2 ms", pass(extra <= 2*time.Millisecond)},
	}, nil
}
