package pipeline

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
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

// expiredNote is said with a confirmation that replaced an expired one.
const expiredNote = "The earlier confirmation expired (older than approval_ttl), so nothing ran. This is the action as it stands on the server now; please confirm again."

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
		e.Target = a.targetName(t, p)
	}
	a.auditor.Audit(e)
}

// targets remembers the target named for a confirmation, so that its
// executed entry names the experiment a delete has just removed.
var targets sync.Map // confirmation id -> name

// targetName names what p acts on: the name in its params, else the
// experiment it names by id, looked up by name.
func (a *Agent) targetName(t *turn, p *Pending) string {
	target := audit.TargetOf(p.Bound.Params)
	if !upgrade.IsUUID(target) {
		return target
	}
	if v, ok := targets.Load(p.ID); ok && p.ID != "" {
		return v.(string)
	}
	if name := a.lookupName(t, target); name != target {
		targets.Store(p.ID, name)
		return name
	}
	return target
}

func (a *Agent) lookupName(t *turn, target string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	names, err := t.experimentNames(ctx)
	if err != nil {
		return target
	}
	for _, n := range names {
		if n.ID == target {
			return n.Name
		}
	}
	return target
}

// expired reports whether p may no longer be approved (approval_ttl).
func (a *Agent) expired(p *Pending) bool {
	return a.set.ApprovalTTL > 0 && !p.CreatedAt.IsZero() && a.now().Sub(p.CreatedAt) > a.set.ApprovalTTL
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
	a.audit(t, audit.Expired, old, audit.Entry{Message: "older than approval_ttl " + a.set.ApprovalTTL.String()})
	t.sess.await(cur)
	t.pending = cur
	t.reaskOnly = true
	t.notes = append(t.notes, expiredNote)
	a.audit(t, audit.Proposed, cur, audit.Entry{Message: "replaces expired confirmation " + old.ID})
	return nil
}

// auditExecuted records a write's outcome and what the server answered.
func (a *Agent) auditExecuted(t *turn, b *actions.Bound, result json.RawMessage, execErr error) {
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
