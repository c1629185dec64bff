package checkpoint

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// FormatVersion is the version of the checkpoint format this package writes. Any change
// to the encoding (a field added, renamed or re-typed) bumps it and registers a
// migration from the previous version (migrations in decode.go), because readers decode
// strictly. Version 2 added effects_dropped, the count the effect log's compaction
// leaves behind.
const FormatVersion = 2

const (
	// MaxSeq is the largest seq a checkpoint may have: 2^53-1, the largest integer
	// every JSON reader (jq, JavaScript) holds exactly (math.MaxInt where int is
	// smaller). One save per microsecond would take 285 years to get there, so a larger
	// seq only comes from a damaged or hand-made file, and bounding it means that Save
	// never overflows seq + 1. effects_dropped shares the bound.
	MaxSeq = min(1<<53-1, math.MaxInt)

	// MaxStartedEffects is how many effects a checkpoint may hold started and without
	// an outcome. The executor has one call in flight at a time, so a real session has
	// one or two; more than this can only come from a damaged or hostile file, which
	// would otherwise cost every resume a reconciliation per entry.
	MaxStartedEffects = 100

	// FinishedEffectsKept is how many finished (done or failed) effects Save keeps in
	// the effect log: the most recently finished ones. Older finished effects have
	// served their purpose (only started ones are ever reconciled, and the execution log
	// in the state records what ran) and are only counted, in effects_dropped, so the
	// file does not grow with every action.
	FinishedEffectsKept = 20

	// maxServerLen bounds upgrade_server: a URL, or the simulator's name and id.
	maxServerLen = 2048
)

// Status is where a session stands between two processes, and how a turn
// ended: the one status type of the checkpoint, a turn's result (cli.md)
// and the scenario runner. A checkpoint holds the Valid ones; a turn's
// result holds TurnStatuses.
type Status string

const (
	StatusIdle                 Status = "idle"
	StatusRunning              Status = "running"
	StatusAwaitingConfirmation Status = "awaiting_confirmation"
	StatusWaitingJob           Status = "waiting_job"
	StatusTerminated           Status = "terminated"

	// StatusCompleted and StatusFailed end a turn (its result); the
	// session is idle afterwards, so no checkpoint holds them.
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"

	// StatusCorrupt never appears in a checkpoint; List uses it for sessions whose
	// checkpoint cannot be read, so a listing never fails because of one bad file.
	StatusCorrupt Status = "corrupt"
)

// TurnStatuses are the statuses a turn's result may have.
var TurnStatuses = []Status{StatusCompleted, StatusAwaitingConfirmation, StatusWaitingJob, StatusTerminated, StatusFailed}

// Valid reports whether s may appear in a checkpoint.
func (s Status) Valid() bool {
	switch s {
	case StatusIdle, StatusRunning, StatusAwaitingConfirmation, StatusWaitingJob, StatusTerminated:
		return true
	}
	return false
}

// Interrupt kinds.
const (
	KindConfirmation = "confirmation"
	KindJob          = "job"
)

// Effect states.
const (
	EffectStarted = "started"
	EffectDone    = "done"
	EffectFailed  = "failed"
)

