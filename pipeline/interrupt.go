package pipeline

import (
	"errors"
	"fmt"

	"github.com/upgrade-agent/upgrade-agent/audit"
)

// A turn is a small state machine: each node returns the next node, or an
// interrupt as an error value. Agent.pause is the one place that
// recognises interrupts and records them on the Session; runGraph saves.
// Adding an interrupt kind is one type here plus one case in pause.

// awaitConfirmation: show the confirmation and pause the turn.
type awaitConfirmation struct {
	p    *Pending
	note string
}

func (i *awaitConfirmation) Error() string {
	return "interrupt: awaiting confirmation of " + i.p.Bound.Name
}

// suspendOnJob: the executor started a job that did not end within
// --wait-jobs; the turn ends and resume picks it up.
type suspendOnJob struct {
	w  *JobWait
	st JobStatus
}

func (i *suspendOnJob) Error() string { return "interrupt: waiting on job " + i.w.Ref.ID }

// pause is the one place an interrupt becomes a pause: it records
// awaitConfirmation or suspendOnJob on the session and says which node
// comes next (the responder shows a confirmation; a suspended turn ends).
// paused is false when err is no interrupt. runGraph calls it for what a
// node returns; showing a pending confirmation again and re-attaching to a
// job during crash recovery produce the same values and come here too.
func (a *Agent) pause(t *turn, err error) (next string, paused bool, ferr error) {
	var await *awaitConfirmation
	var suspend *suspendOnJob
	switch {
	case errors.As(err, &await):
		if await.p.NeedsHuman && (t.pending == nil || t.pending.ID != await.p.ID) {
			a.proposing(t, await.p)
			a.audit(t, audit.Proposed, await.p, audit.Entry{})
		}
		t.sess.await(await.p)
		t.showing = await.p
		if await.note != "" {
			t.notes = append(t.notes, await.note)
		}
		return NodeResponder, true, nil
	case errors.As(err, &suspend):
		if err := t.sess.suspend(suspend.w, a.newID(), a.now()); err != nil {
			return nodeEnd, true, err
		}
		st := suspend.st
		t.job = &st
		t.st.FinalResponse = suspendText(t.sess.cp.SessionID, st)
		a.respond(t, t.st.FinalResponse)
		return nodeEnd, true, nil
	}
	return "", false, nil
}

func suspendText(session string, s JobStatus) string {
	return fmt.Sprintf("Started %s as job %s (%d of %d done so far). It keeps running in the background; run `upgrade-agent resume %s` to check on it, or add --wait to wait for the result.",
		s.Action, s.ID, s.Done, s.Total, session)
}
