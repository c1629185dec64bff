package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// executor runs the one action this turn approved, exactly as it was shown.
func (a *Agent) executor(ctx context.Context, t *turn) (string, error) {
	p := t.approved()
	if p == nil {
		// Only a confirmation the confirmation node built and a human (or
		// the policy with --yes) approved ever runs.
		t.st.addError(ErrTypeUnknown, "nothing approved to execute")
		return NodeResponder, nil
	}
	if p == t.pending {
		// Approved in this turn, shown in an earlier one: the text the
		// person approved must still be what this program renders now.
		cur, stale, err := a.currentPending(ctx, t, p)
		if err != nil {
			t.recordError(err)
			t.showing = p
			return NodeResponder, nil
		}
		if stale {
			t.answer = answerReasked
			return nodeEnd, &awaitConfirmation{p: cur, note: staleNote}
		}
	}
	effectID := a.newID()
	if err := t.sess.startEffect(effectID, p.Bound, a.now()); err != nil {
		return nodeEnd, err
	}
	if err := t.sess.save(a.deps.Store, checkpoint.StatusRunning, NodeExecutor, a.mcpCaps()); err != nil {
		return nodeEnd, err
	}
	return a.execute(ctx, t, p, effectID)
}

// execute runs p under an effect that is already started and saved. Its
// key, derived from the confirmation, makes a repeat after a crash land on
// the same experiment or job.
func (a *Agent) execute(ctx context.Context, t *turn, p *Pending, effectID string) (string, error) {
	b := p.Bound
	nextStep := t.st.NextStep
	wctx, returned, err := a.writeWindow(ctx, t, effectID)
	if err != nil {
		return nodeEnd, err // the session was lost: nothing runs
	}
	out, err := b.Execute(wctx, a.env(t.api(), t.sess.cp.SessionID), p.ID)
	returned(err)
	if err == nil && out.Job != nil {
		if p == t.approvedP {
			a.audit(t, audit.JobStarted, p, audit.Entry{JobID: out.Job.ID})
		}
		return a.waitJob(ctx, t, b, &JobWait{Action: b.Name, Params: b.Params, Ref: *out.Job, EffectID: effectID, Key: p.ID, NextStep: nextStep})
	}
	a.record(t, b, effectID, out.Result, err)
	t.sess.done()
	return a.afterExecution(t, nextStep, err != nil), nil
}

// afterExecution routes on after an execution; a next step makes the
// analyzer continue the original request.
func (a *Agent) afterExecution(t *turn, nextStep string, failed bool) string {
	next := routeAfterExecution(nextStep, failed)
	if next == NodeAnalyzer {
		t.continuation = true
		t.nextStep = nextStep
	}
	return next
}

// waitJob waits up to --wait-jobs for a job the action started; a job that
// goes on suspends the turn.
func (a *Agent) waitJob(ctx context.Context, t *turn, b *actions.Bound, w *JobWait) (string, error) {
	ja, ok := b.Action().(actions.JobAction)
	if !ok {
		err := fmt.Errorf("%s answered with job %s, but it cannot be polled", b.Name, w.Ref.ID)
		a.record(t, b, w.EffectID, nil, err)
		t.sess.done()
		return NodeResponder, nil
	}
	env := a.env(t.api(), t.sess.cp.SessionID)
	st, err := ja.Poll(ctx, env, w.Ref, a.set.WaitJobs)
	if err != nil {
		// The effect stays started: resume re-attaches to the job.
		return nodeEnd, fmt.Errorf("checking job %s: %w", w.Ref.ID, err)
	}
	st = jobStatus(st, w)
	if !st.Terminal() {
		return nodeEnd, &suspendOnJob{w: w, st: st}
	}
	t.job = &st
	a.auditJobFinished(t, b, w, st)
	res, ferr := ja.Fetch(ctx, env, w.Ref, st)
	a.record(t, b, w.EffectID, res, ferr)
	t.sess.done()
	return a.afterExecution(t, w.NextStep, ferr != nil), nil
}

