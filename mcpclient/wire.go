package mcpclient

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK (v1.8.0) has typed structs for the protocol and drops what they do
// not name. Three things MCP tasks (2025-11-25) need are among them: the
// server's capabilities.tasks, a tool's execution.taskSupport, the "task"
// field of tools/call params and the CreateTaskResult answer. wireConn sits
// between the SDK and the transport and handles exactly those, on the raw
// JSON-RPC messages:
//   - it reads capabilities.tasks and protocolVersion from the initialize
//     answer, and execution.taskSupport from tools/list answers;
//   - a tools/call whose _meta carries taskRequestKey (put there by
//     Manager.Call) goes out with that value as params.task and the key
//     removed, so the server sees the standard shape;
//   - the answer to such a call, when it is a CreateTaskResult
//     ({"task": {...}}), reaches the SDK as an empty CallToolResult whose
//     _meta carries the task under taskCreatedKey.
//
// Everything else passes through untouched.

// Private _meta keys between Manager and wireConn; never seen on the wire.
const (
	taskRequestKey = "com.upgrade-agent/internal-task-request"
	taskCreatedKey = "com.upgrade-agent/internal-task-created"
)

// Pseudo-method recorded for a task-augmented tools/call.
const methodTaskCall = "tools/call+task"

// wireState is what wireConn learned, shared with the Manager.
type wireState struct {
	mu              sync.Mutex
	pending         map[jsonrpc.ID]string
	protocolVersion string
	tasksToolsCall  bool              // capabilities.tasks.requests.tools.call present
	taskSupport     map[string]string // tool name -> execution.taskSupport
}

func newWireState() *wireState {
	return &wireState{pending: map[jsonrpc.ID]string{}, taskSupport: map[string]string{}}
}

func (s *wireState) track(id jsonrpc.ID, method string) {
	s.mu.Lock()
	s.pending[id] = method
	s.mu.Unlock()
}

func (s *wireState) take(id jsonrpc.ID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.pending[id]
	if ok {
		delete(s.pending, id)
	}
	return m
}

// Negotiated reports the protocol version and whether tools/call may be
// task-augmented.
func (s *wireState) snapshot() (version string, tasks bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.protocolVersion, s.tasksToolsCall
}

func (s *wireState) toolTaskSupport(tool string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taskSupport[tool]
}

// observedTransport wraps a transport so that its connection is a wireConn.
type observedTransport struct {
	inner mcp.Transport
	state *wireState
}

func (t *observedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, &startError{err}
	}
	return &wireConn{inner: c, state: t.state}, nil
}

type wireConn struct {
	inner mcp.Connection
	state *wireState
}

func (c *wireConn) SessionID() string { return c.inner.SessionID() }
func (c *wireConn) Close() error      { return c.inner.Close() }

func (c *wireConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		switch req.Method {
		case "initialize", "tools/list":
			c.state.track(req.ID, req.Method)
		case "tools/call":
			if params, ok := liftTaskRequest(req.Params); ok {
				out := *req
				out.Params = params
				msg = &out
				c.state.track(req.ID, methodTaskCall)
			}
		}
	}
	return c.inner.Write(ctx, msg)
}

func (c *wireConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.inner.Read(ctx)
	if err != nil {
		return msg, err
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !resp.ID.IsValid() {
		return msg, nil
	}
	method := c.state.take(resp.ID)
	if method == "" || resp.Error != nil || len(resp.Result) == 0 {
		return msg, nil
	}
	switch method {
	case "initialize":
		c.observeInitialize(resp.Result)
	case "tools/list":
		c.observeTools(resp.Result)
	case methodTaskCall:
		if result, ok := lowerCreateTaskResult(resp.Result); ok {
			out := *resp
			out.Result = result
			return &out, nil
		}
	}
	return msg, nil
}

func (c *wireConn) observeInitialize(raw json.RawMessage) {
	var res struct {
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
	}
	if json.Unmarshal(raw, &res) != nil {
		return // the SDK reports a broken initialize answer itself
	}
	t := res.Capabilities.Tasks
	call := t != nil && t.Requests != nil && t.Requests.Tools != nil &&
		len(t.Requests.Tools.Call) > 0 && string(t.Requests.Tools.Call) != "null"
	c.state.mu.Lock()
	c.state.protocolVersion = res.ProtocolVersion
	c.state.tasksToolsCall = call
	c.state.mu.Unlock()
}

func (c *wireConn) observeTools(raw json.RawMessage) {
	var res struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(raw, &res) != nil {
		return
	}
	c.state.mu.Lock()
	defer c.state.mu.Unlock()
	for _, t := range res.Tools {
		if t.Execution != nil && t.Execution.TaskSupport != "" {
			c.state.taskSupport[t.Name] = t.Execution.TaskSupport
		}
	}
}

// liftTaskRequest moves _meta[taskRequestKey] to params.task. It reports
// false, leaving the params alone, when the key is absent.
func liftTaskRequest(raw json.RawMessage) (json.RawMessage, bool) {
	var params map[string]json.RawMessage
	if json.Unmarshal(raw, &params) != nil {
		return raw, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(params["_meta"], &meta) != nil {
		return raw, false
	}
	task, ok := meta[taskRequestKey]
	if !ok {
		return raw, false
	}
	delete(meta, taskRequestKey)
	if len(meta) == 0 {
		delete(params, "_meta")
	} else {
		m, err := json.Marshal(meta)
		if err != nil {
			return raw, false
		}
		params["_meta"] = m
	}
	params["task"] = task
	out, err := json.Marshal(params)
	if err != nil {
		return raw, false
	}
	return out, true
}

// lowerCreateTaskResult turns {"task": {...}, "_meta": {...}} into a
// CallToolResult the SDK accepts, with the task under _meta[taskCreatedKey].
// It reports false for an ordinary CallToolResult: a server may run a
// task-augmented request normally.
func lowerCreateTaskResult(raw json.RawMessage) (json.RawMessage, bool) {
	var res struct {
		Task json.RawMessage            `json:"task"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &res) != nil || len(res.Task) == 0 || res.Task[0] != '{' {
		return raw, false
	}
	if res.Meta == nil {
		res.Meta = map[string]json.RawMessage{}
	}
	res.Meta[taskCreatedKey] = res.Task
	out, err := json.Marshal(struct {
		Meta    map[string]json.RawMessage `json:"_meta"`
		Content []any                      `json:"content"`
	}{res.Meta, []any{}})
	if err != nil {
		return raw, false
	}
	return out, true
}
