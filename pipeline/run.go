package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

func (a *Agent) newTurn(sess *Session) *turn {
	return &turn{a: a, sess: sess, st: sess.State}
}

func planFromInterrupt(ic *checkpoint.Interrupt) *actions.Plan {
	if ic == nil || ic.Kind != checkpoint.KindConfirmation || ic.Confirmation == nil {
		return nil
	}
	c := ic.Confirmation
	return &actions.Plan{Action: actions.Name(c.Action), Params: c.Params, Message: c.Message, Destructive: c.Destructive,
		ExperimentID: c.ExperimentID, ExperimentVersion: c.ExperimentVersion}
}

// Ask runs one turn for a message. When a confirmation is pending the
// message is the human's answer.
func (a *Agent) Ask(ctx context.Context, sess *Session, message string) (*Result, error) {
	if ic := sess.CP.Interrupt; ic != nil && ic.Kind == checkpoint.KindJob && ic.Job != nil {
		return nil, fmt.Errorf("%w (job %s): run `upgrade-agent resume %s` to check on it: %w",
			ErrJobPending, ic.Job.ID, sess.CP.SessionID, ErrBadInput)
	}
	t := a.newTurn(sess)
	sess.CP.Counters.Turns++
	t.pendingAtStart = planFromInterrupt(sess.CP.Interrupt)
	rc := a.prepare(t, message)
	t.input, t.messages, t.extra = rc.Message, rc.Messages, rc.Extra
	t.st.resetTurn(t.input)
	t.st.RetryInput = ""
	if err := a.reconcile(ctx, t); err != nil {
		return a.fail(t, message, err)
	}
	if t.suspended {
		// Crash recovery found the action's job still running.
		t.trace = append(t.trace, NodeExecutor)
		return a.finish(t, ReplyWith(t.st.FinalResponse))
	}
	rep, err := a.generateReply(ctx, rc)
	if err != nil {
		return a.fail(t, message, err)
	}
	return a.finish(t, rep)
}

// RetryInput returns the message of a turn that failed and can be run
// again, or "".
func (s *Session) RetryInput() string { return s.State.RetryInput }

// fail keeps the checkpoint valid after a runtime failure: the message is
// kept so that `resume` can run the turn again.
func (a *Agent) fail(t *turn, message string, err error) (*Result, error) {
	t.st.RetryInput = message
	t.recordError(err)
	t.sess.CP.Usage = t.sess.CP.Usage.Add(a.usageOf(t))
	status := checkpoint.StatusIdle
	if t.sess.CP.Interrupt != nil {
		if t.sess.CP.Interrupt.Kind == checkpoint.KindJob {
			status = checkpoint.StatusWaitingJob
		} else {
			status = checkpoint.StatusAwaitingConfirmation
		}
	}
	if serr := a.save(t, status, ""); serr != nil {
		err = errors.Join(err, serr)
	}
	res := a.result(t, StatusFailed)
	return res, err
}

func (a *Agent) usageOf(t *turn) checkpoint.Usage {
	return checkpoint.Usage{LLMCalls: t.llmCalls, PromptTokens: t.usage.PromptTokens,
		CompletionTokens: t.usage.CompletionTokens, CachedTokens: t.usage.CachedTokens}
}

