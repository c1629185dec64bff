package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/llm"
)

func TestRegisterReplyOrder(t *testing.T) {
	noop := func(context.Context, *ReplyContext) (Reply, error) { return Pass(), nil }
	a := chainAgent(Settings{}, WithReply("late", nil, noop, PositionBeforeLLM), WithReply("first", nil, noop, 0),
		WithReply("before-llm-2", nil, noop, 99))
	var got []string
	for _, r := range a.replies {
		got = append(got, r.name)
	}
	want := []string{"first", "termination", "human_reply", "late", "before-llm-2", "llm_pipeline"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
}

func TestGenerateReplyFirstFinalWins(t *testing.T) {
	var calls []string
	mk := func(name string, r Reply) ReplyFunc {
		return func(context.Context, *ReplyContext) (Reply, error) { calls = append(calls, name); return r, nil }
	}
	a := chainAgent(Settings{}, WithReply("skip", func(*ReplyContext) bool { return false }, mk("skip", ReplyWith("never")), 0),
		WithReply("pass", nil, mk("pass", Pass()), PositionBeforeLLM),
		WithReply("answer", nil, mk("answer", ReplyWith("from registered")), PositionBeforeLLM))
	tr := &turn{a: a, sess: NewSession("s", fixedNow()), st: NewState()}
	rc := &ReplyContext{Message: "hello", turn: tr}
	rep, start, err := a.generateReply(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Text != "from registered" || rep.Kind != KindReply || start != nodeEnd {
		t.Fatalf("got %+v", rep)
	}
	if diff := cmp.Diff([]string{"pass", "answer"}, calls); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
}

func TestDefaultReplyWhenNothingAnswers(t *testing.T) {
	a := chainAgent(Settings{})
	// Replace the LLM pipeline by a function that passes.
	a.replies[len(a.replies)-1] = registeredReply{name: "passes", fn: func(context.Context, *ReplyContext) (Reply, error) { return Pass(), nil }}
	tr := &turn{a: a, sess: NewSession("s", fixedNow()), st: NewState()}
	rep, _, err := a.generateReply(context.Background(), &ReplyContext{Message: "hm", turn: tr})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kind != KindStop || rep.Text == "" || rep.Reason == "" {
		t.Fatalf("default reply must be non-empty with a reason: %+v", rep)
	}
}

func TestHooksWorkOnACopy(t *testing.T) {
	a := chainAgent(Settings{Secrets: []string{"topsecretvalue123"}},
		WithMessageHook(func(s string) string { return strings.ToUpper(s) }),
		WithHistoryHook(func(m []llm.Message) []llm.Message {
			m[0].Content = "mutated"
			return m
		}),
		WithStateHook(func(rc *ReplyContext) { rc.Extra = append(rc.Extra, "today") }))
	sess := NewSession("s", fixedNow())
	sess.st.addExchange("first question", "first answer", fixedNow())
	tr := &turn{a: a, sess: sess, st: sess.st}
	rc := a.prepare(tr, "my key is topsecretvalue123 ok")
	if strings.Contains(rc.Message, "topsecretvalue123") || !strings.Contains(rc.Message, "[REDACTED]") {
		t.Fatalf("secret not redacted: %q", rc.Message)
	}
	if !strings.HasPrefix(rc.Message, "MY KEY") {
		t.Fatalf("process_last_received_message not applied: %q", rc.Message)
	}
	if sess.st.ConversationHistory[0].User != "first question" {
		t.Fatal("stored history was mutated by a hook")
	}
	if rc.Messages[0].Content != "mutated" || len(rc.Extra) != 1 {
		t.Fatalf("hooks not applied: %+v", rc)
	}
}

func TestWindowKeepsPromptsFlat(t *testing.T) {
	a := &Agent{}
	sizes := map[int]int{}
	for _, n := range []int{10, 1000} {
		sess := NewSession("s", fixedNow())
		for i := 0; i < n; i++ {
			sess.st.addExchange(fmt.Sprintf("question %d about experiments", i), "an answer of similar length", fixedNow())
		}
		tr := &turn{a: a, sess: sess, st: sess.st}
		rc := a.prepare(tr, "next")
		total := 0
		for _, m := range rc.Messages {
			total += len(m.Content)
		}
		sizes[n] = total
	}
	if sizes[1000] > sizes[10]+8 { // digits of the turn number may differ
		t.Fatalf("prompt grows with the session: turn 10 %d chars, turn 1000 %d chars", sizes[10], sizes[1000])
	}
}

func TestRedact(t *testing.T) {
	in := "use sk-abcdefghijklmnopqrstuvwx and Bearer abcdefghijklmnopqrstu please"
	got := redact.String(in)
	if strings.Contains(got, "sk-abc") || strings.Contains(got, "abcdefghijklmnopqrstu ") {
		t.Fatalf("not redacted: %q", got)
	}
}

// chainAgent is an agent with only its reply chain laid out, as New does.
func chainAgent(s Settings, opts ...Option) *Agent {
	a := &Agent{set: s}
	for _, o := range opts {
		o(a)
	}
	a.buildChain()
	return a
}
