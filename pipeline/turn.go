package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// turn is everything one turn accumulates while it runs. It never outlives
// the turn; what must survive is on the Session (interrupt, effects) or in
// State. Its parts are grouped by who uses them: the pending confirmation
// and what the turn made of it (confirmation, confirm.go), the draft's
// gathering (gathering, draft.go), the memoised reads (reads, reads.go),
// the analyzer's hand-over to the gatherer (handoff) and the budget
// (accounting).
type turn struct {
	a    *Agent
	sess *Session
	st   *State
	mu   sync.Mutex // guards st and the fields below during concurrent tool calls

	input    string        // the message, after hooks: the only copy kept
	messages []llm.Message // recent exchanges after hooks, for prompts
	extra    []string      // context lines from update_agent_state hooks

	accounting
	reads
	gathering
	confirmation
	handoff

	recovered []map[string]any // what crash recovery settled
	job       *JobStatus
	output    map[string]any
	responded bool

	end ending
}

// accounting is what bounds a turn and what its result reports of it.
type accounting struct {
	trace       []string
	llmCalls    int
	usage       llm.Usage
	estimated   bool // a provider sent no usage: characters/4
	transitions int
}

// handoff is what the analyzer hands the gatherer, and the executor the
// analyzer, within a turn.
type handoff struct {
	prefetch     []llm.ToolCall // the analyzer's lookups: the gatherer's first round
	infoOnly     bool           // the analyzer said the request is a question (needs_action false)
	object       actions.Object // what the analyzer said the request is about: the gatherer's scope (none: every tool)
	continuation bool           // the analyzer runs after the executor for a next step
	nextStep     string         // the step the analyzer and gatherer work on after an execution
}

// answerKind is what a turn made of a pending confirmation.
type answerKind int

const (
	answerNone     answerKind = iota
	answerApproved            // the person's clear yes, --yes, or the policy
	answerDenied              // a no: the pending action is dropped
	answerChanged             // a no with a correction: gather the changed action
	answerUnclear             // ask again, run nothing
	answerReasked             // a clear answer that may not approve (unseen, stale, expired or interrupted): a note says why, ask again
)

// ending is how a turn ends besides its interrupt (which the Session holds).
type ending struct {
	terminated       string // termination_reason
	terminateSession bool   // a termination word ended the session
	resetAutoReplies bool   // the auto-reply limit fired: start counting again
	failure          error  // the first auth or connection failure: the turn fails with it
}

type namedResult struct {
	Tool   string `json:"tool"`
	Result any    `json:"result"`
}

// takeStop reports and clears the gatherer's stop signal.
func (t *turn) takeStop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stop
	t.stop = false
	return s
}

// errBudget: the turn has spent its LLM calls.
var errBudget = errors.New("LLM call budget of the turn exhausted")

// chat makes one LLM call on behalf of a node, within the turn's budget.
func (t *turn) chat(ctx context.Context, node string, req llm.Request) (*llm.Response, error) {
	if t.llmCalls >= t.a.maxCalls() {
		return nil, errBudget
	}
	t.llmCalls++
	req.Model = t.a.set.Model
	req.Node = node
	if req.Temperature == nil {
		req.Temperature = t.a.set.Temperature
	}
	ctx, span := startChatSpan(ctx, node, req)
	resp, err := t.a.deps.LLM.Chat(llm.WithNode(ctx, node), req)
	endChatSpan(ctx, span, resp, err)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", node, err)
	}
	t.usage.Add(resp.Usage)
	t.estimated = t.estimated || resp.UsageEstimated
	return resp, nil
}

// respond hands the reply to the caller as soon as it is final.
func (a *Agent) respond(t *turn, text string) {
	if t.responded {
		return
	}
	t.responded = true
	if a.onResponse != nil {
		a.onResponse(text)
	}
}

func (t *turn) update(fn func(s *State)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t.st)
}

func (t *turn) noteToolResult(name string, res any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if strings.HasPrefix(name, "set_") || strings.HasPrefix(name, "update_") || name == "add_error" {
		return
	}
	t.toolResults = append(t.toolResults, namedResult{Tool: name, Result: res})
}

// recordError classifies an error from UpGrade or elsewhere into
// State.Errors. An authentication failure, or an UpGrade that gives no
// answer at all, also fails the turn: the reply still explains it, and the
// exit code says it (3 or 1).
func (t *turn) recordError(err error) {
	typ := errorType(err)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.end.failure == nil && failsTurn(err) {
		t.end.failure = err
	}
	t.st.addError(typ, err.Error())
}

// failsTurn is the one rule for errors met during a turn: credentials
// refused (UpGrade or the LLM), or UpGrade failing as a server (no answer,
// a 5xx with a JSON body or an HTML page, a body that is no answer) fail the
// turn; the reply still explains what happened. What the request itself got
// wrong (validation, not_found) is for the model and the person to fix.
func failsTurn(err error) bool {
	typ := errorType(err)
	return typ == ErrTypeAuth || upgrade.CategoryOf(err) == upgrade.CategoryAPI
}

// errorType maps an error to the types of pipeline.md, by the error's kind.
func errorType(err error) string {
	if c := upgrade.CategoryOf(err); c != "" {
		return string(c)
	}
	var je *actions.JobError
	if errors.As(err, &je) {
		return je.Type()
	}
	var pe *actions.ParseError
	if errors.As(err, &pe) {
		return ErrTypeValidation
	}
	var le *llm.Error
	if errors.As(err, &le) && le.Kind == llm.KindAuth {
		return ErrTypeAuth
	}
	return ErrTypeUnknown
}
