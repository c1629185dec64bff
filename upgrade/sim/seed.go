package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The sample data of "upgrade-agent sim seed": a small school district's
// UpGrade, enough for every read-only command to show something real.
// It goes in through the REST API, as a person's clicks would, so the
// simulator records the same history and audit entries, and nothing here
// knows how the simulator stores its state.
//
// Objects are found by name (experiments, segments) or key (flags) and
// skipped when present, so seeding twice changes nothing.

// SeedAPI is the part of the UpGrade client the seed uses.
type SeedAPI interface {
	BaseURL() string
	Experiments(ctx context.Context) ([]upgrade.Experiment, error)
	CreateExperiment(ctx context.Context, e *upgrade.Experiment) (*upgrade.Experiment, error)
	SetState(ctx context.Context, id string, s upgrade.State) (*upgrade.Experiment, error)
	Init(ctx context.Context, userID string, req upgrade.InitRequest) (*upgrade.InitResponse, error)
	Assign(ctx context.Context, userID, appContext string) ([]upgrade.Assignment, error)
	Mark(ctx context.Context, userID string, req upgrade.MarkRequest) (*upgrade.MarkResponse, error)
	Flags(ctx context.Context) ([]upgrade.FeatureFlag, error)
	CreateFlag(ctx context.Context, f *upgrade.FeatureFlag) (*upgrade.FeatureFlag, error)
	AddFlagList(ctx context.Context, kind upgrade.ListKind, in upgrade.FlagListInput) (*upgrade.FlagList, error)
	Segments(ctx context.Context) (*upgrade.SegmentsAnswer, error)
	UpsertSegment(ctx context.Context, in upgrade.SegmentInput) (*upgrade.SegmentRecord, error)
	Metrics(ctx context.Context) ([]upgrade.MetricNode, error)
	SaveMetrics(ctx context.Context, units []upgrade.MetricUnit, contexts []string) ([]upgrade.MetricNode, error)
	Log(ctx context.Context, userID string, entries []upgrade.LogEntry) ([]upgrade.LogRow, error)
}

// SeedReport says what a seed created and what it found already there.
type SeedReport struct {
	Created []string `json:"created"`
	Present []string `json:"present"`
}

type seedSegment struct {
	name, context, description string
	users                      []string
	groups                     []upgrade.GroupRef
	sub                        []string // names of segments seeded before it
}

type seedList struct {
	kind    upgrade.ListKind
	enabled bool
	users   []string
	groups  []upgrade.GroupRef
	segment string // a seeded segment's name
}

type seedFlag struct {
	key, name, context, status, filter, description string
	lists                                           []seedList
}

type seedExperiment struct {
	name, context, description string
	conditions                 []string
	site, target               string
	filter                     string
	include                    string // a seeded segment the inclusion list names
	states                     []upgrade.State
	enrolled                   int // users marked while enrolling
	school                     string
	queries                    []seedQuery
	logs                       bool // enrolled users log the sample metrics (sampleLog)
}

type seedQuery struct {
	name, metric string
	op           upgrade.QueryOp
}

type seedMetric struct {
	key, datatype string
	allowed       []string
	context       string
}

// The sample metrics: what a tutor logs per student, so that the results
// of Math Hints have numbers to show.
const (
	metricTimeOnTask = "time_on_task"
	metricCompletion = "completion"
)

func sampleMetrics() []seedMetric {
	return []seedMetric{
		{key: metricTimeOnTask, datatype: upgrade.MetricContinuous, context: "assign-prog"},
		{key: metricCompletion, datatype: upgrade.MetricCategorical, allowed: []string{"completed", "partial", "abandoned"}, context: "assign-prog"},
	}
}

// sampleLog is what user logs in condition code: derived from the user id
// alone (and the condition, so the variant shows an effect), never random,
// so every seed prints the same results.
func sampleLog(user, code string) map[string]any {
	h := fnv.New32a()
	_, _ = h.Write([]byte(user))
	n := h.Sum32()
	seconds := 240 + int(n%120) // 4 to 6 minutes
	done := n%10 < 5
	if code == "variant" {
		seconds -= 30
		done = n%10 < 7
	}
	completion := "completed"
	switch {
	case done:
	case n%2 == 0:
		completion = "partial"
	default:
		completion = "abandoned"
	}
	return map[string]any{metricTimeOnTask: seconds, metricCompletion: completion}
}

