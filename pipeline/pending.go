package pipeline

import (
	"context"
	"slices"
)

// ---- the pending confirmation ----

// confirmation is the pending confirmation an earlier turn left and what
// this turn made of it, one value: only it can be approved in this turn,
// and only by the person's own words, --yes, or the never policy.
type confirmation struct {
	pending    *Pending
	answer     answerKind
	approvedBy string   // human, yes-flag, policy
	approvedP  *Pending // the confirmation approved in this turn
	// held lists what this turn learnt of the pending confirmation before
	// any answer (mark): changed since shown, unseen, expired, outcome
	// unknown, interrupted before it ran.
	held []pendingState
	// showing is the confirmation the responder shows: the turn pauses.
	showing *Pending
	notes   []string // said with the confirmation: stale, unseen, expired, interrupted
	denied  *Pending // the confirmation a denial dropped in this turn
}

// pendingState is one state of the pending confirmation. mark records the
// states found at the start of a turn (each with what the person is told);
// state says where the confirmation stands; next what a decision does.
type pendingState int

const (
	stateNone           pendingState = iota // nothing pending
	stateShown                              // shown to the person: a yes may run it
	stateChanged                            // its text changed since it was shown: renewed, shown again
	stateUnseen                             // the person has not read it: shown first
	stateExpired                            // older than approval_ttl: renewed, shown again
	stateOutcomeUnknown                     // an interrupted run may or may not have done it: check, then confirm
	stateInterrupted                        // approved before a crash but never ran: confirm again
	stateApproved                           // approved in this turn
	stateDenied                             // a no dropped it in this turn
)

// holds: a confirmation in this state may not be approved in this turn;
// it is shown again, and only a no may answer it.
func (s pendingState) holds() bool {
	return s == stateUnseen || s == stateExpired || s == stateOutcomeUnknown
}

// note is what the person is told with a confirmation in this state.
func (s pendingState) note() string {
	switch s {
	case stateChanged:
		return staleNote
	case stateUnseen:
		return unseenNote
	case stateExpired:
		return expiredNote
	case stateOutcomeUnknown:
		return "The previous attempt was interrupted and its outcome is unknown; check the server before confirming again."
	case stateInterrupted:
		return "The previous run stopped before this action ran; nothing was executed. Please confirm again."
	}
	return ""
}

// mark records a state of the pending confirmation found in this turn,
// with its note: an unseen or interrupted confirmation says so only when
// nothing more telling (changed, expired, outcome unknown) was said.
func (c *confirmation) mark(s pendingState) {
	quiet := (s == stateUnseen && len(c.notes) > 0) || (s == stateInterrupted && c.reaskOnly())
	c.held = append(c.held, s)
	if n := s.note(); n != "" && !quiet {
		c.notes = append(c.notes, n)
	}
}

// reaskOnly: the pending confirmation may not be approved in this turn
// (the person has not read it, it expired and was renewed, or an
// interrupted run's outcome is unknown).
func (c *confirmation) reaskOnly() bool {
	for _, s := range c.held {
		if s.holds() {
			return true
		}
	}
	return false
}

// state is where the pending confirmation stands in this turn.
func (c *confirmation) state() pendingState {
	switch {
	case c.answer == answerApproved:
		return stateApproved
	case c.answer == answerDenied || c.answer == answerChanged:
		return stateDenied
	case c.pending == nil:
		return stateNone
	}
	for _, s := range []pendingState{stateOutcomeUnknown, stateExpired, stateUnseen} {
		if slices.Contains(c.held, s) {
			return s
		}
	}
	return stateShown
}

// next says where a decision on the pending confirmation goes: the
// responder when nothing is pending, or to show it again when it may not
// be approved yet; the responder for a no; the executor for a yes.
func (c *confirmation) next(approve bool) (start string, reask bool) {
	switch s := c.state(); {
	case c.pending == nil: // none, or dropped by a no
		return NodeResponder, false
	case s.holds() && approve:
		return NodeResponder, true
	case !approve:
		return NodeResponder, false
	}
	return NodeExecutor, false
}

// currentPending renders the pending confirmation's plan again. When the
// text differs from what was shown (the experiment changed, or the stored
// text was never this program's), it returns a new pending confirmation
// with the current text and stale set: no approval given to the old text
// may run it.
func (a *Agent) currentPending(ctx context.Context, t *turn, p *Pending) (cur *Pending, stale bool, err error) {
	fresh, err := p.Bound.Plan(ctx, a.env(t.api(), t.sess.cp.SessionID))
	if err != nil {
		return nil, false, err
	}
	if p.shows(fresh) {
		return p, false, nil
	}
	return newPending(a.newID(), p.Bound, fresh, a.now(), true), true, nil
}

const unseenNote = "The previous run stopped before showing this confirmation, so nothing ran. Please read it and confirm."

const staleNote = "The action changed since it was shown (the experiment was modified, or the text shown was not this program's), so nothing ran. Please confirm the updated action."

// expiredNote is said with a confirmation that replaced an expired one.
const expiredNote = "The earlier confirmation expired (older than approval_ttl), so nothing ran. This is the action as it stands on the server now; please confirm again."
