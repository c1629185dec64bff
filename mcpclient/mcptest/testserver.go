package mcptest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaKeyJob is the _meta key of the job contract (spec/durability.md).
const MetaKeyJob = "com.upgrade-agent/job"

// Private _meta keys between the wire adapter (wire.go) and the handlers.
const (
	metaTaskRequest = "testserver/task-request"
	metaTaskCreated = "testserver/task-created"
)

// Options choose what the server offers.
type Options struct {
	// Name is the serverInfo name; "" means "testserver".
	Name string `json:"name,omitempty"`
	// Jobs: long_report runs as a job when the call carries the job _meta,
	// and job_status is listed.
	Jobs bool `json:"jobs,omitempty"`
	// Advertise puts {"com.upgrade-agent/job": {"version": JobVersion}} in
	// InitializeResult._meta. Jobs without Advertise is a server whose
	// advertisement got lost (say, after a restart).
	Advertise  bool `json:"advertise,omitempty"`
	JobVersion int  `json:"job_version,omitempty"` // 0 means 1
	// Tasks declares MCP tasks for tools/call, lists long_report with
	// execution.taskSupport = TaskSupport ("" means "optional") and answers
	// tasks/get and tasks/result. It works through Connect or Serve, which
	// install the wire adapter; not through MCP() alone.
	Tasks       bool   `json:"tasks,omitempty"`
	TaskSupport string `json:"task_support,omitempty"`
	// ReadJobs lists slow_lookup: a read-only tool that, like long_report,
	// runs as a job when the call carries the job _meta.
	ReadJobs bool `json:"read_jobs,omitempty"`
	// Polls is how many status polls a job takes to end when the call does
	// not say; 0 means 2.
	Polls int `json:"polls,omitempty"`
	// StateFile keeps the jobs on disk, so that another process (a resumed
	// client talking to a new server process) can follow them.
	StateFile string `json:"state_file,omitempty"`
	// PageSize is the number of tools per tools/list page; 0 means the
	// SDK's default (all in one).
	PageSize int `json:"page_size,omitempty"`
	// Extras lists media (one block of every content type) and ask_client
	// (pings the client and asks it for sampling, then says how both went).
	Extras bool `json:"extras,omitempty"`
	// Now is the clock of task timestamps; nil means time.Now.
	Now func() time.Time `json:"-"`
}