func jobStatus(st JobStatus, w *JobWait) JobStatus {
	if st.ID == "" {
		st.ID = w.Ref.ID
	}
	if st.Action == "" {
		st.Action = w.Action
	}
	return st
}

// record finishes the effect, appends the execution log and the turn's
// actions, and forgets the cached data the action made stale (also after
// a failure: a failed write may have changed part of it).
func (a *Agent) record(t *turn, b *actions.Bound, effectID string, result json.RawMessage, execErr error) {
	now := a.now()
	entry := LogEntry{Timestamp: now.Format(time.RFC3339), Action: b.Name, Params: b.Params}
	out := ActionOut{Action: b.Name, Params: b.Params}
	if execErr != nil {
		t.sess.finishEffect(effectID, nil, execErr.Error(), now)
		entry.Status, entry.Error, entry.ErrorType = "error", execErr.Error(), errorType(execErr)
		out.Status, out.Error = "error", execErr.Error()
		var je *actions.JobError
		if errors.As(execErr, &je) && je.Status.State == actions.JobCancelled {
			entry.Status, out.Status = "cancelled", "cancelled"
		}
		t.recordError(execErr)
	} else {
		t.sess.finishEffect(effectID, result, "", now)
		entry.Status, entry.Result = "success", result
		out.Status, out.Result = "success", result
	}
	t.st.addLog(entry)
	t.st.TurnActions = append(t.st.TurnActions, out)
	t.st.invalidate(b.Spec().Invalidates)
	a.auditExecuted(t, b, result, execErr)
}

// ---- crash recovery ----

// recover settles the effects an earlier process started and never
// finished (it died during the call): the server is asked what happened,
// and a write is never repeated blindly. Effects of an imported checkpoint
// are only read back.
func (a *Agent) recover(ctx context.Context, t *turn) error {
	sess := t.sess
	w, err := sess.jobWait()
	if err != nil {
		return err
	}
	for _, e := range sess.cp.PendingEffects() {
		if w != nil && e.EffectID == w.EffectID {
			continue // the job settles it
		}
		note := map[string]any{"action": e.Action, "effect_id": e.EffectID}
		p := t.pending
		if p == nil || p.Bound.Hash != e.ParamsHash {
			sess.finishEffect(e.EffectID, nil, "outcome unknown: the process stopped during the call and its params are gone", a.now())
			note["outcome"] = actions.OutcomeUnknown
			t.recovered = append(t.recovered, note)
			continue
		}
		rec, err := p.Bound.Reconcile(ctx, a.env(t.api(), sess.cp.SessionID), p.ID, e.StartedAt)
		if err != nil {
			return fmt.Errorf("checking the outcome of an interrupted %s: %w", e.Action, err)
		}
		if rec.Outcome == actions.OutcomeRepeat && sess.imported {
			rec = actions.Reconciliation{Outcome: actions.OutcomeUnknown,
				Note: "the checkpoint came from a file: an interrupted action is never repeated from it"}
		}
		note["outcome"] = rec.Outcome
		if rec.Note != "" {
			note["note"] = rec.Note
		}
		t.recovered = append(t.recovered, note)
		switch rec.Outcome {
		case actions.OutcomeDone:
			a.record(t, p.Bound, e.EffectID, rec.Result, nil)
			sess.done()
			t.pending = nil
		case actions.OutcomeRepeat:
			t.pending = nil
			_, err := a.execute(ctx, t, p, e.EffectID)
			if _, paused, perr := a.pause(t, err); paused {
				return perr // re-attached to the job: the turn is suspended on it
			}
			if err != nil {
				return err
			}
			t.continuation, t.nextStep = false, ""
		case actions.OutcomeNotDone:
			// Safe to run when the person confirms again.
			sess.finishEffect(e.EffectID, nil, "not executed: the process stopped before the call completed", a.now())
		default:
			sess.finishEffect(e.EffectID, nil, "outcome unknown after an interruption", a.now())
			a.audit(t, audit.Executed, p, audit.Entry{Outcome: audit.OutcomeUnknown, Message: rec.Note})
			t.reaskOnly = true
			t.notes = append(t.notes, "The previous attempt was interrupted and its outcome is unknown; check the server before confirming again.")
		}
	}
	return nil
}

