package sim

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

const (
	site   = "SelectSection"
	target = "absolute_value_plot_equality"
	ctx    = "assign-prog"
)

func TestInit(t *testing.T) {
	ts := startSim(t, Options{})
	var got upgrade.InitResponse
	ts.must("POST", "/v6/init", map[string]any{
		"group":        map[string][]string{"classId": {"c1", "c2"}, "schoolId": {"s1"}},
		"workingGroup": map[string]string{"classId": "c1"},
	}, "User-Id", "stu1").decode(t, &got)
	want := upgrade.InitResponse{ID: "stu1", Group: map[string][]string{"classId": {"c1", "c2"}, "schoolId": {"s1"}},
		WorkingGroup: map[string]string{"classId": "c1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("init (-want +got):\n%s", diff)
	}
	// Fields not sent keep their stored values.
	ts.must("POST", "/v6/init", map[string]any{"workingGroup": map[string]string{"classId": "c2"}}, "User-Id", "stu1").decode(t, &got)
	want.WorkingGroup = map[string]string{"classId": "c2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("re-init (-want +got):\n%s", diff)
	}
	ts.must("POST", "/v6/init", map[string]any{}, "User-Id", "stu1").decode(t, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("empty re-init (-want +got):\n%s", diff)
	}
	if r := ts.must("POST", "/v6/init", map[string]any{}, "User-Id", "bare"); string(r.body) != `{"id":"bare"}` {
		t.Errorf("init without groups answered %s", r.body)
	}

	for _, tc := range []struct {
		name string
		body any
		hdr  []string
		code int
		typ  string
	}{
		{"unknown key", map[string]any{"groups": map[string]any{}}, []string{"User-Id", "x"}, 400, "Parameter not in the correct format"},
		{"group values not strings", map[string]any{"group": map[string]any{"classId": "c1"}}, []string{"User-Id", "x"}, 400, "Parameter not in the correct format"},
		{"no User-Id", map[string]any{}, nil, 400, "Parameter not in the correct format"},
	} {
		r := ts.do("POST", "/v6/init", tc.body, tc.hdr...)
		var se upgrade.ServerError
		r.decode(t, &se)
		if r.status != tc.code || se.Type != tc.typ {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if _, ok := ts.srv.Sim().User("x"); ok {
		t.Error("a rejected init created user x")
	}
	// The server does not check working groups against groups: such a
	// user is stored, and group experiments treat them as having no
	// valid group.
	r := ts.must("POST", "/v6/init", map[string]any{"group": map[string][]string{"classId": {"c1"}},
		"workingGroup": map[string]string{"classId": "c7"}}, "User-Id", "outside")
	if string(r.body) != `{"id":"outside","group":{"classId":["c1"]},"workingGroup":{"classId":"c7"}}` {
		t.Errorf("working group outside the group: %s", r.body)
	}
}

func TestAssignNeedsInitialisedUser(t *testing.T) {
	ts := startSim(t, Options{})
	r := ts.do("POST", "/v6/assign", map[string]any{"context": ctx}, "User-Id", "ghost")
	var se upgrade.ServerError
	r.decode(t, &se)
	if r.status != 404 || se.Type != "Experiment user not defined" || se.ErrorCode != 404 {
		t.Errorf("assign for an unknown user: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v6/mark", map[string]any{"data": map[string]any{"site": site}}, "User-Id", "ghost"); r.status != 404 {
		t.Errorf("mark for an unknown user: %d", r.status)
	}
	ts.initUser("u", nil, nil)
	if r := ts.do("POST", "/v6/assign", map[string]any{}, "User-Id", "u"); r.status != 400 {
		t.Errorf("assign without context: %d", r.status)
	}
	// Nothing runs: an empty array, not null.
	r = ts.must("POST", "/v6/assign", map[string]any{"context": ctx}, "User-Id", "u")
	if string(r.body) != "[]" {
		t.Errorf("assign with nothing running = %s, want []", r.body)
	}
}

func TestWeightedAssignment(t *testing.T) {
	ts := startSim(t, Options{Seed: 42})
	e := ts.create(expBody("Weights", func(m map[string]any) {
		m["conditions"] = []any{cond("a", "control", 30, 1), cond("b", "variant", 70, 2)}
	}))
	ts.setState(e.ID, "enrolling")
	counts := map[string]int{}
	const n = 1000
	for _, u := range users("w", n) {
		ts.initUser(u, nil, nil)
		as := ts.assign(u, ctx)
		if len(as) != 1 {
			t.Fatalf("%s got %d assignments", u, len(as))
		}
		a := as[0]
		if a.Site != site || a.Target != target || a.ExperimentType != "Simple" || a.AssignedCondition[0].ExperimentID != e.ID {
			t.Fatalf("assignment %+v", a)
		}
		counts[a.AssignedCondition[0].ConditionCode]++
	}
	share := 100 * float64(counts["control"]) / n
	// 4.5 points is more than three standard deviations at n=1000.
	if math.Abs(share-30) > 4.5 || counts["control"]+counts["variant"] != n {
		t.Errorf("control share %.1f%% (%v), want 30%% +- 4.5", share, counts)
	}
}

func TestSeedMakesAssignmentsRepeatable(t *testing.T) {
	run := func(seed int64) []string {
		ts := startSim(t, Options{Seed: seed})
		e := ts.create(expBody("Seeded"))
		ts.setState(e.ID, "enrolling")
		var codes []string
		for _, u := range users("s", 50) {
			ts.initUser(u, nil, nil)
			codes = append(codes, codeAt(t, ts.assign(u, ctx), site, target))
		}
		return codes
	}
	a, b, c := run(7), run(7), run(8)
	if !cmp.Equal(a, b) {
		t.Errorf("seed 7 twice gave different assignments:\n%v\n%v", a, b)
	}
	if cmp.Equal(a, c) {
		t.Errorf("seeds 7 and 8 gave the same 50 assignments")
	}
}

func TestIndividualConsistency(t *testing.T) {
	ts := startSim(t, Options{Seed: 3})
	e := ts.create(expBody("Keep"))
	ts.setState(e.ID, "enrolling")
	for _, u := range users("k", 20) {
		ts.initUser(u, nil, nil)
		first := codeAt(t, ts.assign(u, ctx), site, target)
		if first == "" {
			t.Fatalf("%s got no condition", u)
		}
		for i := 0; i < 5; i++ {
			if got := codeAt(t, ts.assign(u, ctx), site, target); got != first {
				t.Fatalf("%s: assign %d gave %s after %s", u, i, got, first)
			}
		}
	}
}

func groupExp(name string, mods ...func(map[string]any)) map[string]any {
	return expBody(name, append([]func(map[string]any){func(m map[string]any) {
		m["assignmentUnit"] = "group"
		m["consistencyRule"] = "group"
		m["group"] = "classId"
	}}, mods...)...)
}

func TestGroupConsistency(t *testing.T) {
	ts := startSim(t, Options{Seed: 11})
	e := ts.create(groupExp("Classes"))
	ts.setState(e.ID, "enrolling")
	perClass := map[string]map[string]bool{}
	for c := 0; c < 8; c++ {
		class := fmt.Sprintf("class%d", c)
		perClass[class] = map[string]bool{}
		for _, u := range users(class+"-", 10) {
			ts.initUser(u, map[string][]string{"classId": {class}}, map[string]string{"classId": class})
			perClass[class][codeAt(t, ts.assign(u, ctx), site, target)] = true
		}
	}
	distinct := map[string]bool{}
	for class, codes := range perClass {
		if len(codes) != 1 || codes[""] {
			t.Errorf("%s: its 10 students got %v, want one shared condition", class, codes)
		}
		for c := range codes {
			distinct[c] = true
		}
	}
	if len(distinct) != 2 {
		t.Errorf("8 classes all got %v; classes should be able to differ", distinct)
	}
	// No working group of the experiment's group type: nothing.
	ts.initUser("loner", map[string][]string{"schoolId": {"s1"}}, map[string]string{"schoolId": "s1"})
	if as := ts.assign("loner", ctx); len(as) != 0 {
		t.Errorf("user without a class got %+v", as)
	}
}

func TestSegments(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(map[string]any)
		entered map[string]bool // user -> gets a condition
	}{
		{"exclude by user id", func(m map[string]any) {
			m["experimentSegmentExclusion"] = segment([]string{"bob"}, nil)
		}, map[string]bool{"alice": true, "bob": false, "carol": true}},
		{"exclude by group membership", func(m map[string]any) {
			m["experimentSegmentExclusion"] = segment(nil, [][2]string{{"classId", "c2"}})
		}, map[string]bool{"alice": true, "bob": false, "carol": false}},
		{"exclusion wins over inclusion", func(m map[string]any) {
			m["experimentSegmentInclusion"] = segment([]string{"alice", "bob"}, nil)
			m["experimentSegmentExclusion"] = segment([]string{"bob"}, nil)
		}, map[string]bool{"alice": true, "bob": false, "carol": true}},
		{"excludeAll admits only the included", func(m map[string]any) {
			m["filterMode"] = "excludeAll"
			m["experimentSegmentInclusion"] = segment([]string{"alice"}, nil)
		}, map[string]bool{"alice": true, "bob": false, "carol": false}},
		{"excludeAll with a group, minus the excluded", func(m map[string]any) {
			m["filterMode"] = "excludeAll"
			m["experimentSegmentInclusion"] = segment(nil, [][2]string{{"classId", "c2"}})
			m["experimentSegmentExclusion"] = segment([]string{"carol"}, nil)
		}, map[string]bool{"alice": false, "bob": true, "carol": false}},
		{"excludeAll with nothing included", func(m map[string]any) {
			m["filterMode"] = "excludeAll"
		}, map[string]bool{"alice": false, "bob": false, "carol": false}},
		{"membership uses group, not working group", func(m map[string]any) {
			m["experimentSegmentExclusion"] = segment(nil, [][2]string{{"schoolId", "s9"}})
		}, map[string]bool{"alice": true, "bob": true, "carol": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startSim(t, Options{Seed: 5})
			e := ts.create(expBody("Segments", tt.mod))
			ts.setState(e.ID, "enrolling")
			ts.initUser("alice", map[string][]string{"classId": {"c1"}}, map[string]string{"classId": "c1"})
			ts.initUser("bob", map[string][]string{"classId": {"c2"}}, map[string]string{"classId": "c2"})
			ts.initUser("carol", map[string][]string{"classId": {"c2", "c3"}, "schoolId": {"s9"}}, map[string]string{"classId": "c3"})
			for u, want := range tt.entered {
				if got := codeAt(t, ts.assign(u, ctx), site, target) != ""; got != want {
					t.Errorf("%s gets a condition: %v, want %v", u, got, want)
				}
			}
		})
	}
}

func TestExcludeIfReached(t *testing.T) {
	ts := startSim(t, Options{Seed: 9})
	// "prior" marks the decision point before the experiment exists.
	ts.initUser("prior", nil, nil)
	ts.mark("prior", site, target, "", "", "condition applied")
	e := ts.create(expBody("Early visitors", func(m map[string]any) {
		m["partitions"] = []any{dp("d", site, target, true)}
	}))
	for _, u := range []string{"assigner", "marker", "late"} {
		ts.initUser(u, nil, nil)
	}
	if as := ts.assign("assigner", ctx); len(as) != 0 {
		t.Fatalf("inactive experiment assigned %+v", as)
	}
	ts.mark("marker", site, target, "", "", "condition applied")
	ts.setState(e.ID, "enrolling")
	// Only a mark excludes: reaching the point through assign does not.
	for u, want := range map[string]bool{"assigner": true, "late": true, "marker": false, "prior": false} {
		if got := codeAt(t, ts.assign(u, ctx), site, target) != ""; got != want {
			t.Errorf("%s gets a condition after the start: %v, want %v", u, got, want)
		}
	}
	st, _ := ts.srv.Sim().EnrollmentStats(e.ID)
	if st.UsersExcluded != 2 {
		t.Errorf("usersExcluded = %d, want 2 (marker, prior)", st.UsersExcluded)
	}

	// An enrolled user who marked is excluded when the experiment goes
	// inactive and starts again.
	ts.mark("late", site, target, "", e.ID, "condition applied")
	ts.setState(e.ID, "inactive")
	ts.setState(e.ID, "enrolling")
	if got := codeAt(t, ts.assign("late", ctx), site, target); got != "" {
		t.Errorf("enrolled user got %s after inactive -> running", got)
	}
	// Pausing and resuming (enrollmentComplete -> enrolling) excludes nobody.
	ts.initUser("resumer", nil, nil)
	ts.mark("resumer", site, target, "", e.ID, "condition applied")
	ts.setState(e.ID, "enrollmentComplete")
	ts.setState(e.ID, "enrolling")
	if got := codeAt(t, ts.assign("resumer", ctx), site, target); got == "" {
		t.Error("resuming from enrollmentComplete excluded an enrolled user")
	}

	// Without excludeIfReached an early mark costs nothing.
	f := ts.create(expBody("Forgiving", func(m map[string]any) {
		m["partitions"] = []any{dp("d", "SelectSection", "analyzing_step_functions", false)}
	}))
	ts.initUser("visitor", nil, nil)
	ts.mark("visitor", site, "analyzing_step_functions", "", "", "condition applied")
	ts.setState(f.ID, "enrolling")
	if got := codeAt(t, ts.assign("visitor", ctx), site, "analyzing_step_functions"); got == "" {
		t.Error("visitor of an experiment without exclude-if-reached stayed excluded")
	}
}

func TestExcludeIfReachedPinsTheGroup(t *testing.T) {
	ts := startSim(t, Options{Seed: 4})
	e := ts.create(groupExp("Group early", func(m map[string]any) {
		m["partitions"] = []any{dp("d", site, target, true)}
	}))
	for _, u := range []string{"a1", "a2", "a3"} {
		ts.initUser(u, map[string][]string{"classId": {"A"}}, map[string]string{"classId": "A"})
	}
	for _, u := range []string{"b1", "b2"} {
		ts.initUser(u, map[string][]string{"classId": {"B"}}, map[string]string{"classId": "B"})
	}
	ts.mark("a1", site, target, "", "", "condition applied") // one student of class A marks it while inactive
	ts.setState(e.ID, "enrolling")
	for _, u := range []string{"a1", "a2", "a3"} {
		if got := codeAt(t, ts.assign(u, ctx), site, target); got != "" {
			t.Errorf("%s of the pinned class got %s", u, got)
		}
	}
	b1, b2 := codeAt(t, ts.assign("b1", ctx), site, target), codeAt(t, ts.assign("b2", ctx), site, target)
	if b1 == "" || b1 != b2 {
		t.Errorf("class B got %q and %q, want one shared condition", b1, b2)
	}
	var st upgrade.EnrollmentStats
	ts.must("POST", "/stats/enrollment/detail", map[string]any{"experimentId": e.ID}).decode(t, &st)
	if st.GroupsExcluded != 1 || st.UsersExcluded != 1 {
		t.Errorf("excluded: %d users, %d groups; want 1 and 1", st.UsersExcluded, st.GroupsExcluded)
	}
}

// setPostRule makes an experiment hold a post rule through a PUT, the only
// way on a 6.5 server (create stores continue).
func (ts *testServer) setPostRule(id, rule, revertToCode string) {
	ts.t.Helper()
	cur, _ := ts.srv.Sim().Experiment(id)
	cur.PostExperimentRule, cur.RevertTo = rule, nil
	if c := cur.ConditionByCode(revertToCode); c != nil {
		cid := c.ID
		cur.RevertTo = &cid
	}
	ts.must("PUT", "/experiments/"+id, putBody(ts.t, cur))
}

func TestPostExperimentRules(t *testing.T) {
	ts := startSim(t, Options{Seed: 21})
	assignRule := ts.create(expBody("Assign rule"))
	ts.setPostRule(assignRule.ID, "assign", "variant")
	cont := ts.create(expBody("Continue rule", func(m map[string]any) {
		m["partitions"] = []any{dp("d", site, "analyzing_step_functions", false)}
	}))
	toDefault := ts.create(expBody("Assign default", func(m map[string]any) {
		m["context"] = []any{"mathstream"}
		m["conditions"] = []any{cond("x", "question-hint-default", 50, 1), cond("y", "question-hint-tutorbot", 50, 2)}
		m["partitions"] = []any{dp("p", "lesson-stream", "question-hint", false)}
	}))
	ts.setPostRule(toDefault.ID, "assign", "")
	for _, e := range []upgrade.Experiment{assignRule, cont, toDefault} {
		ts.setState(e.ID, "enrolling")
	}
	// Marked users are enrolled; the "drop" users were assigned only.
	before := map[string]string{}
	for _, u := range users("pre", 20) {
		ts.initUser(u, nil, nil)
		before[u] = codeAt(t, ts.assign(u, ctx), site, "analyzing_step_functions")
		ts.mark(u, site, target, "", assignRule.ID, "condition applied")
		ts.mark(u, site, "analyzing_step_functions", "", cont.ID, "condition applied")
		ts.mark(u, "lesson-stream", "question-hint", "", toDefault.ID, "condition applied")
	}
	for _, u := range users("drop", 5) {
		ts.initUser(u, nil, nil)
		ts.assign(u, ctx)
	}
	for _, e := range []upgrade.Experiment{assignRule, cont, toDefault} {
		ts.setState(e.ID, "enrollmentComplete")
	}
	for _, u := range users("pre", 20) {
		as := ts.assign(u, ctx)
		if got := codeAt(t, as, site, target); got != "variant" {
			t.Errorf("%s: post rule assign gave %q, want variant", u, got)
		}
		if got := codeAt(t, as, site, "analyzing_step_functions"); got != before[u] {
			t.Errorf("%s: post rule continue gave %q, had %q", u, got, before[u])
		}
		if as := ts.assign(u, "mathstream"); len(as) != 0 {
			t.Errorf("%s: post rule assign to the default gave %+v", u, as)
		}
	}
	// Assigned but never marked: nothing under either rule, like a newcomer.
	ts.initUser("newcomer", nil, nil)
	for _, u := range append(users("drop", 5), "newcomer") {
		if as := ts.assign(u, ctx); len(as) != 0 {
			t.Errorf("%s (never marked) got %+v after enrollment complete", u, as)
		}
	}
	// Cancelled and archived experiments hand out nothing.
	ts.setState(assignRule.ID, "cancelled")
	ts.setState(cont.ID, "archived")
	if as := ts.assign("pre0000", ctx); len(as) != 0 {
		t.Errorf("cancelled/archived gave %+v", as)
	}
}

func TestMarkConditionNotAppliedExcludes(t *testing.T) {
	ts := startSim(t, Options{Seed: 2})
	e := ts.create(expBody("Marks"))
	ts.setState(e.ID, "enrolling")
	ts.initUser("m1", nil, nil)
	code := codeAt(t, ts.assign("m1", ctx), site, target)
	var got upgrade.MarkResponse
	ts.mark("m1", site, target, code, e.ID, "condition not applied").decode(t, &got)
	want := upgrade.MarkResponse{ID: got.ID, UserID: "m1", Site: site, Target: target, ExperimentID: e.ID, Condition: code}
	if diff := cmp.Diff(want, got); diff != "" || !uuidV4.MatchString(got.ID) {
		t.Errorf("mark answer (-want +got):\n%s", diff)
	}
	if as := ts.assign("m1", ctx); len(as) != 0 {
		t.Errorf("user marked 'condition not applied' still gets %+v", as)
	}
	// The mark row is kept per user+site+target.
	var again upgrade.MarkResponse
	ts.mark("m1", site, target, code, e.ID, "condition applied").decode(t, &again)
	if again.ID != got.ID {
		t.Errorf("second mark has id %s, first %s", again.ID, got.ID)
	}
	// Errors the server gives for marks.
	if r := ts.do("POST", "/v6/mark", map[string]any{"data": map[string]any{"site": site, "target": target,
		"assignedCondition": map[string]any{"conditionCode": "nope"}}}, "User-Id", "m1"); r.status != 500 {
		t.Errorf("mark with an unknown condition: %d", r.status)
	}
	if r := ts.do("POST", "/v6/mark", map[string]any{"data": map[string]any{"site": site, "target": target,
		"assignedCondition": map[string]any{"experimentId": "3f0b6a55-1c7e-4c1e-9a53-2b8f0f7d9c11"}}}, "User-Id", "m1"); r.status != 404 {
		t.Errorf("mark with a foreign experiment id: %d", r.status)
	}
	if r := ts.do("POST", "/v6/mark", map[string]any{"data": map[string]any{"target": target}}, "User-Id", "m1"); r.status != 400 {
		t.Errorf("mark without site: %d", r.status)
	}
	if r := ts.do("POST", "/v6/mark", map[string]any{"data": map[string]any{"site": site}, "status": "done"}, "User-Id", "m1"); r.status != 400 {
		t.Errorf("mark with a bad status: %d", r.status)
	}
}

func TestSharedDecisionPointAssignsOneExperiment(t *testing.T) {
	ts := startSim(t, Options{Seed: 13})
	a := ts.create(expBody("Shared A"))
	b := ts.create(expBody("Shared B"))
	ts.setState(a.ID, "enrolling")
	ts.setState(b.ID, "enrolling")
	per := map[string]int{}
	for _, u := range users("sh", 200) {
		ts.initUser(u, nil, nil)
		as := ts.assign(u, ctx)
		if len(as) != 1 {
			t.Fatalf("%s got %d entries for one decision point: %+v", u, len(as), as)
		}
		first := as[0].AssignedCondition[0]
		per[first.ExperimentID]++
		for i := 0; i < 3; i++ {
			again := ts.assign(u, ctx)
			if len(again) != 1 || again[0].AssignedCondition[0] != first {
				t.Fatalf("%s: pick not kept: %+v then %+v", u, first, again)
			}
		}
	}
	if per[a.ID] < 60 || per[b.ID] < 60 {
		t.Errorf("users per experiment %v: the pick should be random", per)
	}
}

func TestEnrollmentStatsFromMarks(t *testing.T) {
	ts := startSim(t, Options{Seed: 17})
	e := ts.create(expBody("Stats", func(m map[string]any) {
		m["conditions"] = []any{cond("cond-a", "control", 100, 1), cond("cond-b", "variant", 0, 2)}
		m["partitions"] = []any{dp("d1", site, target, false), dp("d2", site, "analyzing_step_functions", false)}
	}))
	ts.setState(e.ID, "enrolling")
	control, variant := e.ConditionByCode("control").ID, e.ConditionByCode("variant").ID
	// Everyone is drawn control. u1, u2 mark both points; u3 marks d1
	// claiming variant (counted as control: stats count the condition
	// assigned); u4 assigned but never marked; u5 marks not applied.
	marks := []struct{ user, code, target, status string }{
		{"u1", "control", target, "condition applied"},
		{"u1", "control", "analyzing_step_functions", "condition applied"},
		{"u2", "control", target, "condition applied"},
		{"u2", "control", "analyzing_step_functions", "condition applied"},
		{"u3", "variant", target, "condition applied"},
		{"u5", "variant", target, "condition not applied"},
	}
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5"} {
		ts.initUser(u, nil, nil)
		ts.assign(u, ctx)
	}
	for _, m := range marks {
		ts.mark(m.user, site, m.target, m.code, e.ID, m.status)
	}
	var got upgrade.EnrollmentStats
	ts.must("POST", "/stats/enrollment/detail", map[string]any{"experimentId": e.ID}).decode(t, &got)
	d1, d2 := e.Partitions[0].ID, e.Partitions[1].ID
	want := upgrade.EnrollmentStats{ID: e.ID, Users: 3, UsersExcluded: 1, Conditions: []upgrade.ConditionStats{
		{ID: control, Users: 3, Partitions: []upgrade.PartitionStats{{ID: d1, Users: 3}, {ID: d2, Users: 2}}},
		{ID: variant, Users: 0, Partitions: []upgrade.PartitionStats{{ID: d1}, {ID: d2}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	r := ts.do("POST", "/stats/enrollment/detail", map[string]any{"experimentId": "3f0b6a55-1c7e-4c1e-9a53-2b8f0f7d9c11"})
	if se := r.object(t); r.status != 500 || se["name"] != "TypeError" {
		t.Errorf("stats of an unknown experiment: %d %s", r.status, r.body)
	}
	r = ts.do("POST", "/stats/enrollment/detail", map[string]any{"experimentId": "xyz"})
	if se := r.object(t); r.status != 500 || se["name"] != "QueryFailedError" {
		t.Errorf("stats of a non-UUID: %d %s", r.status, r.body)
	}
}

func TestGroupStatsCountGroups(t *testing.T) {
	ts := startSim(t, Options{Seed: 17})
	e := ts.create(groupExp("Group stats"))
	ts.setState(e.ID, "enrolling")
	for _, u := range []struct{ id, class string }{{"g1", "A"}, {"g2", "A"}, {"g3", "B"}} {
		ts.initUser(u.id, map[string][]string{"classId": {u.class}}, map[string]string{"classId": u.class})
		code := codeAt(t, ts.assign(u.id, ctx), site, target)
		ts.mark(u.id, site, target, code, e.ID, "condition applied")
	}
	st, err := ts.srv.Sim().EnrollmentStats(e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Users != 3 || st.Groups != 2 {
		t.Errorf("users %d groups %d, want 3 and 2", st.Users, st.Groups)
	}
}

func TestEnrollmentCompleteCondition(t *testing.T) {
	ts := startSim(t, Options{Seed: 1})
	e := ts.create(expBody("Ends itself", func(m map[string]any) {
		m["enrollmentCompleteCondition"] = map[string]any{"userCount": 2, "groupCount": 0}
	}))
	ts.setState(e.ID, "enrolling")
	for _, u := range []string{"x1", "x2"} {
		ts.initUser(u, nil, nil)
		code := codeAt(t, ts.assign(u, ctx), site, target)
		ts.mark(u, site, target, code, e.ID, "condition applied")
	}
	got, _ := ts.srv.Sim().Experiment(e.ID)
	if got.State != upgrade.StateEnrollmentComplete {
		t.Errorf("state after 2 enrollments = %s", got.State)
	}
}

func TestConcurrentAssign(t *testing.T) {
	ts := startSim(t, Options{Seed: 99})
	e := ts.create(expBody("Busy"))
	g := ts.create(groupExp("Busy groups", func(m map[string]any) {
		m["partitions"] = []any{dp("d", site, "analyzing_step_functions", false)}
	}))
	ts.setState(e.ID, "enrolling")
	ts.setState(g.ID, "enrolling")
	const workers, perWorker = 32, 20
	type result struct {
		user, class string
		as          []upgrade.Assignment
		err         error
	}
	results := make(chan result, workers*perWorker*2)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				u := fmt.Sprintf("c%02d-%02d", w, i)
				class := fmt.Sprintf("class%d", (w+i)%5)
				init := map[string]any{"group": map[string][]string{"classId": {class}}, "workingGroup": map[string]string{"classId": class}}
				if err := post(ts, "/v6/init", u, init, nil); err != nil {
					results <- result{user: u, err: err}
					return
				}
				for k := 0; k < 2; k++ {
					var as []upgrade.Assignment
					err := post(ts, "/v6/assign", u, map[string]any{"context": ctx}, &as)
					results <- result{user: u, class: class, as: as, err: err}
				}
			}
		}(w)
	}
	wg.Wait()
	close(results)
	ind, grp, n := map[string]string{}, map[string]string{}, 0
	for r := range results {
		n++
		if r.err != nil {
			t.Fatalf("%s: %v", r.user, r.err)
		}
		ic, gc := codeAt(t, r.as, site, target), codeAt(t, r.as, site, "analyzing_step_functions")
		if ic == "" || gc == "" {
			t.Fatalf("%s got no condition: %+v", r.user, r.as)
		}
		if prev, ok := ind[r.user]; ok && prev != ic {
			t.Errorf("%s changed condition %s -> %s", r.user, prev, ic)
		}
		ind[r.user] = ic
		if prev, ok := grp[r.class]; ok && prev != gc {
			t.Errorf("%s of %s got %s, the class has %s", r.user, r.class, gc, prev)
		}
		grp[r.class] = gc
	}
	if n != workers*perWorker*2 || len(ind) != workers*perWorker {
		t.Errorf("%d answers for %d users", n, len(ind))
	}
}