// Job is the server's record of a job or task.
type Job struct {
	Key            string    `json:"key"`
	Tool           string    `json:"tool,omitempty"` // "" = long_report
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Task           bool      `json:"task,omitempty"`
	Topic          string    `json:"topic"`
	Needed         int       `json:"needed"`
	Polls          int       `json:"polls"`
	Fail           string    `json:"fail,omitempty"`
	Quiet          bool      `json:"quiet,omitempty"`
	State          string    `json:"state"` // running | succeeded | failed | cancelled
	Message        string    `json:"message,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// State is everything the server remembers; the StateFile holds it as JSON.
type State struct {
	Jobs map[string]*Job `json:"jobs"`
	// ByIdempotencyKey maps an idempotency key to the job it started.
	ByIdempotencyKey map[string]string `json:"by_idempotency_key"`
	// Starts counts jobs started per idempotency key (at most 1 when the
	// client's retries are safe); StartRequests counts START calls.
	Starts        map[string]int `json:"starts"`
	StartRequests map[string]int `json:"start_requests"`
	NextID        int            `json:"next_id"`
}

func newState() State {
	return State{Jobs: map[string]*Job{}, ByIdempotencyKey: map[string]string{},
		Starts: map[string]int{}, StartRequests: map[string]int{}}
}

// LoadState reads a StateFile (tests use it to count STARTs of another
// process).
func LoadState(path string) (State, error) {
	st := newState()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// Server is the test MCP server.
type Server struct {
	opts    Options
	mcp     *mcp.Server
	mu      sync.Mutex
	st      State
	changed chan struct{} // closed and replaced on every change
}

// New builds the server; it fails only when the StateFile cannot be read.
func New(opts Options) (*Server, error) {
	opts.JobVersion = cmp.Or(opts.JobVersion, 1)
	opts.Polls = cmp.Or(opts.Polls, 2)
	opts.TaskSupport = cmp.Or(opts.TaskSupport, "optional")
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, st: newState(), changed: make(chan struct{})}
	if opts.StateFile != "" {
		st, err := LoadState(opts.StateFile)
		if err != nil {
			return nil, err
		}
		s.st = st
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: cmp.Or(opts.Name, "testserver"), Version: "1.0.0"},
		&mcp.ServerOptions{PageSize: opts.PageSize})
	s.mcp.AddReceivingMiddleware(s.advertise)
	s.addTools()
	if opts.Tasks {
		if err := mcp.AddReceivingCustomMethod(s.mcp, "tasks/get", s.tasksGet); err != nil {
			return nil, err
		}
		if err := mcp.AddReceivingCustomMethod(s.mcp, "tasks/result", s.tasksResult); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// MCP is the SDK server, e.g. for mcp.NewStreamableHTTPHandler. Tasks need
// Connect or Serve.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Connect serves one client over t (an in-memory transport in tests).
func (s *Server) Connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, error) {
	return s.mcp.Connect(ctx, s.wrap(t), nil)
}

// Serve serves one client over t until it disconnects (stdio).
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	return s.mcp.Run(ctx, s.wrap(t))
}

func (s *Server) wrap(t mcp.Transport) mcp.Transport {
	if !s.opts.Tasks {
		return t
	}
	return &taskTransport{inner: t, taskSupport: s.opts.TaskSupport}
}

// Starts is how many jobs the idempotency key started.
func (s *Server) Starts(idempotencyKey string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Starts[idempotencyKey]
}

// StartRequests is how many START calls carried the idempotency key.
func (s *Server) StartRequests(idempotencyKey string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.StartRequests[idempotencyKey]
}

// Job returns a copy of a job or task record.
func (s *Server) Job(key string) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.st.Jobs[key]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// Finish ends a running job now, as it would after its polls.
func (s *Server) Finish(key string) error {
	return s.update(key, func(j *Job) { s.finish(j) })
}

// Cancel marks a running job cancelled.
func (s *Server) Cancel(key string) error {
	return s.update(key, func(j *Job) {
		if j.State == "running" {
			j.State, j.Message = "cancelled", "cancelled by the operator"
		}
	})
}

func (s *Server) update(key string, f func(*Job)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.st.Jobs[key]
	if !ok {
		return fmt.Errorf("unknown job %q", key)
	}
	f(j)
	j.UpdatedAt = s.opts.Now().UTC()
	return s.changedLocked()
}

// changedLocked persists the state and wakes tasks/result waiters.
func (s *Server) changedLocked() error {
	close(s.changed)
	s.changed = make(chan struct{})
	if s.opts.StateFile == "" {
		return nil
	}
	b, err := json.MarshalIndent(s.st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.opts.StateFile), ".testserver-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.opts.StateFile)
}

func (s *Server) finish(j *Job) {
	if j.State != "running" {
		return
	}
	if j.Fail != "" {
		j.State, j.Message = "failed", j.Fail
	} else {
		j.State, j.Message = "succeeded", "report ready"
	}
}

// poll counts one status request and ends the job after its polls.
func (s *Server) poll(key string, task bool) (Job, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.st.Jobs[key]
	if !ok || j.Task != task {
		return Job{}, false, nil
	}
	if j.State == "running" {
		j.Polls++
		if j.Polls >= j.Needed {
			s.finish(j)
		} else {
			j.Message = fmt.Sprintf("%d of %d polls", j.Polls, j.Needed)
		}
		j.UpdatedAt = s.opts.Now().UTC()
		if err := s.changedLocked(); err != nil {
			return Job{}, false, err
		}
	}
	return *j, true, nil
}

func (s *Server) advertise(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err == nil && method == "initialize" && s.opts.Advertise {
			if ir, ok := res.(*mcp.InitializeResult); ok {
				if ir.Meta == nil {
					ir.Meta = mcp.Meta{}
				}
				ir.Meta[MetaKeyJob] = map[string]any{"version": s.opts.JobVersion}
			}
		}
		return res, err
	}
}

func (s *Server) addTools() {
	s.mcp.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Echo the text back.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return errorResult("arguments: " + err.Error()), nil
		}
		return textResult(a.Text), nil
	})

	s.mcp.AddTool(&mcp.Tool{
		Name:        "lookup",
		Description: "Look an item up by id.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil || a.ID == "" {
			return errorResult("lookup needs an id"), nil
		}
		item := map[string]any{"id": a.ID, "name": "item " + a.ID}
		b, _ := json.Marshal(item)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: item}, nil
	})

	notDestructive := false
	s.mcp.AddTool(&mcp.Tool{
		Name:        "long_report",
		Description: "Write a report; takes a while, so it runs as a job when the client can follow one.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &notDestructive},
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"topic":{"type":"string"},` +
			`"polls":{"type":"integer","minimum":0,"description":"status polls before the job ends"},` +
			`"fail":{"type":"string","description":"make the job fail with this message"},` +
			`"quiet":{"type":"boolean","description":"a failed result carries no text (the status still has it)"}},` +
			`"required":["topic"]}`),
	}, s.longReport)

	if s.opts.ReadJobs {
		s.mcp.AddTool(&mcp.Tool{
			Name:        "slow_lookup",
			Description: "Look an item up by id in the archive; slow, so it runs as a job when the client can follow one.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		}, s.slowLookup)
	}

	if s.opts.Extras {
		s.addExtras()
	}

	if s.opts.Jobs {
		s.mcp.AddTool(&mcp.Tool{
			Name:        "job_status",
			Description: "Reserved: status of a job started by a job-backed tool.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`),
		}, s.jobStatus)
	}
}

type reportArgs struct {
	Topic string `json:"topic"`
	Polls *int   `json:"polls"`
	Fail  string `json:"fail"`
	Quiet bool   `json:"quiet"`
}

func (s *Server) longReport(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a reportArgs
	if err := json.Unmarshal(req.Params.Arguments, &a); err != nil || a.Topic == "" {
		return errorResult("long_report needs a topic"), nil
	}
	meta := req.Params.Meta
	job, hasJob := meta[MetaKeyJob].(map[string]any)
	hasJob = hasJob && s.opts.Jobs
	_, asTask := meta[metaTaskRequest]
	asTask = asTask && s.opts.Tasks

	if hasJob {
		if key, _ := job["key"].(string); key != "" {
			return s.fetch(key)
		}
	}
	if asTask {
		return s.start(a, "", true)
	}
	if s.opts.Tasks && s.opts.TaskSupport == "required" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "long_report must be called as a task"}
	}
	if hasJob {
		idem, _ := job["idempotency_key"].(string)
		return s.start(a, idem, false)
	}
	// The blocking path: the client cannot follow a job.
	return finalResult(a.Topic, a.Fail, a.Quiet), nil
}

