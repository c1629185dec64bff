package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/internal/jschema"
	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// MCP is what the pipeline needs from MCP servers; *mcpclient.Manager
// satisfies it. Read-only tools join the gatherer's tools; every other tool
// is an executor action behind the same action interface as the built-in
// ones (mcpAction), so confirmation, effects, jobs and resume treat both
// alike.
type MCP interface {
	Tools() []mcpclient.Tool
	Tool(qualifiedName string) (mcpclient.Tool, bool)
	Call(ctx context.Context, qualifiedName string, args json.RawMessage, effectID string) (*mcpclient.CallResult, error)
	JobStatus(ctx context.Context, h mcpclient.JobHandle) (mcpclient.JobStatus, error)
	FetchJob(ctx context.Context, h mcpclient.JobHandle) (*mcpclient.CallResult, error)
	Capabilities() map[string]mcpclient.Capability
}

// mcpPollInterval is how often an MCP job is checked while a turn waits.
var mcpPollInterval = 200 * time.Millisecond

// mcpAction adapts one MCP tool that is not read-only to actions.Action.
// Its annotations are claims of a server the person may not control: only
// a server marked trusted may relax confirmation with destructiveHint false.
type mcpAction struct {
	m        MCP
	tl       mcpclient.Tool
	trusted  bool
	resolved *jschema.Schema
}

var _ actions.JobAction = (*mcpAction)(nil)

// mcpAction returns the adapter of an MCP action name.
func (a *Agent) mcpAction(name string) (actions.Action, bool) {
	if a.mcp == nil || !mcpclient.IsMCPTool(name) {
		return nil, false
	}
	tl, ok := a.mcp.Tool(name)
	if !ok || tl.ReadOnly {
		return nil, false
	}
	resolved, err := resolveSchema(tl.InputSchema)
	if err != nil {
		return nil, false // a schema we cannot check arguments against: not offered
	}
	return &mcpAction{m: a.mcp, tl: tl, trusted: slices.Contains(a.set.TrustedMCPServers, tl.Server), resolved: resolved}, true
}

func (x *mcpAction) Spec() actions.Spec {
	return actions.Spec{
		Name: x.tl.QualifiedName, Description: x.tl.Description,
		Destructive: x.tl.Destructive || !x.trusted,
		// What a foreign tool changes is unknown: forget every cache.
		Invalidates: []actions.Cache{actions.CacheExperiments, actions.CacheEnrollment, actions.CacheContexts},
		Schema:      schemaOrObject(x.tl.InputSchema),
	}
}

// Bind canonicalises the arguments: keys sorted, and a null member (the
// model's way of saying "not given") left out.
func (x *mcpAction) Bind(raw json.RawMessage) (*actions.Bound, error) {
	obj, err := decodeObject(raw)
	if err != nil {
		return nil, &actions.ParseError{Action: x.tl.QualifiedName, Problems: []actions.Problem{{Message: err.Error()}}}
	}
	dropNulls(obj)
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	canon, err := checkpoint.CanonicalJSON(b)
	if err != nil {
		return nil, err
	}
	return actions.NewBound(x, canon, obj)
}

func (x *mcpAction) Validate(_ context.Context, _ actions.Env, b *actions.Bound) ([]actions.Problem, error) {
	var inst any
	if err := json.Unmarshal(b.Params, &inst); err != nil {
		return nil, err
	}
	if err := x.resolved.Validate(inst); err != nil {
		return []actions.Problem{{Message: fmt.Sprintf("the arguments do not fit the tool's input schema: %v", err)}}, nil
	}
	return nil, nil
}

// Plan names the tool, its server and the exact arguments.
func (x *mcpAction) Plan(_ context.Context, _ actions.Env, b *actions.Bound) (*actions.Plan, error) {
	var s strings.Builder
	destructive := x.Spec().Destructive
	if destructive {
		s.WriteString(actions.DestructiveMarker)
	}
	fmt.Fprintf(&s, "Call tool %q on MCP server %q", x.tl.Name, x.tl.Server)
	if d := strings.TrimSpace(x.tl.Description); d != "" {
		fmt.Fprintf(&s, " (%s)", d)
	}
	fmt.Fprintf(&s, " with arguments %s.\n%s", string(b.Params), actions.ConfirmPrompt)
	return &actions.Plan{Action: actions.Name(b.Name), Params: b.Params, Message: s.String(), Destructive: destructive}, nil
}

