package mcpclient

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Kinds of JobHandle.
const (
	KindMeta = "meta" // the _meta job contract
	KindTask = "task" // MCP tasks (2025-11-25)
)

// States of JobStatus; the same words as the job records of spec/durability.md.
const (
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// JobHandle identifies a job started through an MCP tool. It holds
// everything needed to follow the job from another process, so it goes into
// the checkpoint as is.
type JobHandle struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Kind   string `json:"kind"`
	// Key is the server's job key (meta) or task id (task).
	Key string `json:"key"`
	// Version is the job contract version the job was started under (meta).
	Version int `json:"version,omitempty"`
	// Args are the original arguments, sent again with the FETCH (meta).
	Args json.RawMessage `json:"args,omitempty"`
}

// QualifiedName is the tool's name as offered to the LLM.
func (h JobHandle) QualifiedName() string { return QualifiedName(h.Server, h.Tool) }

func (h JobHandle) validate() error {
	switch {
	case h.Server == "" || h.Tool == "":
		return fmt.Errorf("%w: server and tool must be set", ErrBadHandle)
	case h.Key == "":
		return fmt.Errorf("%w: key is empty", ErrBadHandle)
	case h.Kind != KindMeta && h.Kind != KindTask:
		return fmt.Errorf("%w: kind %q (want %q or %q)", ErrBadHandle, h.Kind, KindMeta, KindTask)
	}
	return nil
}

// JobStatus is one observation of a job.
type JobStatus struct {
	State   string `json:"state"` // running | succeeded | failed | cancelled
	Done    int    `json:"done,omitempty"`
	Total   int    `json:"total,omitempty"`
	Message string `json:"message,omitempty"`
}

// Terminal reports whether the job will not change any more.
func (s JobStatus) Terminal() bool { return s.State != StateRunning }

// JobStatus asks the server once where a job stands: the reserved tool
// job_status with {"key": K} for a meta job, tasks/get for a task.
func (m *Manager) JobStatus(ctx context.Context, h JobHandle) (JobStatus, error) {
	if err := h.validate(); err != nil {
		return JobStatus{}, err
	}
	c, err := m.server(h.Server)
	if err != nil {
		return JobStatus{}, err
	}
	if h.Kind == KindTask {
		info, err := tasksGet(ctx, c, h.Key)
		if err != nil {
			return JobStatus{}, err
		}
		return info.status()
	}
	return m.metaStatus(ctx, c, h)
}

func (m *Manager) metaStatus(ctx context.Context, c *serverConn, h JobHandle) (JobStatus, error) {
	args, err := json.Marshal(map[string]string{"key": h.Key})
	if err != nil {
		return JobStatus{}, err
	}
	res, err := c.session.callTool(ctx, callToolParams{
		Name:      JobStatusTool,
		Arguments: args,
		Meta:      map[string]any{MetaKeyJob: map[string]any{"version": m.jobVersion(c, h)}},
	})
	if err != nil {
		return JobStatus{}, fmt.Errorf("mcp server %q: %s for job %s: %w", h.Server, JobStatusTool, h.Key, err)
	}
	out := convertResult(res)
	if out.IsError {
		return JobStatus{}, fmt.Errorf("mcp server %q: %s for job %s: %s", h.Server, JobStatusTool, h.Key,
			cmp.Or(out.Text, "error without a message"))
	}
	body := out.Structured
	if len(body) == 0 {
		body = json.RawMessage(out.Text)
	}
	st, err := parseMetaStatus(body)
	if err != nil {
		return JobStatus{}, fmt.Errorf("mcp server %q: %s for job %s: %w", h.Server, JobStatusTool, h.Key, err)
	}
	return st, nil
}

func (m *Manager) jobVersion(c *serverConn, h JobHandle) int {
	return cmp.Or(h.Version, c.caps.JobVersion, JobContractVersion)
}

// parseMetaStatus reads the job_status answer (see docs/mcp.md):
// {"state": ..., "done": n, "total": n, "message": ...}; "status" for
// "state" and {"progress": {"done", "total"}} are accepted too.
func parseMetaStatus(body json.RawMessage) (JobStatus, error) {
	var w struct {
		State    string `json:"state"`
		Status   string `json:"status"`
		Done     int    `json:"done"`
		Total    int    `json:"total"`
		Progress *struct {
			Done  int `json:"done"`
			Total int `json:"total"`
		} `json:"progress"`
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return JobStatus{}, fmt.Errorf("%w: want a JSON object with a state: %v", ErrBadStatus, err)
	}
	state, ok := normalizeState(cmp.Or(w.State, w.Status))
	if !ok {
		return JobStatus{}, fmt.Errorf("%w: state %q", ErrBadStatus, cmp.Or(w.State, w.Status))
	}
	st := JobStatus{State: state, Done: w.Done, Total: w.Total, Message: cmp.Or(w.Message, w.Error)}
	if w.Progress != nil {
		st.Done, st.Total = w.Progress.Done, w.Progress.Total
	}
	return st, nil
}

