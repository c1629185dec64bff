package pipeline

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

//go:embed prompts/analyzer.md
var analyzerPrompt string

//go:embed prompts/gatherer.md
var gathererPrompt string

//go:embed prompts/responder.md
var responderPrompt string

// errBudget: the turn has spent its LLM calls.
var errBudget = errors.New("LLM call budget of the turn exhausted")

// chat makes one LLM call on behalf of a node, within the turn's budget.
func (t *turn) chat(ctx context.Context, node string, req llm.Request) (*llm.Response, error) {
	if t.llmCalls >= t.a.maxCalls() {
		return nil, errBudget
	}
	t.llmCalls++
	req.Model = t.a.Model
	req.Node = node
	if req.Temperature == nil {
		req.Temperature = t.a.Temperature
	}
	resp, err := t.a.LLM.Chat(llm.WithNode(ctx, node), req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", node, err)
	}
	t.usage.Add(resp.Usage)
	return resp, nil
}

// runGraph carries the turn through the nodes from start until the turn
// ends, saving a checkpoint at every node boundary.
func (a *Agent) runGraph(ctx context.Context, t *turn, start string) (Reply, error) {
	node := start
	for node != nodeEnd {
		if t.transitions >= maxTransitions {
			t.terminated = fmt.Sprintf("node transition limit (%d) reached", maxTransitions)
			break
		}
		t.transitions++
		t.trace = append(t.trace, node)
		next, err := a.runNode(ctx, t, node)
		if errors.Is(err, errBudget) {
			t.terminated = fmt.Sprintf("LLM call limit (%d) reached in this turn", a.maxCalls())
			break
		}
		if err != nil {
			return Reply{}, err
		}
		if err := a.save(t, checkpoint.StatusRunning, next); err != nil {
			return Reply{}, err
		}
		node = next
	}
	if t.terminated != "" {
		text := t.st.FinalResponse
		if text == "" {
			text = fmt.Sprintf("I stopped this turn: %s. Nothing else was run; send a message to continue.", t.terminated)
			if t.pausing && t.plan != nil {
				text += "\n\n" + t.plan.Message
			}
		}
		return StopWith(t.terminated, text), nil
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

// ---- analyzer ----

type analyzeArgs struct {
	IntentType         string  `json:"intent_type" jsonschema:"direct_answer or needs_info"`
	Confidence         float64 `json:"confidence" jsonschema:"0 to 1"`
	UserRequestSummary string  `json:"user_request_summary"`
	Reasoning          string  `json:"reasoning"`
	UserConfirmed      *bool   `json:"user_confirmed,omitempty" jsonschema:"only when a confirmation is pending: true, false, or null when unclear"`
	DirectResponse     string  `json:"direct_response,omitempty" jsonschema:"the full answer, for direct_answer only"`
}

var analyzeTool = newTool("analyze_user_request", "Classify the person's message.", false,
	func(context.Context, *turn, analyzeArgs) (any, error) { return nil, nil })

var analyzerTools = newToolSet(analyzeTool)

// parseToolArgs validates and decodes the arguments of a forced tool call.
func parseToolArgs[T any](d *toolDef, call llm.ToolCall) (T, error) {
	var v T
	var inst any
	if err := json.Unmarshal([]byte(call.Arguments), &inst); err != nil {
		return v, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if err := d.resolved.Validate(inst); err != nil {
		return v, fmt.Errorf("invalid arguments: %v", err)
	}
	if err := decodeStrict(json.RawMessage(call.Arguments), &v); err != nil {
		return v, err
	}
	return v, nil
}

func (a *Agent) analyzer(ctx context.Context, t *turn) (string, error) {
	ctxInfo := map[string]any{}
	if t.pendingAtStart != nil && !t.continuation {
		ctxInfo["pending_confirmation"] = map[string]any{"action": t.pendingAtStart.Action, "message": t.pendingAtStart.Message}
	}
	if t.st.ActionNeeded != "" && !t.continuation {
		ctxInfo["action_in_progress"] = map[string]any{"action": t.st.ActionNeeded, "params": t.st.ActionParams, "missing": t.st.MissingParams}
	}
	if len(t.extra) > 0 {
		ctxInfo["notes"] = t.extra // from update_agent_state hooks
	}
	var user string
	if t.continuation {
		user = fmt.Sprintf("Continue this request: %s\nDone so far: %s\nNext step: %s", t.st.UserRequestSummary, t.doneSoFar(), t.nextStep)
	} else {
		user = t.input
	}
	msgs := a.promptMessages(t, analyzerPrompt, ctxInfo, user)
	req := llm.Request{Messages: msgs, Tools: analyzerTools.llm, ToolChoice: llm.Force(analyzeTool.name), ParallelToolCalls: boolPtr(false)}

	var args analyzeArgs
	var parsed bool
	for attempt := 0; attempt < 2 && !parsed; attempt++ {
		resp, err := t.chat(ctx, NodeAnalyzer, req)
		if err != nil {
			return nodeEnd, err
		}
		call, ok := findCall(resp.ToolCalls, analyzeTool.name)
		if !ok {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: resp.Content},
				llm.Message{Role: llm.RoleUser, Content: "Call analyze_user_request."})
			continue
		}
		args, err = parseToolArgs[analyzeArgs](analyzeTool, call)
		if err == nil && args.IntentType != IntentDirectAnswer && args.IntentType != IntentNeedsInfo {
			err = fmt.Errorf("intent_type must be direct_answer or needs_info, got %q", args.IntentType)
		}
		if err != nil {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
				llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: errorResult(err.Error())})
			continue
		}
		parsed = true
	}
	if !parsed {
		// Two malformed answers: fall back to gathering, which can still
		// answer or ask, rather than failing the turn.
		args = analyzeArgs{IntentType: IntentNeedsInfo, UserRequestSummary: t.input}
	}
	if !t.continuation {
		t.st.IntentType = args.IntentType
		t.st.Confidence = args.Confidence
		t.st.UserRequestSummary = args.UserRequestSummary
	}
	d := analyzerDecision{intent: args.IntentType, directResponse: strings.TrimSpace(args.DirectResponse),
		userConfirmed: args.UserConfirmed, pendingAtStart: t.pendingAtStart != nil && !t.approved, continuation: t.continuation}
	if t.continuation {
		t.continuation = false
	}
	next := routeAfterAnalyzer(d)
	if d.pendingAtStart && !d.continuation {
		switch {
		case d.userConfirmed == nil:
			t.reask = true
			t.plan = t.pendingAtStart
			t.pausing = true
		case *d.userConfirmed:
			t.approve("answer")
		default:
			t.deny()
		}
		t.st.UserConfirmed = d.userConfirmed
	}
	if next == nodeEnd {
		t.st.FinalResponse = d.directResponse
		t.directDone = true
		a.respond(t, d.directResponse)
	}
	return next, nil
}

