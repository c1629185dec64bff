package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Propose runs a turn that proposes one action with params a command
// wrote (`stratification upload`, `experiments import`): the turn starts
// where the gatherer would have left a complete draft, so no model is
// asked, and goes on as any turn does (the confirmation and its
// interrupt, or under the policy the executor). text is what the session's
// history shows as the person's message. Params that do not validate end
// the turn with an error naming every problem (exit 2): a command checks
// them before, so that never starts a session.
func (a *Agent) Propose(ctx context.Context, sess *Session, text, action string, params json.RawMessage) (*Result, error) {
	if ic := sess.jobRef(); ic != nil {
		return nil, badInput("%w (job %s): run `upgrade-agent resume %s` to check on it", ErrJobPending, ic.Job.ID, sess.cp.SessionID)
	}
	if _, ok := a.action(action); !ok {
		return nil, badInput("%q is not an action", action)
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
	if _, err := t.setParams(ctx, params); err != nil {
		return a.fail(t, err)
	}
	if err := a.validateDraft(ctx, t); err != nil {
		return a.fail(t, err)
	}
	if !t.draftReady() {
		t.mu.Lock()
		var parts []string
		for _, p := range t.problems {
			parts = append(parts, fmt.Sprintf("%s: %s", p.Field, p.Message))
		}
		t.mu.Unlock()
		return a.fail(t, badInput("%s: %s", action, strings.Join(parts, "; ")))
	}
	return a.play(ctx, t, NodeConfirmation, Reply{}, "")
}
