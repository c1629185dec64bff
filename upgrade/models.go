package upgrade

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// State is an experiment state, always held in UpGrade's internal naming.
// Servers of version 6.5 answer with display names (running, paused,
// completed); NormalizeState folds them back so the rest of the program only
// ever sees one vocabulary.
type State string

// The experiment states of upgrade-api.md, internal names.
const (
	StateInactive           State = "inactive"
	StatePreview            State = "preview"
	StateScheduled          State = "scheduled"
	StateEnrolling          State = "enrolling"
	StateEnrollmentComplete State = "enrollmentComplete"
	StateCancelled          State = "cancelled"
	StateArchived           State = "archived"
	StateDraft              State = "draft"
)

// AllStates lists every internal state name.
var AllStates = []State{StateInactive, StatePreview, StateScheduled, StateEnrolling,
	StateEnrollmentComplete, StateCancelled, StateArchived, StateDraft}

// displayToInternal maps UpGrade's display names of states to internal ones
// (a switch: a package-level map is built at init).
func displayToInternal(name string) (State, bool) {
	switch name {
	case "running":
		return StateEnrolling, true
	case "paused":
		return StateEnrollmentComplete, true
	case "completed":
		return StateCancelled, true
	}
	return "", false
}

// NormalizeState maps a display name to its internal name; internal names
// (any case) pass through. Unknown names are returned unchanged.
func NormalizeState(s string) State {
	t := strings.TrimSpace(s)
	if st, ok := displayToInternal(strings.ToLower(t)); ok {
		return st
	}
	for _, st := range AllStates {
		if strings.EqualFold(string(st), t) {
			return st
		}
	}
	return State(t)
}

// Valid reports whether s is one of the internal state names.
func (s State) Valid() bool {
	for _, st := range AllStates {
		if st == s {
			return true
		}
	}
	return false
}

// Display is the name a 6.5 server shows for the state.
func (s State) Display() string {
	switch s {
	case StateEnrolling:
		return "running"
	case StateEnrollmentComplete:
		return "paused"
	case StateCancelled:
		return "completed"
	}
	return string(s)
}

// UnmarshalJSON accepts both internal and display names.
func (s *State) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	*s = NormalizeState(str)
	return nil
}

// Enumerations of upgrade-api.md.
const (
	ConsistencyIndividual = "individual"
	ConsistencyExperiment = "experiment"
	ConsistencyGroup      = "group"

	UnitIndividual     = "individual"
	UnitGroup          = "group"
	UnitWithinSubjects = "within-subjects"

	PostRuleContinue = "continue"
	PostRuleRevert   = "revert"
	PostRuleAssign   = "assign"

	FilterIncludeAll = "includeAll"
	FilterExcludeAll = "excludeAll"

	TypeSimple    = "Simple"
	TypeFactorial = "Factorial"

	AlgorithmRandom = "random"
	// AlgorithmStratified draws within the values of a stratification
	// factor (6.5 draws like random, upgrade-results-designs.md section 9).
	AlgorithmStratified = "stratified random sampling"
	// AlgorithmMooclet is Thompson sampling through mooclets, off on a
	// standard 6.5 backend.
	AlgorithmMooclet = "ts_configurable"

	MarkConditionApplied    = "condition applied"
	MarkConditionNotApplied = "condition not applied"
	MarkNoConditionAssigned = "no condition assigned"
)

// Condition is one arm of an experiment.
type Condition struct {
	ID               string  `json:"id"`
	ConditionCode    string  `json:"conditionCode"`
	AssignmentWeight float64 `json:"assignmentWeight"`
	Order            int     `json:"order"`
	Name             string  `json:"name,omitempty"`
	Description      string  `json:"description,omitempty"`
	TwoCharacterID   string  `json:"twoCharacterId,omitempty"`
	// LevelCombinationElements name the levels of a factorial condition.
	LevelCombinationElements []LevelCombinationElement `json:"levelCombinationElements,omitempty"`
}

// LevelCombinationElement is one level of a factorial condition.
type LevelCombinationElement struct {
	ID    string   `json:"id"`
	Level LevelRef `json:"level"`
}

// LevelRef names a level of a factor.
type LevelRef struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Factor is one factor of a factorial experiment.
type Factor struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Order       int     `json:"order"`
	Levels      []Level `json:"levels"`
}

