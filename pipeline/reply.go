package pipeline

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/llm"
)

// The reply chain, modelled on AG2's ConversableAgent.generate_reply: hooks
// prepare a copy of the messages, then reply functions are asked in order
// until one returns a final answer.

// ReplyKind says whether a reply function answered.
type ReplyKind int

// Reply kinds.
const (
	KindPass  ReplyKind = iota // not mine: ask the next function
	KindReply                  // final reply text
	KindStop                   // end the turn (and say why)
)

// Reply is what a reply function returns.
type Reply struct {
	Kind   ReplyKind
	Text   string
	Reason string // termination_reason for KindStop
}

// Pass lets the next reply function answer.
func Pass() Reply { return Reply{Kind: KindPass} }

// ReplyWith answers with text.
func ReplyWith(text string) Reply { return Reply{Kind: KindReply, Text: text} }

// StopWith ends the turn with text and a termination reason.
func StopWith(reason, text string) Reply { return Reply{Kind: KindStop, Reason: reason, Text: text} }

// ReplyContext is what reply functions and hooks see. Messages is a deep copy:
// changing it never changes the stored history.
type ReplyContext struct {
	Message                string        // the incoming message, after hooks
	Messages               []llm.Message // recent exchanges then the incoming message
	Extra                  []string      // context lines added by update_agent_state hooks
	PendingAction          string        // action awaiting confirmation, if any
	ConsecutiveAutoReplies int
	turn                   *turn
}

// ReplyFunc is a registered reply function.
type ReplyFunc func(ctx context.Context, rc *ReplyContext) (Reply, error)

// Trigger decides whether a reply function is asked at all (nil: always).
type Trigger func(rc *ReplyContext) bool

type registeredReply struct {
	name    string
	trigger Trigger
	fn      ReplyFunc
}

// PositionBeforeLLM registers a reply function just before the LLM pipeline,
// after the built-in termination and human-reply checks.
const PositionBeforeLLM = -1

// RegisterReply adds a reply function. position 0 is checked first;
// PositionBeforeLLM (or any position past the end) puts it just before the
// LLM pipeline, which is always last.
func (a *Agent) RegisterReply(name string, trigger Trigger, fn ReplyFunc, position int) {
	a.ensureChain()
	r := registeredReply{name: name, trigger: trigger, fn: fn}
	last := len(a.replies) - 1 // the LLM pipeline
	if position < 0 || position > last {
		position = last
	}
	a.replies = slices.Insert(a.replies, position, r)
}

// HookKind names the three hook points.
type HookKind string

// Hook kinds, in the order they run.
const (
	HookUpdateAgentState      HookKind = "update_agent_state"
	HookProcessLastReceived   HookKind = "process_last_received_message"
	HookProcessAllBeforeReply HookKind = "process_all_messages_before_reply"
)

type hooks struct {
	state []func(rc *ReplyContext)
	last  []func(text string) string
	all   []func(msgs []llm.Message) []llm.Message
}

// RegisterHook adds a hook. fn must be func(*ReplyContext) for
// update_agent_state, func(string) string for process_last_received_message
// and func([]llm.Message) []llm.Message for process_all_messages_before_reply.
func (a *Agent) RegisterHook(kind HookKind, fn any) error {
	switch kind {
	case HookUpdateAgentState:
		f, ok := fn.(func(*ReplyContext))
		if !ok {
			return fmt.Errorf("hook %s: want func(*ReplyContext), got %T", kind, fn)
		}
		a.hooks.state = append(a.hooks.state, f)
	case HookProcessLastReceived:
		f, ok := fn.(func(string) string)
		if !ok {
			return fmt.Errorf("hook %s: want func(string) string, got %T", kind, fn)
		}
		a.hooks.last = append(a.hooks.last, f)
	case HookProcessAllBeforeReply:
		f, ok := fn.(func([]llm.Message) []llm.Message)
		if !ok {
			return fmt.Errorf("hook %s: want func([]llm.Message) []llm.Message, got %T", kind, fn)
		}
		a.hooks.all = append(a.hooks.all, f)
	default:
		return fmt.Errorf("unknown hook kind %q", kind)
	}
	return nil
}

// PatternReply is a config-registered fixed reply: when Pattern matches the
// message, Reply is the answer and no LLM is called.
type PatternReply struct {
	Pattern *regexp.Regexp
	Reply   string
}

// ensureChain installs the built-in reply functions once: termination check,
// human reply, config pattern replies, then the LLM pipeline.
func (a *Agent) ensureChain() {
	if a.replies != nil {
		return
	}
	a.replies = []registeredReply{
		{name: "termination", fn: a.replyTermination},
		{name: "human_reply", fn: a.replyHuman},
	}
	for _, p := range a.PatternReplies {
		a.replies = append(a.replies, registeredReply{name: "pattern:" + p.Pattern.String(),
			trigger: func(rc *ReplyContext) bool { return p.Pattern.MatchString(rc.Message) },
			fn:      func(context.Context, *ReplyContext) (Reply, error) { return ReplyWith(p.Reply), nil }})
	}
	a.replies = append(a.replies, registeredReply{name: "llm_pipeline", fn: a.replyLLM})
}

