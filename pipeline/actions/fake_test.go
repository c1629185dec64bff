package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// fakeAPI is an in-memory UpGrade good enough for this package's tests:
// experiments by id, deterministic assignment while enrolling, marks, and
// instruments (call counts, in-flight gauge, injected errors).
type fakeAPI struct {
	mu    sync.Mutex
	meta  upgrade.ContextMetadata
	exps  map[string]*upgrade.Experiment
	order []string
	users map[string]upgrade.InitResponse
	marks []markRec
	stats map[string]int // experiment id -> enrolled users
	calls map[string]int
	errs  map[string]error // method -> error returned by every call
	// errFor returns an error for a user call (method, user) or nil.
	errFor func(method, userID string) error

	nextID     int
	version    int
	replaceIDs bool // like the real server: condition/partition ids are replaced on write

	fl *flagStore // feature flags and segments (flag_fake_test.go)

	metrics []upgrade.MetricNode // read only: the metric actions run against the simulator

	inflight, maxInflight int
	// gateAt > 0 holds every Init until that many calls are in flight at
	// once (or the gate times out), so a test can prove concurrency
	// without sleeping.
	gateAt   int
	gate     chan struct{}
	gateOnce sync.Once
}

type markRec struct {
	UserID string
	Req    upgrade.MarkRequest
}

func newFake() *fakeAPI {
	return &fakeAPI{
		meta:  upgrade.DefaultContextMetadata(),
		exps:  map[string]*upgrade.Experiment{},
		users: map[string]upgrade.InitResponse{},
		stats: map[string]int{},
		calls: map[string]int{},
		errs:  map[string]error{},
		gate:  make(chan struct{}),
		fl:    newFlagStore(),
	}
}

func fakeID(prefix, n int) string { return fmt.Sprintf("%08d-0000-4000-8000-%012d", prefix, n) }

func cloneExp(e *upgrade.Experiment) *upgrade.Experiment {
	raw, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	var out upgrade.Experiment
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return &out
}

func notFound(id string) error {
	return &upgrade.Error{Category: upgrade.CategoryNotFound, Status: http.StatusNotFound, Method: "GET",
		URL: "/experiments/single/" + id, Message: "Experiment not found"}
}

func (f *fakeAPI) enter(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	return f.errs[method]
}

func (f *fakeAPI) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// add stores an experiment as the server would hold it.
func (f *fakeAPI) add(e *upgrade.Experiment) *upgrade.Experiment {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := cloneExp(e)
	if _, ok := f.exps[c.ID]; !ok {
		f.order = append(f.order, c.ID)
	}
	f.exps[c.ID] = c
	return cloneExp(c)
}

func (f *fakeAPI) get(id string) *upgrade.Experiment {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.exps[id]; ok {
		return cloneExp(e)
	}
	return nil
}

func (f *fakeAPI) ContextMetadata(ctx context.Context) (upgrade.ContextMetadata, error) {
	if err := f.enter("ContextMetadata"); err != nil {
		return nil, err
	}
	return f.meta, nil
}

