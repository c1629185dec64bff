package pipeline

import (
	"context"
	"errors"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// turn is everything one turn accumulates while it runs. It never outlives
// the turn; what must survive goes into State or the checkpoint.
type turn struct {
	a    *Agent
	sess *Session
	st   *State
	mu   sync.Mutex // guards st and the fields below during concurrent tool calls

	input    string        // the message, after hooks
	messages []llm.Message // recent exchanges after hooks, for prompts
	extra    []string      // context lines from update_agent_state hooks

	trace       []string
	llmCalls    int
	usage       llm.Usage
	transitions int

	metaOnce sync.Once
	meta     upgrade.ContextMetadata
	metaErr  error

	toolResults []namedResult // read results of this turn, for the responder's report

	// pendingAtStart is the confirmation that was waiting when the turn
	// began. Only it can be approved in this turn.
	pendingAtStart *actions.Plan
	approved       bool   // a human (or the never policy with --yes) approved the pending plan
	approvedBy     string // "human", "answer", "yes-flag", "policy"
	denied         bool
	reask          bool   // the answer was unclear: show the confirmation again
	staleNote      string // the plan changed since it was shown
	plan           *actions.Plan
	pausing        bool // the turn ends awaiting confirmation
	suspended      bool // the turn ends waiting on a job
	jobID          string
	directDone     bool // analyzer's direct_response ended the turn
	actionsRun     []ActionOut
	terminated     string // termination_reason
	authFailed     bool
	unreachable    bool
	continuation   bool   // the analyzer runs after the executor for a next step
	nextStep       string // the step the analyzer and gatherer work on after an execution

	params       actions.Params // validated params of the pending action (this turn)
	mcpPlan      *actions.Plan  // the plan of a validated MCP action (this turn)
	humanDecided bool           // a human answered a confirmation in this turn
	deniedAction string
	responded    bool // OnResponse was called
	reconciled   []map[string]any
	jobStatus    *JobStatus

	terminateSession bool // a termination word ended the session
	resetAutoReplies bool // the auto-reply limit fired: start counting again
	output           map[string]any
	forceReask       bool // an interrupted action's outcome is unknown: ask again, never run blindly
}

type namedResult struct {
	Tool   string `json:"tool"`
	Result any    `json:"result"`
}

func (t *turn) update(fn func(s *State)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t.st)
}

func (t *turn) noteToolResult(name string, res any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if strings.HasPrefix(name, "set_") || strings.HasPrefix(name, "update_") || name == "add_error" {
		return
	}
	t.toolResults = append(t.toolResults, namedResult{Tool: name, Result: res})
}

// recordError classifies an error from UpGrade or elsewhere into State.Errors.
func (t *turn) recordError(err error) {
	typ := errorType(err)
	t.mu.Lock()
	defer t.mu.Unlock()
	if typ == ErrTypeAuth {
		t.authFailed = true
	}
	var ue *upgrade.Error
	if errors.As(err, &ue) && ue.Status == 0 && ue.Category == upgrade.CategoryAPI {
		t.unreachable = true // no HTTP answer at all: the turn fails (exit 1)
	}
	t.st.addError(typ, err.Error())
}

// errorType maps an error to the types of pipeline.md, by the error's kind.
func errorType(err error) string {
	if c := upgrade.CategoryOf(err); c != "" {
		return string(c)
	}
	var je *jobError
	if errors.As(err, &je) {
		return je.typ
	}
	var le *llm.Error
	if errors.As(err, &le) && le.Kind == llm.KindAuth {
		return ErrTypeAuth
	}
	return ErrTypeUnknown
}

// metadata fetches the context metadata at most once per turn.
func (t *turn) metadata(ctx context.Context) (upgrade.ContextMetadata, error) {
	t.metaOnce.Do(func() {
		t.meta, t.metaErr = t.a.API.ContextMetadata(ctx)
		if t.metaErr == nil {
			t.update(func(s *State) { s.ContextMetadata = t.meta })
		}
	})
	return t.meta, t.metaErr
}

func (t *turn) contextInfo(ctx context.Context, name string) (upgrade.ContextInfo, error) {
	md, err := t.metadata(ctx)
	if err != nil {
		return upgrade.ContextInfo{}, err
	}
	ci, ok := md[name]
	if !ok {
		return ci, inputErrorf("unknown context %q; valid contexts: %s", name, strings.Join(contextNames(md), ", "))
	}
	return ci, nil
}

func (t *turn) experimentNames(ctx context.Context) ([]upgrade.ExperimentName, error) {
	t.mu.Lock()
	cached := t.st.ExperimentNames
	t.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	names, err := t.a.API.ExperimentNames(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(names, func(i, j int) bool { return names[i].Name < names[j].Name })
	t.update(func(s *State) { s.ExperimentNames = names })
	return names, nil
}

func (t *turn) allExperiments(ctx context.Context) ([]ExperimentSummary, error) {
	t.mu.Lock()
	cached := t.st.AllExperiments
	t.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	list, err := t.a.API.Experiments(ctx)
	if err != nil {
		return nil, err
	}
	sums := make([]ExperimentSummary, 0, len(list))
	for i := range list {
		sums = append(sums, summarize(&list[i]))
	}
	sort.Slice(sums, func(i, j int) bool { return sums[i].Name < sums[j].Name })
	t.update(func(s *State) { s.AllExperiments = sums })
	return sums, nil
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// resolveID accepts an id or a name (the rules of upgrade.ResolveExperiment:
// exact id or name, then a unique prefix).
func (t *turn) resolveID(ctx context.Context, ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if uuidRE.MatchString(ref) {
		return ref, nil
	}
	names, err := t.experimentNames(ctx)
	if err != nil {
		return "", err
	}
	id, err := upgrade.ResolveExperiment(names, ref)
	if err != nil {
		return "", inputErrorf("%v", err)
	}
	return id, nil
}

func reflectTypeOf(v any) reflect.Type {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func roundTo(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}

func trimFloat(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}
