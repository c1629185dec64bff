package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Name is the name of an executor action. The values are the tool-level
// contract of spec/pipeline.md: the LLM names them, checkpoints store them.
type Name string

// The experiment and user actions.
const (
	CreateExperiment            Name = "create_experiment"
	UpdateExperiment            Name = "update_experiment"
	UpdateExperimentStatus      Name = "update_experiment_status"
	DeleteExperiment            Name = "delete_experiment"
	InitExperimentUser          Name = "init_experiment_user"
	GetDecisionPointAssignments Name = "get_decision_point_assignments"
	MarkDecisionPoint           Name = "mark_decision_point"
	VisitDecisionPoint          Name = "visit_decision_point"
	TestConditionBalance        Name = "test_condition_balance"
)

// The feature flag and segment actions.
const (
	CreateFeatureFlag       Name = "create_feature_flag"
	UpdateFeatureFlag       Name = "update_feature_flag"
	UpdateFeatureFlagStatus Name = "update_feature_flag_status"
	DeleteFeatureFlag       Name = "delete_feature_flag"
	AddFeatureFlagList      Name = "add_feature_flag_list"
	UpdateFeatureFlagList   Name = "update_feature_flag_list"
	RemoveFeatureFlagList   Name = "remove_feature_flag_list"
	CreateSegment           Name = "create_segment"
	UpdateSegment           Name = "update_segment"
	DeleteSegment           Name = "delete_segment"
)

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
	// CacheFlags: gathered_info.feature_flags, feature_flag_details,
	// segments and segment_details.
	CacheFlags Cache = "flags"
	// CacheExperiments: experiment_names, all_experiments and
	// gathered_info.experiment_details.
	CacheExperiments Cache = "experiments"
	// CacheEnrollment: gathered_info.enrollment_details.
	CacheEnrollment Cache = "enrollment"
	// CacheContexts: context_metadata.
	CacheContexts Cache = "contexts"
)

// Spec is what an action declares about itself; the pipeline routes on it
// and never on the action's name or origin.
type Spec struct {
	Name        string
	Description string
	// Destructive actions need a yes even under the destructive policy.
	Destructive bool
	// LongRunning actions answer Execute with a job (spec/durability.md).
	LongRunning bool
	// Invalidates lists the cached data that is stale once the action ran.
	Invalidates []Cache
	// Schema is the JSON schema of the params (get_<action>_schema).
	Schema json.RawMessage
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
}

// Action is one executor action: one of the built-in ones, or an MCP
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
	State     string          `json:"state"` // queued, running, succeeded, failed, cancelled
	Done      int             `json:"done"`
	Total     int             `json:"total"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
}

// Job states.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// Terminal reports whether the job has ended.
func (j JobStatus) Terminal() bool {
	return j.State == JobSucceeded || j.State == JobFailed || j.State == JobCancelled
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
		msg = "job " + e.Status.State
	}
	return fmt.Sprintf("job %s %s: %s", e.Status.ID, e.Status.State, msg)
}

// Type is the error type of the failure (api or unknown).
func (e *JobError) Type() string {
	switch {
	case e.Status.ErrorType != "":
		return e.Status.ErrorType
	case e.Status.State == JobCancelled:
		return "unknown"
	}
	return "api"
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

// ---- the registry of built-in actions ----

var registry = map[string]Action{}
var order []string

// register adds a built-in action; each action's file calls it from init.
func register(a Action) {
	name := a.Spec().Name
	if _, dup := registry[name]; dup {
		panic("actions: duplicate action " + name)
	}
	registry[name] = a
	order = append(order, name)
}

// specOrder is the order of spec/pipeline.md; Names keeps it.
var specOrder = []Name{CreateExperiment, UpdateExperiment, UpdateExperimentStatus, DeleteExperiment,
	InitExperimentUser, GetDecisionPointAssignments, MarkDecisionPoint, VisitDecisionPoint, TestConditionBalance,
	CreateFeatureFlag, UpdateFeatureFlag, UpdateFeatureFlagStatus, DeleteFeatureFlag,
	AddFeatureFlagList, UpdateFeatureFlagList, RemoveFeatureFlagList, CreateSegment, UpdateSegment, DeleteSegment}

// Names lists the built-in actions in the order of spec/pipeline.md.
func Names() []Name {
	rank := map[string]int{}
	for i, n := range specOrder {
		rank[string(n)] = i
	}
	names := append([]string(nil), order...)
	sort.SliceStable(names, func(i, j int) bool { return rank[names[i]] < rank[names[j]] })
	out := make([]Name, len(names))
	for i, n := range names {
		out[i] = Name(n)
	}
	return out
}

// Lookup returns the built-in action of that name.
func Lookup(name string) (Action, bool) {
	a, ok := registry[name]
	return a, ok
}

// Bind binds raw params of the named built-in action.
func Bind(name string, raw json.RawMessage) (*Bound, error) {
	a, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownAction, name, knownNames())
	}
	return a.Bind(raw)
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

func knownNames() string {
	parts := make([]string, len(specOrder))
	for i, n := range specOrder {
		parts[i] = string(n)
	}
	return strings.Join(parts, ", ")
}
