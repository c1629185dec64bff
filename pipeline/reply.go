package pipeline

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
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
	for _, p := range a.set.PatternReplies {
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
	rc := &ReplyContext{turn: t, ConsecutiveAutoReplies: t.sess.cp.Counters.ConsecutiveAutoReplies}
	if t.pending != nil {
		rc.PendingAction = t.pending.Bound.Name
	}
	for _, h := range a.hooks.state {
		h(rc)
	}
	msg := redact.String(message, a.set.Secrets...) // never reaches the model, the history or a checkpoint
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
	words := a.set.TerminationWords
	if len(words) == 0 {
		words = defaultTerminationWords
	}
	for _, tw := range words {
		if w == normalizeAnswer(tw) {
			rc.turn.end.terminateSession = true
			return StopWith(fmt.Sprintf("termination word %q", tw), "Goodbye. Nothing further will run in this session."), nil
		}
	}
	if a.set.MaxConsecutiveAutoReplies > 0 && rc.ConsecutiveAutoReplies >= a.set.MaxConsecutiveAutoReplies {
		rc.turn.end.resetAutoReplies = true
		return StopWith(fmt.Sprintf("consecutive auto-reply limit (%d) reached", a.set.MaxConsecutiveAutoReplies),
			fmt.Sprintf("I have answered %d messages in a row without a human decision, so I stopped here. Send your next message to continue.", rc.ConsecutiveAutoReplies)), nil
	}
	return Pass(), nil
}

// replyHuman decides what the chat path must not send to the analyzer: a
// confirmation the person has not read is shown again, whatever the words;
// under --yes, the pending confirmation is approved unless the person's
// own words begin by refusing it ("no, use 60/40": those go to the
// analyzer as a denial or a change, and a changed action shown in this run
// is approved by --yes in its turn); and an answer given while crash
// recovery settled the interrupted action gets that report. A clear yes
// or no never comes here: Ask reads it as a Decision first.
func (a *Agent) replyHuman(ctx context.Context, rc *ReplyContext) (Reply, error) {
	t := rc.turn
	var next string
	switch {
	case t.pending == nil && len(t.recovered) > 0 && clearAnswer(rc.Message) != answerUnclear:
		// The interrupted action was settled with the server: report it
		// instead of treating the answer as a new request.
		next = NodeResponder
	case t.pending != nil && (t.reaskOnly || a.set.Yes && !startsWithNo(rc.Message)):
		// An unread confirmation is shown again whatever the words say.
		var err error
		if next, err = a.decide(ctx, t, Approve, "yes-flag"); err != nil {
			return Reply{}, err
		}
	default:
		return Pass(), nil
	}
	return a.runGraph(ctx, t, next)
}

// Decision is a person's clear answer to a pending confirmation: the
// words of pipeline.md's clear answers, `resume --answer yes|no`, or
// --yes. It enters the graph at the executor or the responder directly;
// only free text goes to the analyzer.
type Decision int

// Decisions.
const (
	Approve Decision = iota + 1
	Deny
)

// ParseDecision reads a clear yes or no ("yes please", "no thanks"); ok is
// false for anything else, which is free text for the analyzer.
func ParseDecision(text string) (d Decision, ok bool) {
	switch clearAnswer(text) {
	case answerApproved:
		return Approve, true
	case answerDenied:
		return Deny, true
	}
	return 0, false
}

// decide applies a decision to the turn's pending confirmation and says
// which node the graph goes on from: the executor runs an approved action;
// the responder reports a denial, or shows the confirmation again when the
// person has not read it yet (only a no may stand for an answer given
// before that) or when crash recovery already settled it.
func (a *Agent) decide(ctx context.Context, t *turn, d Decision, by string) (string, error) {
	switch {
	case t.pending == nil:
		return NodeResponder, nil
	case t.reaskOnly && d != Deny:
		t.answer = answerReasked
		return NodeResponder, a.showAgain(ctx, t)
	case d == Deny:
		t.deny(false)
		return NodeResponder, nil
	}
	t.approve(t.pending, by)
	return NodeExecutor, nil
}