// prepare runs the hooks on a copy of the messages.
func (a *Agent) prepare(t *turn, message string) *ReplyContext {
	hist := t.st.ConversationHistory
	msgs := make([]llm.Message, 0, 2*len(hist)+1)
	for _, ex := range hist {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: ex.User}, llm.Message{Role: llm.RoleAssistant, Content: ex.Assistant})
	}
	rc := &ReplyContext{turn: t, ConsecutiveAutoReplies: t.sess.CP.Counters.ConsecutiveAutoReplies}
	if t.pendingAtStart != nil {
		rc.PendingAction = string(t.pendingAtStart.Action)
	}
	for _, h := range a.hooks.state {
		h(rc)
	}
	msg := redact(message, a.Secrets)
	for _, h := range a.hooks.last {
		msg = h(msg)
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: msg})
	// The built-in trim keeps a window of recent exchanges: prompts stay the
	// same size however long the session grows.
	msgs = windowMessages(msgs, promptWindow)
	for _, h := range a.hooks.all {
		msgs = h(slices.Clone(msgs))
	}
	rc.Message = msg
	rc.Messages = msgs
	return rc
}

// windowMessages keeps the last n exchanges before the final message.
func windowMessages(msgs []llm.Message, n int) []llm.Message {
	if len(msgs) <= 2*n+1 {
		return msgs
	}
	return slices.Clone(msgs[len(msgs)-(2*n+1):])
}

var keyPattern = regexp.MustCompile(`\b(sk-[A-Za-z0-9_\-]{16,}|Bearer\s+[A-Za-z0-9._\-]{16,})`)

// redact removes API keys and tokens from an incoming message so they never
// reach the model, the history or a checkpoint.
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 8 {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	return keyPattern.ReplaceAllString(s, "[REDACTED]")
}

// generateReply asks the reply functions in order.
func (a *Agent) generateReply(ctx context.Context, rc *ReplyContext) (Reply, error) {
	a.ensureChain()
	for _, r := range a.replies {
		if r.trigger != nil && !r.trigger(rc) {
			continue
		}
		rep, err := r.fn(ctx, rc)
		if err != nil {
			return Reply{}, err
		}
		if rep.Kind != KindPass {
			if rep.Text == "" && rep.Kind == KindReply {
				continue
			}
			return rep, nil
		}
	}
	return StopWith("no reply function answered",
		"I could not produce a reply to that message: no reply function answered. Try rephrasing the request."), nil
}

var defaultTerminationWords = []string{"exit", "quit", "bye"}

// replyTermination ends the turn on a termination word or when the
// consecutive auto-reply limit is reached.
func (a *Agent) replyTermination(_ context.Context, rc *ReplyContext) (Reply, error) {
	w := normalizeAnswer(rc.Message)
	words := a.TerminationWords
	if len(words) == 0 {
		words = defaultTerminationWords
	}
	for _, tw := range words {
		if w == normalizeAnswer(tw) {
			rc.turn.terminateSession = true
			return StopWith(fmt.Sprintf("termination word %q", tw), "Goodbye. Nothing further will run in this session."), nil
		}
	}
	if a.MaxConsecutiveAutoReplies > 0 && rc.ConsecutiveAutoReplies >= a.MaxConsecutiveAutoReplies {
		rc.turn.resetAutoReplies = true
		return StopWith(fmt.Sprintf("consecutive auto-reply limit (%d) reached", a.MaxConsecutiveAutoReplies),
			fmt.Sprintf("I have answered %d messages in a row without a human decision, so I stopped here. Send your next message to continue.", rc.ConsecutiveAutoReplies)), nil
	}
	return Pass(), nil
}

// replyHuman decides a pending confirmation when the answer is a clear yes
// or no, without the LLM.
func (a *Agent) replyHuman(ctx context.Context, rc *ReplyContext) (Reply, error) {
	t := rc.turn
	ans := clearAnswer(rc.Message)
	if t.pendingAtStart == nil {
		if len(t.reconciled) > 0 && ans != answerUnclear {
			// The interrupted action was settled with the server: report
			// it instead of treating the answer as a new request.
			return a.runGraph(ctx, t, NodeResponder)
		}
		return Pass(), nil
	}
	if t.forceReask {
		t.plan, t.pausing, t.reask = t.pendingAtStart, true, true
		t.staleNote = "The previous attempt was interrupted and its outcome is unknown; check the server before confirming again."
		return a.runGraph(ctx, t, NodeResponder)
	}
	if a.Yes && ans != answerNo {
		// --yes approves the pending confirmation of this run.
		t.approve("yes-flag")
		return a.runGraph(ctx, t, NodeExecutor)
	}
	switch ans {
	case answerYes:
		t.approve("human")
		return a.runGraph(ctx, t, NodeExecutor)
	case answerNo:
		t.deny()
		return a.runGraph(ctx, t, NodeResponder)
	}
	return Pass(), nil
}

// replyLLM is the LLM pipeline: the graph from the analyzer.
func (a *Agent) replyLLM(ctx context.Context, rc *ReplyContext) (Reply, error) {
	return a.runGraph(ctx, rc.turn, NodeAnalyzer)
}

type answer int

const (
	answerUnclear answer = iota
	answerYes
	answerNo
)

var yesWords = []string{"yes", "y", "ok", "okay", "sure", "confirm", "proceed", "go ahead", "do it"}
var noWords = []string{"no", "n", "cancel", "stop", "abort", "don't", "dont"}

// normalizeAnswer lowercases, trims and drops trailing punctuation.
func normalizeAnswer(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimRight(s, ".!?, ")
	s = strings.ReplaceAll(s, "’", "'")
	return strings.TrimSpace(s)
}

// clearAnswer classifies a confirmation answer without the LLM.
func clearAnswer(s string) answer {
	w := normalizeAnswer(s)
	if slices.Contains(yesWords, w) {
		return answerYes
	}
	if slices.Contains(noWords, w) {
		return answerNo
	}
	return answerUnclear
}
