package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
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

// errBudget: the turn has spent its LLM calls.
var errBudget = errors.New("LLM call budget of the turn exhausted")

// maxTransitions bounds the node transitions of one turn.
const maxTransitions = 24

// runGraph carries the turn through the nodes from start until the turn
// ends, saving a checkpoint at every node boundary.
func (a *Agent) runGraph(ctx context.Context, t *turn, start string) (Reply, error) {
	node := start
	for node != nodeEnd {
		if t.transitions >= maxTransitions {
			t.end.terminated = fmt.Sprintf("node transition limit (%d) reached", maxTransitions)
			break
		}
		t.transitions++
		t.trace = append(t.trace, node)
		began, calls := time.Now(), t.llmCalls
		next, err := a.runNode(ctx, t, node)
		a.logger().Debug("node", "session", t.sess.cp.SessionID, "node", node, "took", time.Since(began).Round(time.Microsecond),
			"llm_calls", t.llmCalls-calls, "err", err)
		pauseNext, paused, perr := a.pause(t, err)
		switch {
		case perr != nil:
			return Reply{}, perr
		case paused:
			next = pauseNext
		case errors.Is(err, errBudget):
			t.end.terminated = fmt.Sprintf("LLM call limit (%d) reached in this turn", a.maxCalls())
		case err != nil:
			return Reply{}, err
		}
		if t.end.terminated != "" {
			break
		}
		// After each node the turn can be resumed from the next one. The
		// responder's last step is the exception: the turn's final save
		// follows at once, and a crash between the two only runs the
		// responder again (it changes nothing on the server).
		if node != NodeResponder || next != nodeEnd || err != nil {
			if err := t.sess.save(a.deps.Store, checkpoint.StatusRunning, next, a.mcpCaps()); err != nil {
				return Reply{}, err
			}
		}
		node = next
	}
	if t.end.terminated != "" {
		text := t.st.FinalResponse
		if text == "" {
			text = fmt.Sprintf("I stopped this turn: %s. Nothing else was run; send a message to continue.", t.end.terminated)
			if t.showing != nil {
				text += "\n\n" + t.showing.Message
			}
		}
		return StopWith(t.end.terminated, text), nil
	}
	return ReplyWith(t.st.FinalResponse), nil
}

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

func (a *Agent) runNode(ctx context.Context, t *turn, node string) (string, error) {
	switch node {
	case NodeAnalyzer:
		t.st.CurrentState = StateAnalyzing
		return a.analyzer(ctx, t)
	case NodeGatherer:
		t.st.CurrentState = StateGathering
		return a.gatherer(ctx, t)
	case NodeConfirmation:
		t.st.CurrentState = StateConfirming
		return a.confirmation(ctx, t)
	case NodeExecutor:
		t.st.CurrentState = StateExecuting
		return a.executor(ctx, t)
	case NodeResponder:
		t.st.CurrentState = StateResponding
		return a.responder(ctx, t)
	case NodeOutput:
		return a.outputNode(ctx, t)
	}
	return nodeEnd, fmt.Errorf("unknown node %q", node)
}

// chat makes one LLM call on behalf of a node, within the turn's budget.
func (t *turn) chat(ctx context.Context, node string, req llm.Request) (*llm.Response, error) {
	if t.llmCalls >= t.a.maxCalls() {
		return nil, errBudget
	}
	t.llmCalls++
	req.Model = t.a.set.Model
	req.Node = node
	if req.Temperature == nil {
		req.Temperature = t.a.set.Temperature
	}
	resp, err := t.a.deps.LLM.Chat(llm.WithNode(ctx, node), req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", node, err)
	}
	t.usage.Add(resp.Usage)
	return resp, nil
}

// ---- entry points ----

