package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// CallResult is a tool's answer. When Job is set the tool started a job: the
// caller stores the handle and follows it with JobStatus and FetchJob; Text
// and Structured then hold whatever the server said on acceptance.
type CallResult struct {
	// Text joins the text content blocks; other blocks are named in brackets.
	Text string `json:"text,omitempty"`
	// Structured is the structuredContent, when the server sent one.
	Structured json.RawMessage `json:"structured,omitempty"`
	// IsError is the tool's own error flag: the call worked, the tool failed.
	IsError bool       `json:"is_error,omitempty"`
	Job     *JobHandle `json:"job,omitempty"`
}

// Call runs a tool by its qualified name. effectID is the executor's effect
// id for an action ("" for a read-only call of the gatherer).
//
// On a job-aware server the call carries
// _meta["com.upgrade-agent/job"] = {"version": V, "idempotency_key": K} with
// K = IdempotencyKey(effectID, server, tool) (no key when effectID is ""),
// and an answer whose _meta carries {"com.upgrade-agent/job": {"key": ...}}
// yields a Job of kind "meta". On a server that declared MCP tasks, a tool
// whose taskSupport is "required", or "optional" when called with an effect
// id by a server that is not job-aware (the _meta contract is preferred: it
// has idempotency keys), is called task-augmented and yields a Job of kind
// "task". Anything else is the plain blocking call.
//
// Protocol failures (server gone, unknown tool on the server, bad params)
// are errors; a tool that ran and failed is a result with IsError.
func (m *Manager) Call(ctx context.Context, qualifiedName string, args json.RawMessage, effectID string) (*CallResult, error) {
	tool, ok := m.byName[qualifiedName]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, qualifiedName)
	}
	c, err := m.server(tool.Server)
	if err != nil {
		return nil, err
	}
	args, err = objectArgs(args)
	if err != nil {
		return nil, fmt.Errorf("mcp tool %s: arguments: %w", qualifiedName, err)
	}

	meta := map[string]any{}
	if c.caps.JobVersion > 0 {
		job := map[string]any{"version": c.caps.JobVersion}
		if effectID != "" {
			job["idempotency_key"] = IdempotencyKey(effectID, tool.Server, tool.Name)
		}
		meta[MetaKeyJob] = job
	}
	params := callToolParams{Name: tool.Name, Arguments: args}
	asTask := wantTask(c.caps, tool, effectID)
	if asTask {
		params.Task = &taskParams{TTL: m.taskTTL}
	}
	if len(meta) > 0 {
		params.Meta = meta
	}
	res, err := c.session.callTool(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("mcp tool %s: %w", qualifiedName, err)
	}
	out := convertResult(res)
	if asTask {
		if task, ok := res.createdTask(); ok {
			out.Job = &JobHandle{Server: tool.Server, Tool: tool.Name, Kind: KindTask, Key: task.TaskID, Args: args}
			if out.Text == "" {
				// Optional text a server offers for the model while the task runs.
				out.Text, _ = res.Meta["io.modelcontextprotocol/model-immediate-response"].(string)
			}
			m.logger.Debug("mcp task started", "server", tool.Server, "tool", tool.Name, "task", task.TaskID, "status", task.Status)
			return out, nil
		}
	}
	if c.caps.JobVersion > 0 && !out.IsError {
		if key, ok := jobKey(res.Meta); ok {
			out.Job = &JobHandle{Server: tool.Server, Tool: tool.Name, Kind: KindMeta, Key: key,
				Version: c.caps.JobVersion, Args: args}
			m.logger.Debug("mcp job started", "server", tool.Server, "tool", tool.Name, "key", key)
		}
	}
	return out, nil
}

func wantTask(caps Capability, tool Tool, effectID string) bool {
	if !caps.Tasks {
		return false
	}
	switch tool.TaskSupport {
	case "required":
		return true
	case "optional":
		return effectID != "" && caps.JobVersion == 0
	}
	return false
}

// objectArgs accepts a JSON object (or nothing, meaning {}) and compacts it,
// so that the handle stored in a checkpoint holds exactly what was sent.
func objectArgs(args json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage(`{}`), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// jobKey reads result._meta["com.upgrade-agent/job"].key.
func jobKey(meta map[string]any) (string, bool) {
	obj, ok := meta[MetaKeyJob].(map[string]any)
	if !ok {
		return "", false
	}
	key, ok := obj["key"].(string)
	return key, ok && key != ""
}

func convertResult(res *callToolResult) *CallResult {
	out := &CallResult{IsError: res.IsError}
	var parts []string
	for _, c := range res.Content {
		switch c.Type {
		case "text":
			parts = append(parts, c.Text)
		case "resource":
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", c.Resource.URI))
			}
		case "resource_link":
			parts = append(parts, fmt.Sprintf("[resource link %s]", c.URI))
		case "image":
			parts = append(parts, fmt.Sprintf("[image %s omitted]", c.MIMEType))
		case "audio":
			parts = append(parts, fmt.Sprintf("[audio %s omitted]", c.MIMEType))
		default:
			parts = append(parts, fmt.Sprintf("[%s content omitted]", c.Type))
		}
	}
	out.Text = strings.Join(parts, "\n")
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			out.Structured = b
		}
	}
	return out
}
