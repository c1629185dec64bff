package mcptest

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's server drops what its structs do not name, and MCP tasks are
// among that: capabilities.tasks, execution.taskSupport, params.task and the
// CreateTaskResult. taskConn translates on the raw messages:
//   - initialize answer: adds capabilities.tasks.requests.tools.call;
//   - tools/list answer: adds execution.taskSupport to long_report;
//   - tools/call with params.task: the task metadata moves to
//     _meta[metaTaskRequest] for the handler;
//   - the answer to that call, when the handler created a task
//     (_meta[metaTaskCreated]), becomes {"task": {...}}.

type taskTransport struct {
	inner       mcp.Transport
	taskSupport string
}

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &taskConn{inner: c, taskSupport: t.taskSupport, pending: map[jsonrpc.ID]string{}}, nil
}

type taskConn struct {
	inner       mcp.Connection
	taskSupport string
	mu          sync.Mutex
	pending     map[jsonrpc.ID]string
}

func (c *taskConn) SessionID() string { return c.inner.SessionID() }
func (c *taskConn) Close() error      { return c.inner.Close() }

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.inner.Read(ctx)
	if err != nil {
		return msg, err
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return msg, nil
	}
	switch req.Method {
	case "initialize", "tools/list":
		c.track(req.ID, req.Method)
	case "tools/call":
		var params map[string]json.RawMessage
		if json.Unmarshal(req.Params, &params) != nil {
			return msg, nil
		}
		task, ok := params["task"]
		if !ok {
			return msg, nil
		}
		meta := map[string]json.RawMessage{}
		_ = json.Unmarshal(params["_meta"], &meta)
		meta[metaTaskRequest] = task
		delete(params, "task")
		params["_meta"], _ = json.Marshal(meta)
		out := *req
		out.Params, _ = json.Marshal(params)
		c.track(req.ID, "task")
		return &out, nil
	}
	return msg, nil
}

func (c *taskConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil || len(resp.Result) == 0 {
		return c.inner.Write(ctx, msg)
	}
	c.mu.Lock()
	method, tracked := c.pending[resp.ID]
	delete(c.pending, resp.ID)
	c.mu.Unlock()
	if !tracked {
		return c.inner.Write(ctx, msg)
	}
	var result map[string]any
	if json.Unmarshal(resp.Result, &result) != nil {
		return c.inner.Write(ctx, msg)
	}
	switch method {
	case "initialize":
		caps, _ := result["capabilities"].(map[string]any)
		if caps == nil {
			caps = map[string]any{}
		}
		caps["tasks"] = map[string]any{"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		result["capabilities"] = caps
	case "tools/list":
		tools, _ := result["tools"].([]any)
		for _, t := range tools {
			if tool, ok := t.(map[string]any); ok && tool["name"] == "long_report" {
				tool["execution"] = map[string]any{"taskSupport": c.taskSupport}
			}
		}
	case "task":
		meta, _ := result["_meta"].(map[string]any)
		task, ok := meta[metaTaskCreated]
		if !ok {
			return c.inner.Write(ctx, msg)
		}
		delete(meta, metaTaskCreated)
		result = map[string]any{"task": task}
		if len(meta) > 0 {
			result["_meta"] = meta
		}
	}
	b, err := json.Marshal(result)
	if err != nil {
		return err
	}
	out := *resp
	out.Result = b
	return c.inner.Write(ctx, &out)
}

func (c *taskConn) track(id jsonrpc.ID, method string) {
	c.mu.Lock()
	c.pending[id] = method
	c.mu.Unlock()
}
