package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Backend is what the pipeline needs from UpGrade: the executor's operations
// plus the health check. *upgrade.Client satisfies it.
type Backend interface {
	actions.API
	Health(ctx context.Context) (*upgrade.ServerInfo, error)
	// FlagSnapshot reads a flag with every segment its lists reach, for
	// explain_feature_flag and the flag details (admin routes only).
	FlagSnapshot(ctx context.Context, id string) (*upgrade.FlagSnapshot, error)
}

// Confirmation policies (pipeline.md).
const (
	PolicyAlways      = actions.PolicyAlways
	PolicyDestructive = actions.PolicyDestructive
	PolicyNever       = actions.PolicyNever
)

// Status is how a turn ended (the JSON output's status) and where a
// session stands between runs: one type with the checkpoint.
type Status = checkpoint.Status

// Turn statuses of the JSON output.
const (
	StatusCompleted            = checkpoint.StatusCompleted
	StatusAwaitingConfirmation = checkpoint.StatusAwaitingConfirmation
	StatusWaitingJob           = checkpoint.StatusWaitingJob
	StatusTerminated           = checkpoint.StatusTerminated
	StatusFailed               = checkpoint.StatusFailed
)

// TurnStatusNames are the statuses a turn's result may have, as text (for
// readers that check a status someone wrote, such as a scenario's expect).
func TurnStatusNames() []string {
	names := make([]string, len(checkpoint.TurnStatuses))
	for i, s := range checkpoint.TurnStatuses {
		names[i] = string(s)
	}
	return names
}

// DefaultReason is the termination_reason of a turn that ended as usual
// with status s ("" for a terminated turn, whose reason is its own).
func DefaultReason(s Status) string {
	switch s {
	case StatusCompleted:
		return "turn completed"
	case StatusAwaitingConfirmation:
		return "awaiting confirmation"
	case StatusWaitingJob:
		return "waiting on a job"
	case StatusFailed:
		return "failed"
	}
	return ""
}

// JobRunner runs long actions outside the turn (pipeline/jobs).
type JobRunner = actions.JobRunner

// JobStatus is a job as the pipeline sees it.
type JobStatus = actions.JobStatus

// Deps are what an agent talks to. LLM and API are required. MCP servers
// come with WithMCP.
type Deps struct {
	LLM   llm.Client
	API   Backend
	Store checkpoint.Store // nil: nothing is saved (library use)
	Jobs  JobRunner        // nil: long actions run inline
	// Actions are the actions (and declared lookups) the agent offers and
	// runs; nil: a copy of the built-in set (actions.Builtin).
	Actions *actions.Registry

	Now    func() time.Time // nil: time.Now
	NewID  func() string    // nil: random hex
	Logger *slog.Logger     // nil: discard
	// ExitCode maps a turn's outcome to the process's exit code, for the
	// turn's span; nil: the span carries none.
	ExitCode func(Status, error) int
}

// Settings are the knobs of the turn flags and the config file.
type Settings struct {
	Model       string
	Temperature *float32
	// Policy says which actions need a human yes: always (default),
	// destructive, never (only together with Yes).
	Policy string
	// Yes approves the pending and any new confirmation in this run.
	Yes bool
	// MaxLLMCalls bounds the LLM calls of one turn (max_auto_replies;
	// 0 = 12).
	MaxLLMCalls int
	// MaxConsecutiveAutoReplies ends a turn before any work when the agent
	// has answered that many turns in a row without a human decision; 0
	// turns the check off.
	MaxConsecutiveAutoReplies int
	TerminationWords          []string
	PatternReplies            []PatternReply
	// Secrets are redacted from incoming messages.
	Secrets []string
	// WaitJobs is how long a turn waits inline for a job it started.
	WaitJobs time.Duration
	// Output is the structured-output node (nil: off).
	Output *OutputConfig
	// TrustedMCPServers are the MCP servers marked trusted: true in the
	// config, whose annotations may relax confirmation.
	TrustedMCPServers []string
	// ReplyWording says who words the reply that shows a confirmation and
	// the reply after a confirmed action, a denial or a finished job: "go"
	// (default: rendered from the plan or the result, no LLM call) or
	// "llm" (the responder writes it).
	ReplyWording string
	// ApprovalTTL is how long a confirmation may be approved; 0 never
	// expires (teams: audit.go).
	ApprovalTTL time.Duration
}