// Checkpoint is one saved state of a session. The declaration order of the fields is
// the order of the members on disk, which the checksum depends on (docs/checkpoints.md):
// the small header fields come first and the large opaque ones last, so that listing
// sessions can stop reading before the bulk. Checksum must stay the last field.
type Checkpoint struct {
	FormatVersion int        `json:"format_version"`
	SessionID     string     `json:"session_id"`
	Seq           int        `json:"seq"`
	ParentSeq     int        `json:"parent_seq"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	Status        Status     `json:"status"`
	NextNode      string     `json:"next_node,omitempty"`
	Interrupt     *Interrupt `json:"interrupt,omitempty"`
	Counters      Counters   `json:"counters"`
	Usage         Usage      `json:"usage"`
	// Summary is filled by the pipeline for `sessions list`, since State is opaque here.
	Summary *SessionSummary `json:"summary,omitempty"`
	// MCP holds the capabilities negotiated with MCP servers, so that a resumed process
	// still knows which servers run tools as jobs.
	MCP json.RawMessage `json:"mcp,omitempty"`
	// EffectsDropped counts the finished effects Save has left out of Effects (see
	// FinishedEffectsKept) over the session's life.
	EffectsDropped int `json:"effects_dropped,omitempty"`
	// UpgradeServer names the UpGrade the session works against: its URL, or
	// "embedded-simulator:<id>" for the embedded simulator of a state dir (the id
	// is kept in the simulator's data file). Optional: older checkpoints have
	// none, and any server may resume them. See FileStore.Server.
	UpgradeServer string   `json:"upgrade_server,omitempty"`
	Effects       []Effect `json:"effects"`
	// State is the pipeline's session state (pipeline.md), opaque to this package.
	State    json.RawMessage `json:"state"`
	Checksum string          `json:"checksum"`
}

// Interrupt is why a turn stopped before its end: a confirmation to ask or a job to wait for.
type Interrupt struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"` // KindConfirmation or KindJob
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is fixed when a confirmation is proposed, from the
	// proposing machine's approval_ttl; every machine honours it (nil:
	// never expires, or written before expires_at existed).
	ExpiresAt    *time.Time    `json:"expires_at,omitempty"`
	Confirmation *Confirmation `json:"confirmation,omitempty"`
	Job          *JobRef       `json:"job,omitempty"`
}

// Confirmation is what the human was shown. Resume executes exactly this action with
// exactly these params, and refuses when ParamsHash or the experiment version no longer
// match (the saved decision is stale).
type Confirmation struct {
	Action      string          `json:"action"`
	Params      json.RawMessage `json:"params"`
	ParamsHash  string          `json:"params_hash"`
	Message     string          `json:"message"`
	Destructive bool            `json:"destructive"`
	// ExperimentID and ExperimentVersion identify the experiment the action touches and
	// the version seen when the confirmation was shown (its updatedAt or versionNumber).
	ExperimentID      string `json:"experiment_id,omitempty"`
	ExperimentVersion string `json:"experiment_version,omitempty"`
	// Target names what the action acts on as it was when proposed (an
	// experiment or segment by name, a flag by key); TargetID is its id
	// when the params named it by id. For the inbox and the trail.
	Target   string `json:"target,omitempty"`
	TargetID string `json:"target_id,omitempty"`
}

// JobRef points at a long-running job the turn waits for.
type JobRef struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Handle json.RawMessage `json:"handle,omitempty"`
}

// Effect is one entry of the exactly-once log: persisted as started before the
// non-idempotent call, then done or failed after it.
type Effect struct {
	EffectID   string          `json:"effect_id"`
	Action     string          `json:"action"`
	ParamsHash string          `json:"params_hash"`
	State      string          `json:"state"` // EffectStarted, EffectDone or EffectFailed
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	StartedAt  time.Time       `json:"started_at"`
	// Deadline bounds the write's call to UpGrade (the shared store sets
	// it when it saves the started effect and leases the session until
	// the write can no longer land: docs/teams.md, "Fencing").
	Deadline   *time.Time `json:"deadline,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Counters persist across turns.
type Counters struct {
	ConsecutiveAutoReplies int `json:"consecutive_auto_replies"`
	Turns                  int `json:"turns"`
}

// Usage is the session's LLM usage in total.
type Usage struct {
	LLMCalls         int `json:"llm_calls"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens"`
}

// Add returns u plus o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		LLMCalls:         u.LLMCalls + o.LLMCalls,
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		CachedTokens:     u.CachedTokens + o.CachedTokens,
	}
}

