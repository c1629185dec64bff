package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Name is the name of an executor action. The values are the tool-level
// contract of spec/pipeline.md: the LLM names them, checkpoints store them.
// Each built-in action declares its constant in its own file.
type Name string

// ErrUnknownAction is returned (wrapped) for a name no action answers to.
var ErrUnknownAction = errors.New("unknown action")

// Confirmation policies (spec/cli.md --confirm).
const (
	PolicyAlways      = "always"
	PolicyDestructive = "destructive"
	PolicyNever       = "never"
)

// Cache names a kind of server data the session keeps; an action declares
// which it makes stale.
type Cache string

// The caches of the session state (spec/pipeline.md, State).
const (
	// CacheExperiments: experiment_names, all_experiments and
	// gathered_info.experiment_details.
	CacheExperiments Cache = "experiments"
	// CacheEnrollment: gathered_info.enrollment_details.
	CacheEnrollment Cache = "enrollment"
	// CacheContexts: context_metadata.
	CacheContexts Cache = "contexts"
	// CacheFlags: gathered_info.feature_flags, feature_flag_details,
	// segments, segment_details and flag_explanations.
	CacheFlags Cache = "flags"
)

// Spec is what an action declares about itself; the pipeline routes on it
// and never on the action's name or origin.
type Spec struct {
	Name string
	// Object is what the action acts on (ObjectNone: shared); the
	// gatherer offers it in that object's scope.
	Object      Object
	Description string
	// Destructive actions need a yes even under the destructive policy.
	Destructive bool
	// LongRunning actions answer Execute with a job (spec/durability.md).
	LongRunning bool
	// Invalidates lists the cached data that is stale once the action ran.
	Invalidates []Cache
	// Schema is the JSON schema of the params (get_action_schema).
	Schema json.RawMessage
	// Note is said of the action in the gatherer's prompt ("" = none).
	Note string
	// Refs are the params that name a server object by its id, declared
	// with a `ref` tag on the params type: the gatherer resolves a name
	// written there to the id.
	Refs []Ref
}

// NeedsConfirmation reports whether the action needs a human yes under a
// policy. An unknown policy asks: when in doubt, ask.
func (s Spec) NeedsConfirmation(policy string) bool {
	switch strings.ToLower(strings.TrimSpace(policy)) {
	case PolicyNever:
		return false
	case PolicyDestructive:
		return s.Destructive
	}
	return true
}

// Env is what actions act on.
type Env struct {
	API API
	// Jobs runs long actions outside the process; nil runs them inline.
	Jobs JobRunner
	// SessionID names the session in job records.
	SessionID string
	// Changes finds recorded changes (undo_change); nil: none are kept.
	Changes ChangeSource
}

// Action is one executor action: one of the nine built-in ones, or an MCP
// tool behind an adapter. Every step of the pipeline takes the same Bound
// value, made once by Bind, so validation, the plan, the approval, the
// effect log, execution and reconciliation can never disagree on the params.
type Action interface {
	Spec() Spec
	// Bind parses raw params into the canonical bound value. A *ParseError
	// names every field that is wrong.
	Bind(raw json.RawMessage) (*Bound, error)
	// Validate checks the params against the server's rules. An empty list
	// means they may be confirmed; the error is for a check that could not
	// be made.
	Validate(ctx context.Context, env Env, b *Bound) ([]Problem, error)
	// Plan renders the confirmation: deterministic for the same params and
	// server data.
	Plan(ctx context.Context, env Env, b *Bound) (*Plan, error)
	// Execute runs the approved action. key is derived from the approved
	// confirmation: executing the same confirmation twice must not write
	// twice (a create's id and a job's id derive from it).
	Execute(ctx context.Context, env Env, b *Bound, key string) (Outcome, error)
	// Reconcile finds out, without writing, what became of an execution
	// interrupted by a crash.
	Reconcile(ctx context.Context, env Env, b *Bound, key string, startedAt time.Time) (Reconciliation, error)
}

// JobAction is an action whose Execute may answer with a job.
type JobAction interface {
	Action
	// Poll returns the job's status when it ends or after wait (0: at once).
	Poll(ctx context.Context, env Env, ref JobRef, wait time.Duration) (JobStatus, error)
	// Fetch returns the final result of a job that has ended.
	Fetch(ctx context.Context, env Env, ref JobRef, st JobStatus) (json.RawMessage, error)
}

// Outcome is what an execution produced: a result, or a job to wait for.
type Outcome struct {
	Result json.RawMessage
	Job    *JobRef
}

