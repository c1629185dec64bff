package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// Session is a loaded session: its checkpoint and decoded state, and the
// typed values a turn works on: the draft action and the pending
// confirmation. It is the only writer of the checkpoint's interrupt,
// status and next node, and of the state fields derived from the draft and
// the pending confirmation (action_needed, action_params, missing_params,
// needs_confirmation, confirmation_message): every change goes through one
// of its methods, and sync writes the derived fields from the typed
// values, so the facts cannot drift apart. Its fields are unexported: no
// other package can change a session but through a turn.
type Session struct {
	cp *checkpoint.Checkpoint
	st *State
	// imported is set for a checkpoint taken from a file (resume FILE): it
	// is data, not authority. Interrupted effects are only read back, never
	// repeated, and any confirmation is shown again before it can run.
	imported bool

	// bound is set once bind has read the draft and the pending
	// confirmation as typed values; before, the checkpoint's own fields
	// stand.
	bound   bool
	draft   draft
	pending *Pending
}

// draft is the action the gatherer prepares: its name, and once its
// params bind, the bound value (typed params, canonical JSON and hash),
// bound once per change. It has no other form of its params.
type draft struct {
	name  string
	bound *actions.Bound
	// unbound is what the checkpoint held when it does not bind (nil once
	// the params bind).
	unbound json.RawMessage
	missing []string
}

// params is the draft's params as JSON (canonical once bound; nil: none).
func (d draft) params() json.RawMessage {
	if d.bound != nil {
		return d.bound.Params
	}
	return d.unbound
}

// Pending is the confirmation of one action awaiting a human answer (or,
// approved, being executed), as one value: the bound action and params,
// and what the person was shown, rendered from them. Its ID is the
// checkpoint's interrupt id; the keys that make a repeated execution safe
// derive from it.
type Pending struct {
	ID    string
	Bound *actions.Bound
	// Message is the confirmation text shown; Destructive, ExperimentID
	// and ExperimentVersion what it was based on; Warnings and Facts what
	// helps the decision (actions.Plan, without the action and params
	// Bound holds).
	Message                         string
	Destructive                     bool
	ExperimentID, ExperimentVersion string
	Warnings, Facts                 []string
	CreatedAt                       time.Time
	// ExpiresAt is fixed at proposal (fixExpiry); nil never expires.
	ExpiresAt *time.Time
	// Target and TargetID name what the action acts on, as it was when
	// proposed (audit.go).
	Target, TargetID string
	// NeedsHuman is false for an action the policy (or --yes) approved.
	NeedsHuman bool
}

// newPending is the pending confirmation of b as plan shows it.
func newPending(id string, b *actions.Bound, plan *actions.Plan, at time.Time, needsHuman bool) *Pending {
	return &Pending{ID: id, Bound: b, Message: plan.Message, Destructive: plan.Destructive,
		ExperimentID: plan.ExperimentID, ExperimentVersion: plan.ExperimentVersion,
		Warnings: plan.Warnings, Facts: plan.Facts, CreatedAt: at, NeedsHuman: needsHuman}
}

// shows reports whether plan, rendered now for p's action and params,
// shows the person what p showed: the same text on the same experiment
// version.
func (p *Pending) shows(plan *actions.Plan) bool {
	return plan != nil && plan.Message == p.Message && plan.Destructive == p.Destructive && plan.ExperimentVersion == p.ExperimentVersion
}

// JobWait is a turn suspended on a job: the job and what the turn needs to
// finish once it ends.
type JobWait struct {
	Action   string
	Params   json.RawMessage // canonical params
	Ref      actions.JobRef
	EffectID string
	Key      string
	NextStep string
}

// jobHandle is JobWait as stored in interrupt.job.handle.
type jobHandle struct {
	EffectID string          `json:"effect_id"`
	Params   json.RawMessage `json:"params"`
	NextStep string          `json:"next_step,omitempty"`
	Key      string          `json:"key,omitempty"`
	Handle   json.RawMessage `json:"job,omitempty"`
	// MCP is the handle's field in checkpoints written before the action
	// interface (read only).
	MCP json.RawMessage `json:"mcp,omitempty"`
}

// ErrNothingToResume: the session is neither paused, suspended, stopped
// in the middle of a turn, nor holding a failed turn to retry.
var ErrNothingToResume = errors.New("nothing to resume")

// ErrJobPending: a new message arrived while the session waits on a job.
var ErrJobPending = errors.New("the session is waiting on a job")

