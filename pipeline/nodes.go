package pipeline

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

//go:embed prompts/analyzer.md
var analyzerPrompt string

//go:embed prompts/gatherer.md
var gathererPrompt string

//go:embed prompts/responder.md
var responderPrompt string

// ---- analyzer ----

type analyzeArgs struct {
	IntentType         string  `json:"intent_type" jsonschema:"direct_answer or needs_info"`
	Confidence         float64 `json:"confidence" jsonschema:"0 to 1"`
	UserRequestSummary string  `json:"user_request_summary"`
	Reasoning          string  `json:"reasoning"`
	UserConfirmed      *bool   `json:"user_confirmed,omitempty" jsonschema:"pending confirmation only: false when refused, else null (only the person approves)"`
	DirectResponse     string  `json:"direct_response,omitempty" jsonschema:"the full answer, for direct_answer only"`
	ChangeRequested    *bool   `json:"change_requested,omitempty" jsonschema:"with user_confirmed false: true when a changed action is asked for (no, use 60/40)"`
	NeedsAction        *bool   `json:"needs_action,omitempty" jsonschema:"needs_info only: true to change something on the server, false for a question"`
	// Object is what the request is about; the gatherer is offered that
	// object's tools. Null or absent: not sure (every tool).
	Object *string `json:"object,omitempty"`
}

const analyzeToolName = "analyze_user_request"

func analyzeTool() *toolDef {
	return newTool(analyzeToolName, "Classify the person's message.", false,
		func(context.Context, *turn, analyzeArgs) (any, error) { return nil, nil })
}

// analyzerLookups are the lookups the analyzer carries beside
// analyze_user_request: the first lookups of a needs_info request arrive
// with its classification and run as the gatherer's first round, sharing
// the round trip. Few and short, one finder per object, so that no
// request pays much for the tools of other objects; a call of any other
// read-only gatherer tool is taken all the same.
var analyzerLookups = [...]string{"get_context_metadata", "get_core_terms", "get_assignment_terms", "find_experiment",
	"get_all_experiments", "find_feature_flag", "find_segment"}

func (a *Agent) analyzer(ctx context.Context, t *turn) (string, error) {
	deciding := t.pending != nil && !t.continuation && t.answer == answerNone
	ctxInfo := map[string]any{}
	if deciding {
		ctxInfo["pending_confirmation"] = map[string]any{"action": t.pending.Bound.Name, "message": t.pending.Message}
	}
	if t.action() != "" && !t.continuation && !deciding {
		ctxInfo["action_in_progress"] = t.draftView()
	}
	if len(t.extra) > 0 {
		ctxInfo["notes"] = t.extra // from update_agent_state hooks
	}
	user := t.input
	if t.continuation {
		user = fmt.Sprintf("Continue this request: %s\nDone so far: %s\nNext step: %s", t.st.UserRequestSummary, t.doneSoFar(), t.nextStep)
	}
	msgs := a.promptMessages(t, analyzerPrompt, ctxInfo, user)
	req := llm.Request{Messages: msgs, Tools: a.aTools().llm, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}}

	args, text, err := a.analyze(ctx, t, req)
	if err != nil {
		return nodeEnd, err
	}
	continuation := t.continuation
	t.continuation = false
	if args == nil {
		// No usable classification. A provider that ignores tool_choice
		// answers in plain text: that text is the answer to a message
		// that needs nothing else; otherwise gathering can still answer
		// or ask.
		if text != "" && !deciding && !continuation {
			t.st.IntentType = IntentDirectAnswer
			return a.answerDirectly(t, text), nil
		}
		args = &analyzeArgs{IntentType: IntentNeedsInfo, UserRequestSummary: t.input}
	}
	if !continuation {
		t.st.IntentType = args.IntentType
		t.st.Confidence = args.Confidence
		t.st.UserRequestSummary = args.UserRequestSummary
	}
	t.infoOnly = args.NeedsAction != nil && !*args.NeedsAction
	if args.Object != nil {
		t.object, _ = a.reg().ParseObject(*args.Object) // not one it knows: every tool
	} else if !continuation {
		t.object = actions.ObjectNone
	}
	direct := strings.TrimSpace(args.DirectResponse)
	if deciding {
		t.st.UserConfirmed = args.UserConfirmed
		switch readAnswer(args, t.input) {
		case answerChanged:
			t.deny(true)
			return NodeGatherer, nil
		case answerDenied:
			t.deny(false)
			if direct != "" {
				return a.answerDirectly(t, direct), nil
			}
			return NodeResponder, nil
		default:
			// Unclear, or a model claiming the person approved: only the
			// person's own words approve. Ask again, run nothing.
			t.answer = answerUnclear
			return a.reshow(ctx, t, direct)
		}
	}
	next := routeAfterAnalyzer(args.IntentType, direct)
	if next == nodeEnd {
		return a.answerDirectly(t, direct), nil
	}
	return next, nil
}

