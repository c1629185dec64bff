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

// The one way into a turn: Run takes a session and a typed input. Each
// kind of input settles what an earlier process left (begin, recover),
// finds the node the graph starts from, and hands it to play, the one
// caller of runGraph. Only a Message passes the reply chain.

// Input is what a turn is run for: a Message, a Decision, a JobCheck or a
// Continue.
type Input interface{ turnInput() }

// Message is a person's message. A clear yes or no to the pending
// confirmation becomes a Decision once, before anything else reads it;
// every other message passes the reply chain.
type Message struct{ Text string }

// Decision answers one pending confirmation, named by its id (the
// checkpoint's interrupt id, the JSON output's confirmation.id). It never
// passes the message path: no hooks, no reply chain, no turn count.
type Decision struct {
	ConfirmationID string
	Approve        bool
	// Note is the person's words ("yes please"), kept in the history; ""
	// for a decision a flag made (--yes, --answer read by a program).
	Note string
}

// JobCheck checks on the job the session waits on: once (Wait 0) or until
// it ends, for at most Wait. A finished job's result completes the turn
// that started it.
type JobCheck struct {
	Wait time.Duration
	// Progress receives the job's status while waiting.
	Progress func(JobStatus)
}

// Continue finishes a turn a crash stopped between two nodes (status
// running). Answer, if not nil, is the person's answer to a confirmation
// that still stands (a Decision or a Message).
type Continue struct{ Answer Input }

func (Message) turnInput()  {}
func (Decision) turnInput() {}
func (JobCheck) turnInput() {}
func (Continue) turnInput() {}

// ErrStaleDecision: a decision names another confirmation than the one
// pending (it was replaced, or answered already). Nothing is written and
// nothing runs.
var ErrStaleDecision = errors.New("the decision answers another confirmation than the pending one")

// Run runs one turn of sess for in. It is the one way into a turn; Ask
// and Resume build an input and call it.
func (a *Agent) Run(ctx context.Context, sess *Session, in Input) (res *Result, err error) {
	ctx, span := a.startTurnSpan(ctx, sess, in)
	defer func() { a.endTurnSpan(span, sess, res, err) }()
	switch in := in.(type) {
	case Message:
		return a.runMessage(ctx, sess, in)
	case Decision:
		return a.runDecision(ctx, sess, in)
	case JobCheck:
		return a.runJobCheck(ctx, sess, in)
	case Continue:
		return a.runContinue(ctx, sess, in)
	case nil:
		return nil, badInput("session %s: no input for the turn", sess.cp.SessionID)
	}
	return nil, fmt.Errorf("pipeline: unknown input %T", in)
}

// Ask runs one turn for a message: Run with a Message.
func (a *Agent) Ask(ctx context.Context, sess *Session, message string) (*Result, error) {
	return a.Run(ctx, sess, Message{Text: message})
}

// ResumeRequest says how `resume` continues a session.
type ResumeRequest struct {
	// Answer is the answer to a pending confirmation (HasAnswer set).
	Answer    string
	HasAnswer bool
	// Yes approves the pending confirmation when no answer is given.
	Yes bool
	// Wait is how long to wait for a job to end (resume --wait); 0 checks
	// once.
	Wait time.Duration
	// Progress receives the job's status while waiting.
	Progress func(JobStatus)
}

