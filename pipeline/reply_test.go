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
	a := &Agent{}
	noop := func(context.Context, *ReplyContext) (Reply, error) { return Pass(), nil }
	a.RegisterReply("late", nil, noop, PositionBeforeLLM)
	a.RegisterReply("first", nil, noop, 0)
	a.RegisterReply("before-llm-2", nil, noop, 99)
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
	a := &Agent{}
	var calls []string
	mk := func(name string, r Reply) ReplyFunc {
		return func(context.Context, *ReplyContext) (Reply, error) { calls = append(calls, name); return r, nil }
	}
	a.RegisterReply("skip", func(*ReplyContext) bool { return false }, mk("skip", ReplyWith("never")), 0)
	a.RegisterReply("pass", nil, mk("pass", Pass()), PositionBeforeLLM)
	a.RegisterReply("answer", nil, mk("answer", ReplyWith("from registered")), PositionBeforeLLM)
	tr := &turn{a: a, sess: NewSession("s", fixedNow()), st: NewState()}
	rc := &ReplyContext{Message: "hello", turn: tr}
	rep, err := a.generateReply(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Text != "from registered" || rep.Kind != KindReply {
		t.Fatalf("got %+v", rep)
	}
	if diff := cmp.Diff([]string{"pass", "answer"}, calls); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
}

func TestDefaultReplyWhenNothingAnswers(t *testing.T) {
	a := &Agent{}
	a.ensureChain()
	// Replace the LLM pipeline by a function that passes.
	a.replies[len(a.replies)-1].fn = func(context.Context, *ReplyContext) (Reply, error) { return Pass(), nil }
	tr := &turn{a: a, sess: NewSession("s", fixedNow()), st: NewState()}
	rep, err := a.generateReply(context.Background(), &ReplyContext{Message: "hm", turn: tr})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kind != KindStop || rep.Text == "" || rep.Reason == "" {
		t.Fatalf("default reply must be non-empty with a reason: %+v", rep)
	}
}

func TestHooksWorkOnACopy(t *testing.T) {
	a := &Agent{set: Settings{Secrets: []string{"topsecretvalue123"}}}
	if err := a.RegisterHook(HookProcessLastReceived, func(s string) string { return strings.ToUpper(s) }); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterHook(HookProcessAllBeforeReply, func(m []llm.Message) []llm.Message {
		m[0].Content = "mutated"
		return m
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterHook(HookUpdateAgentState, func(rc *ReplyContext) { rc.Extra = append(rc.Extra, "today") }); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterHook("bogus", func() {}); err == nil {
		t.Fatal("unknown hook kind accepted")
	}
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
