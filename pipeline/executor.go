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
	a.beginChange(ctx, t, p, effectID)
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
	actx, span := startActionSpan(ctx, b, p.ID)
	wctx, returned, err := a.writeWindow(actx, t, effectID)
	if err != nil {
		endActionSpan(span, actions.Outcome{}, err)
		return nodeEnd, err // the session was lost: nothing runs
	}
	out, err := b.Execute(wctx, a.env(t.api(), t.sess.cp.SessionID), p.ID)
	returned(err)
	endActionSpan(span, out, err)
	if err == nil && out.Job != nil {
		if p == t.approvedP {
			a.audit(t, audit.JobStarted, p, audit.Entry{JobID: out.Job.ID})
		}
		return a.waitJob(ctx, t, b, &JobWait{Action: b.Name, Params: b.Params, Ref: *out.Job, EffectID: effectID, Key: p.ID, NextStep: nextStep})
	}
	a.record(ctx, t, b, effectID, out.Result, err)
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
		a.record(ctx, t, b, w.EffectID, nil, err)
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
	a.record(ctx, t, b, w.EffectID, res, ferr)
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
// a failure: a failed write may have changed part of it). The effect's
// change is finished in the same save (change.go).
func (a *Agent) record(ctx context.Context, t *turn, b *actions.Bound, effectID string, result json.RawMessage, execErr error) {
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
	a.auditExecuted(t, b, result, execErr, a.finishChange(ctx, t, effectID, result, execErr))
}

// pollJob checks the job once, or waits up to req.Wait for it to end,
// reporting its progress about once a second.
func (a *Agent) pollJob(ctx context.Context, ja actions.JobAction, env actions.Env, w *JobWait, req JobCheck) (JobStatus, error) {
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
