package mcpclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
)

// Wire names of the job contract (spec/durability.md, "Jobs behind MCP tools").
const (
	// MetaKeyJob is the _meta key of the advertisement, the START, the
	// handle and the FETCH.
	MetaKeyJob = "com.upgrade-agent/job"
	// JobStatusTool is the reserved tool a job-aware server exposes for
	// polling; it is never offered to the LLM.
	JobStatusTool = "job_status"
	// JobContractVersion is the newest version of the contract this client
	// speaks; the negotiated version is the smaller of it and the server's.
	JobContractVersion = 1
	// ProtocolVersion is the MCP version this client asks for. It is the
	// last one with the initialize handshake (whose result carries the job
	// advertisement in _meta) and the one that defines tasks.
	ProtocolVersion = "2025-11-25"
)

// Capability is what was negotiated with one server. The caller stores the
// map from Capabilities in the checkpoint's "mcp" field and gives it back
// as Options.Known when it resumes.
type Capability struct {
	// JobVersion is the negotiated version of the _meta job contract; 0 when
	// the server does not advertise it.
	JobVersion int `json:"job_version,omitempty"`
	// Tasks: the server declared task-augmented tools/call (MCP tasks).
	Tasks bool `json:"tasks,omitempty"`
}

// Tool is one MCP tool as offered to the pipeline.
type Tool struct {
	Server string `json:"server"`
	// Name is the tool's name on its server.
	Name string `json:"name"`
	// QualifiedName is the name offered to the LLM (see QualifiedName).
	QualifiedName string `json:"qualified_name"`
	Description   string `json:"description,omitempty"`
	// InputSchema is the tool's JSON Schema for its arguments (an object
	// schema; {"type":"object"} when the server sent none).
	InputSchema json.RawMessage `json:"input_schema"`
	// ReadOnly is annotations.readOnlyHint: the gatherer may call the tool;
	// any other tool is an executor action behind confirmation.
	ReadOnly bool `json:"read_only,omitempty"`
	// Destructive follows annotations.destructiveHint, whose default for a
	// tool that is not read-only is true (MCP spec); for the "destructive"
	// confirmation policy.
	Destructive bool `json:"destructive,omitempty"`
	// TaskSupport is execution.taskSupport ("optional", "required", or ""
	// for forbidden), meaningful only when the server's Capability.Tasks.
	TaskSupport string `json:"task_support,omitempty"`
}

// Manager holds the connected servers. It is safe for concurrent use.
type Manager struct {
	logger  *slog.Logger
	taskTTL int64 // milliseconds
	servers map[string]*serverConn
	tools   []Tool
	byName  map[string]Tool
	caps    map[string]Capability
}

type serverConn struct {
	name    string
	session *session
	caps    Capability
}

// Connect starts every server, initializes it and lists its tools, the
// servers in parallel. A server that fails any step is reported in the
// returned slice (a *ServerError naming it) and skipped; the Manager is never
// nil and works with the others. Tools with a name already taken are
// reported and skipped too.
//
// Capabilities are read again from every server's initialize answer. A
// server that does not advertise the job contract now but did when the
// checkpoint was written (Options.Known) keeps the version from Known: a
// restarted server, or one behind a proxy that drops the advertisement,
// still gets the START _meta and its jobs can be followed. Known entries of
// servers that are not connected are kept as they are, so writing
// Capabilities back into the checkpoint loses nothing.
func Connect(ctx context.Context, servers []ServerConfig, opts Options) (*Manager, []error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ttl := cmp.Or(opts.TaskTTL, defaultTaskTTL)
	m := &Manager{
		logger:  logger,
		taskTTL: ttl.Milliseconds(),
		servers: map[string]*serverConn{},
		byName:  map[string]Tool{},
		caps:    maps.Clone(opts.Known),
	}
	if m.caps == nil {
		m.caps = map[string]Capability{}
	}

	type outcome struct {
		conn  *serverConn
		tools []wireTool
		err   error
	}
	results := make([]outcome, len(servers))
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for i, cfg := range servers {
		if err := cfg.Validate(); err != nil {
			results[i].err = &ServerError{Server: cfg.Name, Op: OpConfig, Err: err}
			continue
		}
		if seen[cfg.Name] {
			results[i].err = &ServerError{Server: cfg.Name, Op: OpConfig, Err: errors.New("a server with this name is listed twice")}
			continue
		}
		seen[cfg.Name] = true
		wg.Go(func() {
			conn, tools, err := connectOne(ctx, cfg, opts, logger)
			results[i] = outcome{conn, tools, err}
		})
	}
	wg.Wait()

	var errs []error
	for _, r := range results {
		if r.err != nil {
			logger.Debug("mcp server skipped", "error", r.err)
			errs = append(errs, r.err)
			continue
		}
		c := r.conn
		if known, ok := opts.Known[c.name]; ok && c.caps.JobVersion == 0 && known.JobVersion > 0 {
			logger.Debug("mcp server does not advertise the job contract now; using the checkpointed version",
				"server", c.name, "job_version", known.JobVersion)
			c.caps.JobVersion = known.JobVersion
		}
		m.servers[c.name] = c
		m.caps[c.name] = c.caps
		for _, t := range r.tools {
			if c.caps.JobVersion > 0 && t.Name == JobStatusTool {
				continue
			}
			tool := convertTool(c, t)
			if prev, dup := m.byName[tool.QualifiedName]; dup {
				errs = append(errs, &ServerError{Server: c.name, Op: OpListTools,
					Err: fmt.Errorf("tool %q: its name %s is already taken by tool %q of server %q; skipped",
						t.Name, tool.QualifiedName, prev.Name, prev.Server)})
				continue
			}
			m.byName[tool.QualifiedName] = tool
			m.tools = append(m.tools, tool)
		}
		logger.Debug("mcp server connected", "server", c.name, "tools", len(r.tools),
			"job_version", c.caps.JobVersion, "tasks", c.caps.Tasks)
	}
	return m, errs
}

