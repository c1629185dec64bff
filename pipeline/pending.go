package pipeline

import "context"

// ---- the pending confirmation ----

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
