package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
)

const pauseScenario = `name: pause
setup:
  experiments:
    - {name: Math Hints, context: assign-prog, status: enrolling,
       conditions: [{code: control, weight: 50}, {code: variant, weight: 50}],
       decision_points: [{site: SelectSection, target: absolute_value_plot_equality}]}
steps:
  - say: Hi
    llm:
      - call:
          analyze_user_request: {intent_type: direct_answer, confidence: 0.9, user_request_summary: hi, reasoning: hi, direct_response: Hello there!}
  - say: Delete the Math Hints experiment
    llm:
      - call: {analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: delete Math Hints, reasoning: destructive}}
      - call: {find_experiment: {name: Math Hints}}
      - call:
          set_action_needed: {action: delete_experiment, reasoning: asked}
          set_action_params: {action_params: {experiment_id: "{{experiment:Math Hints}}"}}
    expect: {status: awaiting_confirmation, exit_code: 10}
`

// TestKeptStateCarriesRealTime: with KeepState the clock starts from the
// real time, so a kept confirmation expires approval_ttl after the run that
// proposed it (not months before, as on FixedTime); the last step is dated
// no later than now, steps stay a minute apart, nothing kept carries
// FixedTime, and the transcript is the same as without KeepState.
func TestKeptStateCarriesRealTime(t *testing.T) {
	real := time.Date(2031, 6, 2, 10, 20, 30, 0, time.FixedZone("x", 2*3600))
	defer func(f func() time.Time) { wallClock = f }(wallClock)
	wallClock = func() time.Time { return real }

	dir := t.TempDir()
	sc := parse(t, dir, "pause.yaml", pauseScenario)
	sc.Golden = false
	plain := mustRun(t, sc, RunOptions{})
	keep := filepath.Join(dir, "kept")
	kept := mustRun(t, sc, RunOptions{KeepState: keep})
	if !plain.Passed() || !kept.Passed() {
		t.Fatalf("failures: plain %v, kept %v", plain.Failures, kept.Failures)
	}
	if d := cmp.Diff(plain.Transcript, kept.Transcript); d != "" {
		t.Errorf("kept transcript differs (-plain +kept):\n%s", d)
	}

	store, err := checkpoint.OpenFileStore(filepath.Join(keep, "pause"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := store.Load(SessionID)
	if err != nil {
		t.Fatal(err)
	}
	last := time.Date(2031, 6, 2, 8, 20, 0, 0, time.UTC) // real, UTC, to the minute
	if cp.Interrupt == nil || !cp.Interrupt.CreatedAt.Equal(last) {
		t.Errorf("kept confirmation proposed at %+v, want %s (the real time of the last step)", cp.Interrupt, last)
	}
	if want := last.Add(-time.Minute); !cp.CreatedAt.Equal(want) {
		t.Errorf("kept session created at %s, want %s (step 1, a minute before step 2)", cp.CreatedAt, want)
	}
	data, err := os.ReadFile(filepath.Join(keep, "pause", "sim", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fixed := FixedTime().Format("2006-01-02"); strings.Contains(string(data), fixed) {
		t.Errorf("kept simulator data carries the fixed clock %s", fixed)
	}
	if !strings.Contains(string(data), `"2031-06-02T08:`) {
		t.Errorf("kept simulator data has no real time:\n%.400s", data)
	}
	if got := keptEpoch(real, 2); !got.Equal(last.Add(-2 * time.Minute)) {
		t.Errorf("keptEpoch = %s", got)
	}
}