// Reply wordings (Settings.ReplyWording).
const (
	WordingGo  = "go"
	WordingLLM = "llm"
)

// Agent runs turns. Build it with New: its dependencies, settings, MCP
// servers, view callbacks, reply functions and hooks are given there, and
// everything it derives from them (the reply chain, the tool lists) is
// built there too. Nothing changes an agent after New, so one agent may
// run turns of different sessions at the same time; a session is used by
// one turn at a time (the CLI's session lock sees to that).
type Agent struct {
	deps Deps
	set  Settings
	mcp  MCP // nil: no MCP servers
	// auditor receives the turn's decisions (WithAuditor); nil: no trail.
	auditor Auditor
	// targets remembers the name audit entries give a confirmation's
	// target (audit.go), so that the executed entry of a delete names
	// what the delete removed.
	targets sync.Map // confirmation id -> auditTarget

	// onResponse receives the person's reply as soon as it is final,
	// before the optional output node runs.
	onResponse func(text string)
	// streamText receives the responder's text as it streams in (the
	// confirmation text Go appends afterwards comes only in onResponse).
	streamText func(delta string)

	// replies is the reply chain, laid out by New; replyAt holds the
	// positions WithReply asked for until then.
	replies []registeredReply
	replyAt []int
	hooks   hooks
	// scopes are the tool lists and gatherer prompts, per scope, made on
	// first need (action_list.go).
	scopes toolScopes
}

// Option adds to an agent what a front end brings besides Deps and
// Settings: MCP servers, the view's callbacks, reply functions and hooks.
type Option func(*Agent)

// WithMCP joins MCP servers' tools to the agent's (nil: none).
func WithMCP(m MCP) Option { return func(a *Agent) { a.mcp = m } }

// WithOnResponse hands the person's reply to fn as soon as it is final,
// before the optional output node runs.
func WithOnResponse(fn func(text string)) Option { return func(a *Agent) { a.onResponse = fn } }

// WithStreamText hands the responder's text to fn as it streams in. The
// text Go adds after it (a confirmation) arrives only through
// WithOnResponse's callback, as does a reply no model wrote.
func WithStreamText(fn func(delta string)) Option { return func(a *Agent) { a.streamText = fn } }

// New is the one wiring function: the CLI, the scenario runner and the
// benchmarks all build their agent with it. It checks the settings the way
// every front end must (a policy it does not know, never without yes).
func New(d Deps, s Settings, opts ...Option) (*Agent, error) {
	if d.LLM == nil || d.API == nil {
		return nil, fmt.Errorf("pipeline: an LLM client and an UpGrade backend are required")
	}
	switch p := strings.ToLower(strings.TrimSpace(s.Policy)); p {
	case "":
		s.Policy = PolicyAlways
	case PolicyAlways, PolicyDestructive, PolicyNever:
		s.Policy = p
	default:
		return nil, badInput("confirm policy must be always, destructive or never, got %q", s.Policy)
	}
	if s.Policy == PolicyNever && !s.Yes {
		return nil, badInput("--confirm never runs actions without asking; it is refused unless --yes is also given")
	}
	if s.WaitJobs < 0 {
		return nil, badInput("--wait-jobs must not be negative")
	}
	switch w := strings.ToLower(strings.TrimSpace(s.ReplyWording)); w {
	case "":
		s.ReplyWording = WordingGo
	case WordingGo, WordingLLM:
		s.ReplyWording = w
	default:
		return nil, badInput("reply_wording must be go or llm, got %q", s.ReplyWording)
	}
	if s.MaxLLMCalls < 0 || s.MaxConsecutiveAutoReplies < 0 {
		return nil, badInput("max_auto_replies and max_consecutive_auto_replies must not be negative")
	}
	if d.Actions == nil {
		d.Actions = actions.Builtin()
	}
	a := &Agent{deps: d, set: s}
	for _, o := range opts {
		o(a)
	}
	a.buildChain()
	return a, nil
}

