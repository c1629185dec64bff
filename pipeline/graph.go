package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/internal/tracing"
)

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
		nctx, span := startNodeSpan(ctx, node)
		next, err := a.runNode(nctx, t, node)
		tracing.End(span, err)
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