// analyze makes the analyzer's forced call, with at most one retry when the
// answer is not a valid call. It returns the call's arguments (nil when
// there is none) and any plain text the model wrote instead.
func (a *Agent) analyze(ctx context.Context, t *turn, req llm.Request) (*analyzeArgs, string, error) {
	var text string
	for attempt := 0; attempt < 2; attempt++ {
		resp, err := t.chat(ctx, NodeAnalyzer, req)
		if err != nil {
			return nil, text, err
		}
		call, ok := findCall(resp.ToolCalls, analyzeToolName)
		if !ok && len(a.lookupCalls(resp.ToolCalls)) > 0 {
			// Lookups without the classification: the request needs
			// information, and these are its first lookups.
			t.prefetch = a.lookupCalls(resp.ToolCalls)
			return &analyzeArgs{IntentType: IntentNeedsInfo, UserRequestSummary: t.input}, "", nil
		}
		if !ok {
			call, ok = textCall(resp.Content, analyzeToolName, "intent_type")
		}
		if !ok {
			text = strings.TrimSpace(resp.Content)
			if text != "" && !looksLikeCall(text) {
				// The provider ignores tool_choice: another try would
				// most likely get text again.
				return nil, text, nil
			}
			text = "" // a call the model tried to write as text is no answer
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: resp.Content},
				llm.Message{Role: llm.RoleUser, Content: "Call analyze_user_request."})
			continue
		}
		args, err := decodeArgs[analyzeArgs](call)
		if err == nil {
			args.IntentType = strings.ToLower(strings.TrimSpace(args.IntentType))
			if args.IntentType != IntentDirectAnswer && args.IntentType != IntentNeedsInfo {
				err = fmt.Errorf("intent_type: got %q: use direct_answer or needs_info", args.IntentType)
			}
		}
		if err == nil {
			if args.IntentType == IntentNeedsInfo {
				t.prefetch = a.lookupCalls(resp.ToolCalls)
			}
			return &args, "", nil
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
			llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: errorResult(err.Error())})
	}
	return nil, text, nil
}

// lookupCalls are the analyzer's calls of read-only gatherer tools: the
// lookups it carries, or any other it names.
func (a *Agent) lookupCalls(calls []llm.ToolCall) []llm.ToolCall {
	var out []llm.ToolCall
	ts := a.aTools()
	for _, c := range calls {
		if d := ts.lookup(c.Name); d != nil && d.readOnly {
			out = append(out, c)
		}
	}
	return out
}

// textCall reads a call to the tool name that a model without a tool-call
// parser wrote as text: {"name": ..., "arguments": {...}} ("parameters"
// for Llama), alone, in <tool_call> tags (Qwen, Hermes) or in a code
// fence; or the arguments object alone, recognised by its key.
func textCall(content, name, key string) (llm.ToolCall, bool) {
	i, j := strings.Index(content, "{"), strings.LastIndex(content, "}")
	if i < 0 || j < i {
		return llm.ToolCall{}, false
	}
	obj, err := decodeObject(json.RawMessage(content[i : j+1]))
	if err != nil {
		return llm.ToolCall{}, false
	}
	args, hasArgs := obj["arguments"]
	if !hasArgs {
		args, hasArgs = obj["parameters"]
	}
	n, _ := obj["name"].(string)
	switch {
	case hasArgs && strings.EqualFold(toolName(n), name):
	case obj[key] != nil:
		args = obj
	default:
		return llm.ToolCall{}, false
	}
	raw := compactJSON(args)
	if s, ok := args.(string); ok {
		raw = s // the arguments encoded twice
	}
	return llm.ToolCall{ID: "call_in_text", Name: name, Arguments: raw}, true
}