func (f *fakeAPI) ExperimentNames(ctx context.Context) ([]upgrade.ExperimentName, error) {
	if err := f.enter("ExperimentNames"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []upgrade.ExperimentName{}
	for _, id := range f.order {
		if e, ok := f.exps[id]; ok {
			out = append(out, upgrade.ExperimentName{ID: id, Name: e.Name})
		}
	}
	return out, nil
}

func (f *fakeAPI) Experiments(ctx context.Context) ([]upgrade.Experiment, error) {
	if err := f.enter("Experiments"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []upgrade.Experiment{}
	for _, id := range f.order {
		if e, ok := f.exps[id]; ok {
			out = append(out, *cloneExp(e))
		}
	}
	return out, nil
}

func (f *fakeAPI) Experiment(ctx context.Context, id string) (*upgrade.Experiment, error) {
	if err := f.enter("Experiment"); err != nil {
		return nil, err
	}
	if e := f.get(id); e != nil {
		return e, nil
	}
	return nil, notFound(id)
}

func (f *fakeAPI) stamp(e *upgrade.Experiment) {
	f.version++
	e.VersionNumber++
	e.UpdatedAt = time.Date(2025, 3, 4, 10, 0, f.version, 0, time.UTC).Format(time.RFC3339)
}

func (f *fakeAPI) CreateExperiment(ctx context.Context, in *upgrade.Experiment) (*upgrade.Experiment, error) {
	if err := f.enter("CreateExperiment"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	e := cloneExp(in)
	f.nextID++
	e.ID = fakeID(9, f.nextID)
	if id := upgrade.CreateIDOf(ctx); id != "" {
		e.ID = id // like the server: a POST with an id upserts under it
	}
	if f.replaceIDs {
		f.replaceAll(e)
	}
	e.CreatedAt = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	f.stamp(e)
	f.mu.Unlock()
	return f.add(e), nil
}

// replaceAll gives every condition and partition a new id (leaving
// revertTo dangling), as the real server does.
func (f *fakeAPI) replaceAll(e *upgrade.Experiment) {
	for i := range e.Conditions {
		f.nextID++
		e.Conditions[i].ID = fakeID(7, f.nextID)
	}
	for i := range e.Partitions {
		f.nextID++
		e.Partitions[i].ID = fakeID(8, f.nextID)
	}
}

func (f *fakeAPI) UpdateExperiment(ctx context.Context, in *upgrade.Experiment) (*upgrade.Experiment, error) {
	if err := f.enter("UpdateExperiment"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	old, ok := f.exps[in.ID]
	if !ok {
		f.mu.Unlock()
		return nil, notFound(in.ID)
	}
	e := cloneExp(in)
	e.VersionNumber = old.VersionNumber
	e.CreatedAt = old.CreatedAt
	f.stamp(e)
	f.mu.Unlock()
	return f.add(e), nil
}

func (f *fakeAPI) SetState(ctx context.Context, id string, s upgrade.State) (*upgrade.Experiment, error) {
	if err := f.enter("SetState"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.exps[id]
	if !ok {
		return nil, notFound(id)
	}
	e.State = upgrade.NormalizeState(string(s))
	f.stamp(e)
	return cloneExp(e), nil
}

func (f *fakeAPI) DeleteExperiment(ctx context.Context, id string) (*upgrade.Experiment, error) {
	if err := f.enter("DeleteExperiment"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.exps[id]
	if !ok {
		return nil, notFound(id)
	}
	delete(f.exps, id)
	return cloneExp(e), nil
}

func (f *fakeAPI) EnrollmentStats(ctx context.Context, id string) (*upgrade.EnrollmentStats, error) {
	if err := f.enter("EnrollmentStats"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.exps[id]; !ok {
		return nil, notFound(id)
	}
	return &upgrade.EnrollmentStats{ID: id, Users: f.stats[id]}, nil
}

// Lists reads the lists this fake keeps with the experiment.
func (f *fakeAPI) Lists(ctx context.Context, id string) (inclusion, exclusion []upgrade.ExperimentList, err error) {
	if err := f.enter("Lists"); err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.exps[id]
	if !ok {
		return nil, nil, notFound(id)
	}
	if !e.Inclusion.Empty() {
		inclusion = []upgrade.ExperimentList{{SegmentID: "inc-" + id, Segment: e.Inclusion}}
	}
	if !e.Exclusion.Empty() {
		exclusion = []upgrade.ExperimentList{{SegmentID: "exc-" + id, Segment: e.Exclusion}}
	}
	return inclusion, exclusion, nil
}

func (f *fakeAPI) SetLists(ctx context.Context, e *upgrade.Experiment, inclusion, exclusion upgrade.Segment) error {
	if err := f.enter("SetLists"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.exps[e.ID]
	if !ok {
		return notFound(e.ID)
	}
	cur.Inclusion, cur.Exclusion = inclusion, exclusion
	return nil
}

func (f *fakeAPI) Init(ctx context.Context, userID string, req upgrade.InitRequest) (*upgrade.InitResponse, error) {
	if err := f.enter("Init"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.inflight++
	if f.inflight > f.maxInflight {
		f.maxInflight = f.inflight
	}
	if f.gateAt > 0 && f.inflight >= f.gateAt {
		f.gateOnce.Do(func() { close(f.gate) })
	}
	gated := f.gateAt > 0
	f.mu.Unlock()
	if gated {
		select {
		case <-f.gate:
		case <-ctx.Done():
		case <-time.After(5 * time.Second): // only when concurrency is broken; the test then fails on maxInflight
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight--
	if f.errFor != nil {
		if err := f.errFor("Init", userID); err != nil {
			return nil, err
		}
	}
	u := f.users[userID]
	u.ID = userID
	if req.Group != nil {
		u.Group = req.Group
	}
	if req.WorkingGroup != nil {
		u.WorkingGroup = req.WorkingGroup
	}
	f.users[userID] = u
	out := u
	return &out, nil
}

// bucket is a stable pseudo-random number in [0, 100) for a user and
// experiment, so assignment is deterministic but spread like random.
func bucket(userID, expID string) float64 {
	h := fnv.New64a()
	h.Write([]byte(userID + "|" + expID))
	return float64(h.Sum64()%10000) / 100
}

func (f *fakeAPI) Assign(ctx context.Context, userID, appContext string) ([]upgrade.Assignment, error) {
	if err := f.enter("Assign"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errFor != nil {
		if err := f.errFor("Assign", userID); err != nil {
			return nil, err
		}
	}
	if _, ok := f.users[userID]; !ok {
		return nil, &upgrade.Error{Category: upgrade.CategoryNotFound, Status: 404, Message: "user not initialised"}
	}
	// Like UpGrade, a user is enrolled in only one of the enrolling
	// experiments sharing a decision point (a stable pick per user).
	type candidate struct {
		e *upgrade.Experiment
		p upgrade.DecisionPoint
	}
	byDP := map[[2]string][]candidate{}
	var keys [][2]string
	for _, id := range f.order {
		e, ok := f.exps[id]
		if !ok || e.State != upgrade.StateEnrolling || !contains(e.Context, appContext) {
			continue
		}
		for _, p := range e.Partitions {
			key := [2]string{p.Site, p.Target}
			if byDP[key] == nil {
				keys = append(keys, key)
			}
			byDP[key] = append(byDP[key], candidate{e, p})
		}
	}
	out := []upgrade.Assignment{}
	for _, key := range keys {
		cands := byDP[key]
		c := cands[int(bucket(userID, key[0]+key[1])*100)%len(cands)]
		b := bucket(userID, c.e.ID)
		var pick *upgrade.Condition
		acc := 0.0
		for i := range c.e.Conditions {
			acc += c.e.Conditions[i].AssignmentWeight
			if b < acc {
				pick = &c.e.Conditions[i]
				break
			}
		}
		if pick == nil {
			continue
		}
		out = append(out, upgrade.Assignment{Site: key[0], Target: key[1], ExperimentType: "Simple",
			AssignedCondition: []upgrade.AssignedCondition{{ID: pick.ID, ConditionCode: pick.ConditionCode, ExperimentID: c.e.ID}}})
	}
	return out, nil
}

func (f *fakeAPI) Mark(ctx context.Context, userID string, req upgrade.MarkRequest) (*upgrade.MarkResponse, error) {
	if err := f.enter("Mark"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errFor != nil {
		if err := f.errFor("Mark", userID); err != nil {
			return nil, err
		}
	}
	f.marks = append(f.marks, markRec{UserID: userID, Req: req})
	resp := &upgrade.MarkResponse{ID: fmt.Sprintf("mark-%d", len(f.marks)), UserID: userID, Site: req.Data.Site, Target: req.Data.Target}
	if ac := req.Data.AssignedCondition; ac != nil {
		resp.ExperimentID, resp.Condition = ac.ExperimentID, ac.ConditionCode
	}
	return resp, nil
}

var _ API = (*fakeAPI)(nil)

// Fixed experiments for tests and golden texts.
const (
	mathHintsID = "0b7e5c2e-8d0a-4f57-9d6f-3c1a2b4c5d6e"
	groupExpID  = "1c8f6d3f-9e1b-4a68-8e7a-4d2b3c5d6e7f"
	streamExpID = "2d9a7e4a-af2c-4b79-9f8b-5e3c4d6e7f80"
)

func ptr[T any](v T) *T { return &v }

// mathHints is an inactive individual experiment in assign-prog.
func mathHints() *upgrade.Experiment {
	return &upgrade.Experiment{
		ID: mathHintsID, Name: "Math Hints", Description: "Which hint style helps", Context: []string{"assign-prog"},
		State: upgrade.StateInactive, ConsistencyRule: "individual", AssignmentUnit: "individual", PostExperimentRule: "continue",
		Tags: []string{"math"}, FilterMode: "includeAll", Type: "Simple", AssignmentAlgorithm: "random",
		Conditions: []upgrade.Condition{
			{ID: "a1d2c3b4-0000-4000-8000-000000000001", ConditionCode: "control", AssignmentWeight: 50, Order: 1, TwoCharacterID: "CO"},
			{ID: "a1d2c3b4-0000-4000-8000-000000000002", ConditionCode: "variant", AssignmentWeight: 50, Order: 2, TwoCharacterID: "VA"},
		},
		Partitions: []upgrade.DecisionPoint{
			{ID: "b1d2c3b4-0000-4000-8000-000000000001", Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1},
		},
		Inclusion:         upgrade.Segment{Users: []string{}, Groups: []upgrade.GroupRef{}},
		Exclusion:         upgrade.Segment{Users: []string{"student-9"}, Groups: []upgrade.GroupRef{}},
		ConditionPayloads: []json.RawMessage{json.RawMessage(`{"id":"p1","payload":{"type":"string","value":"hint-a"},"parentCondition":"a1d2c3b4-0000-4000-8000-000000000001","decisionPoint":"b1d2c3b4-0000-4000-8000-000000000001"}`), json.RawMessage(`{"id":"p2","payload":{"type":"string","value":"hint-b"},"parentCondition":"a1d2c3b4-0000-4000-8000-000000000002","decisionPoint":"b1d2c3b4-0000-4000-8000-000000000001"}`)},
		CreatedAt:         "2025-03-04T10:00:00Z", UpdatedAt: "2025-03-04T10:05:00Z", VersionNumber: 2,
	}
}

// groupExp is a group experiment whose enrollment is complete, with an
// assign post rule and an excludeAll filter with empty inclusion lists.
func groupExp() *upgrade.Experiment {
	return &upgrade.Experiment{
		ID: groupExpID, Name: "Class Hints", Context: []string{"assign-prog"},
		State: upgrade.StateEnrollmentComplete, ConsistencyRule: "group", AssignmentUnit: "group", Group: "classId",
		PostExperimentRule: "assign", RevertTo: ptr("c1d2c3b4-0000-4000-8000-000000000002"),
		Tags: []string{}, FilterMode: "excludeAll", Type: "Simple",
		Conditions: []upgrade.Condition{
			{ID: "c1d2c3b4-0000-4000-8000-000000000001", ConditionCode: "control", AssignmentWeight: 30, Order: 1},
			{ID: "c1d2c3b4-0000-4000-8000-000000000002", ConditionCode: "variant", AssignmentWeight: 70, Order: 2},
		},
		Partitions: []upgrade.DecisionPoint{
			{ID: "d1d2c3b4-0000-4000-8000-000000000001", Site: "SelectSection", Target: "analyzing_step_functions", Order: 1, ExcludeIfReached: true},
		},
		Inclusion: upgrade.Segment{Users: []string{}, Groups: []upgrade.GroupRef{}},
		Exclusion: upgrade.Segment{Users: []string{}, Groups: []upgrade.GroupRef{}},
		CreatedAt: "2025-03-01T09:00:00Z", UpdatedAt: "2025-03-02T09:00:00Z", VersionNumber: 5,
	}
}

// streamExp is an enrolling experiment in mathstream.
func streamExp() *upgrade.Experiment {
	return &upgrade.Experiment{
		ID: streamExpID, Name: "Tutorbot Hints", Context: []string{"mathstream"},
		State: upgrade.StateEnrolling, ConsistencyRule: "individual", AssignmentUnit: "individual", PostExperimentRule: "continue",
		Tags: []string{}, FilterMode: "includeAll", Type: "Simple",
		Conditions: []upgrade.Condition{
			{ID: "e1d2c3b4-0000-4000-8000-000000000001", ConditionCode: "question-hint-default", AssignmentWeight: 50, Order: 1},
			{ID: "e1d2c3b4-0000-4000-8000-000000000002", ConditionCode: "question-hint-tutorbot", AssignmentWeight: 50, Order: 2},
		},
		Partitions: []upgrade.DecisionPoint{
			{ID: "f1d2c3b4-0000-4000-8000-000000000001", Site: "lesson-stream", Target: "question-hint", Order: 1},
		},
		Inclusion: upgrade.Segment{Users: []string{}, Groups: []upgrade.GroupRef{}},
		Exclusion: upgrade.Segment{Users: []string{}, Groups: []upgrade.GroupRef{}},
		CreatedAt: "2025-03-01T09:00:00Z", UpdatedAt: "2025-03-01T09:30:00Z", VersionNumber: 3,
	}
}

// seeded is a fake holding the three fixed experiments.
func seeded() *fakeAPI {
	f := newFake()
	f.add(mathHints())
	f.add(groupExp())
	f.add(streamExp())
	return f
}

// The fake only reads the metrics a test gives it (the plan goldens): the
// metric actions run against the simulator (metric_test.go).
func (f *fakeAPI) Metrics(context.Context) ([]upgrade.MetricNode, error) {
	if err := f.enter("Metrics"); err != nil {
		return nil, err
	}
	return append([]upgrade.MetricNode{}, f.metrics...), nil
}

func (f *fakeAPI) SaveMetrics(context.Context, []upgrade.MetricUnit, []string) ([]upgrade.MetricNode, error) {
	return nil, errors.New("fake: no metrics")
}

func (f *fakeAPI) DeleteMetric(context.Context, string) ([]upgrade.MetricNode, error) {
	return nil, errors.New("fake: no metrics")
}

func (f *fakeAPI) ReadResults(context.Context, string) (*upgrade.ResultsInput, error) {
	return nil, errors.New("fake: no results")
}