// ResumeInput is the input `resume` gives a session, whatever stopped it:
// a JobCheck for a job, a Continue for a turn a crash stopped, the answer
// to a pending confirmation (a clear yes or no, or --yes, is a Decision
// addressed to the confirmation the session shows; other text a
// Message), or the message of a failed turn, run again. Every checkpoint
// the pipeline writes has a way forward here.
func ResumeInput(sess *Session, req ResumeRequest) (Input, error) {
	id := sess.PendingConfirmation()
	var answer Input
	if req.HasAnswer && req.Answer != "" {
		answer = Message{Text: req.Answer}
		if approve, ok := ParseDecision(req.Answer); ok && id != "" {
			answer = Decision{ConfirmationID: id, Approve: approve, Note: req.Answer}
		}
	}
	switch {
	case sess.jobRef() != nil:
		return JobCheck{Wait: req.Wait, Progress: req.Progress}, nil
	case sess.Status() == checkpoint.StatusRunning:
		// An approval does not outlive its process: --yes does not answer a
		// confirmation a crashed turn left; the person's answer may.
		return Continue{Answer: answer}, nil
	case id != "":
		if answer == nil && req.Yes {
			answer = Decision{ConfirmationID: id, Approve: true}
		}
		if answer == nil {
			return nil, badInput("session %s %w: pass --answer yes, --answer no, or --answer TEXT", sess.cp.SessionID, ErrAnswerRequired)
		}
		return answer, nil
	case sess.RetryInput() != "":
		return Message{Text: sess.RetryInput()}, nil
	}
	return nil, badInput("session %s: %w: it is %s", sess.cp.SessionID, ErrNothingToResume, sess.Status())
}

// Resume continues a session as `resume` does: Run with ResumeInput's
// input (--yes of the settings approves when no answer is given).
func (a *Agent) Resume(ctx context.Context, sess *Session, req ResumeRequest) (*Result, error) {
	req.Yes = req.Yes || a.set.Yes
	in, err := ResumeInput(sess, req)
	if err != nil {
		return nil, err
	}
	return a.Run(ctx, sess, in)
}

// runMessage runs a turn for a message: a clear yes or no to the pending
// confirmation is a Decision; anything else passes the reply chain, whose
// answer is the reply or the node the graph starts from.
func (a *Agent) runMessage(ctx context.Context, sess *Session, m Message) (*Result, error) {
	if ic := sess.jobRef(); ic != nil {
		return nil, badInput("%w (job %s): run `upgrade-agent resume %s` to check on it", ErrJobPending, ic.Job.ID, sess.cp.SessionID)
	}
	if id := sess.PendingConfirmation(); id != "" {
		if approve, ok := ParseDecision(m.Text); ok {
			return a.runDecision(ctx, sess, Decision{ConfirmationID: id, Approve: approve, Note: m.Text})
		}
	}
	t, err := a.begin(ctx, sess)
	if err != nil {
		return nil, err
	}
	sess.cp.Counters.Turns++
	rc := a.prepare(t, m.Text)
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
	rep, start, err := a.generateReply(ctx, rc)
	if err != nil {
		return a.fail(t, err)
	}
	return a.play(ctx, t, start, rep, "")
}

// runDecision answers the session's pending confirmation. The turn goes
// from the decision straight to the executor or the responder: the words
// are not read again, the reply chain and its termination words are not
// asked, and the turn counter stays: a decision completes the turn that
// asked for it. Effects an earlier process left started are settled
// first. A decision for another confirmation than the pending one is
// refused before anything is written.
func (a *Agent) runDecision(ctx context.Context, sess *Session, d Decision) (*Result, error) {
	ic := sess.confirmationRef()
	if ic == nil {
		return nil, badInput("session %s: %w: no confirmation is pending (it is %s)", sess.cp.SessionID, ErrNothingToResume, sess.Status())
	}
	if d.ConfirmationID != ic.ID {
		return nil, badInput("session %s: %w: it answers confirmation %q, the pending one is %q; read it and answer again",
			sess.cp.SessionID, ErrStaleDecision, d.ConfirmationID, ic.ID)
	}
	text, by := d.Note, "human"
	if text == "" {
		text, by = "yes", "yes-flag"
		if !d.Approve {
			text = "no"
		}
	}
	t, err := a.begin(ctx, sess)
	if err != nil {
		return nil, err
	}
	a.startTurn(t, text)
	if err := a.recover(ctx, t); err != nil {
		return a.fail(t, err)
	}
	if sess.jobRef() != nil {
		return a.finish(t, ReplyWith(t.st.FinalResponse))
	}
	start, err := a.decide(ctx, t, d.Approve, by)
	if err != nil {
		return a.fail(t, err)
	}
	return a.play(ctx, t, start, Reply{}, "")
}