// Level is one level of a factor. Payload is nil when there is none; a
// 6.5 server reads a level created without one back as {type: string,
// value: null}, which it refuses when sent back (so it is never sent).
type Level struct {
	ID          string        `json:"id"`
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	Order       int           `json:"order,omitempty"`
	Payload     *LevelPayload `json:"payload,omitempty"`
}

// LevelPayload is a level's payload; Value nil reads as "none".
type LevelPayload struct {
	Type  string  `json:"type"`
	Value *string `json:"value"`
}

// PayloadText is the level's payload value ("" when none).
func (l Level) PayloadText() string {
	if l.Payload == nil || l.Payload.Value == nil {
		return ""
	}
	return *l.Payload.Value
}

// Condition order of a within-subjects experiment.
const (
	OrderRandom            = "random"
	OrderRandomRoundRobin  = "random round robin"
	OrderOrderedRoundRobin = "ordered round robin"
)

// DecisionPoint is what the server calls a partition: a site and an
// optional target where a condition is chosen.
type DecisionPoint struct {
	ID               string `json:"id"`
	Site             string `json:"site"`
	Target           string `json:"target,omitempty"`
	Description      string `json:"description,omitempty"`
	Order            int    `json:"order"`
	ExcludeIfReached bool   `json:"excludeIfReached"`
	TwoCharacterID   string `json:"twoCharacterId,omitempty"`
}

// GroupRef names one group of a group type.
type GroupRef struct {
	Type    string `json:"type"`
	GroupID string `json:"groupId"`
}

// Segment is the normalised form of an inclusion or exclusion list. Both wire
// shapes (6.5: an array of {segment}; 6.2: a single {segment}) decode into it.
type Segment struct {
	Users  []string   `json:"users"`
	Groups []GroupRef `json:"groups"`
	// Segments are the public segments the lists include (a list row's
	// subSegments), whose members count too. The agent's experiment
	// actions never add or remove them: SetLists keeps the rows naming
	// them.
	Segments []SegmentRef `json:"segments,omitempty"`
}

// SegmentRef names a public segment that an experiment list includes.
type SegmentRef struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Empty reports whether the segment lists nobody: no user, no group and no
// public segment.
func (s Segment) Empty() bool { return len(s.Users) == 0 && len(s.Groups) == 0 && len(s.Segments) == 0 }