func sampleSegments() []seedSegment {
	return []seedSegment{
		{name: "pilot schools", context: "assign-prog", description: "Schools in the hint pilot",
			groups: []upgrade.GroupRef{{Type: "schoolId", GroupID: "lincoln-high"}, {Type: "schoolId", GroupID: "roosevelt-middle"}}},
		{name: "grade 8 classes", context: "assign-prog", description: "Grade 8 classes, and the pilot schools",
			groups: []upgrade.GroupRef{{Type: "classId", GroupID: "8a"}, {Type: "classId", GroupID: "8b"}},
			sub:    []string{"pilot schools"}},
		{name: "QA accounts", context: "assign-prog", description: "Test logins that never count",
			users: []string{"qa-1", "qa-2"}},
	}
}

func sampleFlags() []seedFlag {
	return []seedFlag{
		{key: "HINT_PANEL", name: "Hint panel", context: "assign-prog", status: "enabled", filter: "excludeAll",
			description: "The new hint panel, for grade 8 first",
			lists: []seedList{
				{kind: upgrade.ListInclusion, enabled: true, segment: "grade 8 classes"},
				{kind: upgrade.ListExclusion, enabled: true, users: []string{"qa-1", "student-13"}},
			}},
		{key: "MATH_HINTS", name: "Math hints", context: "mathstream", status: "enabled", filter: "includeAll",
			description: "Hints in the lesson stream, for everyone but the excluded",
			lists: []seedList{
				{kind: upgrade.ListExclusion, enabled: true, users: []string{"qa-1", "qa-2"}},
				{kind: upgrade.ListExclusion, enabled: false, users: []string{"u13"}},
			}},
		{key: "DARK_MODE", name: "Dark mode", context: "mathstream", status: "disabled", filter: "excludeAll",
			description: "Dark theme, still in testing",
			lists: []seedList{
				{kind: upgrade.ListInclusion, enabled: true, users: []string{"student-1", "student-2"}},
				{kind: upgrade.ListInclusion, enabled: false, groups: []upgrade.GroupRef{{Type: "classId", GroupID: "8a"}}},
			}},
	}
}

func sampleExperiments() []seedExperiment {
	return []seedExperiment{
		{name: "Math Hints", context: "assign-prog", description: "Do worked-example hints help on absolute value plots?",
			conditions: []string{"control", "variant"}, site: "SelectSection", target: "absolute_value_plot_equality",
			filter: "excludeAll", include: "pilot schools",
			states: []upgrade.State{upgrade.StateEnrolling}, enrolled: 80, school: "lincoln-high", logs: true,
			queries: []seedQuery{
				{name: "Mean time on task", metric: metricTimeOnTask, op: upgrade.QueryOp{OperationType: "avg"}},
				{name: "Time on task spread", metric: metricTimeOnTask, op: upgrade.QueryOp{OperationType: "stddev"}},
				{name: "Completion rate", metric: metricCompletion, op: upgrade.QueryOp{OperationType: "percentage", CompareFn: "=", CompareValue: "completed"}},
			}},
		{name: "Step Function Practice", context: "assign-prog", description: "Extra practice problems before the unit test",
			conditions: []string{"control", "variant"}, site: "SelectSection", target: "analyzing_step_functions",
			filter: "includeAll",
			states: []upgrade.State{upgrade.StateEnrolling, upgrade.StateEnrollmentComplete}, enrolled: 16, school: "roosevelt-middle"},
		{name: "Tutorbot Pilot", context: "livehint-ai", description: "Which tutor bot students prefer",
			conditions: []string{"tutorbot-enabled1", "tutorbot-enabled2"}, site: "problem-info", target: "digital",
			filter: "includeAll"},
	}
}