func boolPtr(b bool) *bool { return &b }

func findCall(calls []llm.ToolCall, name string) (llm.ToolCall, bool) {
	for _, c := range calls {
		if c.Name == name {
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
	for _, ao := range t.actionsRun {
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
	if t.st.ActionNeeded != "" {
		ctxInfo["action_in_progress"] = map[string]any{"action": t.st.ActionNeeded, "params": t.st.ActionParams, "missing": t.st.MissingParams}
	}
	user := t.input
	if t.nextStep != "" {
		user = "Next step of the request: " + t.nextStep
		t.nextStep = ""
	}
	msgs := a.promptMessages(t, gathererPrompt, ctxInfo, user)
	ts := a.gTools()
	for {
		resp, err := t.chat(ctx, NodeGatherer, llm.Request{Messages: msgs, Tools: ts.llm, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceAuto}})
		if err != nil {
			return nodeEnd, err
		}
		if len(resp.ToolCalls) == 0 {
			break
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
		for _, o := range ts.execute(ctx, t, resp.ToolCalls) {
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: o.call.ID, Name: o.call.Name, Content: o.content})
		}
		if actionComplete(t.st) {
			break // no extra LLM round just to hear that the gatherer is done
		}
		if t.st.ActionNeeded != "" && len(t.st.MissingParams) > 0 {
			break // only the person can give the rest
		}
	}
	o := gathererOutcome{actionComplete: actionComplete(t.st)}
	if o.actionComplete {
		ok, err := a.validatePending(ctx, t)
		if err != nil {
			t.recordError(err)
		}
		o.valid = ok
	}
	return routeAfterGatherer(o), nil
}

// actionComplete: an action is chosen, its params are set and nothing is
// missing.
func actionComplete(s *State) bool {
	return s.ActionNeeded != "" && s.ActionParams != nil && len(s.MissingParams) == 0
}

// validatePending runs the Go validation of the pending action. Problems
// become validation errors and missing params.
func (a *Agent) validatePending(ctx context.Context, t *turn) (bool, error) {
	raw, err := json.Marshal(t.st.ActionParams)
	if err != nil {
		return false, err
	}
	if tl, ok := a.mcpAction(t.st.ActionNeeded); ok {
		args, err := checkMCPParams(tl, t.st.ActionParams)
		if err != nil {
			t.st.addError(ErrTypeValidation, fmt.Sprintf("%s arguments: %v", tl.QualifiedName, err))
			return false, nil
		}
		t.mcpPlan = a.mcpPlan(tl, args)
		return true, nil
	}
	p, err := actions.Parse(t.st.ActionNeeded, raw)
	if err != nil {
		t.st.addError(ErrTypeValidation, err.Error())
		return false, nil
	}
	problems, err := actions.Validate(ctx, t.api(), p)
	if err != nil {
		return false, err
	}
	for _, pr := range problems {
		t.st.Errors = append(t.st.Errors, ErrorEntry{Type: ErrTypeValidation, Message: pr.Message, Field: pr.Field})
		if pr.Missing && !slices.Contains(t.st.MissingParams, pr.Field) {
			t.st.MissingParams = append(t.st.MissingParams, pr.Field)
		}
	}
	if len(problems) > 0 {
		return false, nil
	}
	t.params = p
	return true, nil
}

// ---- confirmation ----

func (a *Agent) confirmation(ctx context.Context, t *turn) (string, error) {
	var plan *actions.Plan
	var needsHuman bool
	if t.mcpPlan != nil {
		plan = t.mcpPlan
		tl, _ := a.mcpAction(string(plan.Action))
		needsHuman = mcpNeedsConfirmation(a.policy(), tl) && !a.Yes
	} else {
		if t.params == nil {
			return NodeResponder, fmt.Errorf("confirmation reached without validated params")
		}
		var err error
		plan, err = actions.BuildPlan(ctx, t.api(), t.params)
		if err != nil {
			t.recordError(err)
			return NodeResponder, nil
		}
		needsHuman = actions.RequiresConfirmation(a.policy(), plan.Action) && !a.Yes
	}
	t.plan = plan
	if a.policy() == PolicyNever && !a.Yes {
		needsHuman = true // never is only honoured together with --yes
	}
	if needsHuman {
		if err := t.setConfirmationInterrupt(plan); err != nil {
			return nodeEnd, err
		}
		t.pausing = true
	} else if a.Yes {
		t.approve("yes-flag")
	} else {
		t.approve("policy")
	}
	return routeAfterConfirmation(needsHuman), nil
}

func (t *turn) setConfirmationInterrupt(plan *actions.Plan) error {
	hash, err := checkpoint.ParamsHash(string(plan.Action), plan.Params)
	if err != nil {
		return err
	}
	t.sess.CP.Interrupt = &checkpoint.Interrupt{
		ID: t.a.newID(), Kind: checkpoint.KindConfirmation, CreatedAt: t.a.now(),
		Confirmation: &checkpoint.Confirmation{Action: string(plan.Action), Params: plan.Params, ParamsHash: hash,
			Message: plan.Message, Destructive: plan.Destructive, ExperimentID: plan.ExperimentID, ExperimentVersion: plan.ExperimentVersion},
	}
	t.st.NeedsConfirmation = true
	t.st.ConfirmationMessage = plan.Message
	return nil
}

func (t *turn) approve(by string) {
	t.approved = true
	t.approvedBy = by
	if t.plan == nil {
		t.plan = t.pendingAtStart
	}
	if by == "human" || by == "answer" {
		t.humanDecided = true
		v := true
		t.st.UserConfirmed = &v
	}
}

func (t *turn) deny() {
	t.denied = true
	t.humanDecided = true
	if t.pendingAtStart != nil {
		t.deniedAction = string(t.pendingAtStart.Action)
	}
	v := false
	t.st.UserConfirmed = &v
	t.st.clearPending()
	t.sess.CP.Interrupt = nil
	t.plan = nil
	t.pendingAtStart = nil
}

// ---- executor ----

func (a *Agent) executor(ctx context.Context, t *turn) (string, error) {
	plan := t.plan
	if plan == nil || !t.approved {
		// Only a plan the confirmation node built and a human (or policy
		// with --yes) approved ever runs.
		t.st.addError(ErrTypeUnknown, "nothing approved to execute")
		return NodeResponder, nil
	}
	fromEarlierTurn := t.pendingAtStart != nil && plan == t.pendingAtStart
	if fromEarlierTurn {
		if ok, err := a.checkBinding(ctx, t, plan); err != nil || !ok {
			return NodeResponder, err
		}
	}
	_, isMCP := a.mcpAction(string(plan.Action))
	var p actions.Params
	if !isMCP {
		var err error
		p, err = actions.Parse(string(plan.Action), plan.Params)
		if err != nil {
			t.st.addError(ErrTypeValidation, err.Error())
			return NodeResponder, nil
		}
	}
	spec, _ := actions.Lookup(string(plan.Action))
	hash, err := checkpoint.ParamsHash(string(plan.Action), plan.Params)
	if err != nil {
		return nodeEnd, err
	}
	effectID := a.newID()
	if err := t.sess.CP.StartEffect(effectID, string(plan.Action), hash, a.now()); err != nil {
		return nodeEnd, err
	}
	if err := a.save(t, checkpoint.StatusRunning, NodeExecutor); err != nil {
		return nodeEnd, err
	}
	nextStep := t.st.NextStep
	if isMCP {
		done, err := a.executeMCP(ctx, t, effectID, plan)
		if err != nil {
			return nodeEnd, err
		}
		if !done {
			return routeAfterExecutor(true, "", false), nil
		}
	} else if spec.LongRunning {
		done, err := a.startJob(ctx, t, effectID, plan, p)
		if err != nil {
			return nodeEnd, err
		}
		if !done {
			return routeAfterExecutor(true, "", false), nil
		}
	} else {
		execCtx := ctx
		if plan.Action == actions.CreateExperiment {
			// A create gets an id derived from the confirmation it executes:
			// if a crash hides whether it landed, executing that confirmation
			// again upserts the same experiment instead of making a twin.
			key := effectID
			if ic := t.sess.CP.Interrupt; fromEarlierTurn && ic != nil {
				key = ic.ID
			}
			execCtx = upgrade.WithCreateID(ctx, upgrade.IDFrom(key))
		}
		result, execErr := actions.Execute(execCtx, t.api(), p)
		a.recordExecution(t, effectID, plan, result, execErr)
	}
	if spec.WritesExperiments {
		t.st.invalidateExperiments()
	}
	failed := len(t.actionsRun) > 0 && t.actionsRun[len(t.actionsRun)-1].Status != "success"
	t.st.clearPending()
	t.sess.CP.Interrupt = nil
	t.pendingAtStart = nil
	t.plan = nil
	t.approved = false
	if failed {
		nextStep = ""
	}
	if nextStep != "" {
		t.continuation = true
		t.nextStep = nextStep
	}
	return routeAfterExecutor(false, nextStep, false), nil
}

// checkBinding refuses a pending plan whose params no longer match what was
// shown, or whose experiment changed since (a stale plan, as terraform
// refuses a stale saved plan). The plan is rebuilt and asked again.
func (a *Agent) checkBinding(ctx context.Context, t *turn, plan *actions.Plan) (bool, error) {
	conf := t.sess.CP.Interrupt
	hash, err := checkpoint.ParamsHash(string(plan.Action), plan.Params)
	if err != nil {
		return false, err
	}
	mismatch := conf == nil || conf.Confirmation == nil || conf.Confirmation.ParamsHash != hash
	if !mismatch && t.st.ActionParams != nil {
		cur, err := json.Marshal(t.st.ActionParams)
		if err == nil {
			h2, err := checkpoint.ParamsHash(t.st.ActionNeeded, cur)
			mismatch = err != nil || h2 != hash
		}
	}
	stale := false
	if _, isMCP := a.mcpAction(string(plan.Action)); !mismatch && !isMCP {
		stale, err = actions.IsStale(ctx, t.api(), plan)
		if err != nil {
			t.recordError(err)
			return false, nil
		}
	}
	if !mismatch && !stale {
		return true, nil
	}
	t.approved = false
	var fresh *actions.Plan
	if tl, ok := a.mcpAction(t.st.ActionNeeded); ok {
		args, err := checkMCPParams(tl, t.st.ActionParams)
		if err != nil {
			t.st.addError(ErrTypeValidation, "the pending action changed and is no longer valid: "+err.Error())
			t.st.clearPending()
			t.sess.CP.Interrupt = nil
			return false, nil
		}
		fresh = a.mcpPlan(tl, args)
	} else {
		raw, _ := json.Marshal(t.st.ActionParams)
		p, err := actions.Parse(t.st.ActionNeeded, raw)
		if err != nil {
			t.st.addError(ErrTypeValidation, "the pending action changed and is no longer valid: "+err.Error())
			t.st.clearPending()
			t.sess.CP.Interrupt = nil
			return false, nil
		}
		fresh, err = actions.BuildPlan(ctx, t.api(), p)
		if err != nil {
			t.recordError(err)
			return false, nil
		}
	}
	if err := t.setConfirmationInterrupt(fresh); err != nil {
		return false, err
	}
	t.plan = fresh
	t.pendingAtStart = nil
	t.pausing = true
	t.staleNote = "The action changed since it was shown (the experiment was modified, or the parameters differ), so nothing ran. Please confirm the updated action."
	return false, nil
}

// recordExecution finishes the effect and writes the execution log entry.
func (a *Agent) recordExecution(t *turn, effectID string, plan *actions.Plan, result json.RawMessage, execErr error) {
	now := a.now()
	entry := LogEntry{Timestamp: now.Format("2006-01-02T15:04:05Z07:00"), Action: string(plan.Action), Params: plan.Params}
	out := ActionOut{Action: string(plan.Action), Params: plan.Params}
	if execErr != nil {
		_ = t.sess.CP.FinishEffect(effectID, nil, execErr.Error(), now)
		entry.Status, entry.Error, entry.ErrorType = "error", execErr.Error(), errorType(execErr)
		out.Status, out.Error = "error", execErr.Error()
		t.recordError(execErr)
	} else {
		_ = t.sess.CP.FinishEffect(effectID, result, "", now)
		entry.Status, entry.Result = "success", result
		out.Status, out.Result = "success", result
	}
	t.st.addLog(entry)
	t.actionsRun = append(t.actionsRun, out)
}

// ---- responder ----

func (a *Agent) responder(ctx context.Context, t *turn) (string, error) {
	report := t.report()
	msgs := a.promptMessages(t, responderPrompt, nil, "")
	last := &msgs[len(msgs)-1]
	last.Content = "Message: " + t.input + "\n\nTurn report: " + compactJSON(report)
	ts := a.rTools()
	var text string
	for round := 0; ; round++ {
		req := llm.Request{Messages: msgs, Tools: ts.llm, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceAuto}}
		if a.StreamText != nil {
			req.Stream = true
			req.OnText = a.StreamText
		}
		if round >= 3 {
			req.Tools, req.ToolChoice = nil, llm.ToolChoice{}
		}
		resp, err := t.chat(ctx, NodeResponder, req)
		if errors.Is(err, errBudget) {
			text = fallbackText(report)
			t.terminated = fmt.Sprintf("LLM call limit (%d) reached in this turn", a.maxCalls())
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
	if t.pausing && t.plan != nil && !strings.Contains(text, t.plan.Message) {
		// The person must read the confirmation node's text verbatim.
		text += "\n\n" + t.plan.Message
	}
	t.st.FinalResponse = text
	a.respond(t, text)
	return routeAfterResponder(a.outputEnabled()), nil
}

// respond hands the reply to the caller as soon as it is final.
func (a *Agent) respond(t *turn, text string) {
	if t.responded {
		return
	}
	t.responded = true
	if a.OnResponse != nil {
		a.OnResponse(text)
	}
}

// report is what the responder is told about the turn, so that most replies
// need no tool call.
func (t *turn) report() map[string]any {
	r := map[string]any{}
	if t.st.UserRequestSummary != "" {
		r["request"] = t.st.UserRequestSummary
	}
	if t.pausing && t.plan != nil {
		c := map[string]any{"action": t.plan.Action, "destructive": t.plan.Destructive, "message": t.plan.Message}
		if len(t.plan.Warnings) > 0 {
			c["warnings"] = t.plan.Warnings
		}
		if t.reask {
			c["answer_was_unclear"] = true
		}
		if t.staleNote != "" {
			c["note"] = t.staleNote
		}
		r["awaiting_confirmation"] = c
	}
	if t.denied {
		r["denied"] = map[string]any{"action": t.deniedAction, "note": "the person said no; nothing was run and the pending action was dropped"}
	}
	if len(t.actionsRun) > 0 {
		r["actions"] = t.actionsRun
	}
	if len(t.reconciled) > 0 {
		r["recovered"] = t.reconciled
	}
	if len(t.st.Errors) > 0 {
		r["errors"] = t.st.Errors
	}
	if !t.pausing && t.st.ActionNeeded != "" {
		r["action_in_progress"] = map[string]any{"action": t.st.ActionNeeded, "params": t.st.ActionParams, "missing_params": t.st.MissingParams}
	}
	if len(t.toolResults) > 0 {
		r["data"] = limitData(t.toolResults, 12000)
	}
	if t.jobStatus != nil {
		r["job"] = t.jobStatus
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
	if c, ok := report["awaiting_confirmation"].(map[string]any); ok {
		b.WriteString("Please confirm.")
		_ = c
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

// turnAPI gives actions the turn's memoised context metadata, so a turn
// fetches it at most once.
type turnAPI struct {
	Backend
	t *turn
}

func (x turnAPI) ContextMetadata(ctx context.Context) (upgrade.ContextMetadata, error) {
	return x.t.metadata(ctx)
}

func (t *turn) api() turnAPI { return turnAPI{Backend: t.a.API, t: t} }