// ---- jobs ----

// resumeJob continues a turn suspended on a job: it checks the job (waiting
// up to req.Wait, reporting progress), and when the job has ended records
// the result and lets the turn finish.
func (a *Agent) resumeJob(ctx context.Context, sess *Session, req ResumeRequest) (*Result, error) {
	w, err := sess.jobWait()
	if err != nil {
		return nil, err
	}
	act, ok := a.action(w.Action)
	if !ok {
		return nil, badInput("session %s waits on job %s of %q, which is no action here (an MCP server that is not configured?)", sess.cp.SessionID, w.Ref.ID, w.Action)
	}
	ja, ok := act.(actions.JobAction)
	if !ok {
		return nil, badInput("session %s waits on job %s of %q, which does not run jobs", sess.cp.SessionID, w.Ref.ID, w.Action)
	}
	b, err := act.Bind(w.Params)
	if err != nil {
		return nil, badInput("session %s: interrupt.job.handle.params: %v", sess.cp.SessionID, err)
	}
	t, err := a.begin(ctx, sess)
	if err != nil {
		return nil, err
	}
	rc := a.prepare(t, sess.st.UserInput)
	t.input, t.messages = sess.st.UserInput, rc.Messages
	t.st.Errors = []ErrorEntry{}
	t.st.TurnActions = nil
	env := a.env(t.api(), sess.cp.SessionID)
	st, err := a.pollJob(ctx, ja, env, w, req)
	if err != nil {
		return nil, err
	}
	t.job = &st
	if !st.Terminal() {
		t.st.FinalResponse = fmt.Sprintf("Job %s is still %s: %d of %d done.", st.ID, st.State, st.Done, st.Total)
		a.respond(t, t.st.FinalResponse)
		return a.result(t, StatusWaitingJob), nil
	}
	t.trace = append(t.trace, NodeExecutor)
	a.auditJobFinished(t, b, w, st)
	res, ferr := ja.Fetch(ctx, env, w.Ref, st)
	a.record(t, b, w.EffectID, res, ferr)
	sess.resumed()
	next := a.afterExecution(t, w.NextStep, ferr != nil)
	if err := sess.save(a.deps.Store, checkpoint.StatusRunning, next, a.mcpCaps()); err != nil {
		return nil, err
	}
	rep, err := a.runGraph(ctx, t, next)
	if err != nil {
		return a.fail(t, err)
	}
	// The exchange of the original message was recorded when the turn
	// suspended; this reply completes it.
	t.input = "(job " + st.ID + " finished)"
	return a.finish(t, rep)
}

// pollJob checks the job once, or waits up to req.Wait for it to end,
// reporting its progress about once a second.
func (a *Agent) pollJob(ctx context.Context, ja actions.JobAction, env actions.Env, w *JobWait, req ResumeRequest) (JobStatus, error) {
	deadline := a.now().Add(req.Wait)
	for first := true; ; first = false {
		step := min(time.Second, max(deadline.Sub(a.now()), 0))
		if first {
			step = 0 // the first check is at once, so progress shows at once
		}
		st, err := ja.Poll(ctx, env, w.Ref, step)
		if err != nil {
			return st, fmt.Errorf("checking job %s: %w", w.Ref.ID, err)
		}
		st = jobStatus(st, w)
		if req.Progress != nil {
			req.Progress(st)
		}
		if st.Terminal() || !a.now().Before(deadline) {
			return st, nil
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}