// finish records the reply, updates the counters and saves the checkpoint.
func (a *Agent) finish(t *turn, rep Reply) (*Result, error) {
	st := t.st
	cp := t.sess.CP
	if rep.Kind == KindStop {
		t.terminated = rep.Reason
	}
	text := rep.Text
	st.FinalResponse = text
	a.respond(t, text)
	st.addExchange(t.input, text, a.now())
	if t.terminateSession {
		st.clearPending()
		cp.Interrupt = nil
		t.pausing = false
		st.ConversationComplete = true
	}
	if t.humanDecided || t.resetAutoReplies {
		cp.Counters.ConsecutiveAutoReplies = 0
	} else {
		cp.Counters.ConsecutiveAutoReplies++
	}
	cp.Usage = cp.Usage.Add(a.usageOf(t))

	status, cpStatus := StatusCompleted, checkpoint.StatusIdle
	switch {
	case t.suspended:
		status, cpStatus = StatusWaitingJob, checkpoint.StatusWaitingJob
	case t.pausing && cp.Interrupt != nil:
		status, cpStatus = StatusAwaitingConfirmation, checkpoint.StatusAwaitingConfirmation
	case t.terminated != "":
		status = StatusTerminated
		if t.terminateSession {
			cpStatus = checkpoint.StatusTerminated
		}
	case t.authFailed, t.unreachable:
		status = StatusFailed
	}
	st.CurrentState = StateAnalyzing
	if err := a.save(t, cpStatus, ""); err != nil {
		return nil, err
	}
	return a.result(t, status), nil
}

func (a *Agent) result(t *turn, status string) *Result {
	cp := t.sess.CP
	res := &Result{
		SessionID: cp.SessionID, Turn: cp.Counters.Turns, Status: status, Response: t.st.FinalResponse,
		Actions: t.actionsRun, Trace: t.trace, TerminationReason: t.terminated, Output: t.output,
		Usage: UsageOut{LLMCalls: t.llmCalls, PromptTokens: t.usage.PromptTokens, CompletionTokens: t.usage.CompletionTokens, CachedTokens: t.usage.CachedTokens},
	}
	if res.Trace == nil {
		res.Trace = []string{}
	}
	if len(t.st.Errors) > 0 {
		res.Errors = append([]ErrorEntry(nil), t.st.Errors...)
	}
	if status == StatusAwaitingConfirmation && cp.Interrupt != nil && cp.Interrupt.Confirmation != nil {
		c := cp.Interrupt.Confirmation
		res.Confirmation = &ConfirmationOut{ID: cp.Interrupt.ID, Action: c.Action, Params: c.Params, Message: c.Message, Destructive: c.Destructive}
	}
	if t.jobStatus != nil {
		js := t.jobStatus
		res.Job = &JobOut{ID: js.ID, Action: js.Action, State: js.State}
		if js.Total > 0 {
			res.Job.Progress = &Progress{Done: js.Done, Total: js.Total}
		}
	}
	if t.terminated != "" && status != StatusTerminated && res.TerminationReason == "" {
		res.TerminationReason = t.terminated
	}
	if res.TerminationReason == "" {
		switch status {
		case StatusCompleted:
			res.TerminationReason = "turn completed"
		case StatusAwaitingConfirmation:
			res.TerminationReason = "awaiting confirmation"
		case StatusWaitingJob:
			res.TerminationReason = "waiting on a job"
		case StatusFailed:
			res.TerminationReason = "failed"
		}
	}
	return res
}

// ---- jobs ----

type jobHandle struct {
	EffectID string               `json:"effect_id"`
	Params   json.RawMessage      `json:"params"`
	NextStep string               `json:"next_step,omitempty"`
	MCP      *mcpclient.JobHandle `json:"mcp,omitempty"` // a job behind an MCP tool
}

// startJob runs a long action. Without a job runner it runs inline; with
// one it waits up to WaitJobs and suspends the turn if the job goes on.
func (a *Agent) startJob(ctx context.Context, t *turn, effectID string, plan *actions.Plan, p actions.Params) (bool, error) {
	if a.Jobs == nil {
		// Without a job runner (library use, tests) the action runs in the turn.
		result, err := actions.Execute(ctx, t.api(), p)
		a.recordExecution(t, effectID, plan, result, err)
		return true, nil
	}
	if err := a.Jobs.Start(ctx, effectID, t.sess.CP.SessionID, string(plan.Action), plan.Params); err != nil {
		a.recordExecution(t, effectID, plan, nil, err)
		return true, nil
	}
	status, err := a.Jobs.Wait(ctx, effectID, a.WaitJobs)
	if err != nil {
		return false, err
	}
	if status.Terminal() {
		a.recordJob(t, effectID, plan, status)
		return true, nil
	}
	h, _ := json.Marshal(jobHandle{EffectID: effectID, Params: plan.Params, NextStep: t.st.NextStep})
	t.sess.CP.Interrupt = &checkpoint.Interrupt{ID: a.newID(), Kind: checkpoint.KindJob, CreatedAt: a.now(),
		Job: &checkpoint.JobRef{ID: effectID, Action: string(plan.Action), Handle: h}}
	t.st.clearPending()
	t.suspended = true
	t.jobStatus = &status
	t.st.FinalResponse = suspendText(t.sess.CP.SessionID, status)
	return false, nil
}