// showAgain makes the turn show the pending confirmation again, with its
// current text.
func (a *Agent) showAgain(ctx context.Context, t *turn) error {
	cur, stale, err := a.currentPending(ctx, t, t.pending)
	if err != nil {
		return err
	}
	i := &awaitConfirmation{p: cur}
	if stale {
		i.note = staleNote
	}
	_, _, err = a.pause(t, i)
	return err
}

// replyLLM is the LLM pipeline: the graph from the analyzer.
func (a *Agent) replyLLM(ctx context.Context, rc *ReplyContext) (Reply, error) {
	return a.runGraph(ctx, rc.turn, NodeAnalyzer)
}

// The clear answers of pipeline.md: a yes or no word, or a phrase built
// only from them and politeness ("yes please", "yes, go ahead", "ok, do
// it", "no thanks"). Anything that questions or changes the action is not
// clear and goes to the analyzer, which can never approve.
var (
	yesPhrases = [][]string{{"yes"}, {"y"}, {"ok"}, {"okay"}, {"sure"}, {"confirm"}, {"confirmed"}, {"proceed"},
		{"go", "ahead"}, {"do", "it"}, {"yeah"}, {"yep"}, {"yup"}, {"go", "for", "it"}, {"approve"}, {"approved"},
		{"sounds", "good"}, {"looks", "good"}, {"please", "proceed"}, {"please", "do"}}
	noPhrases = [][]string{{"no"}, {"n"}, {"cancel"}, {"stop"}, {"abort"}, {"don't"}, {"dont"}, {"do", "not"},
		{"nope"}, {"nah"}, {"never", "mind"}, {"nevermind"}, {"don't", "do", "it"}, {"do", "not", "do", "it"}}
	politeness = [][]string{{"please"}, {"thanks"}, {"thank", "you"}, {"thx"}, {"ty"}, {"kindly"}}
)

// normalizeAnswer lowercases, trims and drops trailing punctuation.
func normalizeAnswer(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimRight(s, ".!?, ")
	s = strings.ReplaceAll(s, "’", "'")
	return strings.TrimSpace(s)
}

// clearAnswer classifies a confirmation answer without the LLM.
func clearAnswer(s string) answerKind {
	words := answerWords(s)
	if len(words) == 0 {
		return answerUnclear
	}
	switch {
	case coveredBy(words, yesPhrases):
		return answerApproved
	case coveredBy(words, noPhrases):
		return answerDenied
	}
	return answerUnclear
}

// answerWords lowercases s and splits it into words at blanks and
// punctuation (apostrophes stay: don't).
func answerWords(s string) []string {
	s = strings.ToLower(strings.ReplaceAll(s, "’", "'"))
	return strings.FieldsFunc(s, func(r rune) bool {
		return r != '\'' && !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// coveredBy reports whether words is a sequence of the phrases and of
// politeness, with at least one phrase.
func coveredBy(words []string, phrases [][]string) bool {
	seen := false
	for i := 0; i < len(words); {
		n := matchPhrase(words[i:], phrases)
		if n > 0 {
			seen = true
			i += n
			continue
		}
		if n = matchPhrase(words[i:], politeness); n > 0 {
			i += n
			continue
		}
		return false
	}
	return seen
}

// startsWithNo reports whether s begins with a no phrase ("no, use 60/40",
// "don't, make it 40").
func startsWithNo(s string) bool {
	return matchPhrase(answerWords(s), noPhrases) > 0
}

// matchPhrase returns the length of the longest phrase words starts with.
func matchPhrase(words []string, phrases [][]string) int {
	best := 0
	for _, p := range phrases {
		if len(p) > best && len(p) <= len(words) && slices.Equal(words[:len(p)], p) {
			best = len(p)
		}
	}
	return best
}