// looksLikeCall: text that starts like a tool call written out (JSON, a
// code fence, call tags) is no answer to show the person.
func looksLikeCall(text string) bool {
	for _, p := range []string{"{", "```", "<tool_call>", "<|python_tag|>", "<function"} {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// readAnswer reads the analyzer's view of an answer to a pending
// confirmation. It can deny, or deny with a change; it never approves: a
// user_confirmed true from the model is unclear.
func readAnswer(args *analyzeArgs, message string) answerKind {
	if args.UserConfirmed == nil || *args.UserConfirmed {
		return answerUnclear
	}
	changed := args.IntentType == IntentNeedsInfo && changeCue.Get().MatchString(message)
	if args.ChangeRequested != nil {
		changed = *args.ChangeRequested
	}
	if changed {
		return answerChanged
	}
	return answerDenied
}

// changeCue: words and figures that carry a change in a denial ("no, use
// 60/40 instead"), for models that do not fill change_requested;
// compiled on first use, not at init.
var changeCue = lazyre.Of(`(?i)\b(instead|use|change|make it|set|rather|switch|with|but)\b|\d`)

// answerDirectly ends the turn with text written by the analyzer.
func (a *Agent) answerDirectly(t *turn, text string) string {
	t.st.FinalResponse = text
	a.respond(t, text)
	return nodeEnd
}

// reshow asks the pending confirmation again, with its current text. When
// the analyzer already answered something the person asked, that answer
// and the confirmation are the reply, with no responder call.
func (a *Agent) reshow(ctx context.Context, t *turn, direct string) (string, error) {
	p := t.pending
	cur, stale, err := a.currentPending(ctx, t, p)
	if err != nil {
		t.recordError(err)
		cur = p
	}
	note := ""
	if stale {
		note = staleNote
	}
	if direct != "" && !stale {
		t.showing = cur
		t.st.FinalResponse = direct + "\n\n" + cur.Message
		a.respond(t, t.st.FinalResponse)
		return nodeEnd, nil
	}
	return nodeEnd, &awaitConfirmation{p: cur, note: note}
}

func boolPtr(b bool) *bool { return &b }

// findCall finds a tool call by name, ignoring case (some models write
// Analyze_User_Request).
func findCall(calls []llm.ToolCall, name string) (llm.ToolCall, bool) {
	for _, c := range calls {
		if strings.EqualFold(toolName(c.Name), name) {
			return c, true
		}
	}
	return llm.ToolCall{}, false
}

// promptMessages lays out a node's messages: the fixed system prompt first
// (a byte-identical prefix across calls of the node), then the window of
// recent exchanges, then one user message with this turn's context.
func (a *Agent) promptMessages(t *turn, system string, ctxInfo map[string]any, user string) []llm.Message {
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: system}}
	if n := len(t.messages); n > 1 {
		msgs = append(msgs, t.messages[:n-1]...)
	}
	var b strings.Builder
	if len(ctxInfo) > 0 {
		b.WriteString("Context: ")
		b.WriteString(compactJSON(ctxInfo))
		b.WriteString("\n\n")
	}
	b.WriteString("Message: ")
	b.WriteString(user)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: b.String()})
	return msgs
}

func (t *turn) doneSoFar() string {
	var parts []string
	for _, ao := range t.st.TurnActions {
		parts = append(parts, fmt.Sprintf("%s %s %s", ao.Action, ao.Status, string(ao.Result)))
	}
	return strings.Join(parts, "; ")
}

// ---- gatherer ----