func suspendText(session string, s JobStatus) string {
	return fmt.Sprintf("Started %s as job %s (%d of %d done so far). It keeps running in the background; run `upgrade-agent resume %s` to check on it, or add --wait to wait for the result.",
		s.Action, s.ID, s.Done, s.Total, session)
}

// jobError carries a job's own failure message and type.
type jobError struct{ typ, msg string }

func (e *jobError) Error() string { return e.msg }

func (a *Agent) recordJob(t *turn, effectID string, plan *actions.Plan, s JobStatus) {
	if s.State == "succeeded" {
		a.recordExecution(t, effectID, plan, s.Result, nil)
		return
	}
	typ := s.ErrorType
	if typ == "" {
		typ = ErrTypeAPI
		if s.State == "cancelled" {
			typ = ErrTypeUnknown
		}
	}
	msg := s.Error
	if msg == "" {
		msg = "job " + s.State
	}
	a.recordExecution(t, effectID, plan, nil, &jobError{typ: typ, msg: fmt.Sprintf("job %s %s: %s", s.ID, s.State, msg)})
	if len(t.actionsRun) > 0 && s.State == "cancelled" {
		t.actionsRun[len(t.actionsRun)-1].Status = "cancelled"
	}
}

// ResumeJob continues a turn suspended on a job: it checks the job (waiting
// up to wait), and when the job has ended records the result and lets the
// responder report it.
func (a *Agent) ResumeJob(ctx context.Context, sess *Session, wait time.Duration) (*Result, error) {
	ic := sess.CP.Interrupt
	if ic == nil || ic.Kind != checkpoint.KindJob || ic.Job == nil {
		return nil, ErrNothingToResume
	}
	var h jobHandle
	_ = json.Unmarshal(ic.Job.Handle, &h)
	t := a.newTurn(sess)
	rc := a.prepare(t, sess.State.UserInput)
	t.input, t.messages = sess.State.UserInput, rc.Messages
	t.st.Errors = []ErrorEntry{}
	if h.MCP != nil {
		done, err := a.resumeMCPJob(ctx, t, ic, h, wait)
		if err != nil {
			return nil, err
		}
		if !done {
			return a.stillRunning(t), nil
		}
		t.trace = append(t.trace, NodeExecutor)
	} else {
		if a.Jobs == nil {
			return nil, errors.New("no job runner configured")
		}
		status, err := a.Jobs.Wait(ctx, ic.Job.ID, wait)
		if err != nil {
			return nil, err
		}
		t.jobStatus = &status
		if !status.Terminal() {
			return a.stillRunning(t), nil
		}
		plan := &actions.Plan{Action: actions.Name(ic.Job.Action), Params: h.Params}
		t.trace = append(t.trace, NodeExecutor)
		a.recordJob(t, ic.Job.ID, plan, status)
	}
	status := *t.jobStatus
	sess.CP.Interrupt = nil
	failed := t.actionsRun[len(t.actionsRun)-1].Status != "success"
	next := routeAfterExecutor(false, "", false)
	if h.NextStep != "" && !failed {
		t.continuation = true
		t.nextStep = h.NextStep
		next = NodeAnalyzer
	}
	if err := a.save(t, checkpoint.StatusRunning, next); err != nil {
		return nil, err
	}
	rep, err := a.runGraph(ctx, t, next)
	if err != nil {
		return a.fail(t, sess.State.UserInput, err)
	}
	// The exchange of the original message was recorded when the turn
	// suspended; this reply completes it.
	t.input = "(job " + status.ID + " finished)"
	return a.finish(t, rep)
}

