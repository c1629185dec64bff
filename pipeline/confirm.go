package pipeline

import (
	"context"

	"github.com/upgrade-agent/upgrade-agent/audit"
)

// What a turn does with the pending confirmation: a decision approves or
// denies it, or it is shown again. The nodes and the entry points call
// these; none of them calls back into the graph.

// decide applies a decision to the turn's pending confirmation and says
// which node the graph starts from: the executor runs an approved action;
// the responder reports a denial, or shows the confirmation again when the
// person has not read it yet (only a no may stand for an answer given
// before that) or when crash recovery already settled it.
func (a *Agent) decide(ctx context.Context, t *turn, approve bool, by string) (string, error) {
	start, reask := t.confirmation.next(approve)
	switch {
	case t.pending == nil:
	case reask:
		t.answer = answerReasked
		return start, a.showAgain(ctx, t)
	case !approve:
		t.deny(false)
	default:
		t.approve(t.pending, by)
	}
	return start, nil
}

// showAgain makes the turn show the pending confirmation again, with its
// current text.
func (a *Agent) showAgain(ctx context.Context, t *turn) error {
	cur, stale, err := a.currentPending(ctx, t, t.pending)
	if err != nil {
		return err
	}
	i := &awaitConfirmation{p: cur}
	if stale {
		i.note = staleNote
	}
	_, _, err = a.pause(t, i)
	return err
}

// approve records that p may run in this turn.
func (t *turn) approve(p *Pending, by string) {
	t.answer, t.approvedBy, t.approvedP = answerApproved, by, p
	t.a.audit(t, audit.Approved, p, audit.Entry{Message: "by " + by})
	if by == "human" {
		v := true
		t.st.UserConfirmed = &v
	}
}

// approved is the confirmation approved in this turn, if any.
func (t *turn) approved() *Pending {
	if t.answer != answerApproved {
		return nil
	}
	return t.approvedP
}

// deny drops the pending confirmation. A denial that carries a change
// keeps the draft for the gatherer.
func (t *turn) deny(changed bool) {
	t.answer = answerDenied
	if changed {
		t.answer = answerChanged
	}
	t.denied = t.pending
	if t.pending != nil {
		t.a.audit(t, audit.Denied, t.pending, audit.Entry{})
	}
	v := false
	t.st.UserConfirmed = &v
	t.sess.deny(changed)
	t.pending = nil
}

// humanDecided: a person answered a confirmation in this turn.
func (t *turn) humanDecided() bool {
	return (t.answer == answerApproved && t.approvedBy == "human") || t.answer == answerDenied || t.answer == answerChanged
}
