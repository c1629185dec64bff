package pipeline

import (
	"slices"
	"testing"
)

// TestPendingStates: the pending confirmation's states are read in one
// place: what each found state tells the person, whether it holds the
// confirmation from a yes, and where a decision then goes.
func TestPendingStates(t *testing.T) {
	p := &Pending{ID: "c1"}
	for _, tc := range []struct {
		name       string
		c          confirmation
		marks      []pendingState
		want       pendingState
		yes, no    string // the node a yes / a no starts from
		reaskOnYes bool
		notes      []string
	}{
		{name: "nothing pending", want: stateNone, yes: NodeResponder, no: NodeResponder},
		{name: "shown", c: confirmation{pending: p}, want: stateShown, yes: NodeExecutor, no: NodeResponder},
		{name: "changed since shown, unseen", c: confirmation{pending: p}, marks: []pendingState{stateChanged, stateUnseen},
			want: stateUnseen, yes: NodeResponder, reaskOnYes: true, no: NodeResponder, notes: []string{staleNote}},
		{name: "unseen", c: confirmation{pending: p}, marks: []pendingState{stateUnseen},
			want: stateUnseen, yes: NodeResponder, reaskOnYes: true, no: NodeResponder, notes: []string{unseenNote}},
		{name: "expired", c: confirmation{pending: p}, marks: []pendingState{stateExpired, stateUnseen},
			want: stateExpired, yes: NodeResponder, reaskOnYes: true, no: NodeResponder, notes: []string{expiredNote}},
		{name: "outcome unknown", c: confirmation{pending: p}, marks: []pendingState{stateOutcomeUnknown, stateInterrupted},
			want: stateOutcomeUnknown, yes: NodeResponder, reaskOnYes: true, no: NodeResponder, notes: []string{stateOutcomeUnknown.note()}},
		{name: "interrupted before it ran", c: confirmation{pending: p}, marks: []pendingState{stateInterrupted},
			want: stateShown, yes: NodeExecutor, no: NodeResponder, notes: []string{stateInterrupted.note()}},
		{name: "approved", c: confirmation{pending: p, answer: answerApproved}, want: stateApproved, yes: NodeExecutor, no: NodeResponder},
		{name: "denied", c: confirmation{answer: answerDenied}, want: stateDenied, yes: NodeResponder, no: NodeResponder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			for _, m := range tc.marks {
				c.mark(m)
			}
			if got := c.state(); got != tc.want {
				t.Errorf("state %d, want %d", got, tc.want)
			}
			if start, reask := c.next(true); start != tc.yes || reask != tc.reaskOnYes {
				t.Errorf("a yes goes to %s (reask %v), want %s (%v)", start, reask, tc.yes, tc.reaskOnYes)
			}
			if start, reask := c.next(false); start != tc.no || reask {
				t.Errorf("a no goes to %s (reask %v), want %s", start, reask, tc.no)
			}
			if !slices.Equal(c.notes, tc.notes) {
				t.Errorf("notes %q, want %q", c.notes, tc.notes)
			}
		})
	}
}
