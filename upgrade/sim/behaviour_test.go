package sim

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Behaviours of the real 6.5 server that the differential test measured
// (docs/simulator.md). Each test here fails if the simulator stops doing
// what the server does.

func weighted(a, b float64) func(map[string]any) {
	return func(m map[string]any) {
		m["conditions"] = []any{cond("cond-a", "control", a, 1), cond("cond-b", "variant", b, 2)}
	}
}

func (ts *testServer) stats(id string) upgrade.EnrollmentStats {
	ts.t.Helper()
	st, err := ts.srv.Sim().EnrollmentStats(id)
	if err != nil {
		ts.t.Fatal(err)
	}
	return st
}

func TestUnmarkedUsersAreRedrawn(t *testing.T) {
	ts := startSim(t, Options{Seed: 3})
	e := ts.create(expBody("Reweighted", weighted(0, 100)))
	ts.setState(e.ID, "enrolling")
	ts.initUser("assigned", nil, nil)
	ts.initUser("marked", nil, nil)
	for _, u := range []string{"assigned", "marked"} {
		if got := codeAt(t, ts.assign(u, ctx), site, target); got != "variant" {
			t.Fatalf("%s drew %q with weights 0/100", u, got)
		}
	}
	ts.mark("marked", site, target, "variant", e.ID, "condition applied")
	if st := ts.stats(e.ID); st.Users != 1 {
		t.Fatalf("assign stored something: %d users enrolled", st.Users)
	}
	cur, _ := ts.srv.Sim().Experiment(e.ID)
	cur.Conditions[0].AssignmentWeight, cur.Conditions[1].AssignmentWeight = 100, 0
	ts.must("PUT", "/experiments/"+e.ID, putBody(t, cur))
	if got := codeAt(t, ts.assign("assigned", ctx), site, target); got != "control" {
		t.Errorf("an unmarked user kept %q after the weights changed to 100/0", got)
	}
	if got := codeAt(t, ts.assign("marked", ctx), site, target); got != "variant" {
		t.Errorf("a marked user changed to %q", got)
	}
}

func TestWeightsBelow100GiveTheRestToTheFirstCondition(t *testing.T) {
	ts := startSim(t, Options{Seed: 5})
	zero := ts.create(expBody("Zero", weighted(0, 0)))
	part := ts.create(expBody("Thirty", weighted(0, 30), func(m map[string]any) {
		m["partitions"] = []any{dp("d", site, "analyzing_step_functions", false)}
	}))
	ts.setState(zero.ID, "enrolling")
	ts.setState(part.ID, "enrolling")
	variants := 0
	for _, u := range users("w", 400) {
		ts.initUser(u, nil, nil)
		as := ts.assign(u, ctx)
		if got := codeAt(t, as, site, target); got != "control" {
			t.Fatalf("%s drew %q with weights 0/0; the first condition takes it all", u, got)
		}
		if codeAt(t, as, site, "analyzing_step_functions") == "variant" {
			variants++
		}
	}
	if variants < 80 || variants > 160 {
		t.Errorf("weights 0/30: %d of 400 drew variant, want about 120", variants)
	}
}

func TestMarkEnrollsTheAssignedCondition(t *testing.T) {
	ts := startSim(t, Options{Seed: 6})
	e := ts.create(expBody("Marks", weighted(0, 100)))
	ts.setState(e.ID, "enrolling")
	variant := e.ConditionByCode("variant").ID
	cases := []struct {
		user     string
		body     map[string]any
		enrolled int
		excluded int
	}{
		{"applied-bare", map[string]any{"data": map[string]any{"site": site, "target": target}, "status": "condition applied"}, 1, 0},
		{"none-assigned", map[string]any{"data": map[string]any{"site": site, "target": target}, "status": "no condition assigned"}, 2, 0},
		{"no-status", map[string]any{"data": map[string]any{"site": site, "target": target,
			"assignedCondition": map[string]any{"conditionCode": "variant"}}}, 3, 0},
		{"other-code", map[string]any{"data": map[string]any{"site": site, "target": target,
			"assignedCondition": map[string]any{"conditionCode": "control", "experimentId": e.ID}}, "status": "condition applied"}, 4, 0},
		{"not-applied", map[string]any{"data": map[string]any{"site": site, "target": target}, "status": "condition not applied"}, 4, 1},
	}
	for _, tc := range cases {
		ts.initUser(tc.user, nil, nil)
		ts.must("POST", "/v6/mark", tc.body, "User-Id", tc.user)
		st := ts.stats(e.ID)
		if st.Users != tc.enrolled || st.UsersExcluded != tc.excluded || st.Conditions[1].ID != variant || st.Conditions[1].Users != tc.enrolled {
			t.Errorf("after %s: %d enrolled (%d in variant), %d excluded; want %d, all variant, %d",
				tc.user, st.Users, st.Conditions[1].Users, st.UsersExcluded, tc.enrolled, tc.excluded)
		}
	}
}