// Execute calls the tool. On a job-aware server the call carries an
// idempotency key derived from key, so a START repeated after a crash
// re-attaches to the job instead of starting a second one.
func (x *mcpAction) Execute(ctx context.Context, _ actions.Env, b *actions.Bound, key string) (actions.Outcome, error) {
	res, err := x.m.Call(ctx, x.tl.QualifiedName, b.Params, key)
	if err != nil {
		return actions.Outcome{}, err
	}
	if res.Job != nil {
		h, err := json.Marshal(res.Job)
		if err != nil {
			return actions.Outcome{}, err
		}
		id := key
		if id == "" {
			id = res.Job.Key
		}
		return actions.Outcome{Job: &actions.JobRef{ID: id, Handle: h}}, nil
	}
	return mcpOutcome(x.tl.QualifiedName, res)
}

func mcpOutcome(name string, res *mcpclient.CallResult) (actions.Outcome, error) {
	if res.IsError {
		return actions.Outcome{}, &actions.JobError{Status: actions.JobStatus{Action: name, State: actions.JobFailed, ErrorType: ErrTypeAPI,
			Error: fmt.Sprintf("%s failed: %s", name, res.Text)}}
	}
	raw, err := json.Marshal(mcpResultValue(res))
	if err != nil {
		return actions.Outcome{}, err
	}
	return actions.Outcome{Result: raw}, nil
}

// Report says what the tool answered: its text, or its structured result.
func (x *mcpAction) Report(result json.RawMessage) string {
	var v struct {
		Text *string `json:"text"`
	}
	what := string(result)
	if json.Unmarshal(result, &v) == nil && v.Text != nil {
		what = *v.Text
	}
	return fmt.Sprintf("Tool %q on MCP server %q returned:\n%s", x.tl.Name, x.tl.Server, strings.TrimSpace(what))
}

func (x *mcpAction) Reconcile(_ context.Context, _ actions.Env, _ *actions.Bound, _ string, _ time.Time) (actions.Reconciliation, error) {
	if x.m.Capabilities()[x.tl.Server].JobVersion > 0 {
		return actions.Reconciliation{Outcome: actions.OutcomeRepeat,
			Note: "the server recognises a repeated call by its idempotency key: calling again re-attaches to the job"}, nil
	}
	return actions.Reconciliation{Outcome: actions.OutcomeUnknown,
		Note: "interrupted during the call to the MCP server, which cannot tell whether it ran"}, nil
}

func (x *mcpAction) Poll(ctx context.Context, _ actions.Env, ref actions.JobRef, wait time.Duration) (actions.JobStatus, error) {
	h, err := x.handle(ref)
	if err != nil {
		return actions.JobStatus{}, err
	}
	s, err := waitMCP(ctx, x.m, h, wait)
	if err != nil {
		return actions.JobStatus{}, err
	}
	return actions.JobStatus{ID: ref.ID, Action: x.tl.QualifiedName, State: actions.JobState(s.State), Done: s.Done, Total: s.Total, Error: s.Message}, nil
}

func (x *mcpAction) Fetch(ctx context.Context, _ actions.Env, ref actions.JobRef, _ actions.JobStatus) (json.RawMessage, error) {
	h, err := x.handle(ref)
	if err != nil {
		return nil, err
	}
	res, err := x.m.FetchJob(ctx, h)
	if err != nil {
		return nil, err
	}
	out, err := mcpOutcome(x.tl.QualifiedName, res)
	return out.Result, err
}