// begin starts a turn on a session: the pending confirmation of an earlier
// turn, and the settling of effects an earlier process left started.
func (a *Agent) begin(ctx context.Context, sess *Session) (*turn, error) {
	t := &turn{a: a, sess: sess, st: sess.st}
	if err := sess.bind(a.action); err != nil {
		return t, err
	}
	p := sess.pending
	t.pending = p
	if p != nil && sess.imported {
		// An imported confirmation's text is what the file says the
		// person was shown. When it is not what this program renders from
		// the action and params, nothing in the file stands: the current
		// text replaces it before anyone (the model included) reads it.
		cur, stale, err := a.currentPending(ctx, t, p)
		if err != nil {
			return t, err
		}
		if stale {
			sess.await(cur)
			t.pending = cur
			t.notes = append(t.notes, staleNote)
		}
	}
	if t.pending != nil && a.expired(t.pending) && len(sess.cp.PendingEffects()) == 0 {
		if err := a.expire(ctx, t); err != nil {
			return t, err
		}
	}
	if t.pending != nil && !a.set.Yes && !sess.shown(t.pending) {
		// Made by a turn that stopped before its reply, or replaced just
		// now: the person has not read it, so no answer given before
		// they do can approve it. It is shown first.
		t.reaskOnly = true
		if len(t.notes) == 0 {
			t.notes = append(t.notes, unseenNote)
		}
	}
	return t, nil
}

// Ask runs one turn for a message. When a confirmation is pending the
// message is the human's answer: a clear yes or no is a Decision, and
// anything else goes to the analyzer.
func (a *Agent) Ask(ctx context.Context, sess *Session, message string) (*Result, error) {
	if ic := sess.jobRef(); ic != nil {
		return nil, badInput("%w (job %s): run `upgrade-agent resume %s` to check on it", ErrJobPending, ic.Job.ID, sess.cp.SessionID)
	}
	if d, ok := ParseDecision(message); ok && sess.confirmationRef() != nil {
		return a.Decide(ctx, sess, d, message)
	}
	return a.runTurn(ctx, sess, message, true, func(_ *turn, rc *ReplyContext) (Reply, error) {
		return a.generateReply(ctx, rc)
	})
}

// runTurn runs a turn for a message: the hooks prepare it, the per-turn
// fields are reset and the effects an earlier process left started are
// settled; then reply gives the turn's reply, and the turn is finished
// and saved. counts says whether the turn counter goes up (a new message
// does; a decision completes the turn that asked for it).
func (a *Agent) runTurn(ctx context.Context, sess *Session, message string, counts bool, reply func(t *turn, rc *ReplyContext) (Reply, error)) (*Result, error) {
	t, err := a.begin(ctx, sess)
	if err != nil {
		return nil, err
	}
	if counts {
		sess.cp.Counters.Turns++
	}
	rc := a.prepare(t, message)
	t.input, t.messages, t.extra = rc.Message, rc.Messages, rc.Extra
	t.st.resetTurn(t.input)
	t.st.RetryInput = ""
	if err := a.recover(ctx, t); err != nil {
		return a.fail(t, err)
	}
	if sess.jobRef() != nil {
		// Crash recovery re-attached to the interrupted action's job.
		return a.finish(t, ReplyWith(t.st.FinalResponse))
	}
	rep, err := reply(t, rc)
	if err != nil {
		return a.fail(t, err)
	}
	return a.finish(t, rep)
}

// Decide answers the session's pending confirmation with a decision (text
// is the person's words, kept in the history; "" for a flag). The turn
// goes from the decision straight to the executor or the responder: the
// words are not read again, the reply chain and its termination words are
// not asked, and the turn counter stays: a decision completes the turn
// that asked for it. Effects an earlier process left started are settled
// first.
func (a *Agent) Decide(ctx context.Context, sess *Session, d Decision, text string) (*Result, error) {
	if sess.confirmationRef() == nil {
		return nil, badInput("session %s: %w: no confirmation is pending (it is %s)", sess.cp.SessionID, ErrNothingToResume, sess.Status())
	}
	by := "human"
	if text == "" {
		text, by = "yes", "yes-flag"
		if d == Deny {
			text = "no"
		}
	}
	return a.runTurn(ctx, sess, text, false, func(t *turn, _ *ReplyContext) (Reply, error) {
		next, err := a.decide(ctx, t, d, by)
		if err != nil {
			return Reply{}, err
		}
		return a.runGraph(ctx, t, next)
	})
}

