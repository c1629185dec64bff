package actions

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func mustExecute(t *testing.T, api API, p Params) json.RawMessage {
	t.Helper()
	raw, err := Execute(context.Background(), api, p)
	if err != nil {
		t.Fatalf("Execute(%s): %v", p.Action(), err)
	}
	return raw
}

// mustExecuteKey executes p as the confirmation key would.
func mustExecuteKey(t *testing.T, api API, p Params, key string) json.RawMessage {
	t.Helper()
	out, err := mustBound(p).Execute(context.Background(), Env{API: api}, key)
	if err != nil {
		t.Fatalf("Execute(%s): %v", p.Action(), err)
	}
	return out.Result
}

func decode[T any](t testing.TB, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return v
}

func TestExecuteCreate(t *testing.T) {
	for _, replace := range []bool{false, true} {
		f := newFake()
		f.replaceIDs = replace
		p := planCases()[1].p.(CreateExperimentParams) // create_full
		res := decode[ExperimentResult](t, mustExecute(t, f, p))
		stored := f.get(res.ID)
		if stored == nil {
			t.Fatalf("experiment %s not stored", res.ID)
		}
		want := ExperimentResult{ID: stored.ID, Name: "Class Hints 2", Context: "assign-prog", State: upgrade.StateInactive,
			Conditions: []ConditionResult{
				{ID: stored.Conditions[0].ID, Code: "control", Weight: 33.33},
				{ID: stored.Conditions[1].ID, Code: "variant", Weight: 66.67},
			},
			DecisionPoints: []DecisionPointResult{
				{ID: stored.Partitions[0].ID, Site: "SelectSection", Target: "absolute_value_plot_equality", ExcludeIfReached: true},
				{ID: stored.Partitions[1].ID, Site: "SelectSection", Target: "analyzing_step_functions"},
			},
			PostExperimentRule: "assign variant",
		}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("replaceIDs=%v: result (-want +got):\n%s", replace, diff)
		}
		if stored.RevertTo == nil || *stored.RevertTo != stored.Conditions[1].ID {
			t.Errorf("replaceIDs=%v: revertTo = %v, want the id of variant %s", replace, stored.RevertTo, stored.Conditions[1].ID)
		}
		// The post rule needs a second write only when the server replaced ids.
		wantUpdates := 0
		if replace {
			wantUpdates = 1
		}
		if got := f.count("UpdateExperiment"); got != wantUpdates {
			t.Errorf("replaceIDs=%v: %d updates after create, want %d", replace, got, wantUpdates)
		}
		if f.count("CreateExperiment") != 1 {
			t.Errorf("%d creates", f.count("CreateExperiment"))
		}
		check := []struct{ got, want any }{
			{stored.Type, "Simple"}, {stored.AssignmentAlgorithm, "random"}, {stored.AssignmentUnit, "group"},
			{stored.Group, "classId"}, {stored.ConsistencyRule, "group"}, {stored.PostExperimentRule, "assign"},
			{stored.FilterMode, "excludeAll"}, {stored.Description, p.Description},
		}
		for _, c := range check {
			if c.got != c.want {
				t.Errorf("stored %v, want %v", c.got, c.want)
			}
		}
		if diff := cmp.Diff(upgrade.Segment{Users: []string{"student-1", "student 2"}, Groups: []upgrade.GroupRef{{Type: "schoolId", GroupID: "school-7"}}}, stored.Inclusion); diff != "" {
			t.Errorf("inclusion (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(upgrade.Segment{Users: []string{"student-9"}, Groups: []upgrade.GroupRef{{Type: "classId", GroupID: "c-13"}}}, stored.Exclusion); diff != "" {
			t.Errorf("exclusion (-want +got):\n%s", diff)
		}
	}
}