func TestMarkAfterEnrollmentCompleteExcludes(t *testing.T) {
	ts := startSim(t, Options{Seed: 7})
	e := ts.create(expBody("Late"))
	ts.setState(e.ID, "enrolling")
	ts.initUser("early", nil, nil)
	ts.initUser("late", nil, nil)
	code := codeAt(t, ts.assign("early", ctx), site, target)
	ts.mark("early", site, target, code, e.ID, "condition applied")
	ts.setState(e.ID, "enrollmentComplete")
	ts.mark("late", site, target, "control", e.ID, "condition applied")
	if st := ts.stats(e.ID); st.Users != 1 || st.UsersExcluded != 1 {
		t.Errorf("%d enrolled, %d excluded; want the late mark excluded", st.Users, st.UsersExcluded)
	}
	if got := codeAt(t, ts.assign("early", ctx), site, target); got != code {
		t.Errorf("enrolled user got %q under continue, had %q", got, code)
	}
	if as := ts.assign("late", ctx); len(as) != 0 {
		t.Errorf("late user got %+v", as)
	}
}

func TestGroupExperimentWithoutValidWorkingGroup(t *testing.T) {
	ts := startSim(t, Options{Seed: 8})
	e := ts.create(groupExp("Classes", weighted(0, 100)))
	ts.setState(e.ID, "enrolling")
	ts.initUser("nowg", map[string][]string{"classId": {"A"}}, nil)
	ts.initUser("outside", map[string][]string{"classId": {"A"}}, map[string]string{"classId": "Z"})
	ts.initUser("member", map[string][]string{"classId": {"A"}}, map[string]string{"classId": "A"})
	for _, u := range []string{"nowg", "outside"} {
		if as := ts.assign(u, ctx); len(as) != 0 {
			t.Errorf("%s got %+v from a group experiment", u, as)
		}
		ts.mark(u, site, target, "variant", e.ID, "condition applied")
	}
	if got := codeAt(t, ts.assign("member", ctx), site, target); got != "variant" {
		t.Errorf("member got %q", got)
	}
	ts.mark("member", site, target, "variant", e.ID, "condition applied")
	if st := ts.stats(e.ID); st.Users != 1 || st.Groups != 1 || st.UsersExcluded != 2 {
		t.Errorf("stats %d users, %d groups, %d excluded; want 1, 1, 2", st.Users, st.Groups, st.UsersExcluded)
	}
}

func TestEnrollmentCompleteConditionForGroups(t *testing.T) {
	ts := startSim(t, Options{Seed: 1})
	e := ts.create(groupExp("Two classes of two", func(m map[string]any) {
		m["enrollmentCompleteCondition"] = map[string]any{"userCount": 2, "groupCount": 2}
	}))
	ts.setState(e.ID, "enrolling")
	for i, class := range []string{"A", "B", "A", "B"} {
		u := fmt.Sprintf("s%d", i)
		ts.initUser(u, map[string][]string{"classId": {class}}, map[string]string{"classId": class})
		ts.mark(u, site, target, "", e.ID, "condition applied")
		got, _ := ts.srv.Sim().Experiment(e.ID)
		if want := i == 3; (got.State == upgrade.StateEnrollmentComplete) != want {
			t.Errorf("after %d marks state is %s", i+1, got.State)
		}
	}
}