// ErrAnswerRequired: resume of a session awaiting a confirmation without
// an answer.
var ErrAnswerRequired = errors.New("awaits a confirmation")

// ErrBadInput marks errors caused by the caller's input or files (exit 2).
var ErrBadInput = errors.New("bad input")

// inputError is bad input: its message, and errors.Is ErrBadInput.
type inputError struct{ err error }

func (e *inputError) Error() string   { return e.err.Error() }
func (e *inputError) Unwrap() []error { return []error{e.err, ErrBadInput} }

// badInput formats an error that is bad input.
func badInput(format string, args ...any) error {
	return &inputError{err: fmt.Errorf(format, args...)}
}

// NewSession starts an empty session.
func NewSession(id string, now time.Time) *Session {
	return &Session{
		cp: &checkpoint.Checkpoint{
			FormatVersion: checkpoint.FormatVersion, SessionID: id, CreatedAt: now.UTC(), UpdatedAt: now.UTC(),
			Status: checkpoint.StatusIdle, Effects: []checkpoint.Effect{},
		},
		st: NewState(),
	}
}

// LoadSession reads a session from the store.
func LoadSession(store checkpoint.Store, id string) (*Session, error) {
	cp, err := store.Load(id)
	if err != nil {
		return nil, err
	}
	st, err := DecodeState(cp)
	if err != nil {
		return nil, err
	}
	return &Session{cp: cp, st: st}, nil
}

// LoadImportedSession reads a session whose checkpoint was taken from a
// file (resume FILE): it is data, not authority. Interrupted effects are
// only read back, never repeated, and any confirmation is shown again
// before it can run.
func LoadImportedSession(store checkpoint.Store, id string) (*Session, error) {
	s, err := LoadSession(store, id)
	if err != nil {
		return nil, err
	}
	s.imported = true
	return s, nil
}

// DecodeState decodes the pipeline's state a checkpoint holds (for
// readers such as `sessions show`; a turn loads a Session).
func DecodeState(cp *checkpoint.Checkpoint) (*State, error) {
	st := NewState()
	if len(cp.State) > 0 && string(cp.State) != "null" {
		dec := json.NewDecoder(bytes.NewReader(cp.State))
		if err := dec.Decode(st); err != nil {
			return nil, fmt.Errorf("session %s: state: %w", cp.SessionID, errors.Join(checkpoint.ErrCorrupt, err))
		}
	}
	st.normalize()
	return st, nil
}

// ID is the session's id.
func (s *Session) ID() string { return s.cp.SessionID }

// Interrupt is a copy of what stopped the session's last turn (nil:
// nothing): a confirmation to answer or a job to wait on.
func (s *Session) Interrupt() *checkpoint.Interrupt {
	ic := s.cp.Interrupt
	if ic == nil {
		return nil
	}
	c := *ic
	if ic.Confirmation != nil {
		cf := *ic.Confirmation
		cf.Params = bytes.Clone(cf.Params)
		c.Confirmation = &cf
	}
	if ic.Job != nil {
		j := *ic.Job
		j.Handle = bytes.Clone(j.Handle)
		c.Job = &j
	}
	return &c
}

// MCPCapabilities are the MCP capabilities negotiated in earlier runs of
// the session (JSON, as stored; nil: none).
func (s *Session) MCPCapabilities() json.RawMessage { return bytes.Clone(s.cp.MCP) }

// History is a copy of the session's recent exchanges.
func (s *Session) History() []Exchange { return slices.Clone(s.st.ConversationHistory) }

// RetryInput returns the message of a turn that failed and can be run
// again, or "". It was stored after the hooks (redacted).
func (s *Session) RetryInput() string { return s.st.RetryInput }

// Status is the session's status between runs.
func (s *Session) Status() checkpoint.Status { return s.cp.Status }

// PendingConfirmation is the id of the confirmation the session awaits an
// answer to ("" when none): a Decision addresses it.
func (s *Session) PendingConfirmation() string {
	if ic := s.confirmationRef(); ic != nil {
		return ic.ID
	}
	return ""
}

// confirmationRef is the pending confirmation as the checkpoint holds it.
func (s *Session) confirmationRef() *checkpoint.Interrupt {
	if ic := s.cp.Interrupt; ic != nil && ic.Kind == checkpoint.KindConfirmation && ic.Confirmation != nil {
		return ic
	}
	return nil
}