// Result is the outcome of one turn: the JSON output of cli.md.
type Result struct {
	SessionID         string           `json:"session_id"`
	Turn              int              `json:"turn"`
	Status            Status           `json:"status"`
	Response          string           `json:"response"`
	Confirmation      *ConfirmationOut `json:"confirmation,omitempty"`
	Declined          *DeclinedOut     `json:"declined,omitempty"`
	Job               *JobOut          `json:"job,omitempty"`
	Output            map[string]any   `json:"output,omitempty"`
	Actions           []ActionOut      `json:"actions,omitempty"`
	Errors            []ErrorEntry     `json:"errors,omitempty"`
	Trace             []string         `json:"trace"`
	TerminationReason string           `json:"termination_reason,omitempty"`
	Usage             UsageOut         `json:"usage"`
}

// ConfirmationOut is the pending confirmation in the JSON output.
type ConfirmationOut struct {
	ID          string          `json:"id"`
	Action      string          `json:"action"`
	Params      json.RawMessage `json:"params"`
	Message     string          `json:"message"`
	Destructive bool            `json:"destructive"`
}

// JobOut is the job in the JSON output.
type JobOut struct {
	ID       string           `json:"id"`
	Action   string           `json:"action"`
	State    actions.JobState `json:"state"`
	Progress *Progress        `json:"progress,omitempty"`
}

// Progress of a job.
type Progress = actions.Progress

// ActionOut is one executed action in the JSON output.
type ActionOut struct {
	Action string          `json:"action"`
	Params json.RawMessage `json:"params"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// UsageOut is the LLM usage of one turn.
type UsageOut struct {
	LLMCalls         int `json:"llm_calls"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens"`
}

func (a *Agent) now() time.Time {
	if a.deps.Now != nil {
		return a.deps.Now().UTC()
	}
	return time.Now().UTC()
}

func (a *Agent) newID() string {
	if a.deps.NewID != nil {
		return a.deps.NewID()
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (a *Agent) logger() *slog.Logger {
	if a.deps.Logger != nil {
		return a.deps.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (a *Agent) maxCalls() int {
	if a.set.MaxLLMCalls > 0 {
		return a.set.MaxLLMCalls
	}
	return 12
}

func (a *Agent) policy() string {
	if a.set.Policy == "" {
		return PolicyAlways
	}
	return a.set.Policy
}

// outputEnabled: the structured-output node runs after the responder.
func (a *Agent) outputEnabled() bool {
	return a.set.Output != nil && a.set.Output.Enabled && a.set.Output.Schema != nil && len(a.set.Output.Schema.custom) > 0
}

// action finds the action of a name: a built-in one first, then an MCP
// tool behind its adapter. Nodes, the executor and resume look actions up
// through it and never ask where one comes from; only the gatherer's tool
// list (a schema tool per built-in action, the MCP actions listed in the
// prompt's context) and set_action_needed's forgiving spelling of a
// built-in name go to the registry themselves.
func (a *Agent) action(name string) (actions.Action, bool) {
	if act, ok := a.reg().Lookup(name); ok {
		return act, true
	}
	return a.mcpAction(name)
}

// env is what actions act on in this run.
func (a *Agent) env(api actions.API, sessionID string) actions.Env {
	env := actions.Env{API: api, Jobs: a.deps.Jobs, SessionID: sessionID}
	if a.deps.Store != nil {
		env.Changes = storeChanges{a.deps.Store}
	}
	return env
}

// mcpCaps is the negotiated MCP capabilities, stored with the session so a
// resumed process still knows which servers run tools as jobs.
func (a *Agent) mcpCaps() json.RawMessage {
	if a.mcp == nil {
		return nil
	}
	caps := a.mcp.Capabilities()
	if len(caps) == 0 {
		return nil
	}
	b, err := json.Marshal(caps)
	if err != nil {
		return nil
	}
	return b
}
