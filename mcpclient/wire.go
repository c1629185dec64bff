package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// The MCP messages this client sends and reads, as plain structs: only the
// fields it uses. Unknown fields are ignored, so a server may send more.
// MCP tasks (2025-11-25) are among them: capabilities.tasks,
// execution.taskSupport, the "task" of tools/call params and the
// CreateTaskResult answer.

// protocolVersions are the versions a server may answer initialize with,
// newest first; ProtocolVersion is the one asked for.
var protocolVersions = []string{ProtocolVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type initializeParams struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Capabilities    struct{}       `json:"capabilities"` // no roots, sampling or elicitation to offer
	ClientInfo      implementation `json:"clientInfo"`
}

type initializeResult struct {
	ProtocolVersion string `json:"protocolVersion"`
	Capabilities    struct {
		Tasks *struct {
			Requests *struct {
				Tools *struct {
					Call json.RawMessage `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"tasks"`
	} `json:"capabilities"`
	ServerInfo implementation `json:"serverInfo"`
	Meta       map[string]any `json:"_meta"`
}

// tasksToolsCall reports capabilities.tasks.requests.tools.call.
func (r *initializeResult) tasksToolsCall() bool {
	t := r.Capabilities.Tasks
	return t != nil && t.Requests != nil && t.Requests.Tools != nil &&
		len(t.Requests.Tools.Call) > 0 && string(t.Requests.Tools.Call) != "null"
}

type listToolsParams struct {
	Cursor string `json:"cursor,omitempty"`
}

type listToolsResult struct {
	Tools      []wireTool `json:"tools"`
	NextCursor string     `json:"nextCursor"`
}

type wireTool struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	// InputSchema is decoded as any and encoded again, as the SDK did, so
	// the schema offered to the LLM keeps the same bytes (keys sorted).
	InputSchema any `json:"inputSchema"`
	Annotations *struct {
		Title           string `json:"title"`
		ReadOnlyHint    bool   `json:"readOnlyHint"`
		DestructiveHint *bool  `json:"destructiveHint"`
	} `json:"annotations"`
	Execution *struct {
		TaskSupport string `json:"taskSupport"`
	} `json:"execution"`
}

type callToolParams struct {
	Meta      map[string]any  `json:"_meta,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Task asks for a task-augmented call (MCP tasks).
	Task *taskParams `json:"task,omitempty"`
}

type taskParams struct {
	TTL int64 `json:"ttl"` // milliseconds
}

// callToolResult is a CallToolResult, or a CreateTaskResult when Task is set.
type callToolResult struct {
	Meta              map[string]any  `json:"_meta"`
	Content           []content       `json:"content"`
	StructuredContent any             `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Task              json.RawMessage `json:"task"`
}

// content is one content block; Type says which fields apply.
type content struct {
	Type     string `json:"type"`
	Text     string `json:"text"`     // text
	MIMEType string `json:"mimeType"` // image, audio
	URI      string `json:"uri"`      // resource_link
	Resource *struct {
		URI  string `json:"uri"`
		Text string `json:"text"`
	} `json:"resource"` // resource (embedded)
}

// MCP tasks (2025-11-25).
const (
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
)

type taskIDParams struct {
	TaskID string `json:"taskId"`
}

// taskInfo is the Task object (the tasks/get result, and the "task" of a
// CreateTaskResult).
type taskInfo struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt,omitempty"`
	LastUpdatedAt string `json:"lastUpdatedAt,omitempty"`
	TTL           *int64 `json:"ttl"`
	PollInterval  *int64 `json:"pollInterval,omitempty"`
}

// initialize runs the handshake: initialize, then notifications/initialized.
func (s *session) initialize(ctx context.Context, clientVersion string) (*initializeResult, error) {
	var res initializeResult
	err := s.call(ctx, "initialize", initializeParams{
		ProtocolVersion: ProtocolVersion,
		ClientInfo:      implementation{Name: "upgrade-agent", Version: clientVersion},
	}, &res)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(protocolVersions, res.ProtocolVersion) {
		return nil, fmt.Errorf("unsupported protocol version: %q", res.ProtocolVersion)
	}
	if c, ok := s.conn.(protocolVersionSetter); ok {
		c.setProtocolVersion(res.ProtocolVersion)
	}
	if err := s.notify(ctx, "notifications/initialized", struct{}{}); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return &res, nil
}

// maxToolPages bounds tools/list pagination against a server whose cursors
// never end.
const maxToolPages = 1000

func (s *session) listTools(ctx context.Context) ([]wireTool, error) {
	var tools []wireTool
	seen := map[string]bool{}
	cursor := ""
	for range maxToolPages {
		var res listToolsResult
		if err := s.call(ctx, "tools/list", listToolsParams{Cursor: cursor}, &res); err != nil {
			return nil, err
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			return tools, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("tools/list: the server repeats the cursor %q", res.NextCursor)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxToolPages)
}

func (s *session) callTool(ctx context.Context, p callToolParams) (*callToolResult, error) {
	if len(p.Arguments) == 0 {
		p.Arguments = json.RawMessage(`{}`)
	}
	var res callToolResult
	if err := s.call(ctx, "tools/call", p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (s *session) tasksGet(ctx context.Context, id string) (*taskInfo, error) {
	var info taskInfo
	if err := s.call(ctx, methodTasksGet, taskIDParams{TaskID: id}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func (s *session) tasksResult(ctx context.Context, id string) (*callToolResult, error) {
	var res callToolResult
	if err := s.call(ctx, methodTasksResult, taskIDParams{TaskID: id}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// createdTask reads the task of a CreateTaskResult; false for an ordinary
// CallToolResult (a server may run a task-augmented request normally).
func (r *callToolResult) createdTask() (*taskInfo, bool) {
	if len(r.Task) == 0 || r.Task[0] != '{' {
		return nil, false
	}
	var t taskInfo
	if json.Unmarshal(r.Task, &t) != nil || t.TaskID == "" {
		return nil, false
	}
	return &t, true
}

// isRPCError reports the JSON-RPC error a server answered with.
func isRPCError(err error) (*rpcError, bool) {
	var e *rpcError
	ok := errors.As(err, &e)
	return e, ok
}