// shown reports whether the person has read p: the reply of the latest
// finished turn holds its text verbatim (a turn that pauses for a
// confirmation always shows it). A confirmation made by a turn that
// stopped before its reply (a crash, a failure) has not been read.
func (s *Session) shown(p *Pending) bool {
	h := s.st.ConversationHistory
	return len(h) > 0 && p.Message != "" && strings.Contains(h[len(h)-1].Assistant, p.Message)
}

// bind reads the checkpoint's pending confirmation and the state's draft
// as typed values, once per process, with the actions the agent knows
// (built-in and MCP). The checkpoint is data: the confirmation's params
// are bound again (their hash must be the stored params_hash), its
// destructive flag comes from the action's declaration, and its text is
// only what the person was shown (the turn renders it anew before
// anything runs or is shown again).
func (s *Session) bind(lookup func(name string) (actions.Action, bool)) error {
	if s.bound {
		return nil
	}
	id := s.cp.SessionID
	if ic := s.confirmationRef(); ic != nil {
		c := ic.Confirmation
		act, ok := lookup(c.Action)
		if !ok {
			return badInput("session %s awaits a confirmation of %q, which is no action here (an MCP server that is not configured?)", id, c.Action)
		}
		b, err := actions.Restore(act, c.Params)
		if err != nil {
			return badInput("session %s: interrupt.confirmation.params: %v", id, err)
		}
		if b.Hash != c.ParamsHash {
			return badInput("session %s: interrupt.confirmation.params_hash does not match its params: the checkpoint was altered", id)
		}
		s.pending = &Pending{ID: ic.ID, Bound: b, Message: c.Message, Destructive: b.Spec().Destructive,
			ExperimentID: c.ExperimentID, ExperimentVersion: c.ExperimentVersion, CreatedAt: ic.CreatedAt, ExpiresAt: ic.ExpiresAt, Target: c.Target, TargetID: c.TargetID, NeedsHuman: true}
	}
	st := s.st
	s.draft = draft{name: st.ActionNeeded, unbound: st.ActionParams, missing: st.MissingParams}
	if act, ok := lookup(st.ActionNeeded); ok && len(st.ActionParams) > 0 {
		if b, err := actions.Restore(act, st.ActionParams); err == nil {
			s.draft.bound, s.draft.unbound = b, nil
		}
	}
	s.bound = true
	return nil
}

// chooseAction makes name the draft's action; another action than the
// draft's starts with no params.
func (s *Session) chooseAction(name string) {
	if s.draft.name != name {
		s.draft = draft{name: name}
	}
}

// setDraftParams records the draft's params, bound and validated.
func (s *Session) setDraftParams(b *actions.Bound) {
	s.draft.bound, s.draft.unbound = b, nil
}

// setMissing records the params only the person can give.
func (s *Session) setMissing(missing []string) { s.draft.missing = missing }

// await records p as the pending confirmation; its action is the draft.
func (s *Session) await(p *Pending) {
	s.pending = p
	s.draft = draft{name: p.Bound.Name, bound: p.Bound}
	s.sync()
}

// deny drops the pending confirmation. With keepDraft the action's draft
// stays for the gatherer to change (a denial that carries a correction);
// otherwise the next turn starts clean.
func (s *Session) deny(keepDraft bool) {
	s.pending = nil
	if !keepDraft {
		s.clearDraft()
	}
	s.sync()
}

// done ends the pending action: it ran (or its outcome is settled).
func (s *Session) done() {
	s.pending = nil
	s.clearDraft()
	s.sync()
}

// clearDraft drops the draft and what the request still needed after it.
func (s *Session) clearDraft() {
	s.draft = draft{}
	s.st.NextStep = ""
	s.st.ActionReasoning = ""
}

// sync writes the checkpoint's confirmation interrupt and the state's
// derived fields from the draft and the pending confirmation: the one
// place they are written.
func (s *Session) sync() {
	if !s.bound {
		return
	}
	st, d := s.st, s.draft
	st.ActionNeeded, st.ActionParams = d.name, d.params()
	st.MissingParams = d.missing
	if st.MissingParams == nil {
		st.MissingParams = []string{}
	}
	st.NeedsConfirmation, st.ConfirmationMessage = false, ""
	p := s.pending
	if p == nil {
		if s.confirmationRef() != nil {
			s.cp.Interrupt = nil
		}
		return
	}
	st.NeedsConfirmation, st.ConfirmationMessage = p.NeedsHuman, p.Message
	s.cp.Interrupt = &checkpoint.Interrupt{
		ID: p.ID, Kind: checkpoint.KindConfirmation, CreatedAt: p.CreatedAt, ExpiresAt: p.ExpiresAt,
		Confirmation: &checkpoint.Confirmation{Action: p.Bound.Name, Params: p.Bound.Params, ParamsHash: p.Bound.Hash,
			Message: p.Message, Destructive: p.Destructive,
			ExperimentID: p.ExperimentID, ExperimentVersion: p.ExperimentVersion, Target: p.Target, TargetID: p.TargetID},
	}
}