// ResumeRequest says how to continue a session.
type ResumeRequest struct {
	// Answer is the answer to a pending confirmation (HasAnswer set).
	Answer    string
	HasAnswer bool
	// Wait is how long to wait for a job to end (resume --wait); 0 checks
	// once.
	Wait time.Duration
	// Progress receives the job's status while waiting.
	Progress func(JobStatus)
}

// Resume continues a session, whatever stopped it: it answers a pending
// confirmation, checks or waits on a job (built-in or MCP), finishes a turn
// that a crash stopped between two nodes, or runs a failed turn again.
// Every checkpoint the pipeline writes has a way forward here.
func (a *Agent) Resume(ctx context.Context, sess *Session, req ResumeRequest) (*Result, error) {
	switch {
	case sess.jobRef() != nil:
		if sess.Status() == checkpoint.StatusRunning && req.Wait == 0 {
			// The turn stopped right after it suspended on the job, before
			// its last save: it had not yet had its --wait-jobs wait.
			req.Wait = a.set.WaitJobs
		}
		return a.resumeJob(ctx, sess, req)
	case sess.Status() == checkpoint.StatusRunning:
		return a.resumeInterrupted(ctx, sess, req)
	case sess.confirmationRef() != nil:
		if !req.HasAnswer && a.set.Yes {
			return a.Decide(ctx, sess, Approve, "")
		}
		if !req.HasAnswer || req.Answer == "" {
			return nil, badInput("session %s %w: pass --answer yes, --answer no, or --answer TEXT", sess.cp.SessionID, ErrAnswerRequired)
		}
		return a.Ask(ctx, sess, req.Answer)
	case sess.RetryInput() != "":
		return a.Ask(ctx, sess, sess.RetryInput())
	}
	return nil, badInput("session %s: %w: it is %s", sess.cp.SessionID, ErrNothingToResume, sess.Status())
}

// resumeInterrupted finishes a turn that stopped between two nodes (status
// running): the effects it left are settled with the server, then the turn
// goes on from the node it was about to run. An approval does not outlive
// its process: an action that was approved but had not started is asked
// again (the answer given to this resume, if any, is the new answer).
func (a *Agent) resumeInterrupted(ctx context.Context, sess *Session, req ResumeRequest) (*Result, error) {
	t, err := a.begin(ctx, sess)
	if err != nil {
		return nil, err
	}
	rc := a.prepare(t, sess.st.UserInput)
	t.input, t.messages, t.extra = sess.st.UserInput, rc.Messages, rc.Extra
	t.st.Errors = []ErrorEntry{}
	if err := a.recover(ctx, t); err != nil {
		return a.fail(t, err)
	}
	if sess.jobRef() != nil {
		t.trace = append(t.trace, NodeExecutor)
		return a.finish(t, ReplyWith(t.st.FinalResponse))
	}
	stands := t.pending != nil && sess.confirmationRef() != nil
	if stands {
		// Approved in the interrupted process but never run, or run
		// without effect: the person decides again. The answer given to
		// this resume decides, unless the outcome is unknown or the person
		// never read the confirmation: that answer was given before they
		// could read what it answers, and only a no may stand for it.
		if req.HasAnswer && req.Answer != "" && (!t.reaskOnly || clearAnswer(req.Answer) == answerDenied) {
			return a.Ask(ctx, sess, req.Answer)
		}
		if err := a.showAgain(ctx, t); err != nil {
			return a.fail(t, err)
		}
		if !t.reaskOnly {
			t.notes = append(t.notes, "The previous run stopped before this action ran; nothing was executed. Please confirm again.")
		}
	}
	next := routeInterrupted(sess.cp.NextNode, stands)
	rep, err := a.runGraph(ctx, t, next)
	if err != nil {
		return a.fail(t, err)
	}
	return a.finish(t, rep)
}

// fail keeps the checkpoint valid after a runtime failure: the message (as
// it was after the hooks) is kept so that `resume` can run the turn again.
func (a *Agent) fail(t *turn, err error) (*Result, error) {
	t.st.RetryInput = t.input
	t.recordError(err)
	t.sess.cp.Usage = t.sess.cp.Usage.Add(a.usageOf(t))
	if serr := t.sess.save(a.deps.Store, t.sess.statusAtRest(false), "", a.mcpCaps()); serr != nil {
		err = errors.Join(err, serr)
	}
	return a.result(t, StatusFailed), err
}