// slowLookup is lookup as a job: started by a call with the job _meta,
// fetched by a call with its key.
func (s *Server) slowLookup(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &a); err != nil || a.ID == "" {
		return errorResult("slow_lookup needs an id"), nil
	}
	job, hasJob := req.Params.Meta[MetaKeyJob].(map[string]any)
	if !hasJob || !s.opts.Jobs {
		return lookupResult(a.ID), nil
	}
	if key, _ := job["key"].(string); key != "" {
		return s.fetch(key)
	}
	idem, _ := job["idempotency_key"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked("slow_lookup", reportArgs{Topic: a.ID}, idem, false)
}

func lookupResult(id string) *mcp.CallToolResult {
	item := map[string]any{"id": id, "name": "item " + id + " (from the archive)"}
	b, _ := json.Marshal(item)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: item}
}

func (s *Server) start(a reportArgs, idem string, task bool) (*mcp.CallToolResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked("", a, idem, task)
}

func (s *Server) startLocked(tool string, a reportArgs, idem string, task bool) (*mcp.CallToolResult, error) {
	if idem != "" {
		s.st.StartRequests[idem]++
		if key, ok := s.st.ByIdempotencyKey[idem]; ok {
			if err := s.changedLocked(); err != nil {
				return nil, err
			}
			return s.acceptedLocked(s.st.Jobs[key]), nil
		}
	}
	s.st.NextID++
	now := s.opts.Now().UTC()
	j := &Job{
		Tool:           tool,
		IdempotencyKey: idem,
		Task:           task,
		Topic:          a.Topic,
		Needed:         s.opts.Polls,
		Fail:           a.Fail,
		Quiet:          a.Quiet,
		State:          "running",
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	if a.Polls != nil {
		j.Needed = *a.Polls
	}
	if task {
		j.Key = fmt.Sprintf("task-%d", s.st.NextID)
	} else {
		j.Key = fmt.Sprintf("job-%d", s.st.NextID)
	}
	s.st.Jobs[j.Key] = j
	if idem != "" {
		s.st.ByIdempotencyKey[idem] = j.Key
		s.st.Starts[idem]++
	}
	if err := s.changedLocked(); err != nil {
		return nil, err
	}
	return s.acceptedLocked(j), nil
}

func (s *Server) acceptedLocked(j *Job) *mcp.CallToolResult {
	if j.Task {
		return &mcp.CallToolResult{Meta: mcp.Meta{metaTaskCreated: taskObject(j)}}
	}
	res := textResult(fmt.Sprintf("report on %s started as job %s", j.Topic, j.Key))
	res.Meta = mcp.Meta{MetaKeyJob: map[string]any{"key": j.Key}}
	return res
}

func (s *Server) fetch(key string) (*mcp.CallToolResult, error) {
	j, ok := s.Job(key)
	if !ok || j.Task {
		return errorResult(fmt.Sprintf("unknown job key %q", key)), nil
	}
	switch j.State {
	case "running":
		res := textResult(fmt.Sprintf("job %s is still running", key))
		res.Meta = mcp.Meta{MetaKeyJob: map[string]any{"key": key}}
		return res, nil
	case "cancelled":
		return errorResult(j.Message), nil
	}
	if j.Tool == "slow_lookup" {
		return lookupResult(j.Topic), nil
	}
	return finalResult(j.Topic, j.Fail, j.Quiet), nil
}

func (s *Server) jobStatus(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &a); err != nil || a.Key == "" {
		return errorResult("job_status needs a key"), nil
	}
	j, ok, err := s.poll(a.Key, false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return errorResult(fmt.Sprintf("unknown job key %q", a.Key)), nil
	}
	st := map[string]any{"state": j.State, "done": min(j.Polls, j.Needed), "total": j.Needed, "message": j.Message}
	b, _ := json.Marshal(st)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: st}, nil
}

