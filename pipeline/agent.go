package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/exitcode"
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
	PolicyAlways      = "always"
	PolicyDestructive = "destructive"
	PolicyNever       = "never"
)

// Turn statuses of the JSON output.
const (
	StatusCompleted            = "completed"
	StatusAwaitingConfirmation = "awaiting_confirmation"
	StatusWaitingJob           = "waiting_job"
	StatusTerminated           = "terminated"
	StatusFailed               = "failed"
)

// Agent runs turns. Its fields are set once by the caller (the CLI, the
// scenario runner, tests); RegisterReply and RegisterHook add to the reply
// chain before the first turn.
type Agent struct {
	LLM   llm.Client
	API   Backend
	Store checkpoint.Store

	Model       string
	Temperature *float32
	Policy      string // always (default), destructive, never
	Yes         bool   // approve pending and new confirmations in this run

	// MaxLLMCalls bounds the LLM calls of one turn (max_auto_replies).
	MaxLLMCalls int
	// MaxConsecutiveAutoReplies ends a turn before any work when the agent
	// has answered that many turns in a row without a human decision (a
	// yes or no to a confirmation). 0 turns the check off.
	MaxConsecutiveAutoReplies int
	TerminationWords          []string
	PatternReplies            []PatternReply
	Secrets                   []string // redacted from incoming messages

	Jobs     JobRunner
	WaitJobs time.Duration

	// MCP offers the tools of MCP servers (nil: none).
	MCP MCP

	Output *OutputConfig

	// OnResponse receives the person's reply as soon as it is final, before
	// the optional output node runs.
	OnResponse func(text string)
	// StreamText, when set, receives the responder's text as it streams in
	// (the confirmation text Go appends afterwards comes only in OnResponse).
	StreamText func(delta string)

	Now    func() time.Time
	NewID  func() string
	Logger *slog.Logger

	replies []registeredReply
	hooks   hooks
	tools   *toolSet
	rtools  *toolSet
}

// JobRunner runs long actions (the condition balance) outside the turn.
type JobRunner interface {
	// Start launches the job under the given id (the executor's effect id,
	// so that a retried start after a crash finds the same job).
	Start(ctx context.Context, jobID, sessionID, action string, params json.RawMessage) error
	// Wait returns the job's status when it ends or after d, whichever is first.
	Wait(ctx context.Context, jobID string, d time.Duration) (JobStatus, error)
}

// JobStatus is a job as the pipeline sees it.
type JobStatus struct {
	ID        string          `json:"id"`
	Action    string          `json:"action"`
	State     string          `json:"state"` // queued, running, succeeded, failed, cancelled
	Done      int             `json:"done"`
	Total     int             `json:"total"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
}

// Terminal reports whether the job has ended.
func (j JobStatus) Terminal() bool {
	return j.State == "succeeded" || j.State == "failed" || j.State == "cancelled"
}

// Result is the outcome of one turn: the JSON output of cli.md.
type Result struct {
	SessionID         string           `json:"session_id"`
	Turn              int              `json:"turn"`
	Status            string           `json:"status"`
	Response          string           `json:"response"`
	Confirmation      *ConfirmationOut `json:"confirmation,omitempty"`
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
	ID       string    `json:"id"`
	Action   string    `json:"action"`
	State    string    `json:"state"`
	Progress *Progress `json:"progress,omitempty"`
}

// Progress of a job.
type Progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

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

// Session is a loaded session: its checkpoint and decoded state.
type Session struct {
	CP    *checkpoint.Checkpoint
	State *State
}

// ErrNothingToResume: the session is neither paused nor suspended.
var ErrNothingToResume = errors.New("nothing to resume")

// ErrJobPending: a new message arrived while the session waits on a job.
var ErrJobPending = errors.New("the session is waiting on a job")

// ErrBadInput marks errors caused by the caller's input (exit 2).
var ErrBadInput = exitcode.ErrUsage

// NewSession starts an empty session.
func NewSession(id string, now time.Time) *Session {
	return &Session{
		CP: &checkpoint.Checkpoint{
			FormatVersion: checkpoint.FormatVersion, SessionID: id, CreatedAt: now.UTC(), UpdatedAt: now.UTC(),
			Status: checkpoint.StatusIdle, Effects: []checkpoint.Effect{},
		},
		State: NewState(),
	}
}

// LoadSession reads a session from the store.
func LoadSession(store checkpoint.Store, id string) (*Session, error) {
	cp, err := store.Load(id)
	if err != nil {
		return nil, err
	}
	st := NewState()
	if len(cp.State) > 0 && string(cp.State) != "null" {
		if err := json.Unmarshal(cp.State, st); err != nil {
			return nil, fmt.Errorf("session %s: state: %w", id, errors.Join(checkpoint.ErrCorrupt, err))
		}
	}
	st.normalize()
	return &Session{CP: cp, State: st}, nil
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
		a.tools = gathererTools(mcpReadTools(a.MCP)...)
	}
	return a.tools
}

func (a *Agent) rTools() *toolSet {
	if a.rtools == nil {
		a.rtools = responderTools()
	}
	return a.rtools
}

// save writes the checkpoint at a node boundary or an interrupt.
func (a *Agent) save(t *turn, status checkpoint.Status, next string) error {
	if a.Store == nil {
		return nil
	}
	cp := t.sess.CP
	t.mu.Lock()
	raw, err := json.Marshal(t.st)
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	cp.State = raw
	cp.Status = status
	cp.NextNode = next
	last := t.input
	if n := len(t.st.ConversationHistory); n > 0 && t.st.FinalResponse == "" {
		last = t.st.ConversationHistory[n-1].User
	}
	cp.Summary = &checkpoint.SessionSummary{LastMessage: truncate(last, 80), Turns: cp.Counters.Turns}
	if a.MCP != nil {
		// The negotiated capabilities travel with the session, so a resumed
		// process still knows which servers run tools as jobs.
		if caps := a.MCP.Capabilities(); len(caps) > 0 {
			if b, err := json.Marshal(caps); err == nil {
				cp.MCP = b
			}
		}
	}
	if err := a.Store.Save(cp); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