func TestMarkChecksAnyExperimentOnThePoint(t *testing.T) {
	ts := startSim(t, Options{Seed: 2})
	inactive := ts.create(expBody("Inactive"))
	ts.initUser("m", nil, nil)
	foreign := "3f0b6a55-1c7e-4c1e-9a53-2b8f0f7d9c11"
	for _, tc := range []struct {
		name        string
		data        map[string]any
		status      int
		errName, ty string
	}{
		{"foreign experiment id", map[string]any{"site": site, "target": target,
			"assignedCondition": map[string]any{"experimentId": foreign}}, 404, "Error", "Query Failed"},
		{"unknown condition code", map[string]any{"site": site, "target": target,
			"assignedCondition": map[string]any{"conditionCode": "nope"}}, 500, "Error", "Condition not found"},
		{"no target", map[string]any{"site": site}, 400, "BadRequestError", "Parameter not in the correct format"},
	} {
		r := ts.do("POST", "/v6/mark", map[string]any{"data": tc.data, "status": "condition applied"}, "User-Id", "m")
		se := r.object(t)
		if r.status != tc.status || se["name"] != tc.errName || se["type"] != tc.ty {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	// A mark on an inactive experiment's point names it but enrolls nobody.
	var got upgrade.MarkResponse
	ts.mark("m", site, target, "control", "", "condition applied").decode(t, &got)
	if got.ExperimentID != inactive.ID {
		t.Errorf("mark names %q, want the inactive experiment", got.ExperimentID)
	}
	if st := ts.stats(inactive.ID); st.Users != 0 || st.UsersExcluded != 0 {
		t.Errorf("a mark on an inactive experiment counted: %+v", st)
	}
}

func TestMarksWithoutExperimentIDLandOnEitherExperiment(t *testing.T) {
	ts := startSim(t, Options{Seed: 12})
	running := ts.create(expBody("Running"))
	inactive := ts.create(expBody("Inactive"))
	ts.setState(running.ID, "enrolling")
	per := map[string]int{}
	for _, u := range users("lm", 60) {
		ts.initUser(u, nil, nil)
		var got upgrade.MarkResponse
		ts.mark(u, site, target, "", "", "condition applied").decode(t, &got)
		per[got.ExperimentID]++
	}
	if per[running.ID] < 15 || per[inactive.ID] < 15 {
		t.Errorf("marks per experiment %v: both should get some", per)
	}
	if st := ts.stats(running.ID); st.Users != per[running.ID] {
		t.Errorf("running experiment enrolled %d, %d marks landed on it", st.Users, per[running.ID])
	}
}

func TestAssignErrors(t *testing.T) {
	ts := startSim(t, Options{})
	ts.initUser("u", nil, nil)
	for _, tc := range []struct {
		name, user string
		body       map[string]any
		status     int
		errName    string
		ty, msg    string
	}{
		{"unknown context", "u", map[string]any{"context": "nowhere"}, 400, "Error", typeIncorrectParam, "Invalid app context: nowhere"},
		{"no context", "u", map[string]any{}, 400, "BadRequestError", typeIncorrectParam, msgInvalidBody},
		{"no User-Id", "", map[string]any{"context": ctx}, 400, "Error", typeIncorrectParam, "User-Id header not found."},
		{"unknown user", "ghost", map[string]any{"context": ctx}, 404, "Error", typeUserNotDefined, "User not found: ghost"},
	} {
		var hdr []string
		if tc.user != "" {
			hdr = []string{"User-Id", tc.user}
		}
		r := ts.do("POST", "/v6/assign", tc.body, hdr...)
		se := r.object(t)
		if r.status != tc.status || se["name"] != tc.errName || se["type"] != tc.ty || se["message"] != tc.msg {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
}

func TestPayloadsAreDeliveredPerDecisionPoint(t *testing.T) {
	ts := startSim(t, Options{Seed: 1})
	e := ts.create(expBody("Payloads", weighted(0, 100), func(m map[string]any) {
		m["partitions"] = []any{dp("d1", site, target, false), dp("d2", site, "analyzing_step_functions", false)}
		m["conditionPayloads"] = []any{
			map[string]any{"id": "p1", "payload": map[string]any{"type": "string", "value": "at-d1"}, "parentCondition": "cond-b", "decisionPoint": "d1"},
			map[string]any{"id": "p2", "payload": map[string]any{"type": "string", "value": "anywhere"}, "parentCondition": "cond-b"},
		}
	}))
	ts.setState(e.ID, "enrolling")
	ts.initUser("u", nil, nil)
	payloadAt := func(as []upgrade.Assignment, tgt string) string {
		for _, a := range as {
			if a.Target == tgt && a.AssignedCondition[0].Payload != nil {
				return a.AssignedCondition[0].Payload.Value
			}
		}
		return ""
	}
	as := ts.assign("u", ctx)
	if a, b := payloadAt(as, target), payloadAt(as, "analyzing_step_functions"); a != "at-d1" || b != "" {
		t.Errorf("payloads %q and %q; want at-d1 and none (no decision point, not delivered)", a, b)
	}
	// An update gives every condition its code as payload wherever none
	// was sent, and drops payloads without a decision point.
	cur, _ := ts.srv.Sim().Experiment(e.ID)
	var put upgrade.Experiment
	ts.must("PUT", "/experiments/"+e.ID, putBody(t, cur)).decode(t, &put)
	if len(put.ConditionPayloads) != 4 {
		t.Errorf("payloads after update: %s", put.ConditionPayloads)
	}
	as = ts.assign("u", ctx)
	if a, b := payloadAt(as, target), payloadAt(as, "analyzing_step_functions"); a != "at-d1" || b != "variant" {
		t.Errorf("after update payloads %q and %q; want at-d1 and variant", a, b)
	}
}

func TestPaginatedPagesByIDThenSorts(t *testing.T) {
	ts := startSim(t, Options{Seed: 1})
	var made []upgrade.Experiment
	for _, n := range []string{"delta", "alpha", "echo", "bravo", "charlie"} {
		made = append(made, ts.create(expBody(n)))
	}
	byID := slices.Clone(made)
	sort.Slice(byID, func(i, j int) bool { return byID[i].ID < byID[j].ID })
	var want []string
	for _, e := range byID[2:4] {
		want = append(want, e.Name)
	}
	sort.Strings(want)
	req := map[string]any{"skip": 2, "take": 2, "sortParams": map[string]any{"key": "name", "sortAs": "ASC"}}
	raw := ts.must("POST", "/experiments/paginated", req).object(t)
	var got []string
	for _, n := range raw["nodes"].([]any) {
		got = append(got, n.(map[string]any)["name"].(string))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || raw["total"] != float64(5) {
		t.Errorf("page %v (total %v), want %v: the 3rd and 4th by id, sorted by name", got, raw["total"], want)
	}
	if raw["skip"] != float64(2) || raw["take"] != float64(2) || raw["sortParams"] == nil {
		t.Errorf("paging parameters not echoed: %v", raw)
	}
}

// keysOf lists an object's keys, sorted.
func keysOf(v any) string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestAnswerShapes(t *testing.T) {
	ts := startSim(t, Options{Seed: 1})
	const (
		base  = "assignmentAlgorithm,assignmentUnit,backendVersion,conditionOrder,consistencyRule,context,createdAt,description,endOn,enrollmentCompleteCondition,filterMode,group,id,name,postExperimentRule,revertTo,startOn,state,tags,type,updatedAt,versionNumber"
		cond  = "assignmentWeight,conditionCode,createdAt,description,id,name,order,twoCharacterId,updatedAt,versionNumber"
		point = "createdAt,description,excludeIfReached,id,order,site,target,twoCharacterId,updatedAt,versionNumber"
	)
	with := func(extra ...string) string {
		all := append(strings.Split(base, ","), extra...)
		sort.Strings(all)
		return strings.Join(all, ",")
	}
	created := ts.must("POST", "/experiments", expBody("Shapes", func(m map[string]any) {
		m["experimentSegmentInclusion"] = segment([]string{"in"}, [][2]string{{"classId", "c1"}})
	})).object(t)
	id := created["id"].(string)
	single := ts.must("GET", "/experiments/single/"+id, nil).object(t)
	var list []any
	ts.must("GET", "/experiments", nil).decode(t, &list)
	page := ts.must("POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 5}).object(t)
	state := ts.must("POST", "/experiments/state", map[string]any{"experimentId": id, "state": "enrolling"}).object(t)
	cur, _ := ts.srv.Sim().Experiment(id)
	put := ts.must("PUT", "/experiments/"+id, putBody(t, cur)).object(t)
	var deleted []any
	ts.must("DELETE", "/experiments/"+id, nil).decode(t, &deleted)

	for _, tc := range []struct {
		name string
		got  any
		want string
	}{
		{"create", created, with("conditionPayloads", "conditions", "factors", "partitions", "queries")},
		{"create condition", lookup(created, "conditions.0"), cond},
		{"create decision point", lookup(created, "partitions.0"), point},
		{"single", single, with("conditionPayloads", "conditions", "experimentSegmentExclusion", "experimentSegmentInclusion",
			"factors", "partitions", "queries", "stateTimeLogs", "stratificationFactor")},
		{"single condition", lookup(single, "conditions.0"), "assignmentWeight,conditionCode,conditionPayloads,createdAt,description,id,levelCombinationElements,name,order,twoCharacterId,updatedAt,versionNumber"},
		{"list", list[0], with("conditionPayloads", "conditions", "experimentSegmentExclusion", "experimentSegmentInclusion",
			"factors", "partitions", "queries", "stateTimeLogs")},
		{"list segment", lookup(list[0], "experimentSegmentInclusion.0"), "createdAt,experimentId,segment,segmentId,updatedAt,versionNumber"},
		{"list segment body", lookup(list[0], "experimentSegmentInclusion.0.segment"),
			"context,createdAt,description,groupForSegment,id,individualForSegment,listType,name,subSegments,tags,type,updatedAt,versionNumber"},
		{"list segment user", lookup(list[0], "experimentSegmentInclusion.0.segment.individualForSegment.0"),
			"createdAt,segmentId,updatedAt,userId,versionNumber"},
		{"list segment group", lookup(list[0], "experimentSegmentInclusion.0.segment.groupForSegment.0"),
			"createdAt,groupId,segmentId,type,updatedAt,versionNumber"},
		{"paginated", page, "nodes,skip,take,total"},
		{"page node", lookup(page, "nodes.0"), with("experimentSegmentInclusion", "partitions", "stateTimeLogs")},
		{"state", state, with("partitions", "queries", "stateTimeLogs")},
		{"state log", lookup(state, "stateTimeLogs.0"), "createdAt,experiment,fromState,id,timeLog,toState,updatedAt,versionNumber"},
		{"state log experiment", lookup(state, "stateTimeLogs.0.experiment"), with("partitions", "queries", "stateTimeLogs")},
		// The body has no stratificationFactor: nor has the answer (measured).
		{"update", put, with("conditionPayloads", "conditions", "experimentSegmentExclusion", "experimentSegmentInclusion",
			"factors", "partitions", "queries", "stateTimeLogs")},
		{"update condition", lookup(put, "conditions.0"), "assignmentWeight,conditionCode,createdAt,description,experimentId,id,name,order,twoCharacterId,updatedAt,versionNumber"},
		{"deleted row", deleted[0], with("stratificationFactorStratificationFactorName")},
	} {
		if got := keysOf(tc.got); got != tc.want {
			t.Errorf("%s keys:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	if state["state"] != "running" || lookup(state, "stateTimeLogs.0.experiment.state") != "inactive" {
		t.Errorf("state answer shows %v, its log's experiment %v", state["state"], lookup(state, "stateTimeLogs.0.experiment.state"))
	}
	if lookup(deleted[0], "state") != "enrolling" {
		t.Errorf("deleted row state %v, want the internal name", lookup(deleted[0], "state"))
	}
}