func TestExecuteCreateDefaults(t *testing.T) {
	f := newFake()
	res := decode[ExperimentResult](t, mustExecute(t, f, validCreate()))
	e := f.get(res.ID)
	got := []string{e.AssignmentUnit, e.ConsistencyRule, e.PostExperimentRule, e.FilterMode, string(e.State), e.Type, e.AssignmentAlgorithm, e.Group}
	want := []string{"individual", "individual", "continue", "includeAll", "inactive", "Simple", "random", ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if e.RevertTo != nil || e.Tags == nil {
		t.Errorf("revertTo %v, tags %v", e.RevertTo, e.Tags)
	}
	for _, c := range e.Conditions {
		if !upgrade.IsUUID(c.ID) {
			t.Errorf("condition id %q is not a UUID", c.ID)
		}
	}
}

func TestExecuteUpdateKeepsIDs(t *testing.T) {
	f := seeded()
	before := f.get(mathHintsID)
	p := UpdateExperimentParams{ExperimentID: mathHintsID,
		// variant kept (moved first), control dropped, a new code added.
		Conditions: &[]ConditionParam{{Code: "variant", Weight: ptr(60.0)}, {Code: "control2", Weight: ptr(40.0)}},
		DecisionPoints: &[]DecisionPointParam{
			{Site: "SelectSection", Target: "analyzing_step_functions"},
			{Site: "SelectSection", Target: "absolute_value_plot_equality", ExcludeIfReached: true},
		},
		PostExperimentRule: &PostRuleParam{Rule: "assign", ConditionCode: "control2"},
	}
	res := decode[ExperimentResult](t, mustExecute(t, f, p))
	e := f.get(mathHintsID)
	if res.ID != mathHintsID {
		t.Fatalf("result id %s", res.ID)
	}
	variantID := before.ConditionByCode("variant").ID
	if got := e.ConditionByCode("variant"); got == nil || got.ID != variantID || got.AssignmentWeight != 60 || got.Order != 1 || got.TwoCharacterID != "VA" {
		t.Errorf("variant = %+v, want id %s weight 60 order 1, other fields kept", got, variantID)
	}
	newCond := e.ConditionByCode("control2")
	if newCond == nil || !upgrade.IsUUID(newCond.ID) || newCond.ID == before.ConditionByCode("control").ID {
		t.Errorf("new condition = %+v, want a fresh UUID", newCond)
	}
	if e.ConditionByCode("control") != nil {
		t.Error("control was not removed")
	}
	oldDP := before.Partitions[0]
	var kept, added *upgrade.DecisionPoint
	for i := range e.Partitions {
		switch e.Partitions[i].Target {
		case oldDP.Target:
			kept = &e.Partitions[i]
		case "analyzing_step_functions":
			added = &e.Partitions[i]
		}
	}
	if kept == nil || kept.ID != oldDP.ID || !kept.ExcludeIfReached || kept.Order != 2 {
		t.Errorf("kept decision point = %+v, want id %s, exclude if reached, order 2", kept, oldDP.ID)
	}
	if added == nil || !upgrade.IsUUID(added.ID) || added.ID == oldDP.ID || added.Order != 1 {
		t.Errorf("added decision point = %+v", added)
	}
	if e.RevertTo == nil || *e.RevertTo != newCond.ID {
		t.Errorf("revertTo = %v, want %s", e.RevertTo, newCond.ID)
	}
	// The payload of the removed condition is dropped, variant's stays linked.
	if len(e.ConditionPayloads) != 1 || decode[map[string]any](t, e.ConditionPayloads[0])["parentCondition"] != variantID {
		t.Errorf("payloads = %s", e.ConditionPayloads)
	}
	// Fields not named are kept.
	if e.Description != before.Description || e.Name != before.Name || e.CreatedAt != before.CreatedAt ||
		!cmp.Equal(e.Exclusion, before.Exclusion) || !cmp.Equal(e.Tags, before.Tags) || e.State != before.State {
		t.Errorf("unnamed fields changed:\nbefore %+v\nafter  %+v", before, e)
	}
}

func TestExecuteUpdateFilterMode(t *testing.T) {
	f := seeded()
	// excludeAll with an inclusion list, then back to includeAll: the
	// inclusion segment is rebuilt empty.
	mustExecute(t, f, UpdateExperimentParams{ExperimentID: mathHintsID, FilterMode: ptr("excludeAll"),
		InclusionUsers: &[]string{"s1"}, InclusionGroups: &[]GroupParam{{Type: "classId", GroupID: "c1"}}})
	e := f.get(mathHintsID)
	if e.FilterMode != "excludeAll" || !cmp.Equal(e.Inclusion.Users, []string{"s1"}) || len(e.Inclusion.Groups) != 1 {
		t.Fatalf("after excludeAll: %s %+v", e.FilterMode, e.Inclusion)
	}
	mustExecute(t, f, UpdateExperimentParams{ExperimentID: mathHintsID, FilterMode: ptr("includeAll")})
	e = f.get(mathHintsID)
	if e.FilterMode != "includeAll" || !e.Inclusion.Empty() {
		t.Errorf("after includeAll: %s %+v", e.FilterMode, e.Inclusion)
	}
	if !cmp.Equal(e.Exclusion.Users, []string{"student-9"}) {
		t.Errorf("exclusion changed: %+v", e.Exclusion)
	}
}

func TestExecuteUpdateUnitToIndividualDropsGroup(t *testing.T) {
	f := seeded()
	mustExecute(t, f, UpdateExperimentParams{ExperimentID: groupExpID, AssignmentUnit: ptr("individual"), ConsistencyRule: ptr("individual")})
	e := f.get(groupExpID)
	if e.AssignmentUnit != "individual" || e.Group != "" || e.ConsistencyRule != "individual" {
		t.Errorf("unit %s group %q consistency %s", e.AssignmentUnit, e.Group, e.ConsistencyRule)
	}
	if e.RevertTo == nil || *e.RevertTo != "c1d2c3b4-0000-4000-8000-000000000002" {
		t.Errorf("revertTo = %v, want the variant id kept", e.RevertTo)
	}
}

func TestExecuteStatusDeleteUsers(t *testing.T) {
	ctx := context.Background()
	f := seeded()

	got := string(mustExecute(t, f, UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "running"}))
	want := `{"id":"` + mathHintsID + `","name":"Math Hints","previous_state":"inactive","state":"enrolling"}`
	if got != want {
		t.Errorf("status result %s\nwant %s", got, want)
	}
	if f.get(mathHintsID).State != upgrade.StateEnrolling {
		t.Error("state not changed")
	}

	got = string(mustExecute(t, f, InitExperimentUserParams{UserID: "s1", Group: map[string][]string{"classId": {"c1", "c2"}}, WorkingGroup: map[string]string{"classId": "c2"}}))
	want = `{"user_id":"s1","group":{"classId":["c1","c2"]},"working_group":{"classId":"c2"}}`
	if got != want {
		t.Errorf("init result %s\nwant %s", got, want)
	}

	asg := decode[struct {
		UserID      string             `json:"user_id"`
		Assignments []AssignmentResult `json:"assignments"`
	}](t, mustExecute(t, f, GetDecisionPointAssignmentsParams{UserID: "s1", Context: "assign-prog"}))
	if len(asg.Assignments) != 1 || asg.Assignments[0].ExperimentID != mathHintsID || asg.Assignments[0].Site != "SelectSection" {
		t.Fatalf("assignments = %+v", asg)
	}
	code := asg.Assignments[0].ConditionCode

	got = string(mustExecute(t, f, MarkDecisionPointParams{UserID: "s1",
		DecisionPoint:     SiteTarget{Site: "SelectSection", Target: "absolute_value_plot_equality"},
		AssignedCondition: &AssignedConditionParam{ConditionCode: code, ExperimentID: mathHintsID}}))
	want = `{"user_id":"s1","site":"SelectSection","target":"absolute_value_plot_equality","experiment_id":"` + mathHintsID +
		`","condition":"` + code + `","status":"condition applied","mark_id":"mark-1"}`
	if got != want {
		t.Errorf("mark result %s\nwant %s", got, want)
	}
	m := f.marks[0].Req
	if m.Data.AssignedCondition == nil || m.Data.AssignedCondition.ID != f.get(mathHintsID).ConditionByCode(code).ID {
		t.Errorf("mark sent %+v, want the condition id", m.Data.AssignedCondition)
	}

	got = string(mustExecute(t, f, MarkDecisionPointParams{UserID: "s2", DecisionPoint: SiteTarget{Site: "SelectSection"}}))
	want = `{"user_id":"s2","site":"SelectSection","target":"","status":"no condition assigned","mark_id":"mark-2"}`
	if got != want {
		t.Errorf("mark result %s\nwant %s", got, want)
	}

	vis := decode[visitResult](t, mustExecute(t, f, VisitDecisionPointParams{UserID: "s3", Context: "assign-prog", Site: "SelectSection", Target: "absolute_value_plot_equality"}))
	if vis.Assigned == nil || vis.Assigned.ExperimentID != mathHintsID || vis.Status != "condition applied" {
		t.Errorf("visit = %+v", vis)
	}
	last := f.marks[len(f.marks)-1]
	if last.UserID != "s3" || last.Req.Status != "condition applied" || last.Req.Data.AssignedCondition.ConditionCode != vis.Assigned.ConditionCode {
		t.Errorf("visit marked %+v", last)
	}
	vis = decode[visitResult](t, mustExecute(t, f, VisitDecisionPointParams{UserID: "s4", Context: "assign-prog", Site: "SelectSection", Target: "analyzing_step_functions"}))
	if vis.Assigned != nil || vis.Status != "no condition assigned" {
		t.Errorf("visit without an enrolling experiment = %+v", vis)
	}
	if _, ok := f.users["s4"]; !ok {
		t.Error("visit did not init the user")
	}

	got = string(mustExecute(t, f, DeleteExperimentParams{ExperimentID: mathHintsID}))
	want = `{"id":"` + mathHintsID + `","name":"Math Hints","deleted":true}`
	if got != want {
		t.Errorf("delete result %s\nwant %s", got, want)
	}
	if _, err := f.Experiment(ctx, mathHintsID); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("experiment still there: %v", err)
	}
}