// Seed fills the UpGrade behind api with the sample data; hc sends the one
// request the client has no method for (an experiment list naming a
// public segment).
func Seed(ctx context.Context, api SeedAPI, hc *http.Client) (*SeedReport, error) {
	rep := &SeedReport{Created: []string{}, Present: []string{}}
	segIDs, err := seedSegmentsIn(ctx, api, rep)
	if err != nil {
		return rep, err
	}
	if err := seedFlagsIn(ctx, api, segIDs, rep); err != nil {
		return rep, err
	}
	if err := seedMetricsIn(ctx, api, rep); err != nil {
		return rep, err
	}
	if err := seedExperimentsIn(ctx, api, hc, segIDs, rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func seedSegmentsIn(ctx context.Context, api SeedAPI, rep *SeedReport) (map[string]string, error) {
	ans, err := api.Segments(ctx)
	if err != nil {
		return nil, fmt.Errorf("read segments: %w", err)
	}
	ids := map[string]string{}
	for _, s := range ans.Segments {
		ids[s.Name] = s.ID
	}
	for _, s := range sampleSegments() {
		what := "segment " + s.name
		if ids[s.name] != "" {
			rep.Present = append(rep.Present, what)
			continue
		}
		in := upgrade.SegmentInput{Name: s.name, Description: s.description, Context: s.context, Type: "public",
			UserIDs: append([]string{}, s.users...), Groups: append([]upgrade.GroupRef{}, s.groups...), SubSegmentIDs: []string{}}
		for _, sub := range s.sub {
			in.SubSegmentIDs = append(in.SubSegmentIDs, ids[sub])
		}
		rec, err := api.UpsertSegment(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", what, err)
		}
		ids[s.name] = rec.ID
		rep.Created = append(rep.Created, what)
	}
	return ids, nil
}

func seedFlagsIn(ctx context.Context, api SeedAPI, segIDs map[string]string, rep *SeedReport) error {
	have, err := api.Flags(ctx)
	if err != nil {
		return fmt.Errorf("read feature flags: %w", err)
	}
	keys := map[string]bool{}
	for _, f := range have {
		keys[f.Key] = true
	}
	for _, sf := range sampleFlags() {
		what := "flag " + sf.key
		if keys[sf.key] {
			rep.Present = append(rep.Present, what)
			continue
		}
		f, err := api.CreateFlag(ctx, &upgrade.FeatureFlag{Name: sf.name, Key: sf.key, Description: sf.description,
			Context: []string{sf.context}, Tags: []string{"sample"}, Status: sf.status, FilterMode: sf.filter})
		if err != nil {
			return fmt.Errorf("create %s: %w", what, err)
		}
		for i, l := range sf.lists {
			seg := upgrade.SegmentInput{Name: fmt.Sprintf("%s %s %d", sf.key, l.kind, i+1), Context: sf.context, Type: "private",
				UserIDs: append([]string{}, l.users...), Groups: append([]upgrade.GroupRef{}, l.groups...), SubSegmentIDs: []string{}}
			switch {
			case l.segment != "":
				seg.ListType = "Segment"
				seg.SubSegmentIDs = []string{segIDs[l.segment]}
			case len(l.groups) > 0:
				seg.ListType = l.groups[0].Type
			default:
				seg.ListType = "Individual"
			}
			if _, err := api.AddFlagList(ctx, l.kind, upgrade.FlagListInput{FlagID: f.ID, Enabled: l.enabled, ListType: seg.ListType, Segment: seg}); err != nil {
				return fmt.Errorf("add a list to %s: %w", what, err)
			}
		}
		rep.Created = append(rep.Created, what)
	}
	return nil
}

// seedMetricsIn creates the sample metrics the server lacks; queries need
// them before the experiment that uses them is saved.
func seedMetricsIn(ctx context.Context, api SeedAPI, rep *SeedReport) error {
	trees, err := api.Metrics(ctx)
	if err != nil {
		return fmt.Errorf("read metrics: %w", err)
	}
	keys := map[string]bool{}
	for _, m := range upgrade.FlattenMetrics(trees) {
		keys[m.Key] = true
	}
	for _, sm := range sampleMetrics() {
		what := "metric " + sm.key
		if keys[sm.key] {
			rep.Present = append(rep.Present, what)
			continue
		}
		unit := upgrade.MetricUnit{Metric: sm.key, Datatype: sm.datatype, AllowedValues: sm.allowed}
		if _, err := api.SaveMetrics(ctx, []upgrade.MetricUnit{unit}, []string{sm.context}); err != nil {
			return fmt.Errorf("create %s: %w", what, err)
		}
		rep.Created = append(rep.Created, what)
	}
	return nil
}

func seedExperimentsIn(ctx context.Context, api SeedAPI, hc *http.Client, segIDs map[string]string, rep *SeedReport) error {
	have, err := api.Experiments(ctx)
	if err != nil {
		return fmt.Errorf("read experiments: %w", err)
	}
	names := map[string]bool{}
	for _, e := range have {
		names[e.Name] = true
	}
	for _, se := range sampleExperiments() {
		what := "experiment " + se.name
		if names[se.name] {
			rep.Present = append(rep.Present, what)
			continue
		}
		if err := seedExperiment1(ctx, api, hc, segIDs, se); err != nil {
			return fmt.Errorf("create %s: %w", what, err)
		}
		rep.Created = append(rep.Created, what)
	}
	return nil
}

func seedExperiment1(ctx context.Context, api SeedAPI, hc *http.Client, segIDs map[string]string, se seedExperiment) error {
	e := &upgrade.Experiment{Name: se.name, Description: se.description, Context: []string{se.context},
		State: upgrade.StateInactive, ConsistencyRule: "individual", AssignmentUnit: "individual",
		PostExperimentRule: "continue", Tags: []string{"sample"}, FilterMode: se.filter, Type: "Simple",
		AssignmentAlgorithm: "random",
		Partitions:          []upgrade.DecisionPoint{{Site: se.site, Target: se.target, Order: 1}}}
	w := 100.0 / float64(len(se.conditions))
	for i, code := range se.conditions {
		e.Conditions = append(e.Conditions, upgrade.Condition{ConditionCode: code, AssignmentWeight: w, Order: i + 1})
	}
	for _, q := range se.queries {
		if _, err := e.AddQuery(q.name, q.metric, upgrade.RepeatedMostRecent, q.op); err != nil {
			return fmt.Errorf("add query %s: %w", q.name, err)
		}
	}
	created, err := api.CreateExperiment(ctx, e)
	if err != nil {
		return err
	}
	if se.include != "" {
		if err := addSegmentList(ctx, api.BaseURL(), hc, created, segIDs[se.include]); err != nil {
			return err
		}
	}
	for _, st := range se.states {
		if _, err := api.SetState(ctx, created.ID, st); err != nil {
			return fmt.Errorf("set state %s: %w", st, err)
		}
		if st == upgrade.StateEnrolling {
			if err := enrol(ctx, api, created, se); err != nil {
				return err
			}
		}
	}
	return nil
}

// sampleLogTime is the client timestamp of the sample logs: fixed, so the
// data is the same on every seed.
const sampleLogTime = "2026-01-12T09:00:00.000Z"

// enrol initialises se.enrolled students of se.school and marks each at the
// decision point with the condition UpGrade assigned.
func enrol(ctx context.Context, api SeedAPI, e *upgrade.Experiment, se seedExperiment) error {
	for n := 1; n <= se.enrolled; n++ {
		user := fmt.Sprintf("%s-student-%d", strings.SplitN(se.school, "-", 2)[0], n)
		if _, err := api.Init(ctx, user, upgrade.InitRequest{Group: map[string][]string{"schoolId": {se.school}},
			WorkingGroup: map[string]string{"schoolId": se.school}}); err != nil {
			return fmt.Errorf("init %s: %w", user, err)
		}
		as, err := api.Assign(ctx, user, se.context)
		if err != nil {
			return fmt.Errorf("assign %s: %w", user, err)
		}
		var cond *upgrade.MarkCondition
		for _, a := range as {
			for _, c := range a.AssignedCondition {
				if a.Site == se.site && a.Target == se.target && c.ExperimentID == e.ID {
					cond = &upgrade.MarkCondition{ID: c.ID, ConditionCode: c.ConditionCode, ExperimentID: e.ID}
				}
			}
		}
		if cond == nil {
			continue // excluded by the lists: a mark would not enrol
		}
		if _, err := api.Mark(ctx, user, upgrade.MarkRequest{Data: upgrade.MarkData{Site: se.site, Target: se.target, AssignedCondition: cond}}); err != nil {
			return fmt.Errorf("mark %s: %w", user, err)
		}
		if !se.logs {
			continue
		}
		entry := upgrade.LogEntry{Timestamp: sampleLogTime, Attributes: sampleLog(user, cond.ConditionCode)}
		if _, err := api.Log(ctx, user, []upgrade.LogEntry{entry}); err != nil {
			return fmt.Errorf("log %s: %w", user, err)
		}
	}
	return nil
}

// addSegmentList adds an inclusion list to e that names public segment
// segID, as the web UI's "segment" list does.
func addSegmentList(ctx context.Context, base string, hc *http.Client, e *upgrade.Experiment, segID string) error {
	body := map[string]any{
		"experimentId": e.ID,
		"list": map[string]any{
			"name": e.Name + " pilot", "context": e.Context[0], "type": "private", "listType": "Segment",
			"userIds": []string{}, "groups": []upgrade.GroupRef{}, "subSegmentIds": []string{segID},
		},
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/experiments/inclusionList", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("add the inclusion list: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("add the inclusion list: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}