func (a *Agent) gatherer(ctx context.Context, t *turn) (string, error) {
	ctxInfo := map[string]any{"request": t.st.UserRequestSummary}
	if mcpActs := a.mcpActionList(); len(mcpActs) > 0 {
		ctxInfo["mcp_actions"] = mcpActs
	}
	if t.action() != "" {
		ctxInfo["action_in_progress"] = t.draftView()
	}
	if t.answer == answerChanged {
		ctxInfo["denied"] = "the person said no to the confirmation of the action in progress and asked for the change in their message: apply it with update_action_params"
	}
	user := t.input
	if t.nextStep != "" {
		user = "Next step of the request: " + t.nextStep
		t.nextStep = ""
	}
	scope := a.scopeOf(t)
	msgs := a.promptMessages(t, a.gathererSystem(scope), ctxInfo, user)
	ts := a.gTools(scope)
	t.takeStop()
	if calls := t.prefetch; len(calls) > 0 {
		// The analyzer's lookups are this node's first round.
		t.prefetch = nil
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: calls})
		for _, o := range ts.execute(ctx, t, calls) {
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: o.call.ID, Name: o.call.Name, Content: o.content})
		}
		if t.infoOnly && t.action() == "" {
			return NodeResponder, nil // a question: the responder has what it needs (and may look up more)
		}
	}
	chosenBefore := t.action()
	draftHash := func() string {
		if b := t.draft(); b != nil {
			return b.Hash
		}
		return ""
	}
	for {
		resp, err := t.chat(ctx, NodeGatherer, llm.Request{Messages: msgs, Tools: ts.llm, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceAuto}})
		if err != nil {
			return nodeEnd, err
		}
		if len(resp.ToolCalls) == 0 {
			break // the model has nothing more to look up or set
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
		hashBefore := draftHash()
		for _, o := range ts.execute(ctx, t, resp.ToolCalls) {
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: o.call.ID, Name: o.call.Name, Content: o.content})
		}
		// Complete and valid: no extra LLM round just to hear that the
		// gatherer is done. Unless the model is building an action it
		// chose in this turn key by key: the required keys may come
		// before the optional ones it was asked for (a mark's condition,
		// a user's groups), so it is asked once more, for as long as each
		// such reply changes the action: a reply that changes nothing ends
		// the loop.
		if t.draftReady() && (t.action() == chosenBefore || !ts.keyByKey(resp.ToolCalls) || draftHash() == hashBefore) {
			break
		}
		if t.takeStop() {
			break // the model said what only the person can give, or gave a full set the person must correct
		}
		if t.infoOnly && t.action() == "" && ts.allReadOnly(resp.ToolCalls) {
			break // a question's lookups are done: no extra round just to hear that the gatherer is finished
		}
	}
	if t.answer == answerChanged {
		if b := t.draft(); b != nil && t.denied != nil && b.Hash == t.denied.Bound.Hash {
			// The no carried nothing the gatherer could apply: it is a
			// plain no, and the action shown is dropped, never shown again.
			t.answer = answerDenied
			t.sess.deny(false)
			return NodeResponder, nil
		}
	}
	hasAction := t.action() != ""
	if hasAction {
		if err := a.validateDraft(ctx, t); err != nil {
			t.recordError(err)
			return NodeResponder, nil
		}
		if !t.draftReady() {
			for _, pr := range t.problems {
				t.st.Errors = append(t.st.Errors, ErrorEntry{Type: pr.Type(), Message: pr.Detail(), Field: pr.Field})
			}
		}
	}
	return routeAfterGatherer(hasAction, t.draftReady()), nil
}

// ---- confirmation ----

// confirmation builds the exact, deterministic confirmation of the draft
// action. The policy (or --yes) may approve it at once; otherwise the turn
// shows it and pauses.
func (a *Agent) confirmation(ctx context.Context, t *turn) (string, error) {
	b := t.draft()
	if b == nil || !t.draftReady() {
		return NodeResponder, errors.New("confirmation reached without a complete, valid action")
	}
	plan, err := b.Plan(ctx, a.env(t.api(), t.sess.cp.SessionID))
	if err != nil {
		t.recordError(err)
		return NodeResponder, nil
	}
	needsHuman := b.Spec().NeedsConfirmation(a.policy()) && !a.set.Yes
	if a.policy() == PolicyNever && !a.set.Yes {
		needsHuman = true // never is only honoured together with --yes (New refuses it; this holds anyway)
	}
	p := newPending(a.newID(), b, plan, a.now(), needsHuman)
	if needsHuman {
		return nodeEnd, &awaitConfirmation{p: p}
	}
	// Recorded on the session all the same: the effects of its execution
	// are reconciled against it after a crash.
	t.sess.await(p)
	by := "policy"
	if a.set.Yes {
		by = "yes-flag"
	}
	t.approve(p, by)
	return NodeExecutor, nil
}

// ---- responder ----

