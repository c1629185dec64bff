package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// MCP is what the pipeline needs from MCP servers; *mcpclient.Manager
// satisfies it. Read-only tools join the gatherer's tools; every other tool
// is an executor action behind the confirmation policy.
type MCP interface {
	Tools() []mcpclient.Tool
	Tool(qualifiedName string) (mcpclient.Tool, bool)
	Call(ctx context.Context, qualifiedName string, args json.RawMessage, effectID string) (*mcpclient.CallResult, error)
	JobStatus(ctx context.Context, h mcpclient.JobHandle) (mcpclient.JobStatus, error)
	FetchJob(ctx context.Context, h mcpclient.JobHandle) (*mcpclient.CallResult, error)
	Capabilities() map[string]mcpclient.Capability
}

// mcpPollInterval is how often a turn checks an MCP job while it waits inline.
var mcpPollInterval = 200 * time.Millisecond

// mcpReadTools turns the read-only MCP tools into gatherer tools.
func mcpReadTools(m MCP) []*toolDef {
	if m == nil {
		return nil
	}
	var defs []*toolDef
	for _, tl := range m.Tools() {
		if !tl.ReadOnly {
			continue
		}
		d, err := mcpToolDef(m, tl)
		if err != nil {
			continue // a schema we cannot use: the tool is not offered
		}
		defs = append(defs, d)
	}
	return defs
}

func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

func mcpToolDef(m MCP, tl mcpclient.Tool) (*toolDef, error) {
	resolved, err := resolveSchema(tl.InputSchema)
	if err != nil {
		return nil, err
	}
	schema := tl.InputSchema
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	q := tl.QualifiedName
	return &toolDef{name: q, desc: tl.Description, readOnly: true, schema: schema, resolved: resolved,
		run: func(ctx context.Context, t *turn, raw json.RawMessage) (any, error) {
			res, err := m.Call(ctx, q, raw, "")
			if err != nil {
				return nil, err
			}
			if res.IsError {
				return nil, inputErrorf("%s failed: %s", q, res.Text)
			}
			t.update(func(s *State) { s.setInfo("mcp", q, mcpResultValue(res)) })
			return mcpResultValue(res), nil
		}}, nil
}

func mcpResultValue(res *mcpclient.CallResult) any {
	if len(res.Structured) > 0 {
		return res.Structured
	}
	return map[string]any{"text": res.Text}
}

// mcpAction returns the MCP tool behind an action name, if it is one.
func (a *Agent) mcpAction(name string) (mcpclient.Tool, bool) {
	if a.MCP == nil || !mcpclient.IsMCPTool(name) {
		return mcpclient.Tool{}, false
	}
	tl, ok := a.MCP.Tool(name)
	if !ok || tl.ReadOnly {
		return mcpclient.Tool{}, false
	}
	return tl, true
}

// mcpActionList tells the gatherer which MCP actions exist.
func (a *Agent) mcpActionList() []map[string]string {
	if a.MCP == nil {
		return nil
	}
	var out []map[string]string
	for _, tl := range a.MCP.Tools() {
		if !tl.ReadOnly {
			out = append(out, map[string]string{"action": tl.QualifiedName, "description": tl.Description})
		}
	}
	return out
}