func (a *Agent) usageOf(t *turn) checkpoint.Usage {
	return checkpoint.Usage{LLMCalls: t.llmCalls, PromptTokens: t.usage.PromptTokens,
		CompletionTokens: t.usage.CompletionTokens, CachedTokens: t.usage.CachedTokens}
}

// finish records the reply, updates the counters and saves the checkpoint.
// The turn's status comes from the Session's interrupt and the ending.
func (a *Agent) finish(t *turn, rep Reply) (*Result, error) {
	st := t.st
	cp := t.sess.cp
	if rep.Kind == KindStop {
		t.end.terminated = rep.Reason
	}
	st.FinalResponse = rep.Text
	a.respond(t, rep.Text)
	st.addExchange(t.input, rep.Text, a.now())
	if t.end.terminateSession {
		t.sess.done()
		st.ConversationComplete = true
	}
	if t.humanDecided() || t.end.resetAutoReplies {
		cp.Counters.ConsecutiveAutoReplies = 0
	} else {
		cp.Counters.ConsecutiveAutoReplies++
	}
	cp.Usage = cp.Usage.Add(a.usageOf(t))
	st.CurrentState = StateAnalyzing

	rest := t.sess.statusAtRest(t.end.terminateSession)
	status := rest // waiting_job, awaiting_confirmation, terminated
	if rest == checkpoint.StatusIdle {
		switch {
		case t.end.terminated != "":
			status = StatusTerminated
		case t.end.failure != nil:
			status = StatusFailed
		default:
			status = StatusCompleted
		}
	}
	if err := t.sess.save(a.deps.Store, rest, "", a.mcpCaps()); err != nil {
		return nil, err
	}
	res := a.result(t, status)
	if status == StatusFailed {
		return res, t.end.failure
	}
	return res, nil
}

func (a *Agent) result(t *turn, status Status) *Result {
	cp := t.sess.cp
	res := &Result{
		SessionID: cp.SessionID, Turn: cp.Counters.Turns, Status: status, Response: t.st.FinalResponse,
		Actions: append([]ActionOut(nil), t.st.TurnActions...), Trace: t.trace, TerminationReason: t.end.terminated, Output: t.output,
		Usage: UsageOut{LLMCalls: t.llmCalls, PromptTokens: t.usage.PromptTokens, CompletionTokens: t.usage.CompletionTokens, CachedTokens: t.usage.CachedTokens},
	}
	if res.Trace == nil {
		res.Trace = []string{}
	}
	if len(res.Actions) == 0 {
		res.Actions = nil
	}
	if len(t.st.Errors) > 0 {
		res.Errors = append([]ErrorEntry(nil), t.st.Errors...)
	}
	if ic := t.sess.confirmationRef(); status == StatusAwaitingConfirmation && ic != nil {
		c := ic.Confirmation
		res.Confirmation = &ConfirmationOut{ID: ic.ID, Action: c.Action, Params: c.Params, Message: c.Message, Destructive: c.Destructive}
	}
	if p := t.denied; p != nil {
		res.Declined = &DeclinedOut{Action: p.Bound.Name, Summary: planHeadline(p.Message)}
	}
	if js := t.job; js != nil {
		res.Job = &JobOut{ID: js.ID, Action: js.Action, State: js.State}
		if js.Total > 0 {
			res.Job.Progress = &Progress{Done: js.Done, Total: js.Total}
		}
	}
	if res.TerminationReason == "" {
		res.TerminationReason = DefaultReason(status)
	}
	return res
}

// respond hands the reply to the caller as soon as it is final.
func (a *Agent) respond(t *turn, text string) {
	if t.responded {
		return
	}
	t.responded = true
	if a.onResponse != nil {
		a.onResponse(text)
	}
}

func suspendText(session string, s JobStatus) string {
	return fmt.Sprintf("Started %s as job %s (%d of %d done so far). It keeps running in the background; run `upgrade-agent resume %s` to check on it, or add --wait to wait for the result.",
		s.Action, s.ID, s.Done, s.Total, session)
}

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
