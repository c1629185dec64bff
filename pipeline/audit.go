package pipeline

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Auditor receives the decisions of a turn for the audit trail
// (docs/teams.md): proposed, approved, denied, expired, executed,
// job_started, job_finished. It fills in the time and the actor; a failure
// to write is its own to report. nil: no trail (library use, scenarios).
type Auditor interface {
	Audit(e audit.Entry)
}

// WithAuditor gives the agent an audit trail (teams: docs/teams.md).
func WithAuditor(au Auditor) Option { return func(a *Agent) { a.auditor = au } }

// audit records an event about p, when there is a trail.
func (a *Agent) audit(t *turn, event string, p *Pending, e audit.Entry) {
	if a.auditor == nil {
		return
	}
	e.Event = event
	e.SessionID = t.sess.cp.SessionID
	if p != nil {
		e.ConfirmationID = p.ID
		e.Action = p.Bound.Name
		e.ParamsHash = p.Bound.Hash
		e.Destructive = p.Destructive
		tg := a.targetName(t, p)
		e.Target, e.TargetID = tg.Name, tg.ID
	}
	a.auditor.Audit(e)
}

// auditTarget is what an entry names: the target's name (a flag's key),
// and its id when the params named it by id.
type auditTarget struct{ Name, ID string }

// targetName names what p acts on: the name in its params, else the
// experiment (flag: its key; segment) its params name by id, looked up once
// per confirmation, so that the executed entry of a delete names what it
// removed.
func (a *Agent) targetName(t *turn, p *Pending) auditTarget {
	if p.Target != "" {
		return auditTarget{Name: p.Target, ID: p.TargetID}
	}
	field, target := audit.TargetField(p.Bound.Params)
	if !upgrade.IsUUID(target) {
		return auditTarget{Name: target}
	}
	if v, ok := a.targets.Load(p.ID); ok && p.ID != "" {
		return v.(auditTarget)
	}
	tg := auditTarget{Name: target}
	if name := a.lookupName(t, field, target); name != "" && name != target {
		tg = auditTarget{Name: name, ID: target}
		if p.ID != "" {
			a.targets.Store(p.ID, tg)
		}
	}
	return tg
}

// lookupName is the name of the object id names ("" when it cannot be
// read): a flag by its key, a segment or an experiment by its name.
func (a *Agent) lookupName(t *turn, field, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch field {
	case "flag_id":
		if f, err := a.deps.API.Flag(ctx, id); err == nil && f != nil {
			return f.Key
		}
		return ""
	case "segment_id":
		if s, err := a.deps.API.Segment(ctx, id); err == nil && s != nil {
			return s.Name
		}
		return ""
	}
	names, err := t.experimentNames(ctx)
	if err != nil {
		return ""
	}
	for _, n := range names {
		if n.ID == id {
			return n.Name
		}
	}
	return ""
}

// proposing fixes what a new confirmation keeps from the moment it is
// proposed: its expiry and its target's name.
func (a *Agent) proposing(t *turn, p *Pending) {
	a.fixExpiry(p)
	if p.Target == "" {
		tg := a.targetName(t, p)
		p.Target, p.TargetID = tg.Name, tg.ID
	}
}

// fixExpiry gives a newly proposed confirmation its expiry, from this
// machine's approval_ttl: fixed here, stored with the confirmation, and
// honoured by every machine whatever its own setting.
func (a *Agent) fixExpiry(p *Pending) {
	if p.ExpiresAt != nil || a.set.ApprovalTTL <= 0 {
		return
	}
	at := p.CreatedAt
	if at.IsZero() {
		at = a.now()
	}
	exp := at.Add(a.set.ApprovalTTL).UTC()
	p.ExpiresAt = &exp
}

// expired reports whether p may no longer be approved: past the expires_at
// fixed at its proposal; a confirmation stored before expires_at existed
// is measured against this machine's approval_ttl.
func (a *Agent) expired(p *Pending) bool {
	if p.ExpiresAt != nil {
		return a.now().After(*p.ExpiresAt)
	}
	return a.set.ApprovalTTL > 0 && !p.CreatedAt.IsZero() && a.now().Sub(p.CreatedAt) > a.set.ApprovalTTL
}

// writeFence is a session store that leases a session while a write may be
// in flight (the shared store: docs/teams.md, "Fencing").
type writeFence interface {
	// AnnounceWrite leases the session for a write that no save announced
	// (a repeat after reconciliation), checking the fencing token; it
	// returns the write's deadline.
	AnnounceWrite(sessionID string) (time.Time, error)
	WriteReturned(sessionID string, failed bool) error
}

