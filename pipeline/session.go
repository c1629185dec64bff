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

// Session is a loaded session: its checkpoint and decoded state. It is the
// only writer of the checkpoint's interrupt, status and next node, and of
// the state fields derived from them (needs_confirmation,
// confirmation_message, the pending action's draft): every change goes
// through one of its methods, so the facts cannot drift apart.
type Session struct {
	cp *checkpoint.Checkpoint
	st *State
	// imported is set for a checkpoint taken from a file (resume FILE): it
	// is data, not authority. Interrupted effects are only read back, never
	// repeated, and any confirmation is shown again before it can run.
	imported bool
}

// Pending is the confirmation of one action awaiting a human answer (or,
// approved, being executed): the bound params and the plan the person was
// shown, as one value. Its ID is the checkpoint's interrupt id; the keys
// that make a repeated execution safe derive from it.
type Pending struct {
	ID        string
	Bound     *actions.Bound
	Plan      *actions.Plan
	CreatedAt time.Time
	// NeedsHuman is false for an action the policy (or --yes) approved.
	NeedsHuman bool
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
	return len(h) > 0 && p.Plan.Message != "" && strings.Contains(h[len(h)-1].Assistant, p.Plan.Message)
}

// jobRef is the job the session waits on, as the checkpoint holds it.
func (s *Session) jobRef() *checkpoint.Interrupt {
	if ic := s.cp.Interrupt; ic != nil && ic.Kind == checkpoint.KindJob && ic.Job != nil {
		return ic
	}
	return nil
}

// await records p as the pending confirmation.
func (s *Session) await(p *Pending) {
	s.cp.Interrupt = &checkpoint.Interrupt{
		ID: p.ID, Kind: checkpoint.KindConfirmation, CreatedAt: p.CreatedAt,
		Confirmation: &checkpoint.Confirmation{Action: p.Bound.Name, Params: p.Bound.Params, ParamsHash: p.Bound.Hash,
			Message: p.Plan.Message, Destructive: p.Plan.Destructive,
			ExperimentID: p.Plan.ExperimentID, ExperimentVersion: p.Plan.ExperimentVersion},
	}
	st := s.st
	st.ActionNeeded = p.Bound.Name
	st.ActionParams = p.Bound.Map()
	st.MissingParams = []string{}
	st.NeedsConfirmation = p.NeedsHuman
	st.ConfirmationMessage = p.Plan.Message
}

// deny drops the pending confirmation. With keepDraft the action's draft
// stays for the gatherer to change (a denial that carries a correction);
// otherwise the next turn starts clean.
func (s *Session) deny(keepDraft bool) {
	s.cp.Interrupt = nil
	if keepDraft {
		s.st.NeedsConfirmation = false
		s.st.ConfirmationMessage = ""
		return
	}
	s.st.clearPending()
}

// done ends the pending action: it ran (or its outcome is settled).
func (s *Session) done() {
	s.cp.Interrupt = nil
	s.st.clearPending()
}

// suspend records that the turn waits on a job.
func (s *Session) suspend(w *JobWait, id string, now time.Time) error {
	h, err := json.Marshal(jobHandle{EffectID: w.EffectID, Params: w.Params, NextStep: w.NextStep, Key: w.Key, Handle: w.Ref.Handle})
	if err != nil {
		return err
	}
	s.cp.Interrupt = &checkpoint.Interrupt{ID: id, Kind: checkpoint.KindJob, CreatedAt: now,
		Job: &checkpoint.JobRef{ID: w.Ref.ID, Action: w.Action, Handle: h}}
	s.st.clearPending()
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
