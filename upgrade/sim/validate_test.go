package sim

import (
	"slices"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// stateNames is a literal (no init work); it must stay the display names
// followed by every internal state.
func TestStateNames(t *testing.T) {
	want := []string{"running", "paused", "completed"}
	for _, st := range upgrade.AllStates {
		want = append(want, string(st))
	}
	if !slices.Equal(stateNames, want) {
		t.Errorf("stateNames = %v, want %v", stateNames, want)
	}
}