// SessionSummary is what `sessions list` shows besides the header fields.
type SessionSummary struct {
	LastMessage string `json:"last_message,omitempty"`
	Turns       int    `json:"turns,omitempty"`
}

// Effect returns the effect with this id, or nil. The pointer is into cp.Effects and is
// invalidated by StartEffect (which may grow the slice) and by Save (which compacts it);
// hold on to ids, not pointers.
func (cp *Checkpoint) Effect(id string) *Effect {
	// Newest first: the effect looked up is nearly always the last one started.
	for i := len(cp.Effects) - 1; i >= 0; i-- {
		if cp.Effects[i].EffectID == id {
			return &cp.Effects[i]
		}
	}
	return nil
}

// StartEffect appends a started effect. The caller persists the checkpoint before it
// makes the call the effect stands for. It refuses a duplicate id, and a new effect
// while MaxStartedEffects are still without an outcome.
func (cp *Checkpoint) StartEffect(id, action, paramsHash string, now time.Time) error {
	if id == "" {
		return fmt.Errorf("start effect: empty effect_id")
	}
	if cp.Effect(id) != nil {
		return fmt.Errorf("start effect %s: already in the effect log", id)
	}
	if n := countStarted(cp.Effects); n >= MaxStartedEffects {
		return fmt.Errorf("start effect %s: %d effects are already started without an outcome (the most a checkpoint holds)", id, n)
	}
	cp.Effects = append(cp.Effects, Effect{
		EffectID:   id,
		Action:     action,
		ParamsHash: paramsHash,
		State:      EffectStarted,
		StartedAt:  now.UTC(),
	})
	return nil
}

// FinishEffect records the outcome of a started effect: done with result when errMsg is
// empty, failed with errMsg otherwise.
func (cp *Checkpoint) FinishEffect(id string, result json.RawMessage, errMsg string, now time.Time) error {
	e := cp.Effect(id)
	if e == nil {
		return fmt.Errorf("finish effect %s: not in the effect log", id)
	}
	if e.State != EffectStarted {
		return fmt.Errorf("finish effect %s: already %s", id, e.State)
	}
	t := now.UTC()
	e.FinishedAt = &t
	if errMsg != "" {
		e.State, e.Error, e.Result = EffectFailed, errMsg, nil
		return nil
	}
	e.State, e.Result = EffectDone, result
	return nil
}

// PendingEffects returns the effects started without a recorded outcome: the process
// died during the call, so the executor must reconcile them with the server rather than
// repeat them. A valid checkpoint has at most MaxStartedEffects of them, so settling
// each with FinishEffect stays cheap.
func (cp *Checkpoint) PendingEffects() []Effect {
	var out []Effect
	for _, e := range cp.Effects {
		if e.State == EffectStarted {
			out = append(out, e)
		}
	}
	return out
}

func countStarted(effs []Effect) int {
	n := 0
	for _, e := range effs {
		if e.State == EffectStarted {
			n++
		}
	}
	return n
}

// compactEffects returns the effect log as Save writes it: every effect still started
// (its outcome is unknown until it is reconciled, so it is never dropped) and the keep
// most recently finished ones (by finished_at, then by their place in the log), in log
// order; the finished ones left out are added to dropped, which saturates at MaxSeq.
// effs itself is not modified: a Save that fails leaves the caller's checkpoint as it
// was.
func compactEffects(effs []Effect, dropped, keep int) ([]Effect, int) {
	drop := len(effs) - countStarted(effs) - keep
	if drop <= 0 {
		return effs, dropped
	}
	finished := make([]int, 0, len(effs))
	for i, e := range effs {
		if e.State != EffectStarted {
			finished = append(finished, i)
		}
	}
	finishedAt := func(i int) time.Time {
		if t := effs[i].FinishedAt; t != nil {
			return *t
		}
		return time.Time{}
	}
	slices.SortStableFunc(finished, func(a, b int) int { return finishedAt(a).Compare(finishedAt(b)) })
	gone := make([]bool, len(effs))
	for _, i := range finished[:drop] {
		gone[i] = true
	}
	out := make([]Effect, 0, len(effs)-drop)
	for i, e := range effs {
		if !gone[i] {
			out = append(out, e)
		}
	}
	return out, min(dropped, MaxSeq-drop) + drop
}