// JobRef points at a running job: its id, and the handle its action needs
// to poll it (opaque to everyone else).
type JobRef struct {
	ID     string          `json:"id"`
	Handle json.RawMessage `json:"handle,omitempty"`
}

// JobStatus is a job as the pipeline sees it.
type JobStatus struct {
	ID        string          `json:"id"`
	Action    string          `json:"action"`
	State     JobState        `json:"state"`
	Done      int             `json:"done"`
	Total     int             `json:"total"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
}

// JobState is the state of a job (spec/durability.md): the one set of job
// states of the project, for job records, statuses and the scenario runner.
type JobState string

// Job states.
const (
	JobQueued    JobState = "queued"
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// Terminal reports whether a job in this state has ended.
func (s JobState) Terminal() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCancelled
}

// Valid reports whether s is one of the job states.
func (s JobState) Valid() bool { return s == JobQueued || s == JobRunning || s.Terminal() }

// JobStates lists every job state, in the order a job goes through them.
func JobStates() []string {
	return []string{string(JobQueued), string(JobRunning), string(JobSucceeded), string(JobFailed), string(JobCancelled)}
}

// ErrTypes lists every error type of spec/cli.md's errors[].type.
func ErrTypes() []string {
	return []string{ErrTypeAPI, ErrTypeAuth, ErrTypeValidation, ErrTypeNotFound, ErrTypeUnknown}
}

// Terminal reports whether the job has ended.
func (j JobStatus) Terminal() bool { return j.State.Terminal() }

// Progress counts the units of work of a job (the synthetic users of a
// balance run): the one progress shape of job records and results.
type Progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// JobRunner runs long actions outside the turn (pipeline/jobs).
type JobRunner interface {
	// Start launches the job under jobID. Starting an id that exists starts
	// nothing (it re-attaches), so a start repeated after a crash never
	// runs a job twice.
	Start(ctx context.Context, jobID, sessionID, action string, params json.RawMessage) error
	// Wait returns the job's status when it ends or after d, whichever is
	// first; d = 0 checks once.
	Wait(ctx context.Context, jobID string, d time.Duration) (JobStatus, error)
}

// JobError is a job that failed or was cancelled, with its own message.
type JobError struct {
	Status JobStatus
}

func (e *JobError) Error() string {
	msg := e.Status.Error
	if msg == "" {
		msg = "job " + string(e.Status.State)
	}
	return fmt.Sprintf("job %s %s: %s", e.Status.ID, e.Status.State, msg)
}

// Error types of the session state (spec/pipeline.md, errors[].type).
const (
	ErrTypeAPI        = "api"
	ErrTypeAuth       = "auth"
	ErrTypeValidation = "validation"
	ErrTypeNotFound   = "not_found"
	ErrTypeUnknown    = "unknown"
)

// Type is the error type of the failure (api or unknown).
func (e *JobError) Type() string {
	switch {
	case e.Status.ErrorType != "":
		return e.Status.ErrorType
	case e.Status.State == JobCancelled:
		return ErrTypeUnknown
	}
	return ErrTypeAPI
}

// Outcomes of Reconcile.
const (
	OutcomeDone    = "done"     // the effect happened; Result describes it
	OutcomeNotDone = "not_done" // it did not happen: ask the person again
	OutcomeUnknown = "unknown"  // cannot tell: tell the person and ask again
	OutcomeRepeat  = "repeat"   // executing again with the same key is safe (idempotent, or re-attaches)
)

// Reconciliation is what Reconcile found out about an interrupted action.
type Reconciliation struct {
	Outcome string          `json:"outcome"`
	Result  json.RawMessage `json:"result,omitempty"`
	Note    string          `json:"note"`
}

// Bind binds raw params of the named built-in action (setups and tests;
// the agent and the job runner bind through their Registry).
func Bind(name string, raw json.RawMessage) (*Bound, error) {
	return builtins().Bind(name, raw)
}

// BindParams binds typed params (tests, the scenario setup).
func BindParams(p Params) (*Bound, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%s params: %w", p.Action(), err)
	}
	return Bind(string(p.Action()), raw)
}

// Run binds typed params and executes them at once, with no confirmation,
// no effect log and no job runner: for setting up a backend (scenario
// setups, benchmarks, tests), never for what a person asked.
func Run(ctx context.Context, api API, p Params) (json.RawMessage, error) {
	b, err := BindParams(p)
	if err != nil {
		return nil, err
	}
	out, err := b.Execute(ctx, Env{API: api}, "")
	return out.Result, err
}