func normalizeState(s string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "running", "queued", "pending", "working", "started":
		return StateRunning, true
	case "succeeded", "completed", "complete", "done", "success":
		return StateSucceeded, true
	case "failed", "error":
		return StateFailed, true
	case "cancelled", "canceled":
		return StateCancelled, true
	}
	return "", false
}

// FetchJob returns the final result of a terminal job: for a meta job the
// original tool called again with its original arguments and
// _meta {"com.upgrade-agent/job": {"version": V, "key": K}}, for a task
// tasks/result. It never waits: a job still running gives ErrJobNotFinished.
// A failed or cancelled job gives a result with IsError and the job's own
// message, never an empty success.
func (m *Manager) FetchJob(ctx context.Context, h JobHandle) (*CallResult, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	c, err := m.server(h.Server)
	if err != nil {
		return nil, err
	}
	if h.Kind == KindTask {
		return m.fetchTask(ctx, c, h)
	}
	args, err := objectArgs(h.Args)
	if err != nil {
		return nil, fmt.Errorf("%w: args: %v", ErrBadHandle, err)
	}
	res, err := c.session.callTool(ctx, callToolParams{
		Name:      h.Tool,
		Arguments: args,
		Meta:      map[string]any{MetaKeyJob: map[string]any{"version": m.jobVersion(c, h), "key": h.Key}},
	})
	if err != nil {
		return nil, fmt.Errorf("mcp tool %s: fetch job %s: %w", h.QualifiedName(), h.Key, err)
	}
	if _, running := jobKey(res.Meta); running && !res.IsError {
		return nil, fmt.Errorf("%w: %s job %s", ErrJobNotFinished, h.QualifiedName(), h.Key)
	}
	out := convertResult(res)
	if out.IsError && strings.TrimSpace(out.Text) == "" {
		// The FETCH lost the reason; the status may still have it.
		if st, err := m.metaStatus(ctx, c, h); err == nil && st.Message != "" {
			out.Text = st.Message
		} else {
			out.Text = fmt.Sprintf("MCP job %s of %s failed without a message", h.Key, h.QualifiedName())
		}
	}
	return out, nil
}

func (m *Manager) fetchTask(ctx context.Context, c *serverConn, h JobHandle) (*CallResult, error) {
	info, err := tasksGet(ctx, c, h.Key)
	if err != nil {
		return nil, err
	}
	st, err := info.status()
	if err != nil {
		return nil, err
	}
	if !st.Terminal() {
		// tasks/result would block until the task ends.
		return nil, fmt.Errorf("%w: %s task %s is %s", ErrJobNotFinished, h.QualifiedName(), h.Key, info.Status)
	}
	res, err := c.session.tasksResult(ctx, h.Key)
	if err != nil {
		// The spec has tasks/result repeat the JSON-RPC error of the
		// underlying request; that is the job's failure, not ours.
		if wire, ok := isRPCError(err); ok {
			return &CallResult{IsError: true, Text: cmp.Or(wire.Message, st.Message,
				fmt.Sprintf("MCP task %s of %s %s", h.Key, h.QualifiedName(), st.State))}, nil
		}
		return nil, fmt.Errorf("mcp server %q: %s %s: %w", h.Server, methodTasksResult, h.Key, err)
	}
	out := convertResult(res)
	if st.State != StateSucceeded && !out.IsError {
		out.IsError = true
		msg := cmp.Or(st.Message, fmt.Sprintf("MCP task %s of %s %s", h.Key, h.QualifiedName(), st.State))
		if out.Text != "" {
			msg += "\n" + out.Text
		}
		out.Text = msg
	}
	if out.IsError && strings.TrimSpace(out.Text) == "" {
		out.Text = cmp.Or(st.Message, fmt.Sprintf("MCP task %s of %s %s without a message", h.Key, h.QualifiedName(), st.State))
	}
	return out, nil
}

func (t *taskInfo) status() (JobStatus, error) {
	st := JobStatus{Message: t.StatusMessage}
	switch t.Status {
	case "working":
		st.State = StateRunning
	case "input_required":
		// Answering needs elicitation through tasks/result, which this
		// client does not offer; say so rather than look stuck.
		st.State = StateRunning
		st.Message = cmp.Or(t.StatusMessage, "the server waits for input (input_required) that upgrade-agent cannot give")
	case "completed":
		st.State = StateSucceeded
	case "failed":
		st.State = StateFailed
	case "cancelled":
		st.State = StateCancelled
	default:
		return JobStatus{}, fmt.Errorf("%w: task %s has status %q", ErrBadStatus, t.TaskID, t.Status)
	}
	return st, nil
}

func tasksGet(ctx context.Context, c *serverConn, id string) (*taskInfo, error) {
	info, err := c.session.tasksGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("mcp server %q: %s %s: %w", c.name, methodTasksGet, id, err)
	}
	return info, nil
}