// Validate checks the invariants Save relies on and Load enforces. The returned error
// names the offending field.
func (cp *Checkpoint) Validate() error {
	if err := cp.validateHeader(); err != nil {
		return err
	}
	// Each entry is checked in order and the first fault is reported, so that a prefix
	// of the log that holds the fault gives the same error as the whole log (decodeFast
	// stops decoding a log after its first started effect too many).
	seen := make(map[string]bool, len(cp.Effects))
	started := 0
	for i, e := range cp.Effects {
		if e.EffectID == "" {
			return fmt.Errorf("effects[%d].effect_id: empty", i)
		}
		if seen[e.EffectID] {
			return fmt.Errorf("effects[%d].effect_id: duplicate %q", i, e.EffectID)
		}
		seen[e.EffectID] = true
		switch e.State {
		case EffectStarted:
			if started++; started > MaxStartedEffects {
				return fmt.Errorf("effects[%d]: more than %d effects started without an outcome (a session has one or two calls in flight)", i, MaxStartedEffects)
			}
		case EffectDone, EffectFailed:
		default:
			return fmt.Errorf("effects[%d].state: unknown value %q", i, e.State)
		}
	}
	return nil
}

// validateHeader checks the members that come before effects and state on disk.
func (cp *Checkpoint) validateHeader() error {
	if !ValidID(cp.SessionID) {
		return fmt.Errorf("session_id: invalid %q", cp.SessionID)
	}
	// Save writes seq = the previous seq + 1 and parent_seq = the previous seq,
	// starting from 0, so every checkpoint on disk (history entries too) has these.
	if cp.Seq < 1 || cp.Seq > MaxSeq {
		return fmt.Errorf("seq: %d is out of range (1 to %d)", cp.Seq, MaxSeq)
	}
	if cp.ParentSeq != cp.Seq-1 {
		return fmt.Errorf("parent_seq: %d, but a checkpoint of seq %d follows seq %d", cp.ParentSeq, cp.Seq, cp.Seq-1)
	}
	if len(cp.UpgradeServer) > maxServerLen {
		return fmt.Errorf("upgrade_server: %d bytes, longer than %d", len(cp.UpgradeServer), maxServerLen)
	}
	if cp.EffectsDropped < 0 || cp.EffectsDropped > MaxSeq {
		return fmt.Errorf("effects_dropped: %d is out of range (0 to %d)", cp.EffectsDropped, MaxSeq)
	}
	if !cp.Status.Valid() {
		return fmt.Errorf("status: unknown value %q", cp.Status)
	}
	if in := cp.Interrupt; in != nil {
		switch in.Kind {
		case KindConfirmation:
			if in.Confirmation == nil || in.Confirmation.Action == "" {
				return fmt.Errorf("interrupt.confirmation: missing or without action")
			}
		case KindJob:
			if in.Job == nil || in.Job.ID == "" {
				return fmt.Errorf("interrupt.job: missing or without id")
			}
		default:
			return fmt.Errorf("interrupt.kind: unknown value %q", in.Kind)
		}
	}
	switch cp.Status {
	case StatusAwaitingConfirmation:
		if cp.Interrupt == nil || cp.Interrupt.Kind != KindConfirmation {
			return fmt.Errorf("interrupt: status %s needs a confirmation interrupt", cp.Status)
		}
	case StatusWaitingJob:
		if cp.Interrupt == nil || cp.Interrupt.Kind != KindJob {
			return fmt.Errorf("interrupt: status %s needs a job interrupt", cp.Status)
		}
	}
	return nil
}