// startTurn gives a turn that no message starts (a decision) its input
// and its window of recent exchanges, without the hooks, and resets the
// per-turn fields.
func (a *Agent) startTurn(t *turn, text string) {
	t.input, t.messages = a.window(t, text)
	t.st.resetTurn(t.input)
	t.st.RetryInput = ""
}

// runContinue finishes a turn that stopped between two nodes (status
// running): the effects it left are settled with the server, then the turn
// goes on from the node it was about to run. An approval does not outlive
// its process: an action that was approved but had not started is asked
// again (the answer given with the input, if any, is the new answer).
func (a *Agent) runContinue(ctx context.Context, sess *Session, c Continue) (*Result, error) {
	if sess.jobRef() != nil {
		return a.runJobCheck(ctx, sess, JobCheck{})
	}
	shown := sess.PendingConfirmation()
	t, err := a.beginAgain(ctx, sess)
	if err != nil {
		return nil, err
	}
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
		if c.Answer != nil && (!t.reaskOnly() || denies(c.Answer)) {
			answer := c.Answer
			if d, ok := answer.(Decision); ok && d.ConfirmationID == shown {
				// Renewed just now (expired, or an import's stale text): the
				// answer is to the confirmation that stands.
				d.ConfirmationID = sess.PendingConfirmation()
				answer = d
			}
			return a.Run(ctx, sess, answer)
		}
		if err := a.showAgain(ctx, t); err != nil {
			return a.fail(t, err)
		}
		t.mark(stateInterrupted)
	}
	return a.play(ctx, t, routeInterrupted(sess.cp.NextNode, stands), Reply{}, "")
}

// beginAgain starts a turn that goes on with the session's last message
// (the rest of a crashed turn, a job's completion): its window of recent
// exchanges, without the hooks, and no errors yet.
func (a *Agent) beginAgain(ctx context.Context, sess *Session) (*turn, error) {
	t, err := a.begin(ctx, sess)
	if err != nil {
		return nil, err
	}
	t.input = sess.st.UserInput
	_, t.messages = a.window(t, sess.st.UserInput)
	t.st.Errors = []ErrorEntry{}
	return t, nil
}

// denies reports whether an answer is a clear no.
func denies(in Input) bool {
	switch x := in.(type) {
	case Decision:
		return !x.Approve
	case Message:
		return clearAnswer(x.Text) == answerDenied
	}
	return false
}

// runJobCheck continues a turn suspended on a job: it checks the job
// (waiting up to Wait, reporting progress), and when the job has ended
// records the result and lets the turn finish from the executor's next
// node.
func (a *Agent) runJobCheck(ctx context.Context, sess *Session, c JobCheck) (*Result, error) {
	w, err := sess.jobWait()
	if err != nil {
		return nil, err
	}
	if w == nil {
		return nil, badInput("session %s: %w: it waits on no job (it is %s)", sess.cp.SessionID, ErrNothingToResume, sess.Status())
	}
	if sess.Status() == checkpoint.StatusRunning && c.Wait == 0 {
		// The turn stopped right after it suspended on the job, before
		// its last save: it had not yet had its --wait-jobs wait.
		c.Wait = a.set.WaitJobs
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
	t, err := a.beginAgain(ctx, sess)
	if err != nil {
		return nil, err
	}
	t.st.TurnActions = nil
	env := a.env(t.api(), sess.cp.SessionID)
	st, err := a.pollJob(ctx, ja, env, w, c)
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
	a.record(ctx, t, b, w.EffectID, res, ferr)
	sess.resumed()
	next := a.afterExecution(t, w.NextStep, ferr != nil)
	if err := sess.save(a.deps.Store, checkpoint.StatusRunning, next, a.mcpCaps()); err != nil {
		return nil, err
	}
	// The exchange of the original message was recorded when the turn
	// suspended; this reply completes it.
	return a.play(ctx, t, next, Reply{}, "(job "+st.ID+" finished)")
}

// play runs the graph from start (unless the turn already has its reply:
// start is nodeEnd) and finishes the turn. It is the one caller of
// runGraph. exchange, if not "", is the user side of the exchange the
// reply completes (a job's completion); otherwise the turn's input.
func (a *Agent) play(ctx context.Context, t *turn, start string, rep Reply, exchange string) (*Result, error) {
	if start != nodeEnd {
		var err error
		if rep, err = a.runGraph(ctx, t, start); err != nil {
			return a.fail(t, err)
		}
	}
	if exchange != "" {
		t.input = exchange
	}
	return a.finish(t, rep)
}

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
			t.mark(stateChanged)
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
		t.mark(stateUnseen)
	}
	return t, nil
}

