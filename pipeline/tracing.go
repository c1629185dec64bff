package pipeline

import (
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/internal/tracing"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// The spans of a turn (docs/tracing.md). Attributes the GenAI conventions
// do not name carry the upgrade_agent. prefix.
const (
	agentName    = "upgrade-agent"
	providerName = "openai" // every model is reached through an OpenAI-compatible API

	attrTurn       = attribute.Key("upgrade_agent.turn")
	attrStatus     = attribute.Key("upgrade_agent.status")
	attrExitCode   = attribute.Key("upgrade_agent.exit_code")
	attrInput      = attribute.Key("upgrade_agent.input")
	attrNode       = attribute.Key("upgrade_agent.node")
	attrAction     = attribute.Key("upgrade_agent.action")
	attrTarget     = attribute.Key("upgrade_agent.target")
	attrActionKey  = attribute.Key("upgrade_agent.action.key")
	attrJobID      = attribute.Key("upgrade_agent.job.id")
	attrEstimated  = attribute.Key("upgrade_agent.usage.estimated")
	errTypeUnknown = "unknown_tool"
	errTypeInput   = "invalid_arguments"
)

func inputKind(in Input) string {
	switch in.(type) {
	case Message:
		return "message"
	case Decision:
		return "decision"
	case JobCheck:
		return "job_check"
	case Continue:
		return "continue"
	}
	return "none"
}

// startTurnSpan starts the invoke_agent span of one turn.
func (a *Agent) startTurnSpan(ctx context.Context, sess *Session, in Input) (context.Context, trace.Span) {
	if !tracing.On(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracing.Start(ctx, "invoke_agent "+agentName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		tracing.GenAIOperationName.String(tracing.GenAIOperationInvokeAgent), tracing.GenAIProviderName.String(providerName),
		tracing.GenAIAgentName.String(agentName), tracing.GenAIConversationID.String(sess.cp.SessionID),
		attrInput.String(inputKind(in))))
}

// endTurnSpan records the turn's outcome and ends its span.
func (a *Agent) endTurnSpan(span trace.Span, sess *Session, res *Result, err error) {
	if !span.IsRecording() {
		return
	}
	status := StatusFailed
	turnNo := sess.cp.Counters.Turns
	if res != nil {
		status, turnNo = res.Status, res.Turn
		span.SetAttributes(tracing.GenAIUsageInputTokens.Int(res.Usage.PromptTokens),
			tracing.GenAIUsageOutputTokens.Int(res.Usage.CompletionTokens))
	}
	span.SetAttributes(attrTurn.Int(turnNo), attrStatus.String(string(status)))
	if a.deps.ExitCode != nil {
		span.SetAttributes(attrExitCode.Int(a.deps.ExitCode(status, err)))
	}
	tracing.End(span, err)
}

// startChatSpan starts the span of one LLM call.
func startChatSpan(ctx context.Context, node string, req llm.Request) (context.Context, trace.Span) {
	if !tracing.On(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	name := "chat"
	if req.Model != "" {
		name += " " + req.Model
	}
	ctx, span := tracing.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		tracing.GenAIOperationName.String(tracing.GenAIOperationChat), tracing.GenAIProviderName.String(providerName),
		tracing.GenAIRequestModel.String(req.Model), attrNode.String(node)))
	if tracing.Content(ctx) {
		span.SetAttributes(tracing.GenAIInputMessages.String(tracing.Redact(ctx, messagesJSON(req.Messages))))
	}
	return ctx, span
}

func endChatSpan(ctx context.Context, span trace.Span, resp *llm.Response, err error) {
	if !span.IsRecording() {
		return
	}
	if resp != nil {
		span.SetAttributes(tracing.GenAIUsageInputTokens.Int(resp.Usage.PromptTokens),
			tracing.GenAIUsageOutputTokens.Int(resp.Usage.CompletionTokens),
			tracing.GenAIResponseFinishReasons.StringSlice([]string{finishReason(resp)}))
		if resp.UsageEstimated {
			span.SetAttributes(attrEstimated.Bool(true))
		}
		if tracing.Content(ctx) {
			out := llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls}
			span.SetAttributes(tracing.GenAIOutputMessages.String(tracing.Redact(ctx, messagesJSON([]llm.Message{out}))))
		}
	}
	tracing.End(span, err)
}

func finishReason(resp *llm.Response) string {
	switch {
	case resp.FinishReason != "":
		return resp.FinishReason
	case len(resp.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// messagesJSON renders messages in the shape of the GenAI conventions'
// gen_ai.input.messages: a role and its parts.
func messagesJSON(msgs []llm.Message) string {
	type part struct {
		Type      string `json:"type"`
		Content   string `json:"content,omitempty"`
		ID        string `json:"id,omitempty"`
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments,omitempty"`
	}
	type message struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		msg := message{Role: string(m.Role), Parts: []part{}}
		switch {
		case m.Role == llm.RoleTool:
			msg.Parts = append(msg.Parts, part{Type: "tool_call_response", ID: m.ToolCallID, Content: m.Content})
		case m.Content != "":
			msg.Parts = append(msg.Parts, part{Type: "text", Content: m.Content})
		}
		for _, c := range m.ToolCalls {
			msg.Parts = append(msg.Parts, part{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out = append(out, msg)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "[]"
	}
	return string(b)
}

// startToolSpan starts the span of one tool call.
func startToolSpan(ctx context.Context, name string, call llm.ToolCall) (context.Context, trace.Span) {
	if !tracing.On(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := tracing.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		tracing.GenAIOperationName.String(tracing.GenAIOperationExecuteTool), tracing.GenAIToolName.String(name),
		tracing.GenAIToolCallID.String(call.ID), tracing.GenAIToolType.String("function")))
	if tracing.Content(ctx) {
		span.SetAttributes(tracing.GenAIToolCallArguments.String(tracing.Redact(ctx, call.Arguments)))
	}
	return ctx, span
}

// endToolSpan ends a tool call's span; errType is "" for a call that
// worked.
func endToolSpan(ctx context.Context, span trace.Span, o toolOutcome, errType string, err error) {
	if !span.IsRecording() {
		return
	}
	if tracing.Content(ctx) {
		span.SetAttributes(tracing.GenAIToolCallResult.String(tracing.Redact(ctx, o.content)))
	}
	if errType != "" {
		span.SetStatus(codes.Error, errType)
		span.SetAttributes(tracing.ErrorTypeKey.String(errType))
	}
	span.End()
}

// toolErrorType is the error.type of a failed tool call.
func toolErrorType(err error) string {
	var ie *toolInputError
	if errors.As(err, &ie) {
		return errTypeInput
	}
	return tracing.ErrorType(err)
}

// startActionSpan starts the span of one executed action.
func startActionSpan(ctx context.Context, b *actions.Bound, key string) (context.Context, trace.Span) {
	if !tracing.On(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	attrs := []attribute.KeyValue{attrAction.String(b.Name), attrActionKey.String(key)}
	if target := audit.TargetOf(b.Params); target != "" {
		attrs = append(attrs, attrTarget.String(target))
	}
	return tracing.Start(ctx, "action "+b.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

func endActionSpan(span trace.Span, out actions.Outcome, err error) {
	if !span.IsRecording() {
		return
	}
	if out.Job != nil {
		span.SetAttributes(attrJobID.String(out.Job.ID))
	}
	tracing.End(span, err)
}

// startNodeSpan starts the span of one node.
func startNodeSpan(ctx context.Context, node string) (context.Context, trace.Span) {
	if !tracing.On(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracing.Start(ctx, node, trace.WithAttributes(attrNode.String(node)))
}
