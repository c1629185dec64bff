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

// registeredReply is one function of the chain. A built-in one may route
// instead of replying: it names the node the graph starts from.
type registeredReply struct {
	name    string
	trigger Trigger
	fn      ReplyFunc
	route   func(ctx context.Context, rc *ReplyContext) (start string, ok bool, err error)
}

// PositionBeforeLLM registers a reply function just before the LLM pipeline,
// after the built-in termination and human-reply checks.
const PositionBeforeLLM = -1

// WithReply adds a reply function to the chain. position 0 is checked
// first; PositionBeforeLLM (or any position past the end) puts it just
// before the LLM pipeline, which is always last. Functions are placed in
// the order the options are given.
func WithReply(name string, trigger Trigger, fn ReplyFunc, position int) Option {
	return func(a *Agent) {
		a.replies = append(a.replies, registeredReply{name: name, trigger: trigger, fn: fn})
		a.replyAt = append(a.replyAt, position)
	}
}

// hooks are the three hook points of the reply chain, in the order they
// run: update_agent_state, process_last_received_message,
// process_all_messages_before_reply.
type hooks struct {
	state []func(rc *ReplyContext)
	last  []func(text string) string
	all   []func(msgs []llm.Message) []llm.Message
}

// WithStateHook adds an update_agent_state hook: it may add context lines
// (rc.Extra) before the message is read.
func WithStateHook(fn func(rc *ReplyContext)) Option {
	return func(a *Agent) { a.hooks.state = append(a.hooks.state, fn) }
}

// WithMessageHook adds a process_last_received_message hook: it rewrites
// the incoming text (after the built-in redaction of secrets).
func WithMessageHook(fn func(text string) string) Option {
	return func(a *Agent) { a.hooks.last = append(a.hooks.last, fn) }
}

// WithHistoryHook adds a process_all_messages_before_reply hook: it gets a
// copy of the recent messages and returns the ones prompts use.
func WithHistoryHook(fn func(msgs []llm.Message) []llm.Message) Option {
	return func(a *Agent) { a.hooks.all = append(a.hooks.all, fn) }
}

// PatternReply is a config-registered fixed reply: when Pattern matches the
// message, Reply is the answer and no LLM is called.
type PatternReply struct {
	Pattern *regexp.Regexp
	Reply   string
}

// buildChain lays out the reply chain once, in New: termination check,
// human reply, config pattern replies, the functions given with WithReply
// at their positions, then the LLM pipeline.
func (a *Agent) buildChain() {
	given, at := a.replies, a.replyAt
	chain := []registeredReply{
		{name: "termination", fn: a.replyTermination},
		{name: "human_reply", route: a.replyHuman},
	}
	for _, p := range a.set.PatternReplies {
		chain = append(chain, registeredReply{name: "pattern:" + p.Pattern.String(),
			trigger: func(rc *ReplyContext) bool { return p.Pattern.MatchString(rc.Message) },
			fn:      func(context.Context, *ReplyContext) (Reply, error) { return ReplyWith(p.Reply), nil }})
	}
	chain = append(chain, registeredReply{name: "llm_pipeline",
		route: func(context.Context, *ReplyContext) (string, bool, error) { return NodeAnalyzer, true, nil }})
	for i, r := range given {
		last := len(chain) - 1 // the LLM pipeline
		pos := at[i]
		if pos < 0 || pos > last {
			pos = last
		}
		chain = slices.Insert(chain, pos, r)
	}
	a.replies, a.replyAt = chain, nil
}

// prepare runs the hooks on a copy of the messages.
func (a *Agent) prepare(t *turn, message string) *ReplyContext {
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
	msgs := a.history(t, msg)
	for _, h := range a.hooks.all {
		msgs = h(slices.Clone(msgs))
	}
	rc.Message = msg
	rc.Messages = msgs
	return rc
}

// window is the built-in part of prepare, for a turn no message starts (a
// decision, a job's completion, a crashed turn's rest): the redacted text
// and the window of recent exchanges, without the hooks.
func (a *Agent) window(t *turn, text string) (string, []llm.Message) {
	msg := redact.String(text, a.set.Secrets...)
	return msg, a.history(t, msg)
}

// history is the window of recent exchanges then msg: prompts stay the
// same size however long the session grows.
func (a *Agent) history(t *turn, msg string) []llm.Message {
	hist := t.st.ConversationHistory
	msgs := make([]llm.Message, 0, 2*len(hist)+1)
	for _, ex := range hist {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: ex.User}, llm.Message{Role: llm.RoleAssistant, Content: ex.Assistant})
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: msg})
	return windowMessages(msgs, promptWindow)
}

// windowMessages keeps the last n exchanges before the final message.
func windowMessages(msgs []llm.Message, n int) []llm.Message {
	if len(msgs) <= 2*n+1 {
		return msgs
	}
	return slices.Clone(msgs[len(msgs)-(2*n+1):])
}

// generateReply asks the reply functions in order. The first final answer
// wins: a reply, or a route into the graph (start, from the human reply or
// the LLM pipeline).
func (a *Agent) generateReply(ctx context.Context, rc *ReplyContext) (rep Reply, start string, err error) {
	for _, r := range a.replies {
		if r.trigger != nil && !r.trigger(rc) {
			continue
		}
		if r.route != nil {
			start, ok, err := r.route(ctx, rc)
			if err != nil || ok {
				return Reply{}, start, err
			}
			continue
		}
		rep, err := r.fn(ctx, rc)
		if err != nil {
			return Reply{}, nodeEnd, err
		}
		if rep.Kind != KindPass {
			if rep.Text == "" && rep.Kind == KindReply {
				continue
			}
			return rep, nodeEnd, nil
		}
	}
	return StopWith("no reply function answered",
		"I could not produce a reply to that message: no reply function answered. Try rephrasing the request."), nodeEnd, nil
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

// replyHuman routes what the chat path must not send to the analyzer: a
// confirmation the person has not read is shown again, whatever the words;
// under --yes, the pending confirmation is approved unless the person's
// own words begin by refusing it ("no, use 60/40": those go to the
// analyzer as a denial or a change, and a changed action shown in this run
// is approved by --yes in its turn); and an answer given while crash
// recovery settled the interrupted action gets that report. A clear yes
// or no never comes here: Run reads it as a Decision first.
func (a *Agent) replyHuman(ctx context.Context, rc *ReplyContext) (string, bool, error) {
	t := rc.turn
	switch {
	case t.pending == nil && len(t.recovered) > 0 && clearAnswer(rc.Message) != answerUnclear:
		// The interrupted action was settled with the server: report it
		// instead of treating the answer as a new request.
		return NodeResponder, true, nil
	case t.pending != nil && (t.reaskOnly() || a.set.Yes && !startsWithNo(rc.Message)):
		// An unread confirmation is shown again whatever the words say.
		start, err := a.decide(ctx, t, true, "yes-flag")
		return start, true, err
	}
	return nodeEnd, false, nil
}

// ParseDecision reads a clear yes or no ("yes please", "no thanks"): ok is
// false for anything else, which is free text for the analyzer. Front ends
// make a Decision of it, addressed to the pending confirmation.
func ParseDecision(text string) (approve, ok bool) {
	switch clearAnswer(text) {
	case answerApproved:
		return true, true
	case answerDenied:
		return false, true
	}
	return false, false
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