// checkMCPParams validates an MCP action's arguments against its input schema.
func checkMCPParams(tl mcpclient.Tool, params map[string]any) (json.RawMessage, error) {
	resolved, err := resolveSchema(tl.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("the tool's input schema is unusable: %v", err)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	var inst any
	_ = json.Unmarshal(raw, &inst)
	if err := resolved.Validate(inst); err != nil {
		return nil, err
	}
	return checkpoint.CanonicalJSON(raw)
}

// mcpPlan is the confirmation of an MCP action: the tool, its server and the
// exact arguments.
func (a *Agent) mcpPlan(tl mcpclient.Tool, args json.RawMessage) *actions.Plan {
	var b strings.Builder
	if tl.Destructive {
		b.WriteString("DESTRUCTIVE: ")
	}
	fmt.Fprintf(&b, "Call tool %q on MCP server %q", tl.Name, tl.Server)
	if tl.Description != "" {
		fmt.Fprintf(&b, " (%s)", strings.TrimSpace(tl.Description))
	}
	fmt.Fprintf(&b, " with arguments %s.\nReply yes to proceed or no to cancel.", string(args))
	return &actions.Plan{Action: actions.Name(tl.QualifiedName), Params: args, Message: b.String(), Destructive: tl.Destructive}
}

func mcpNeedsConfirmation(policy string, tl mcpclient.Tool) bool {
	switch policy {
	case PolicyNever:
		return false
	case PolicyDestructive:
		return tl.Destructive
	}
	return true
}

// executeMCP runs an approved MCP action. A job-backed tool answers with a
// handle: the turn waits up to WaitJobs, then suspends with the handle in the
// checkpoint.
func (a *Agent) executeMCP(ctx context.Context, t *turn, effectID string, plan *actions.Plan) (done bool, err error) {
	res, err := a.MCP.Call(ctx, string(plan.Action), plan.Params, effectID)
	if err != nil {
		a.recordExecution(t, effectID, plan, nil, err)
		return true, nil
	}
	if res.Job == nil {
		a.recordMCPResult(t, effectID, plan, res)
		return true, nil
	}
	status, err := a.waitMCP(ctx, *res.Job, a.WaitJobs)
	if err != nil {
		return false, err
	}
	if status.Terminal() {
		return true, a.fetchMCP(ctx, t, effectID, plan, *res.Job)
	}
	h, _ := json.Marshal(jobHandle{EffectID: effectID, Params: plan.Params, NextStep: t.st.NextStep, MCP: res.Job})
	t.sess.CP.Interrupt = &checkpoint.Interrupt{ID: a.newID(), Kind: checkpoint.KindJob, CreatedAt: a.now(),
		Job: &checkpoint.JobRef{ID: effectID, Action: string(plan.Action), Handle: h}}
	t.st.clearPending()
	t.suspended = true
	js := mcpJobStatus(effectID, string(plan.Action), status)
	t.jobStatus = &js
	t.st.FinalResponse = suspendText(t.sess.CP.SessionID, js)
	return false, nil
}

func mcpJobStatus(id, action string, s mcpclient.JobStatus) JobStatus {
	return JobStatus{ID: id, Action: action, State: s.State, Done: s.Done, Total: s.Total, Error: s.Message}
}

// waitMCP polls an MCP job until it ends or d passes (d = 0: once).
func (a *Agent) waitMCP(ctx context.Context, h mcpclient.JobHandle, d time.Duration) (mcpclient.JobStatus, error) {
	deadline := time.Now().Add(d)
	for {
		s, err := a.MCP.JobStatus(ctx, h)
		if err != nil || s.Terminal() || !time.Now().Before(deadline) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(min(mcpPollInterval, time.Until(deadline))):
		}
	}
}

func (a *Agent) fetchMCP(ctx context.Context, t *turn, effectID string, plan *actions.Plan, h mcpclient.JobHandle) error {
	res, err := a.MCP.FetchJob(ctx, h)
	if err != nil {
		a.recordExecution(t, effectID, plan, nil, err)
		return nil
	}
	a.recordMCPResult(t, effectID, plan, res)
	return nil
}

func (a *Agent) recordMCPResult(t *turn, effectID string, plan *actions.Plan, res *mcpclient.CallResult) {
	if res.IsError {
		a.recordExecution(t, effectID, plan, nil, &jobError{typ: ErrTypeAPI, msg: fmt.Sprintf("%s failed: %s", plan.Action, res.Text)})
		return
	}
	b, _ := json.Marshal(mcpResultValue(res))
	a.recordExecution(t, effectID, plan, b, nil)
}

// reattachMCP repeats an interrupted START with the same effect id.
func (a *Agent) reattachMCP(ctx context.Context, t *turn, effectID string, plan *actions.Plan) error {
	res, err := a.MCP.Call(ctx, string(plan.Action), plan.Params, effectID)
	if err != nil {
		return fmt.Errorf("re-attaching to %s: %w", plan.Action, err)
	}
	nextStep := t.st.NextStep
	t.st.clearPending()
	t.pendingAtStart = nil
	if res.Job == nil {
		t.sess.CP.Interrupt = nil
		a.recordMCPResult(t, effectID, plan, res)
		return nil
	}
	h, _ := json.Marshal(jobHandle{EffectID: effectID, Params: plan.Params, NextStep: nextStep, MCP: res.Job})
	t.sess.CP.Interrupt = &checkpoint.Interrupt{ID: a.newID(), Kind: checkpoint.KindJob, CreatedAt: a.now(),
		Job: &checkpoint.JobRef{ID: effectID, Action: string(plan.Action), Handle: h}}
	t.suspended = true
	js := JobStatus{ID: effectID, Action: string(plan.Action), State: mcpclient.StateRunning}
	t.jobStatus = &js
	t.st.FinalResponse = suspendText(t.sess.CP.SessionID, js)
	return nil
}

// resumeMCPJob is ResumeJob for a job behind an MCP tool.
func (a *Agent) resumeMCPJob(ctx context.Context, t *turn, ic *checkpoint.Interrupt, h jobHandle, wait time.Duration) (bool, error) {
	if a.MCP == nil {
		return false, fmt.Errorf("session waits on MCP job %s but no MCP server is configured", ic.Job.ID)
	}
	status, err := a.waitMCP(ctx, *h.MCP, wait)
	if err != nil {
		return false, err
	}
	js := mcpJobStatus(ic.Job.ID, ic.Job.Action, status)
	t.jobStatus = &js
	if !status.Terminal() {
		return false, nil
	}
	plan := &actions.Plan{Action: actions.Name(ic.Job.Action), Params: h.Params}
	return true, a.fetchMCP(ctx, t, ic.Job.ID, plan, *h.MCP)
}
