package pipeline

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// Propose runs a turn that proposes one action with its params as the
// gatherer would have drafted it, without a model: validation, then the
// confirmation node (and the executor, when the policy or --yes approves
// it). `upgrade-agent undo` proposes undo_change this way. text is the
// turn's message in the session's history.
func (a *Agent) Propose(ctx context.Context, sess *Session, text, name string, params json.RawMessage) (res *Result, err error) {
	ctx, span := a.startTurnSpan(ctx, sess, Message{Text: text})
	defer func() { a.endTurnSpan(span, sess, res, err) }()
	act, ok := a.action(name)
	if !ok {
		return nil, badInput("%q is not an action", name)
	}
	b, err := act.Bind(params)
	if err != nil {
		return nil, badInput("%s: %v", name, err)
	}
	probs, err := act.Validate(ctx, a.env(a.deps.API, sess.cp.SessionID), b)
	if err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		msgs := make([]string, 0, len(probs))
		for _, p := range probs {
			msgs = append(msgs, p.Message)
		}
		return nil, badInput("%s", strings.Join(msgs, "; "))
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
	sess.chooseAction(name)
	sess.setDraftParams(b)
	t.problems = []actions.Problem{}
	return a.play(ctx, t, NodeConfirmation, Reply{}, "")
}
