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
}

// Confirmation policies (pipeline.md).
const (
	PolicyAlways      = actions.PolicyAlways
	PolicyDestructive = actions.PolicyDestructive
	PolicyNever       = actions.PolicyNever
)

// Turn statuses of the JSON output.
const (
	StatusCompleted            = "completed"
	StatusAwaitingConfirmation = "awaiting_confirmation"
	StatusWaitingJob           = "waiting_job"
	StatusTerminated           = "terminated"
	StatusFailed               = "failed"
)

// JobRunner runs long actions outside the turn (pipeline/jobs).
type JobRunner = actions.JobRunner

// JobStatus is a job as the pipeline sees it.
type JobStatus = actions.JobStatus

// Deps are what an agent talks to. LLM and API are required.
type Deps struct {
	LLM   llm.Client
	API   Backend
	Store checkpoint.Store // nil: nothing is saved (library use)
	Jobs  JobRunner        // nil: long actions run inline
	MCP   MCP              // nil: no MCP servers

	Now    func() time.Time // nil: time.Now
	NewID  func() string    // nil: random hex
	Logger *slog.Logger     // nil: discard
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
	// ReplyWording says who words the reply after a confirmed action, a
	// denial or a finished job: "go" (default: rendered from the result,
	// no LLM call) or "llm" (the responder writes it).
	ReplyWording string
}

// Reply wordings (Settings.ReplyWording).
const (
	WordingGo  = "go"
	WordingLLM = "llm"
)

// Agent runs turns. Build it with New; RegisterReply and RegisterHook add
// to the reply chain before the first turn.
type Agent struct {
	Deps
	Settings

	// OnResponse receives the person's reply as soon as it is final, before
	// the optional output node runs.
	OnResponse func(text string)
	// StreamText, when set, receives the responder's text as it streams in
	// (the confirmation text Go appends afterwards comes only in OnResponse).
	StreamText func(delta string)

	replies []registeredReply
	hooks   hooks
	tools   *toolSet
	rtools  *toolSet
}

// New is the one wiring function: the CLI, the scenario runner and the
// benchmarks all build their agent with it. It checks the settings the way
// every front end must (a policy it does not know, never without yes).
func New(d Deps, s Settings) (*Agent, error) {
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
	return &Agent{Deps: d, Settings: s}, nil
}

// Result is the outcome of one turn: the JSON output of cli.md.
type Result struct {
	SessionID         string           `json:"session_id"`
	Turn              int              `json:"turn"`
	Status            string           `json:"status"`
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
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

func (a *Agent) newID() string {
	if a.NewID != nil {
		return a.NewID()
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (a *Agent) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (a *Agent) maxCalls() int {
	if a.MaxLLMCalls > 0 {
		return a.MaxLLMCalls
	}
	return 12
}

func (a *Agent) policy() string {
	if a.Policy == "" {
		return PolicyAlways
	}
	return a.Policy
}

func (a *Agent) gTools() *toolSet {
	if a.tools == nil {
		a.tools = gathererTools(a.actionNames(), mcpReadTools(a.MCP)...)
	}
	return a.tools
}

func (a *Agent) rTools() *toolSet {
	if a.rtools == nil {
		a.rtools = responderTools()
	}
	return a.rtools
}

// action finds the action of a name: a built-in one, or an MCP tool behind
// its adapter. It is the only place that tells them apart.
func (a *Agent) action(name string) (actions.Action, bool) {
	if act, ok := actions.Lookup(name); ok {
		return act, true
	}
	return a.mcpAction(name)
}

// env is what actions act on in this run.
func (a *Agent) env(api actions.API, sessionID string) actions.Env {
	return actions.Env{API: api, Jobs: a.Jobs, SessionID: sessionID}
}

// mcpCaps is the negotiated MCP capabilities, stored with the session so a
// resumed process still knows which servers run tools as jobs.
func (a *Agent) mcpCaps() json.RawMessage {
	if a.MCP == nil {
		return nil
	}
	caps := a.MCP.Capabilities()
	if len(caps) == 0 {
		return nil
	}
	b, err := json.Marshal(caps)
	if err != nil {
		return nil
	}
	return b
}