func (a *Agent) responder(ctx context.Context, t *turn) (string, error) {
	if text, ok := a.goReply(t); ok {
		t.st.FinalResponse = text
		a.respond(t, text)
		return routeAfterResponder(a.outputEnabled()), nil
	}
	report := t.report()
	msgs := a.promptMessages(t, responderPrompt, nil, "")
	last := &msgs[len(msgs)-1]
	last.Content = "Message: " + t.input + "\n\nTurn report: " + compactJSON(report)
	ts := a.rTools()
	var text string
	for round := 0; ; round++ {
		req := llm.Request{Messages: msgs, Tools: ts.llm, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceAuto}}
		if a.streamText != nil {
			req.Stream = true
			req.OnText = a.streamText
		}
		if round >= 3 {
			req.Tools, req.ToolChoice = nil, llm.ToolChoice{}
		}
		resp, err := t.chat(ctx, NodeResponder, req)
		if errors.Is(err, errBudget) {
			text = fallbackText(report)
			t.end.terminated = fmt.Sprintf("LLM call limit (%d) reached in this turn", a.maxCalls())
			break
		}
		if err != nil {
			return nodeEnd, err
		}
		if len(resp.ToolCalls) == 0 {
			text = strings.TrimSpace(resp.Content)
			break
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
		for _, o := range ts.execute(ctx, t, resp.ToolCalls) {
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: o.call.ID, Name: o.call.Name, Content: o.content})
		}
	}
	if text == "" {
		text = fallbackText(report)
	}
	if p := t.showing; p != nil && !strings.Contains(text, p.Message) {
		// The person must read the confirmation node's text verbatim.
		text += "\n\n" + p.Message
	}
	text = expiryNoted(t, text)
	t.st.FinalResponse = text
	a.respond(t, text)
	return routeAfterResponder(a.outputEnabled()), nil
}

// report is what the responder is told about the turn, so that most replies
// need no tool call.
func (t *turn) report() map[string]any {
	r := map[string]any{}
	if t.st.UserRequestSummary != "" {
		r["request"] = t.st.UserRequestSummary
	}
	if p := t.showing; p != nil {
		c := map[string]any{"action": p.Bound.Name, "destructive": p.Destructive, "message": p.Message}
		if len(p.Warnings) > 0 {
			c["warnings"] = p.Warnings
		}
		if len(p.Facts) > 0 {
			c["facts"] = p.Facts
		}
		if t.answer == answerUnclear {
			c["answer_was_unclear"] = true
		}
		if len(t.notes) > 0 {
			c["notes"] = t.notes
		}
		r["awaiting_confirmation"] = c
	}
	if t.denied != nil {
		r["denied"] = map[string]any{"action": t.denied.Bound.Name, "note": "the person said no; nothing was run and the pending action was dropped"}
	}
	if len(t.st.TurnActions) > 0 {
		r["actions"] = t.st.TurnActions
	}
	if len(t.recovered) > 0 {
		r["recovered"] = t.recovered
	}
	if len(t.st.Errors) > 0 {
		r["errors"] = t.st.Errors
	}
	if t.showing == nil && t.action() != "" {
		r["action_in_progress"] = t.draftView()
	}
	if len(t.toolResults) > 0 {
		r["data"] = limitData(t.toolResults, 12000)
	}
	if t.job != nil {
		r["job"] = t.job
	}
	return r
}

// limitData keeps the report bounded: later results are dropped first.
func limitData(rs []namedResult, budget int) []namedResult {
	out := []namedResult{}
	used := 0
	for _, r := range rs {
		n := len(compactJSON(r.Result))
		if used+n > budget {
			out = append(out, namedResult{Tool: r.Tool, Result: "(omitted: too large; call a tool to read it)"})
			continue
		}
		used += n
		out = append(out, r)
	}
	return out
}

// fallbackText is the reply Go writes when no model reply can be had.
func fallbackText(report map[string]any) string {
	var b strings.Builder
	if _, ok := report["awaiting_confirmation"].(map[string]any); ok {
		b.WriteString("Please confirm.")
	}
	if acts, ok := report["actions"].([]ActionOut); ok {
		for _, a := range acts {
			fmt.Fprintf(&b, "%s: %s %s\n", a.Action, a.Status, strings.TrimSpace(string(a.Result)+" "+a.Error))
		}
	}
	if errs, ok := report["errors"].([]ErrorEntry); ok {
		for _, e := range errs {
			fmt.Fprintf(&b, "%s error: %s\n", e.Type, e.Message)
		}
	}
	if b.Len() == 0 {
		b.WriteString("Done.")
	}
	return strings.TrimSpace(b.String())
}
