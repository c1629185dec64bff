package pipeline

import (
	"encoding/json"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// Node names, as they appear in traces and checkpoints.
const (
	NodeAnalyzer     = "analyzer"
	NodeGatherer     = "gatherer"
	NodeConfirmation = "confirmation"
	NodeExecutor     = "executor"
	NodeResponder    = "responder"
	NodeOutput       = "output"
	nodeEnd          = ""
)

// Values of State.CurrentState.
const (
	StateAnalyzing  = "ANALYZING"
	StateGathering  = "GATHERING_INFO"
	StateConfirming = "CONFIRMING"
	StateExecuting  = "EXECUTING"
	StateResponding = "RESPONDING"
)

// Intent types of the analyzer.
const (
	IntentDirectAnswer = "direct_answer"
	IntentNeedsInfo    = "needs_info"
)

// Error types of State.Errors and the JSON output (declared in actions,
// where the job runner reads them too).
const (
	ErrTypeAPI        = actions.ErrTypeAPI
	ErrTypeAuth       = actions.ErrTypeAuth
	ErrTypeValidation = actions.ErrTypeValidation
	ErrTypeNotFound   = actions.ErrTypeNotFound
	ErrTypeUnknown    = actions.ErrTypeUnknown
)

// Exchange is one user message and the reply it got.
type Exchange struct {
	User      string    `json:"user"`
	Assistant string    `json:"assistant"`
	At        time.Time `json:"at"`
}

// LogEntry is one executed action.
type LogEntry struct {
	Timestamp string          `json:"timestamp"`
	Action    string          `json:"action"`
	Params    json.RawMessage `json:"params"`
	Status    string          `json:"status"` // success | error | cancelled
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
}

// ErrorEntry is one classified error of the current turn.
type ErrorEntry struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// State is the session state of pipeline.md, stored as JSON in the
// checkpoint. The names of the spec are kept; fields after the blank line are
// additions. action_needed, action_params, missing_params,
// needs_confirmation and confirmation_message are the stored form of the
// Session's draft and pending confirmation: Session.sync writes them, and
// a turn reads the typed values instead.
type State struct {
	UserInput            string                   `json:"user_input"`
	ConversationHistory  []Exchange               `json:"conversation_history"`
	CurrentState         string                   `json:"current_state"`
	IntentType           string                   `json:"intent_type,omitempty"`
	Confidence           float64                  `json:"confidence,omitempty"`
	UserRequestSummary   string                   `json:"user_request_summary,omitempty"`
	ActionNeeded         string                   `json:"action_needed,omitempty"`
	ActionParams         json.RawMessage          `json:"action_params,omitempty"`
	MissingParams        []string                 `json:"missing_params"`
	ContextMetadata      upgrade.ContextMetadata  `json:"context_metadata,omitempty"`
	ExperimentNames      []upgrade.ExperimentName `json:"experiment_names,omitempty"`
	AllExperiments       []readmodel.Summary      `json:"all_experiments,omitempty"`
	GatheredInfo         map[string]any           `json:"gathered_info"`
	NeedsConfirmation    bool                     `json:"needs_confirmation"`
	ConfirmationMessage  string                   `json:"confirmation_message,omitempty"`
	UserConfirmed        *bool                    `json:"user_confirmed"`
	ExecutionLog         []LogEntry               `json:"execution_log"`
	Errors               []ErrorEntry             `json:"errors"`
	FinalResponse        string                   `json:"final_response,omitempty"`
	ConversationComplete bool                     `json:"conversation_complete"`

	// NextStep is what a multi-step request still needs after the pending
	// action (set_action_needed's next_step).
	NextStep string `json:"next_step,omitempty"`
	// ActionReasoning is the gatherer's reason for the pending action.
	ActionReasoning string `json:"action_reasoning,omitempty"`
	// RetryInput holds the message of a turn that failed (LLM or UpGrade
	// unreachable), as it was after the hooks (redacted), so that `resume`
	// can run it again.
	RetryInput string `json:"retry_input,omitempty"`
	// TurnActions are the actions executed in the current turn, so that a
	// turn resumed after a crash can still report them.
	TurnActions []ActionOut `json:"turn_actions,omitempty"`
	// HistoryDropped counts exchanges removed from ConversationHistory to keep
	// the checkpoint compact.
	HistoryDropped int `json:"history_dropped,omitempty"`
	// LogDropped counts execution log entries removed for the same reason.
	LogDropped int `json:"log_dropped,omitempty"`
	// Changes are the writes the executor carried out (change.go).
	Changes []actions.Change `json:"changes,omitempty"`
	// TurnUsage is the LLM work of each run of the agent (a message, an
	// answer, a resume), the last maxStoredExchanges of them, for
	// `sessions show`. Absent in checkpoints written before it existed.
	TurnUsage []TurnUsage `json:"turn_usage,omitempty"`
}

// TurnUsage is the LLM work of one run of the agent: the turn it belongs
// to (an answer to a confirmation continues its turn), its calls and
// tokens, estimated (characters/4) when a provider sent no usage.
type TurnUsage struct {
	Turn             int       `json:"turn"`
	At               time.Time `json:"at"`
	LLMCalls         int       `json:"llm_calls"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	CachedTokens     int       `json:"cached_tokens"`
	Estimated        bool      `json:"estimated,omitempty"`
}

// Limits that keep a long session's checkpoint small. Prompts use a much
// smaller window (promptWindow).
const (
	maxStoredExchanges = 50
	maxStoredLog       = 100
	promptWindow       = 4
)

// NewState returns the state of a new session.
func NewState() *State {
	return &State{
		ConversationHistory: []Exchange{},
		CurrentState:        StateAnalyzing,
		MissingParams:       []string{},
		GatheredInfo:        map[string]any{},
		ExecutionLog:        []LogEntry{},
		Errors:              []ErrorEntry{},
	}
}

// normalize fills nil collections after decoding an older checkpoint.
func (s *State) normalize() {
	if string(s.ActionParams) == "null" {
		s.ActionParams = nil
	}
	if s.ConversationHistory == nil {
		s.ConversationHistory = []Exchange{}
	}
	if s.MissingParams == nil {
		s.MissingParams = []string{}
	}
	if s.GatheredInfo == nil {
		s.GatheredInfo = map[string]any{}
	}
	if s.ExecutionLog == nil {
		s.ExecutionLog = []LogEntry{}
	}
	if s.Errors == nil {
		s.Errors = []ErrorEntry{}
	}
}

// resetTurn clears the per-turn fields (pipeline.md: errors, intent_type,
// confidence, user_request_summary). Progressive gathering survives.
func (s *State) resetTurn(input string) {
	s.UserInput = input
	s.Errors = []ErrorEntry{}
	s.IntentType = ""
	s.Confidence = 0
	s.UserRequestSummary = ""
	s.FinalResponse = ""
	s.UserConfirmed = nil
	s.ConversationComplete = false
	s.CurrentState = StateAnalyzing
	s.TurnActions = nil
}

func (s *State) addError(typ, msg string) {
	s.Errors = append(s.Errors, ErrorEntry{Type: typ, Message: msg})
}

func (s *State) addExchange(user, assistant string, at time.Time) {
	s.ConversationHistory = append(s.ConversationHistory, Exchange{User: user, Assistant: assistant, At: at.UTC()})
	if n := len(s.ConversationHistory) - maxStoredExchanges; n > 0 {
		s.ConversationHistory = append([]Exchange(nil), s.ConversationHistory[n:]...)
		s.HistoryDropped += n
	}
}

func (s *State) addTurnUsage(u TurnUsage) {
	s.TurnUsage = append(s.TurnUsage, u)
	if n := len(s.TurnUsage) - maxStoredExchanges; n > 0 {
		s.TurnUsage = append([]TurnUsage(nil), s.TurnUsage[n:]...)
	}
}

func (s *State) addLog(e LogEntry) {
	s.ExecutionLog = append(s.ExecutionLog, e)
	if n := len(s.ExecutionLog) - maxStoredLog; n > 0 {
		s.ExecutionLog = append([]LogEntry(nil), s.ExecutionLog[n:]...)
		s.LogDropped += n
	}
}

// invalidate forgets the cached server data an executed action declared
// stale.
func (s *State) invalidate(caches []actions.Cache) {
	for _, c := range caches {
		switch c {
		case actions.CacheExperiments:
			s.ExperimentNames = nil
			s.AllExperiments = nil
			delete(s.GatheredInfo, "experiment_details")
			delete(s.GatheredInfo, "experiment_history")
		case actions.CacheEnrollment:
			delete(s.GatheredInfo, "enrollment_details")
		case actions.CacheContexts:
			s.ContextMetadata = nil
		case actions.CacheFlags:
			for _, k := range flagInfoKeys {
				delete(s.GatheredInfo, k)
			}
		}
	}
}

// setInfo stores v at gathered_info.key or gathered_info.key.sub.
func (s *State) setInfo(key, sub string, v any) {
	if sub == "" {
		s.GatheredInfo[key] = v
		return
	}
	m, ok := s.GatheredInfo[key].(map[string]any)
	if !ok {
		m = map[string]any{}
		s.GatheredInfo[key] = m
	}
	m[sub] = v
}