func TestExecuteBalanceInline(t *testing.T) {
	f := seeded()
	res := decode[BalanceResult](t, mustExecute(t, f, BalanceParams{NumUsers: 200, Context: "mathstream", Site: "lesson-stream", Target: "question-hint", ExperimentID: streamExpID}))
	if res.Users != 200 || res.Assigned != 200 || res.ExperimentID != streamExpID || res.DF != 1 {
		t.Errorf("result = %+v", res)
	}
	if f.count("Init") != 200 || f.count("Mark") != 200 {
		t.Errorf("%d inits, %d marks", f.count("Init"), f.count("Mark"))
	}
}

func TestExecutePassesAPIErrors(t *testing.T) {
	refused := &upgrade.Error{Category: upgrade.CategoryValidation, Status: 400, Message: "Invalid body, check 'errors' property"}
	tests := []struct {
		method string
		p      Params
	}{
		{"CreateExperiment", validCreate()},
		{"UpdateExperiment", UpdateExperimentParams{ExperimentID: mathHintsID, Name: ptr("X")}},
		{"SetState", UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "enrolling"}},
		{"DeleteExperiment", DeleteExperimentParams{ExperimentID: mathHintsID}},
		{"Init", InitExperimentUserParams{UserID: "u"}},
		{"Assign", GetDecisionPointAssignmentsParams{UserID: "u", Context: "assign-prog"}},
		{"Mark", MarkDecisionPointParams{UserID: "u", DecisionPoint: SiteTarget{Site: "SelectSection"}}},
		{"Assign", VisitDecisionPointParams{UserID: "u", Context: "assign-prog", Site: "SelectSection", Target: "absolute_value_plot_equality"}},
	}
	for _, tt := range tests {
		f := seeded()
		f.errs[tt.method] = refused
		_, err := Execute(context.Background(), f, tt.p)
		if !errors.Is(err, refused) || upgrade.CategoryOf(err) != upgrade.CategoryValidation {
			t.Errorf("%s failing in %s: err = %v", tt.method, tt.p.Action(), err)
		}
	}
}