// fail keeps the checkpoint valid after a runtime failure: the message (as
// it was after the hooks) is kept so that `resume` can run the turn again.
func (a *Agent) fail(t *turn, err error) (*Result, error) {
	t.st.RetryInput = t.input
	t.recordError(err)
	a.recordUsage(t)
	if serr := t.sess.save(a.deps.Store, t.sess.statusAtRest(false), "", a.mcpCaps()); serr != nil {
		err = errors.Join(err, serr)
	}
	return a.result(t, StatusFailed), err
}

// recordUsage adds the turn's LLM work to the session's totals and to its
// per-turn records.
func (a *Agent) recordUsage(t *turn) {
	cp := t.sess.cp
	u := a.usageOf(t)
	cp.Usage = cp.Usage.Add(u)
	if u.LLMCalls == 0 {
		return // a yes or a job check the executor answered alone
	}
	t.st.addTurnUsage(TurnUsage{Turn: cp.Counters.Turns, At: a.now().UTC(), LLMCalls: u.LLMCalls, PromptTokens: u.PromptTokens,
		CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens, Estimated: t.estimated})
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
	a.recordUsage(t)
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
			a.record(ctx, t, p.Bound, e.EffectID, rec.Result, nil)
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
			t.mark(stateOutcomeUnknown)
		}
	}
	return nil
}

// Propose runs a turn that proposes one action with params a command
// wrote (`undo`, `stratification upload`, `experiments import`): the turn
// starts where the gatherer would have left a complete draft, so no model
// is asked, and goes on as any turn does (the confirmation and its
// interrupt, or under the policy the executor). text is what the
// session's history shows as the person's message. Params that do not
// bind or validate are refused before the turn starts, naming every
// problem (exit 2), so they never change the session.
func (a *Agent) Propose(ctx context.Context, sess *Session, text, action string, params json.RawMessage) (res *Result, err error) {
	ctx, span := a.startTurnSpan(ctx, sess, Message{Text: text})
	defer func() { a.endTurnSpan(span, sess, res, err) }()
	if ic := sess.jobRef(); ic != nil {
		return nil, badInput("%w (job %s): run `upgrade-agent resume %s` to check on it", ErrJobPending, ic.Job.ID, sess.cp.SessionID)
	}
	act, ok := a.action(action)
	if !ok {
		return nil, badInput("%q is not an action", action)
	}
	b, err := act.Bind(params)
	if err != nil {
		return nil, badInput("%s: %v", action, err)
	}
	probs, err := act.Validate(ctx, a.env(a.deps.API, sess.cp.SessionID), b)
	if err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		msg := action
		for i, p := range probs {
			sep := "; "
			if i == 0 {
				sep = ": "
			}
			msg += sep + p.Field + ": " + p.Message
		}
		return nil, badInput("%s", msg)
	}
	t, err := a.begin(ctx, sess)
	if err != nil {
		return nil, err
	}
	sess.cp.Counters.Turns++
	a.startTurn(t, text)
	if err := a.recover(ctx, t); err != nil {
		return a.fail(t, err)
	}
	sess.chooseAction(action)
	sess.setDraftParams(b)
	t.problems = []actions.Problem{}
	return a.play(ctx, t, NodeConfirmation, Reply{}, "")
}