// writeWindow bounds the write of effectID by its deadline: the one its
// save gave it (the shared store does, and leases the session until the
// write can no longer land), or, for a write no save of this process
// announced (a repeat after reconciliation), a new one from the store.
// returned tells the store the call is over. An error: the session was
// lost, and nothing may run.
func (a *Agent) writeWindow(ctx context.Context, t *turn, effectID string) (context.Context, func(error), error) {
	fence, ok := a.deps.Store.(writeFence)
	if !ok {
		return ctx, func(error) {}, nil
	}
	id := t.sess.cp.SessionID
	var deadline time.Time
	for _, e := range t.sess.cp.Effects {
		if e.EffectID == effectID && e.Deadline != nil {
			deadline = *e.Deadline
		}
	}
	// A deadline still ahead was given by this process's own save: another
	// process's has passed before this one could hold the session.
	if !deadline.After(time.Now()) {
		d, err := fence.AnnounceWrite(id)
		if err != nil {
			return ctx, nil, err
		}
		deadline = d
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	return wctx, func(err error) {
		cancel()
		_ = fence.WriteReturned(id, err != nil) // at worst the lease ends by itself
	}, nil
}

// expire replaces an expired pending confirmation with the same action
// planned against the server as it is now, under a new id, which no answer
// of this turn can approve: the person is asked again (exit 10).
func (a *Agent) expire(ctx context.Context, t *turn) error {
	old := t.pending
	cur, _, err := a.currentPending(ctx, t, old)
	if err != nil {
		return err
	}
	if cur == old {
		renewed := *old
		renewed.ID, renewed.CreatedAt, renewed.NeedsHuman = a.newID(), a.now(), true
		cur = &renewed
	}
	if cur.ExpiresAt == old.ExpiresAt {
		cur.ExpiresAt = nil // a new confirmation, a new expiry
	}
	a.proposing(t, cur)
	a.audit(t, audit.Expired, old, audit.Entry{Message: a.expiryMessage(old)})
	t.sess.await(cur)
	t.pending = cur
	t.mark(stateExpired)
	a.audit(t, audit.Proposed, cur, audit.Entry{Message: "replaces expired confirmation " + old.ID})
	return nil
}

// expiryMessage says why old expired.
func (a *Agent) expiryMessage(old *Pending) string {
	if old.ExpiresAt != nil {
		return "expired at " + old.ExpiresAt.UTC().Format(time.RFC3339) + " (fixed at its proposal)"
	}
	return "older than approval_ttl " + a.set.ApprovalTTL.String()
}

// auditExecuted records a write's outcome and what the server answered.
func (a *Agent) auditExecuted(t *turn, b *actions.Bound, result json.RawMessage, execErr error, ch *actions.Change) {
	if a.auditor == nil {
		return
	}
	p := t.approvedP
	if p == nil || p.Bound.Hash != b.Hash {
		p = t.pending
	}
	if p == nil || p.Bound.Hash != b.Hash {
		p = &Pending{Bound: b}
	}
	e := audit.Entry{Outcome: audit.OutcomeSuccess, Answer: audit.Summarize(result)}
	if execErr != nil {
		e.Outcome, e.Message = audit.OutcomeError, execErr.Error()
	}
	if ch != nil {
		e.ChangeID, e.TraceID = ch.ID, ch.TraceID
	}
	a.audit(t, audit.Executed, p, e)
}

// expiryNoted puts the expiry notice before the confirmation a turn shows
// in place of an expired one, in Go's words, whatever the model wrote.
func expiryNoted(t *turn, text string) string {
	if t.showing != nil && slices.Contains(t.notes, expiredNote) && !strings.Contains(text, expiredNote) {
		return expiredNote + "\n\n" + text
	}
	return text
}

// auditJobFinished records the end of the job a turn waited for. The
// confirmation it ran under (the job's key) becomes the turn's approved one
// when the turn has none (a resume of a suspended turn), so that the
// executed entry that follows names it too.
func (a *Agent) auditJobFinished(t *turn, b *actions.Bound, w *JobWait, st JobStatus) {
	p := &Pending{ID: w.Key, Bound: b}
	if t.approvedP == nil {
		t.approvedP = p
	}
	a.audit(t, audit.JobFinished, p, audit.Entry{JobID: st.ID, Outcome: string(st.State)})
}