func connectOne(ctx context.Context, cfg ServerConfig, opts Options, logger *slog.Logger) (*serverConn, []wireTool, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(opts.Timeout, defaultTimeout))
	defer cancel()

	transport, tail := buildTransport(cfg, opts)
	fail := func(op string, err error) (*serverConn, []wireTool, error) {
		return nil, nil, &ServerError{Server: cfg.Name, Op: op, Stderr: tail.String(), Err: err}
	}
	conn, err := transport.Connect(ctx)
	if err != nil {
		return fail(OpStart, err)
	}
	sess := newSession(conn, logger.With("mcp_server", cfg.Name), tail)
	res, err := sess.initialize(ctx, cmp.Or(opts.ClientVersion, "dev"))
	if err != nil {
		_ = sess.close()
		return fail(OpInitialize, err)
	}
	caps := Capability{Tasks: res.tasksToolsCall()}
	v, err := parseJobAdvert(res.Meta)
	if err != nil {
		logger.Warn("mcp server: ignoring its job advertisement", "server", cfg.Name, "error", err)
	}
	caps.JobVersion = min(v, JobContractVersion)

	tools, err := sess.listTools(ctx)
	if err != nil {
		_ = sess.close()
		return fail(OpListTools, err)
	}
	slices.SortFunc(tools, func(a, b wireTool) int { return cmp.Compare(a.Name, b.Name) })
	sess.ready()
	return &serverConn{name: cfg.Name, session: sess, caps: caps}, tools, nil
}

// parseJobAdvert reads {"com.upgrade-agent/job": {"version": N}}; 0 when absent.
func parseJobAdvert(meta map[string]any) (int, error) {
	raw, ok := meta[MetaKeyJob]
	if !ok {
		return 0, nil
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return 0, fmt.Errorf("_meta[%q] is %T, want an object", MetaKeyJob, raw)
	}
	n, ok := obj["version"].(float64)
	if !ok || n < 1 || n != math.Trunc(n) || n > math.MaxInt32 {
		return 0, fmt.Errorf("_meta[%q].version is %v, want a positive integer", MetaKeyJob, obj["version"])
	}
	return int(n), nil
}

func convertTool(c *serverConn, t wireTool) Tool {
	tool := Tool{
		Server:        c.name,
		Name:          t.Name,
		QualifiedName: QualifiedName(c.name, t.Name),
		Description:   t.Description,
	}
	if tool.Description == "" {
		tool.Description = t.Title
	}
	if a := t.Annotations; a != nil {
		tool.ReadOnly = a.ReadOnlyHint
		if tool.Description == "" {
			tool.Description = a.Title
		}
	}
	tool.Destructive = !tool.ReadOnly && (t.Annotations == nil || t.Annotations.DestructiveHint == nil || *t.Annotations.DestructiveHint)
	if c.caps.Tasks && t.Execution != nil {
		if ts := t.Execution.TaskSupport; ts == "optional" || ts == "required" {
			tool.TaskSupport = ts
		}
	}
	tool.InputSchema = json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && len(b) > 0 && b[0] == '{' {
			tool.InputSchema = b
		}
	}
	return tool
}

// Tools lists the tools offered to the LLM: servers in config order, tools
// by name. The reserved job_status of a job-aware server is not among them.
func (m *Manager) Tools() []Tool { return slices.Clone(m.tools) }

// Tool looks a tool up by its qualified name.
func (m *Manager) Tool(qualifiedName string) (Tool, bool) {
	t, ok := m.byName[qualifiedName]
	return t, ok
}

// Capabilities returns the negotiated capability of every connected server
// and the Known capability of the others (see Connect).
func (m *Manager) Capabilities() map[string]Capability { return maps.Clone(m.caps) }

// Close ends every session (for stdio: closes stdin, waits briefly, then
// signals the process).
func (m *Manager) Close() error {
	var errs []error
	for _, name := range sortedKeys(m.servers) {
		if err := m.servers[name].session.close(); err != nil {
			errs = append(errs, fmt.Errorf("mcp server %q: close: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) server(name string) (*serverConn, error) {
	c, ok := m.servers[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrServerUnavailable, name)
	}
	return c, nil
}
