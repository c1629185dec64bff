package pipeline

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// estimating is a provider that sends no usage: the client estimates it.
type estimating struct{ llm.Client }

func (e estimating) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := e.Client.Chat(ctx, req)
	if resp != nil {
		resp.UsageEstimated = true
	}
	return resp, err
}

// TestTurnUsageIsRecordedPerTurn: each run that called the model leaves a
// record of its turn's calls and tokens in the saved state (sessions
// show); a yes the executor answers alone leaves none; a provider without
// usage marks its turn estimated; a state saved before the records
// existed still decodes.
func TestTurnUsageIsRecordedPerTurn(t *testing.T) {
	h := newHarness(t)
	h.agent.set.ReplyWording = WordingGo
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	res := proposeDeleteInGo(t, h, e.ID)
	if _, err := h.agent.Run(context.Background(), h.sess, Decision{ConfirmationID: res.Confirmation.ID, Approve: true, Note: "yes"}); err != nil {
		t.Fatal(err)
	}
	h.agent.deps.LLM = estimating{h.agent.deps.LLM}
	h.ask("hello", analyze(IntentDirectAnswer, "hello", map[string]any{"direct_response": "Hi."}))

	cp, err := h.store.Load(h.sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeState(cp)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.TurnUsage) != 2 {
		t.Fatalf("turn usage %+v, want two records", st.TurnUsage)
	}
	first, second := st.TurnUsage[0], st.TurnUsage[1]
	if first.Turn != 1 || first.LLMCalls != 2 || first.PromptTokens == 0 || first.CompletionTokens == 0 || first.Estimated {
		t.Errorf("turn 1: %+v", first)
	}
	if second.Turn != 2 || second.LLMCalls != 1 || !second.Estimated {
		t.Errorf("turn 2: %+v", second)
	}
	if sum := first.PromptTokens + second.PromptTokens; cp.Usage.PromptTokens != sum || cp.Usage.LLMCalls != 3 {
		t.Errorf("session usage %+v, the turns add up to %d prompt tokens in 3 calls", cp.Usage, sum)
	}

	var old map[string]any
	if err := json.Unmarshal(cp.State, &old); err != nil {
		t.Fatal(err)
	}
	delete(old, "turn_usage")
	cp.State, _ = json.Marshal(old)
	if st, err := DecodeState(cp); err != nil || st.TurnUsage != nil {
		t.Errorf("a state without turn_usage: %v, %+v", err, st)
	}
}