// SegmentIDs are the ids of s's public segments, sorted, each once.
func (s Segment) SegmentIDs() []string {
	out := make([]string, 0, len(s.Segments))
	for _, r := range s.Segments {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SegmentNames are the names of s's public segments, their ids where the
// server gave no name, sorted.
func (s Segment) SegmentNames() []string {
	out := make([]string, 0, len(s.Segments))
	for _, r := range s.Segments {
		if r.Name != "" {
			out = append(out, r.Name)
		} else {
			out = append(out, r.ID)
		}
	}
	slices.Sort(out)
	return out
}

// StateTimeLog is one recorded state change.
type StateTimeLog struct {
	// ID is the server's id of the log row. The server validates it when an
	// experiment is sent back in a PUT, so it must survive a round trip.
	ID        string `json:"id,omitempty"`
	FromState State  `json:"fromState"`
	ToState   State  `json:"toState"`
	TimeLog   string `json:"timeLog"`
}

// EnrollmentCompleteCondition ends enrollment automatically.
type EnrollmentCompleteCondition struct {
	UserCount  int `json:"userCount"`
	GroupCount int `json:"groupCount"`
}

// Experiment is the full experiment object, normalised: internal state names
// and segments in the Segment form. Use MarshalFor to write the shape a
// particular server version expects; MarshalJSON writes the 6.5 shape.
type Experiment struct {
	ID                          string                       `json:"id,omitempty"`
	Name                        string                       `json:"name"`
	Description                 string                       `json:"description,omitempty"`
	Context                     []string                     `json:"context"`
	State                       State                        `json:"state"`
	ConsistencyRule             string                       `json:"consistencyRule,omitempty"`
	AssignmentUnit              string                       `json:"assignmentUnit"`
	PostExperimentRule          string                       `json:"postExperimentRule"`
	Tags                        []string                     `json:"tags"`
	FilterMode                  string                       `json:"filterMode"`
	Type                        string                       `json:"type"`
	AssignmentAlgorithm         string                       `json:"assignmentAlgorithm,omitempty"`
	StratificationFactor        *StratificationRef           `json:"stratificationFactor,omitempty"`
	Group                       string                       `json:"group,omitempty"`
	RevertTo                    *string                      `json:"revertTo"`
	StartOn                     *string                      `json:"startOn,omitempty"`
	EndOn                       *string                      `json:"endOn,omitempty"`
	EnrollmentCompleteCondition *EnrollmentCompleteCondition `json:"enrollmentCompleteCondition,omitempty"`
	Conditions                  []Condition                  `json:"conditions"`
	Partitions                  []DecisionPoint              `json:"partitions"`
	// Factors are a factorial experiment's factors; ConditionOrder a
	// within-subjects experiment's order of conditions.
	Factors           []Factor          `json:"factors,omitempty"`
	ConditionOrder    string            `json:"conditionOrder,omitempty"`
	Inclusion         Segment           `json:"-"`
	Exclusion         Segment           `json:"-"`
	ConditionPayloads []json.RawMessage `json:"conditionPayloads,omitempty"`
	Queries           []json.RawMessage `json:"queries,omitempty"`
	StateTimeLogs     []StateTimeLog    `json:"stateTimeLogs,omitempty"`
	CreatedAt         string            `json:"createdAt,omitempty"`
	UpdatedAt         string            `json:"updatedAt,omitempty"`
	VersionNumber     int               `json:"versionNumber,omitempty"`
}

// ConditionByCode returns the condition with that code, or nil.
func (e *Experiment) ConditionByCode(code string) *Condition {
	for i := range e.Conditions {
		if e.Conditions[i].ConditionCode == code {
			return &e.Conditions[i]
		}
	}
	return nil
}

// ConditionByID returns the condition with that id, or nil.
func (e *Experiment) ConditionByID(id string) *Condition {
	for i := range e.Conditions {
		if e.Conditions[i].ID == id {
			return &e.Conditions[i]
		}
	}
	return nil
}

// ContextName is the experiment's single context ("" when none).
func (e *Experiment) ContextName() string {
	if len(e.Context) == 0 {
		return ""
	}
	return e.Context[0]
}

// SegmentShape says which wire form of segments a server speaks.
type SegmentShape int

const (
	// SegmentsArray is the 6.5 form: experimentSegmentInclusion: [{segment}].
	SegmentsArray SegmentShape = iota
	// SegmentsObject is the 6.2 form: experimentSegmentInclusion: {segment}.
	SegmentsObject
)

type wireIndividual struct {
	UserID string `json:"userId"`
}

type wireSegmentBody struct {
	IndividualForSegment []wireIndividual  `json:"individualForSegment"`
	GroupForSegment      []GroupRef        `json:"groupForSegment"`
	SubSegments          []json.RawMessage `json:"subSegments"`
	Type                 string            `json:"type"`
	ListType             string            `json:"listType,omitempty"`
	Name                 string            `json:"name,omitempty"`
	ID                   string            `json:"id,omitempty"`
	Context              string            `json:"context,omitempty"`
}

type wireSegment struct {
	Segment *wireSegmentBody `json:"segment"`
}

// toWire writes s as one list segment; its public segments as
// subSegments [{id}], with their names too when named (for display: a
// request names them by id only).
func toWire(s Segment, named bool) wireSegment {
	b := &wireSegmentBody{IndividualForSegment: []wireIndividual{}, GroupForSegment: []GroupRef{},
		SubSegments: []json.RawMessage{}, Type: "private"}
	for _, u := range s.Users {
		b.IndividualForSegment = append(b.IndividualForSegment, wireIndividual{UserID: u})
	}
	b.GroupForSegment = append(b.GroupForSegment, s.Groups...)
	for _, r := range s.Segments {
		ref := map[string]string{"id": r.ID}
		if named && r.Name != "" {
			ref["name"] = r.Name
		}
		raw, err := json.Marshal(ref)
		if err == nil {
			b.SubSegments = append(b.SubSegments, raw)
		}
	}
	return wireSegment{Segment: b}
}

func fromWire(ws []wireSegment) Segment {
	seg := Segment{Users: []string{}, Groups: []GroupRef{}}
	for _, w := range ws {
		if w.Segment == nil {
			continue
		}
		for _, u := range w.Segment.IndividualForSegment {
			seg.Users = append(seg.Users, u.UserID)
		}
		seg.Groups = append(seg.Groups, w.Segment.GroupForSegment...)
		for _, raw := range w.Segment.SubSegments {
			var r SegmentRef
			if json.Unmarshal(raw, &r) == nil && r.ID != "" {
				seg.Segments = append(seg.Segments, r)
			}
		}
	}
	return seg
}

// decodeSegments reads either wire shape: an array of {segment}, a single
// {segment}, or null.
func decodeSegments(raw json.RawMessage) (Segment, error) {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return Segment{Users: []string{}, Groups: []GroupRef{}}, nil
	}
	if strings.HasPrefix(t, "[") {
		var arr []wireSegment
		if err := json.Unmarshal(raw, &arr); err != nil {
			return Segment{}, err
		}
		return fromWire(arr), nil
	}
	var one wireSegment
	if err := json.Unmarshal(raw, &one); err != nil {
		return Segment{}, err
	}
	return fromWire([]wireSegment{one}), nil
}

type experimentAlias Experiment

type experimentWire struct {
	experimentAlias
	Inclusion json.RawMessage `json:"experimentSegmentInclusion"`
	Exclusion json.RawMessage `json:"experimentSegmentExclusion"`
}

// UnmarshalJSON reads both segment shapes and both state vocabularies.
func (e *Experiment) UnmarshalJSON(b []byte) error {
	var w experimentWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	inc, err := decodeSegments(w.Inclusion)
	if err != nil {
		return fmt.Errorf("experimentSegmentInclusion: %w", err)
	}
	exc, err := decodeSegments(w.Exclusion)
	if err != nil {
		return fmt.Errorf("experimentSegmentExclusion: %w", err)
	}
	*e = Experiment(w.experimentAlias)
	e.Inclusion, e.Exclusion = inc, exc
	// A simple experiment answers "factors": [] and empty level
	// combinations: the same as none.
	if len(e.Factors) == 0 {
		e.Factors = nil
	}
	for i := range e.Conditions {
		if len(e.Conditions[i].LevelCombinationElements) == 0 {
			e.Conditions[i].LevelCombinationElements = nil
		}
	}
	return nil
}

// MarshalJSON writes the 6.5 shape.
func (e Experiment) MarshalJSON() ([]byte, error) { return e.MarshalFor(SegmentsArray) }

// MarshalFor writes the experiment with the segment shape a server expects.
func (e Experiment) MarshalFor(shape SegmentShape) ([]byte, error) {
	inc, exc := segmentsFor(e, shape, true)
	type out struct {
		experimentAlias
		Inclusion any `json:"experimentSegmentInclusion"`
		Exclusion any `json:"experimentSegmentExclusion"`
	}
	return json.Marshal(out{experimentAlias(e), inc, exc})
}

func segmentsFor(e Experiment, shape SegmentShape, named bool) (inc, exc any) {
	if shape == SegmentsObject {
		return toWire(e.Inclusion, named), toWire(e.Exclusion, named)
	}
	return []wireSegment{toWire(e.Inclusion, named)}, []wireSegment{toWire(e.Exclusion, named)}
}

// requestBody is MarshalFor for a create or update request: it always
// carries conditionPayloads, as an empty list when there are none, because
// a 6.5 server fails an update without them (500, a TypeError), the
// experiment's description and every decision point's description.
func (e Experiment) requestBody(shape SegmentShape) ([]byte, error) {
	inc, exc := segmentsFor(e, shape, false)
	payloads := e.ConditionPayloads
	if payloads == nil {
		payloads = []json.RawMessage{}
	}
	// A decision point without a description fails the server's insert
	// (500): send "" rather than leaving the key out.
	type wirePoint struct {
		DecisionPoint
		Description string `json:"description"`
	}
	points := make([]wirePoint, len(e.Partitions))
	for i, p := range e.Partitions {
		points[i] = wirePoint{p, p.Description}
	}
	e.Factors = sendableFactors(e.Factors)
	// The description is always sent: a 6.5 PUT without it keeps the
	// stored one, so "" is how a description is cleared (measured,
	// docs/upgrade-real.md).
	// So is stratificationFactor, as null when there is none: a 6.5 PUT
	// without the key keeps the stored factor, even when the algorithm
	// goes back to random (measured, docs/upgrade-real.md).
	type out struct {
		experimentAlias
		Description    string             `json:"description"`
		Inclusion      any                `json:"experimentSegmentInclusion"`
		Exclusion      any                `json:"experimentSegmentExclusion"`
		Payloads       []json.RawMessage  `json:"conditionPayloads"`
		Partitions     []wirePoint        `json:"partitions"`
		Stratification *StratificationRef `json:"stratificationFactor"`
	}
	return json.Marshal(out{experimentAlias(e), e.Description, inc, exc, payloads, points, e.StratificationFactor})
}

// sendableFactors are factors as a 6.5 server takes them back: a level
// read back with payload {type: string, value: null} (made without one)
// is refused with a 400 when sent, so it goes without payload.
func sendableFactors(fs []Factor) []Factor {
	if fs == nil {
		return nil
	}
	out := make([]Factor, len(fs))
	for i, f := range fs {
		f.Levels = slices.Clone(f.Levels)
		for k := range f.Levels {
			if p := f.Levels[k].Payload; p != nil && p.Value == nil {
				f.Levels[k].Payload = nil
			}
		}
		out[i] = f
	}
	return out
}

// ExperimentName is one row of GET /experiments/names.
type ExperimentName struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ContextInfo is one context of the context metadata.
type ContextInfo struct {
	Conditions []string `json:"CONDITIONS"`
	GroupTypes []string `json:"GROUP_TYPES"`
	ExpIDs     []string `json:"EXP_IDS"`    // targets
	ExpPoints  []string `json:"EXP_POINTS"` // sites
}

// ContextMetadata maps a context name to its options.
type ContextMetadata map[string]ContextInfo

// ServerInfo is the answer of GET /api.
type ServerInfo struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

// SearchParams filters POST /experiments/paginated.
type SearchParams struct {
	Key    string `json:"key"` // all, name, status, tag, context
	String string `json:"string"`
}

// SortParams orders POST /experiments/paginated.
type SortParams struct {
	Key    string `json:"key"`    // name, state, updatedAt, postExperimentRule
	SortAs string `json:"sortAs"` // ASC, DESC
}

// PageRequest is the body of POST /experiments/paginated.
type PageRequest struct {
	Skip         int           `json:"skip"`
	Take         int           `json:"take"`
	SearchParams *SearchParams `json:"searchParams,omitempty"`
	SortParams   *SortParams   `json:"sortParams,omitempty"`
}

// Page is the answer of POST /experiments/paginated.
type Page struct {
	Total int          `json:"total"`
	Nodes []Experiment `json:"nodes"`
}

// StateChange is the body of POST /experiments/state.
type StateChange struct {
	ExperimentID string  `json:"experimentId"`
	State        State   `json:"state"`
	ScheduleDate *string `json:"scheduleDate,omitempty"`
}

// PartitionStats is enrollment at one decision point of one condition.
type PartitionStats struct {
	ID     string `json:"id"`
	Users  int    `json:"users"`
	Groups int    `json:"groups"`
}

// ConditionStats is enrollment in one condition.
type ConditionStats struct {
	ID         string           `json:"id"`
	Users      int              `json:"users"`
	Groups     int              `json:"groups"`
	Partitions []PartitionStats `json:"partitions"`
}

// EnrollmentStats is the answer of POST /stats/enrollment/detail.
type EnrollmentStats struct {
	ID             string           `json:"id"`
	Users          int              `json:"users"`
	Groups         int              `json:"groups"`
	UsersExcluded  int              `json:"usersExcluded"`
	GroupsExcluded int              `json:"groupsExcluded"`
	Conditions     []ConditionStats `json:"conditions"`
}

// InitRequest is the body of POST /v6/init. Nil fields are not sent and keep
// their stored values on the server.
type InitRequest struct {
	Group        map[string][]string `json:"group,omitempty"`
	WorkingGroup map[string]string   `json:"workingGroup,omitempty"`
}

// InitResponse is the answer of POST /v6/init.
type InitResponse struct {
	ID           string              `json:"id"`
	Group        map[string][]string `json:"group"`
	WorkingGroup map[string]string   `json:"workingGroup"`
}

// Payload is a condition payload as the client sees it.
type Payload struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// AssignedCondition is one condition handed to a user.
type AssignedCondition struct {
	ID            string   `json:"id"`
	ConditionCode string   `json:"conditionCode"`
	Payload       *Payload `json:"payload"`
	ExperimentID  string   `json:"experimentId"`
	// CodeObject is a conditionCode that is not a string: a one-factor
	// factorial answers its level's payload object there.
	CodeObject string `json:"-"`
}

// UnmarshalJSON reads a conditionCode that is a string or an object.
func (a *AssignedCondition) UnmarshalJSON(b []byte) error {
	type plain AssignedCondition
	var w struct {
		plain
		Code json.RawMessage `json:"conditionCode"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*a = AssignedCondition(w.plain)
	if len(w.Code) > 0 && json.Unmarshal(w.Code, &a.ConditionCode) != nil {
		a.CodeObject = string(w.Code)
	}
	return nil
}

// FactorLevels reads an assignment's assignedFactor: factor name -> level
// name.
func (a Assignment) FactorLevels() map[string]string {
	var w []map[string]struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(a.AssignedFactor, &w) != nil {
		return nil
	}
	out := map[string]string{}
	for _, m := range w {
		for f, l := range m {
			out[f] = l.Level
		}
	}
	return out
}

// Assignment is one decision point of the answer of POST /v6/assign.
type Assignment struct {
	Site              string              `json:"site"`
	Target            string              `json:"target"`
	ExperimentType    string              `json:"experimentType"`
	AssignedCondition []AssignedCondition `json:"assignedCondition"`
	AssignedFactor    json.RawMessage     `json:"assignedFactor,omitempty"`
}

// MarkCondition is the condition a mark reports.
type MarkCondition struct {
	ID            string `json:"id,omitempty"`
	ConditionCode string `json:"conditionCode,omitempty"`
	ExperimentID  string `json:"experimentId,omitempty"`
}

// MarkData is the data of a mark.
type MarkData struct {
	Site              string         `json:"site"`
	Target            string         `json:"target,omitempty"`
	AssignedCondition *MarkCondition `json:"assignedCondition,omitempty"`
}

// MarkRequest is the body of POST /v6/mark.
type MarkRequest struct {
	Data        MarkData `json:"data"`
	Status      string   `json:"status,omitempty"`
	Uniquifier  string   `json:"uniquifier,omitempty"`
	ClientError string   `json:"clientError,omitempty"`
}

// MarkResponse is the answer of POST /v6/mark.
type MarkResponse struct {
	ID           string `json:"id"`
	UserID       string `json:"userId"`
	Site         string `json:"site"`
	Target       string `json:"target"`
	ExperimentID string `json:"experimentId"`
	Condition    string `json:"condition"`
}

// ServerError is the JSON error body UpGrade answers with.
type ServerError struct {
	Name      string          `json:"name"`
	Message   string          `json:"message"`
	EndPoint  string          `json:"endPoint"`
	ErrorCode int             `json:"errorCode"`
	Type      string          `json:"type,omitempty"`
	Request   json.RawMessage `json:"request,omitempty"`
}

// DefaultContextMetadata is the metadata the simulator serves unless told
// otherwise (upgrade-api.md, "Default context metadata").
func DefaultContextMetadata() ContextMetadata {
	return ContextMetadata{
		"assign-prog": {
			Conditions: []string{"control", "variant"},
			GroupTypes: []string{"schoolId", "classId", "instructorId"},
			ExpIDs:     []string{"absolute_value_plot_equality", "analyzing_step_functions"},
			ExpPoints:  []string{"SelectSection"},
		},
		"mathstream": {
			Conditions: []string{"question-hint-default", "question-hint-tutorbot"},
			GroupTypes: []string{"schoolId", "classId", "instructorId"},
			ExpIDs:     []string{"question-hint"},
			ExpPoints:  []string{"lesson-stream"},
		},
		"livehint-ai": {
			Conditions: []string{"tutorbot-enabled1", "tutorbot-enabled2", "solver_bot_with_goal", "solver_bot_without_goal"},
			GroupTypes: []string{"schoolId", "classId"},
			ExpIDs:     []string{"digital", "mathbook_ca", "mathbook_tx", "mathstream"},
			ExpPoints:  []string{"problem-info", "create-session"},
		},
	}
}