// MCP tasks (2025-11-25).

type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type taskResult struct {
	mcp.ResultBase
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

var taskStatus = map[string]string{"running": "working", "succeeded": "completed", "failed": "failed", "cancelled": "cancelled"}

func taskObject(j *Job) map[string]any {
	m := map[string]any{
		"taskId":        j.Key,
		"status":        taskStatus[j.State],
		"createdAt":     j.CreatedAt.Format(time.RFC3339),
		"lastUpdatedAt": j.UpdatedAt.Format(time.RFC3339),
		"ttl":           nil,
		"pollInterval":  1000,
	}
	if j.Message != "" {
		m["statusMessage"] = j.Message
	}
	return m
}

func (s *Server) tasksGet(_ context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	j, ok, err := s.poll(p.TaskID, true)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %q", p.TaskID)}
	}
	return &taskResult{
		TaskID:        j.Key,
		Status:        taskStatus[j.State],
		StatusMessage: j.Message,
		CreatedAt:     j.CreatedAt.Format(time.RFC3339),
		LastUpdatedAt: j.UpdatedAt.Format(time.RFC3339),
		PollInterval:  1000,
	}, nil
}

// tasksResult blocks until the task ends, as the spec asks.
func (s *Server) tasksResult(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*mcp.CallToolResult, error) {
	for {
		s.mu.Lock()
		j, ok := s.st.Jobs[p.TaskID]
		var snapshot Job
		if ok {
			snapshot = *j
		}
		changed := s.changed
		s.mu.Unlock()
		if !ok || !snapshot.Task {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %q", p.TaskID)}
		}
		if snapshot.State != "running" {
			var res *mcp.CallToolResult
			if snapshot.State == "cancelled" {
				res = errorResult(snapshot.Message)
			} else {
				res = finalResult(snapshot.Topic, snapshot.Fail, snapshot.Quiet)
			}
			res.Meta = mcp.Meta{"io.modelcontextprotocol/related-task": map[string]any{"taskId": p.TaskID}}
			return res, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func finalResult(topic, fail string, quiet bool) *mcp.CallToolResult {
	if fail != "" && quiet {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{}}
	}
	if fail != "" {
		return errorResult(fail)
	}
	rep := map[string]any{"topic": topic, "sections": 3}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("report on %s: 3 sections", topic)}},
		StructuredContent: rep,
	}
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func errorResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (s *Server) addExtras() {
	s.mcp.AddTool(&mcp.Tool{
		Name:        "media",
		Description: "Answer with one content block of every type.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "caption"},
			&mcp.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
			&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
			&mcp.ResourceLink{URI: "file:///reports/q3.pdf", Name: "q3"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "the notes"}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///logo.png", MIMEType: "image/png", Blob: []byte{1, 2}}},
		}}, nil
	})

	s.mcp.AddTool(&mcp.Tool{
		Name:        "ask_client",
		Description: "Ping the client and ask it for sampling; say how both went.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ping := "ok"
		if err := req.Session.Ping(ctx, nil); err != nil {
			ping = err.Error()
		}
		sampling := "answered"
		//lint:ignore SA1019 a request the client does not offer, to see it refused; sampling is still in 2025-11-25.
		if _, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10}); err != nil {
			sampling = err.Error()
		}
		return textResult(fmt.Sprintf("ping: %s; sampling: %s", ping, sampling)), nil
	})
}