// jobRef is the job the session waits on, as the checkpoint holds it.
func (s *Session) jobRef() *checkpoint.Interrupt {
	if ic := s.cp.Interrupt; ic != nil && ic.Kind == checkpoint.KindJob && ic.Job != nil {
		return ic
	}
	return nil
}

// suspend records that the turn waits on a job.
func (s *Session) suspend(w *JobWait, id string, now time.Time) error {
	h, err := json.Marshal(jobHandle{EffectID: w.EffectID, Params: w.Params, NextStep: w.NextStep, Key: w.Key, Handle: w.Ref.Handle})
	if err != nil {
		return err
	}
	s.pending = nil
	s.clearDraft()
	s.sync()
	s.cp.Interrupt = &checkpoint.Interrupt{ID: id, Kind: checkpoint.KindJob, CreatedAt: now,
		Job: &checkpoint.JobRef{ID: w.Ref.ID, Action: w.Action, Handle: h}}
	return nil
}

// jobWait decodes the job the session waits on.
func (s *Session) jobWait() (*JobWait, error) {
	ic := s.jobRef()
	if ic == nil {
		return nil, nil
	}
	var h jobHandle
	if len(ic.Job.Handle) > 0 {
		if err := json.Unmarshal(ic.Job.Handle, &h); err != nil {
			return nil, badInput("session %s: interrupt.job.handle: %v", s.cp.SessionID, err)
		}
	}
	ref := actions.JobRef{ID: ic.Job.ID, Handle: h.Handle}
	if len(ref.Handle) == 0 && len(h.MCP) > 0 {
		ref.Handle = h.MCP
	}
	effectID := h.EffectID
	if effectID == "" {
		effectID = ic.Job.ID
	}
	return &JobWait{Action: ic.Job.Action, Params: h.Params, Ref: ref, EffectID: effectID, Key: h.Key, NextStep: h.NextStep}, nil
}

// resumed clears the job interrupt once the job's result is recorded.
func (s *Session) resumed() { s.cp.Interrupt = nil }

// startEffect appends a started effect; the caller saves before the call.
func (s *Session) startEffect(id string, b *actions.Bound, now time.Time) error {
	return s.cp.StartEffect(id, b.Name, b.Hash, now)
}

// finishEffect records an effect's outcome. An effect that is not (or no
// longer) started is left alone: recording twice must not fail a turn.
func (s *Session) finishEffect(id string, result json.RawMessage, errMsg string, now time.Time) {
	if e := s.cp.Effect(id); e != nil && e.State == checkpoint.EffectStarted {
		_ = s.cp.FinishEffect(id, result, errMsg, now)
	}
}

// statusAtRest is the status a finished turn leaves: from the interrupt,
// the one source of truth.
func (s *Session) statusAtRest(terminated bool) checkpoint.Status {
	switch {
	case terminated:
		return checkpoint.StatusTerminated
	case s.jobRef() != nil:
		return checkpoint.StatusWaitingJob
	case s.confirmationRef() != nil:
		return checkpoint.StatusAwaitingConfirmation
	}
	return checkpoint.StatusIdle
}

// save writes the checkpoint with a status and the node to continue from.
// It is the only writer of status and next_node.
func (s *Session) save(store checkpoint.Store, status checkpoint.Status, next string, caps json.RawMessage) error {
	if store == nil {
		return nil
	}
	s.sync()
	raw, err := json.Marshal(s.st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	cp := s.cp
	cp.State = raw
	cp.Status = status
	cp.NextNode = next
	if status != checkpoint.StatusRunning {
		cp.NextNode = ""
	}
	last := s.st.UserInput
	cp.Summary = &checkpoint.SessionSummary{LastMessage: truncate(last, 80), Turns: cp.Counters.Turns}
	if len(caps) > 0 {
		cp.MCP = caps
	}
	if err := store.Save(cp); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