func (a *Agent) stillRunning(t *turn) *Result {
	s := t.jobStatus
	t.suspended = true
	t.st.FinalResponse = fmt.Sprintf("Job %s is still %s: %d of %d done.", s.ID, s.State, s.Done, s.Total)
	a.respond(t, t.st.FinalResponse)
	return a.result(t, StatusWaitingJob)
}

// ---- crash recovery ----

// reconcile settles effects that were started but never finished (the
// process died during the call): it asks the server what happened instead of
// repeating the write blindly.
func (a *Agent) reconcile(ctx context.Context, t *turn) error {
	cp := t.sess.CP
	for _, e := range cp.PendingEffects() {
		if ic := cp.Interrupt; ic != nil && ic.Kind == checkpoint.KindJob && ic.Job != nil && ic.Job.ID == e.EffectID {
			continue // the job path settles it
		}
		var plan *actions.Plan
		if ic := cp.Interrupt; ic != nil && ic.Confirmation != nil && ic.Confirmation.ParamsHash == e.ParamsHash {
			plan = planFromInterrupt(ic)
		}
		note := map[string]any{"action": e.Action, "effect_id": e.EffectID}
		if plan == nil {
			_ = cp.FinishEffect(e.EffectID, nil, "outcome unknown: the process stopped during the call and its params are gone", a.now())
			note["outcome"] = "unknown"
			t.reconciled = append(t.reconciled, note)
			continue
		}
		if tl, isMCP := a.mcpAction(e.Action); isMCP {
			if a.MCP.Capabilities()[tl.Server].JobVersion > 0 {
				// A job-aware server recognises a repeated START by its
				// idempotency key (derived from the same effect id): calling
				// again re-attaches to the job instead of starting a second.
				if err := a.reattachMCP(ctx, t, e.EffectID, plan); err != nil {
					return err
				}
				note["outcome"] = "reattached"
			} else {
				// A plain server cannot tell: ask the person again.
				_ = cp.FinishEffect(e.EffectID, nil, "outcome unknown: interrupted during the call to the MCP server", a.now())
				t.forceReask = true
				note["outcome"] = "unknown"
			}
			t.reconciled = append(t.reconciled, note)
			continue
		}
		p, err := actions.Parse(string(plan.Action), plan.Params)
		if err != nil {
			_ = cp.FinishEffect(e.EffectID, nil, "outcome unknown: "+err.Error(), a.now())
			note["outcome"] = "unknown"
			t.reconciled = append(t.reconciled, note)
			continue
		}
		rec, err := actions.Reconcile(ctx, t.api(), p, e.StartedAt)
		if err != nil {
			return fmt.Errorf("checking the outcome of an interrupted %s: %w", e.Action, err)
		}
		note["outcome"] = rec.Outcome
		if rec.Note != "" {
			note["note"] = rec.Note
		}
		switch rec.Outcome {
		case "done":
			_ = cp.FinishEffect(e.EffectID, rec.Result, "", a.now())
			t.st.addLog(LogEntry{Timestamp: a.now().Format(time.RFC3339), Action: e.Action, Params: plan.Params,
				Status: "success", Result: rec.Result})
			t.st.clearPending()
			cp.Interrupt = nil
			t.pendingAtStart = nil
			if spec, ok := actions.Lookup(e.Action); ok && spec.WritesExperiments {
				t.st.invalidateExperiments()
			}
		case "not_done":
			// Safe to run again when the person confirms.
			_ = cp.FinishEffect(e.EffectID, nil, "not executed: the process stopped before the call completed", a.now())
		default:
			_ = cp.FinishEffect(e.EffectID, nil, "outcome unknown after an interruption", a.now())
			t.forceReask = true
		}
		t.reconciled = append(t.reconciled, note)
	}
	return nil
}
