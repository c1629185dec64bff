package cmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

func TestRenderProgressLine(t *testing.T) {
	tests := []struct {
		name              string
		done, total, from int
		elapsed           time.Duration
		want              string
	}{
		{"nothing moved yet", 0, 300, 0, 0,
			"job j1   0% |                              | (0/300) [0s:?]"},
		{"a third", 100, 300, 0, 4500 * time.Millisecond,
			"job j1  33% |█████████                     | (100/300) [4s:9s]"},
		{"rate counts from the first update", 200, 300, 100, 10 * time.Second,
			"job j1  66% |███████████████████           | (200/300) [10s:10s]"},
		{"minutes", 1, 100, 0, 2 * time.Second,
			"job j1   1% |                              | (1/100) [2s:3m18s]"},
		{"complete: no times", 300, 300, 0, 7 * time.Second,
			"job j1 100% |██████████████████████████████| (300/300) "},
		{"past the total", 310, 300, 0, time.Second,
			"job j1 100% |██████████████████████████████| (300/300) "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderProgressLine("job j1", tt.done, tt.total, tt.from, tt.elapsed)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestProgressLineRedrawsInPlace(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var w bytes.Buffer
	p := newJobProgress(&w, true, "j1", func() time.Time { return now })
	p.update(running(0))
	now = now.Add(50 * time.Millisecond)
	p.update(running(10)) // throttled
	now = now.Add(time.Second)
	p.update(running(150))
	now = now.Add(time.Second)
	p.update(pipeline.JobStatus{ID: "j1", State: "succeeded", Done: 300, Total: 300})
	p.finish() // the line is ended already: nothing more
	want := "\rjob j1   0% |                              | (0/300) [0s:?]" +
		"\rjob j1  50% |███████████████               | (150/300) [1s:1s]" +
		"\rjob j1 100% |██████████████████████████████| (300/300) " + strings.Repeat(" ", 7) + "\n"
	if d := cmp.Diff(want, w.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestProgressLineEndsItsLineWhenTheJobFails(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var w bytes.Buffer
	p := newJobProgress(&w, true, "j1", func() time.Time { return now })
	p.update(running(30))
	now = now.Add(time.Second)
	p.update(pipeline.JobStatus{ID: "j1", State: "failed", Done: 60, Total: 300})
	p.finish()
	want := "\rjob j1  10% |███                           | (30/300) [0s:?]" +
		"\rjob j1  20% |██████                        | (60/300) [1s:8s]\n" +
		"job j1 failed at 60/300\n"
	if d := cmp.Diff(want, w.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestProgressLineEndedByFinish(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var w bytes.Buffer
	p := newJobProgress(&w, true, "j1", func() time.Time { return now })
	p.update(running(30))
	p.finish() // a timeout or Ctrl-C stopped the wait
	if got := w.String(); !strings.HasSuffix(got, "[0s:?]\n") {
		t.Errorf("the bar's line is not ended: %q", got)
	}
}

// Off a terminal no bar is drawn: no carriage return, no bar characters.
func TestProgressNoBarOffTerminal(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var w bytes.Buffer
	p := newJobProgress(&w, false, "j1", func() time.Time { return now })
	p.update(running(30))
	now = now.Add(time.Second)
	p.update(pipeline.JobStatus{ID: "j1", State: "succeeded", Done: 300, Total: 300})
	p.finish()
	if got := w.String(); strings.ContainsAny(got, "\r█|") || got != "job j1: 30/300\njob j1: 300/300 succeeded\n" {
		t.Errorf("off a terminal: %q", got)
	}
}
