package scenario

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
)

// Backends a scenario runs against.
const (
	BackendSim = "sim" // a fresh embedded simulator (default)
	BackendURL = "url" // the configured UpGrade (RunOptions.UpgradeURL)
)

// LLM modes of a scenario.
const (
	LLMScript = "script" // the steps' llm: blocks (default)
	LLMLive   = "live"   // RunOptions.LLM
	LLMReplay = "replay" // a cassette, no network
	LLMRecord = "record" // live, written to a cassette
)

// Step kinds.
const (
	StepSay    = "say"
	StepAnswer = "answer"
	StepResume = "resume"
)

// DefaultWaitJobs is the wait_jobs of a scenario that sets none, the same
// default as `ask --wait-jobs`.
const DefaultWaitJobs = 5 * time.Second

// Scenario is one parsed scenario file.
type Scenario struct {
	Name        string
	Description string
	File        string // the path given to Parse
	Backend     string // BackendSim or BackendURL
	Seed        int64
	LLM         LLMSpec
	Golden      bool
	Options     Options
	Setup       Setup
	Steps       []Step
}

// LLMSpec is the scenario's llm: value.
type LLMSpec struct {
	Mode string // LLMScript, LLMLive, LLMReplay, LLMRecord
	File string // cassette path for replay/record, relative to the scenario file as written
}

func (s LLMSpec) String() string {
	if s.File != "" {
		return s.Mode + ":" + s.File
	}
	return s.Mode
}

// Options are the flags of `ask`, snake_case.
type Options struct {
	Confirm                   string // always (default), destructive, never
	Yes                       bool
	WaitJobs                  time.Duration
	OutputSchema              string // as written; relative to the scenario file
	ConversationalOutputs     bool
	MaxAutoReplies            int
	MaxConsecutiveAutoReplies int
	TerminationWords          []string
	ReplyWording              string // go (default) or llm
}

// Setup is arranged directly on the backend before step 1, without the LLM.
type Setup struct {
	// AuthRequired makes the simulator demand an admin token that only the
	// setup (and the expectation checks) hold: every admin request of the
	// agent gets 401, as with a real server whose token is wrong or unset.
	AuthRequired bool
	Experiments  []SetupExperiment
	Users        []SetupUser
	Segments     []SetupSegment // created before the flags (flags.go)
	Flags        []SetupFlag
	Metrics      []SetupMetric // setup_metrics.go
	Queries      []SetupQuery
	Students     []SetupStudents
}

// SetupExperiment is one experiment to create. Params holds the fields of
// create_experiment (JSON, snake_case), so that setup and the agent share
// one definition of an experiment and its defaults.
type SetupExperiment struct {
	Name   string
	Status string // internal state name after normalisation; "" = inactive
	Params json.RawMessage
	Line   int
}

// SetupUser is one user to initialise.
type SetupUser struct {
	ID           string
	Group        map[string][]string
	WorkingGroup map[string]string
	Line         int
}

// Step is one turn of the conversation.
type Step struct {
	Line   int
	Kind   string // StepSay, StepAnswer, StepResume
	Text   string // the message (say) or the answer (answer)
	Resume ResumeSpec
	LLM    []llmtest.Reply
	Expect Expect
	// IfAsked (eval cases): an answer step that is played only when the
	// session awaits a confirmation; otherwise its expectations are
	// checked against the previous step's outcome.
	IfAsked bool
	// NoConfirmation (eval cases): a confirmation left pending by this
	// step fails it, since the case gives no answer for it.
	NoConfirmation bool
}

// Label names the step in failure messages: `say "Delete it"`.
func (s Step) Label() string {
	switch s.Kind {
	case StepResume:
		if s.Resume.Wait {
			return "resume --wait"
		}
		return "resume"
	default:
		return fmt.Sprintf("%s %q", s.Kind, s.Text)
	}
}

// ResumeSpec is the value of a resume step.
type ResumeSpec struct {
	Wait    bool
	Timeout time.Duration // with Wait; 0 = one minute
}

// Expect holds a step's expectations; nil fields are not checked.
type Expect struct {
	Status            *string
	ExitCode          *int
	Trace             *[]string
	LLMCalls          *int
	ResponseContains  []string
	ResponseMatches   []string
	Confirmation      *ExpectConfirmation
	Actions           *[]ExpectAction
	Errors            *[]ExpectError
	Output            any // subset of the structured output; nil = unchecked
	HasOutput         bool
	Job               *ExpectJob
	Backend           *ExpectBackend
	TerminationReason *string // a substring of termination_reason
}

// ExpectConfirmation checks the pending confirmation.
type ExpectConfirmation struct {
	Action          string
	Destructive     *bool
	MessageContains []string
}

// ExpectAction checks one executed action, in order.
type ExpectAction struct {
	Action        string
	Status        string
	ParamsSubset  any
	ResultSubset  any
	ErrorContains string
}

// ExpectError checks one error of the turn, in order.
type ExpectError struct {
	Type            string
	MessageContains string
}

// ExpectJob checks the job of the turn.
type ExpectJob struct {
	State string
	Done  *int
	Total *int
}

// ExpectBackend checks the backend after the step.
type ExpectBackend struct {
	// Experiments are subset-matched against the experiment with the same
	// name (which must exist exactly once).
	Experiments      []map[string]any
	ExperimentAbsent []string
	ExperimentCount  *int
	// Users are subset-matched against the simulator's users (sim only).
	Users []map[string]any
	// Flags (by key) and Segments (public, by name) are subset-matched;
	// FlagAbsent and SegmentAbsent name ones that must not exist.
	Flags         []map[string]any
	FlagAbsent    []string
	Segments      []map[string]any
	SegmentAbsent []string
	// Metrics (by key) and Queries (by experiment and name) are
	// subset-matched; MetricAbsent names metrics that must not exist.
	Metrics      []map[string]any
	MetricAbsent []string
	Queries      []map[string]any
	// Enrolled are enrollment counts of experiments (expect.go).
	Enrolled []ExpectEnrolled
	// QueryAbsent names queries ({experiment, name}) that must not exist.
	QueryAbsent []map[string]any
}