// handle decodes the job handle of ref. A handle is data from a
// checkpoint: one that names another server or tool than this action's is
// refused, so a checkpoint cannot make a status check or a FETCH call a
// tool nobody approved.
func (x *mcpAction) handle(ref actions.JobRef) (mcpclient.JobHandle, error) {
	var h mcpclient.JobHandle
	if err := json.Unmarshal(ref.Handle, &h); err != nil {
		return h, fmt.Errorf("job %s: its MCP handle is unreadable: %w", ref.ID, err)
	}
	if h.Server != x.tl.Server || h.Tool != x.tl.Name {
		return h, badInput("job %s of %s: its handle names tool %q of server %q, not this action's", ref.ID, x.tl.QualifiedName, h.Tool, h.Server)
	}
	return h, nil
}

// waitMCP polls an MCP job until it ends or d passes (d = 0: once).
func waitMCP(ctx context.Context, m MCP, h mcpclient.JobHandle, d time.Duration) (mcpclient.JobStatus, error) {
	deadline := time.Now().Add(d)
	for {
		s, err := m.JobStatus(ctx, h)
		if err != nil || s.Terminal() || !time.Now().Before(deadline) {
			return s, err
		}
		t := time.NewTimer(min(mcpPollInterval, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return s, ctx.Err()
		case <-t.C:
		}
	}
}

// ---- read-only tools for the gatherer ----

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

func mcpToolDef(m MCP, tl mcpclient.Tool) (*toolDef, error) {
	resolved, err := resolveSchema(tl.InputSchema)
	if err != nil {
		return nil, err
	}
	q := tl.QualifiedName
	return &toolDef{name: q, desc: tl.Description, readOnly: true, schema: schemaOrObject(tl.InputSchema),
		run: func(ctx context.Context, t *turn, raw json.RawMessage) (any, error) {
			obj, err := decodeObject(raw)
			if err != nil {
				return nil, inputErrorf("%v", err)
			}
			dropNulls(obj)
			if err := resolved.Validate(any(obj)); err != nil {
				return nil, inputErrorf("invalid arguments: %v", err)
			}
			args, _ := json.Marshal(obj)
			res, err := m.Call(ctx, q, args, "")
			if err != nil {
				return nil, err
			}
			v, err := followReadJob(ctx, m, t.a.set.WaitJobs, q, res)
			if err != nil {
				return nil, err
			}
			t.update(func(s *State) { s.setInfo("mcp", q, v) })
			return v, nil
		}}, nil
}

// followReadJob follows a job handle a read-only tool answered with:
// status, then fetch once it ends. A job still running after wait is
// reported as such, never dropped.
func followReadJob(ctx context.Context, m MCP, wait time.Duration, q string, res *mcpclient.CallResult) (any, error) {
	if res.Job == nil {
		if res.IsError {
			return nil, inputErrorf("%s failed: %s", q, res.Text)
		}
		return mcpResultValue(res), nil
	}
	s, err := waitMCP(ctx, m, *res.Job, wait)
	if err != nil {
		return nil, err
	}
	if !s.Terminal() {
		return map[string]any{"job": res.Job.Key, "state": s.State, "done": s.Done, "total": s.Total,
			"note": "the tool runs this as a job that has not finished; its result is not available yet"}, nil
	}
	final, err := m.FetchJob(ctx, *res.Job)
	if err != nil {
		return nil, err
	}
	if final.IsError {
		return nil, inputErrorf("%s failed: %s", q, final.Text)
	}
	return mcpResultValue(final), nil
}

func mcpResultValue(res *mcpclient.CallResult) any {
	if len(res.Structured) > 0 {
		return res.Structured
	}
	return map[string]any{"text": res.Text}
}

// mcpActionList tells the gatherer which MCP actions exist and what they take.
func (a *Agent) mcpActionList() []map[string]any {
	if a.mcp == nil {
		return nil
	}
	var out []map[string]any
	for _, tl := range a.mcp.Tools() {
		if !tl.ReadOnly {
			out = append(out, map[string]any{"action": tl.QualifiedName, "description": tl.Description,
				"parameters": schemaOrObject(tl.InputSchema)})
		}
	}
	return out
}

func schemaOrObject(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	return raw
}

func resolveSchema(raw json.RawMessage) (*jschema.Schema, error) {
	return jschema.Compile(schemaOrObject(raw))
}
