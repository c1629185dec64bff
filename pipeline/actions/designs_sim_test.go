package actions

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func parseAs[P Params](t *testing.T, action Name, raw string) P {
	t.Helper()
	p, err := Parse(string(action), json.RawMessage(raw))
	if err != nil {
		t.Fatalf("%s: %v", action, err)
	}
	return p.(P)
}

func TestFactorialCanonicalFoldsHabits(t *testing.T) {
	p := parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":" Hints 2x2 ","context":"assign-prog","design":"2x2 Factorial",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],
		"factors":{"Color":["Red"," Blue "],"Shape":{"levels":[{"name":"Circle","payload":"c"},"Square"]}}}`)
	b := mustBound(p)
	d := b.Typed().(CreateExperimentParams)
	if d.Design != DesignFactorial {
		t.Fatalf("design %q", d.Design)
	}
	var codes []string
	for _, c := range d.Conditions {
		codes = append(codes, c.Code+" "+fmtWeight(c.Weight))
	}
	want := []string{"Color=Red; Shape=Circle 25", "Color=Red; Shape=Square 25", "Color=Blue; Shape=Circle 25", "Color=Blue; Shape=Square 25"}
	if diff := cmp.Diff(want, codes); diff != "" {
		t.Fatalf("conditions (-want +got):\n%s", diff)
	}
	// Weights given per combination, written another way, are matched.
	p = parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"x","context":"assign-prog","factors":{"A":["a1","a2"],"B":["b1","b2"]},
		"conditions":{"a1_b1":40,"A=a1; B=b2":10,"a2 b1":25,"A2/B2":25}}`)
	d = mustBound(p).Typed().(CreateExperimentParams)
	if d.Design != DesignFactorial || len(d.Conditions) != 4 || *d.Conditions[0].Weight != 40 || *d.Conditions[1].Weight != 10 {
		t.Fatalf("matched weights: %+v", d.Conditions)
	}
}

func TestDesignValidation(t *testing.T) {
	api := startSim(t, "6.5.0")
	dp := `"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}]`
	cases := []struct {
		name, params string
		fields       []string
	}{
		{"one factor", `{"design":"factorial","factors":[{"name":"Color","levels":["Red","Blue"]}]}`, []string{"factors"}},
		{"one level", `{"factors":{"Color":["Red","Blue"],"Shape":["Circle"]}}`, []string{"factors[1].levels"}},
		{"duplicate level", `{"factors":{"Color":["Red","red"],"Shape":["Circle","Square"]}}`, []string{"factors[0].levels[1].name"}},
		{"separator in a name", `{"factors":{"Color":["Red=1","Blue"],"Shape":["Circle","Square"]}}`, []string{"factors[0].levels[0].name"}},
		{"unknown combination", `{"design":"factorial","factors":{"A":["a1","a2"],"B":["b1","b2"]},"conditions":{"x":100}}`, []string{"conditions[0].weight", "conditions[1].weight", "conditions[2].weight", "conditions[3].weight", "conditions[4].code"}},
		{"factors on a simple design", `{"design":"simple","factors":{"A":["a1","a2"],"B":["b1","b2"]},"conditions":{"control":50,"variant":50}}`, []string{"factors"}},
		{"unknown design", `{"design":"crossover","conditions":{"control":50,"variant":50}}`, []string{"design"}},
		{"within-subjects without order", `{"assignment_unit":"Within Subjects","conditions":{"control":50,"variant":50}}`, []string{"condition_order"}},
		{"within-subjects with a group type", `{"assignment_unit":"within-subjects","condition_order":"random","group_type":"classId","conditions":{"control":50,"variant":50}}`, []string{"group_type"}},
		{"order without within-subjects", `{"condition_order":"random","conditions":{"control":50,"variant":50}}`, []string{"condition_order"}},
		{"unknown order", `{"assignment_unit":"within-subjects","condition_order":"zigzag","conditions":{"control":50,"variant":50}}`, []string{"condition_order"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := `{"name":"Design ` + tc.name + `","context":"assign-prog",` + dp + `,` + strings.TrimPrefix(tc.params, "{")
			p := parseAs[CreateExperimentParams](t, CreateExperiment, raw)
			probs, err := Validate(context.Background(), api, p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pr := range probs {
				got = append(got, pr.Field)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.fields, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s\nproblems: %+v", diff, probs)
			}
		})
	}
}

func TestFactorialOnSimulator(t *testing.T) {
	api := startSim(t, "6.5.0")
	ctx := context.Background()
	p := parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Hints 2x2","context":"assign-prog","design":"factorial",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],
		"factors":[{"name":"Color","levels":[{"name":"Red","payload":"#f00"},{"name":"Blue"}]},{"name":"Shape","levels":["Circle","Square"]}]}`)
	plan, raw := run(t, api, p)
	if !strings.Contains(plan.Message, "Design: factorial, 2 factors:") || !strings.Contains(plan.Message, `Color (Red [payload "#f00"], Blue)`) {
		t.Errorf("plan names no factors:\n%s", plan.Message)
	}
	created := decode[ExperimentResult](t, raw)
	e, err := api.Experiment(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != upgrade.TypeFactorial || len(e.Factors) != 2 || len(e.Conditions) != 4 {
		t.Fatalf("stored: type %s, %d factors, %d conditions", e.Type, len(e.Factors), len(e.Conditions))
	}
	for _, c := range e.Conditions {
		if len(c.LevelCombinationElements) != 2 {
			t.Errorf("condition %s has %d levels", c.ConditionCode, len(c.LevelCombinationElements))
		}
	}
	// An update (the GET read back has null level payloads) goes through.
	u := parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+e.ID+`","description":"colour and shape"}`)
	run(t, api, u)
	// Changing the factors remakes the conditions, keeping the level ids.
	u = parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+e.ID+`","factors":{"Color":["Red","Blue","Green"],"Shape":["Circle","Square"]}}`)
	plan, _ = run(t, api, u)
	if !strings.Contains(plan.Message, "factors: Color (Red [payload \"#f00\"], Blue); Shape (Circle, Square) -> Color (Red, Blue, Green); Shape (Circle, Square)") {
		t.Errorf("update plan:\n%s", plan.Message)
	}
	e2, err := api.Experiment(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(e2.Conditions) != 6 || e2.Factors[0].Levels[0].ID != e.Factors[0].Levels[0].ID {
		t.Fatalf("after update: %d conditions, level ids %s / %s", len(e2.Conditions), e2.Factors[0].Levels[0].ID, e.Factors[0].Levels[0].ID)
	}
	run(t, api, UpdateExperimentStatusParams{ExperimentID: e.ID, Status: "enrolling"})
	for _, uid := range []string{"f1", "f2", "f3", "f4", "f5", "f6"} {
		v := VisitDecisionPointParams{UserID: uid, Context: "assign-prog", Site: "SelectSection", Target: "absolute_value_plot_equality"}
		_, raw := run(t, api, v)
		r := decode[visitResult](t, raw)
		if r.Assigned == nil || e2.ConditionByCode(r.Assigned.ConditionCode) == nil {
			t.Fatalf("%s: visit marked %+v, not a stored code", uid, r.Assigned)
		}
	}
	st, err := api.EnrollmentStats(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Users != 6 {
		t.Errorf("enrolled %d, want 6", st.Users)
	}
}

func TestWithinSubjectsOnSimulator(t *testing.T) {
	api := startSim(t, "6.5.0")
	ctx := context.Background()
	p := parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Practice order","context":"assign-prog",
		"assignment_unit":"within subjects","condition_order":"Ordered Round Robin",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],
		"conditions":{"control":50,"variant":50}}`)
	plan, raw := run(t, api, p)
	if !strings.Contains(plan.Message, "within-subjects (every user gets every condition in turn, condition order ordered round robin)") {
		t.Errorf("plan:\n%s", plan.Message)
	}
	id := decode[ExperimentResult](t, raw).ID
	e, err := api.Experiment(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if e.AssignmentUnit != upgrade.UnitWithinSubjects || e.ConditionOrder != upgrade.OrderOrderedRoundRobin {
		t.Fatalf("stored unit %s order %q", e.AssignmentUnit, e.ConditionOrder)
	}
	run(t, api, UpdateExperimentStatusParams{ExperimentID: id, Status: "enrolling"})
	var seen []string
	for range 3 {
		v := VisitDecisionPointParams{UserID: "w1", Context: "assign-prog", Site: "SelectSection", Target: "absolute_value_plot_equality"}
		_, raw := run(t, api, v)
		seen = append(seen, decode[visitResult](t, raw).Assigned.ConditionCode)
	}
	if diff := cmp.Diff([]string{"control", "variant", "control"}, seen); diff != "" {
		t.Errorf("rotation (-want +got):\n%s", diff)
	}
	st, err := api.EnrollmentStats(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Conditions {
		if c.Users != 1 {
			t.Errorf("condition %s counts %d users, want 1 (a user counts in every condition marked)", c.ID, c.Users)
		}
	}
}

// TestWebUIDesignsOnSimulator: experiments made outside the agent (a
// one-factor factorial whose assign code is a payload object, stored codes
// of its own; a within-subjects experiment without consistency rule) are
// visited and updated.
func TestWebUIDesignsOnSimulator(t *testing.T) {
	api := startSim(t, "6.5.0")
	ctx := context.Background()
	on, off := upgrade.NewID(), upgrade.NewID()
	val := "hint-on"
	one := &upgrade.Experiment{Name: "One Factor", Context: []string{"assign-prog"}, State: upgrade.StateInactive, Type: upgrade.TypeFactorial,
		AssignmentUnit: upgrade.UnitIndividual, ConsistencyRule: upgrade.ConsistencyIndividual, PostExperimentRule: upgrade.PostRuleContinue,
		FilterMode: upgrade.FilterIncludeAll, AssignmentAlgorithm: upgrade.AlgorithmRandom,
		Factors: []upgrade.Factor{{Name: "Hint", Order: 1, Levels: []upgrade.Level{
			{ID: on, Name: "On", Order: 1, Payload: &upgrade.LevelPayload{Type: "string", Value: &val}}, {ID: off, Name: "Off", Order: 2}}}},
		Conditions: []upgrade.Condition{
			{ID: upgrade.NewID(), ConditionCode: "hints-on", AssignmentWeight: 100, Order: 1, LevelCombinationElements: []upgrade.LevelCombinationElement{{ID: upgrade.NewID(), Level: upgrade.LevelRef{ID: on, Name: "On"}}}},
			{ID: upgrade.NewID(), ConditionCode: "hints-off", AssignmentWeight: 0, Order: 2, LevelCombinationElements: []upgrade.LevelCombinationElement{{ID: upgrade.NewID(), Level: upgrade.LevelRef{ID: off, Name: "Off"}}}},
		},
		Partitions: []upgrade.DecisionPoint{{ID: upgrade.NewID(), Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1}}}
	made, err := api.CreateExperiment(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	run(t, api, UpdateExperimentStatusParams{ExperimentID: made.ID, Status: "enrolling"})
	_, raw := run(t, api, VisitDecisionPointParams{UserID: "o1", Context: "assign-prog", Site: "SelectSection", Target: "absolute_value_plot_equality"})
	if r := decode[visitResult](t, raw); r.Assigned == nil || r.Assigned.ConditionCode != "hints-on" {
		t.Fatalf("one-factor visit marked %+v, want the stored code hints-on", r.Assigned)
	}
	run(t, api, UpdateExperimentParams{ExperimentID: made.ID, Description: ptr("one factor")})

	ws := &upgrade.Experiment{Name: "UI Within", Context: []string{"assign-prog"}, State: upgrade.StateInactive, Type: upgrade.TypeSimple,
		AssignmentUnit: upgrade.UnitWithinSubjects, ConditionOrder: upgrade.OrderRandom, PostExperimentRule: upgrade.PostRuleContinue,
		FilterMode: upgrade.FilterIncludeAll, AssignmentAlgorithm: upgrade.AlgorithmRandom,
		Conditions: []upgrade.Condition{{ID: upgrade.NewID(), ConditionCode: "control", AssignmentWeight: 50, Order: 1},
			{ID: upgrade.NewID(), ConditionCode: "variant", AssignmentWeight: 50, Order: 2}},
		Partitions: []upgrade.DecisionPoint{{ID: upgrade.NewID(), Site: "SelectSection", Target: "analyzing_step_functions", Order: 1}}}
	made, err = api.CreateExperiment(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	run(t, api, UpdateExperimentParams{ExperimentID: made.ID, Description: ptr("made in the web UI")})
}

func TestUpdateDesignParam(t *testing.T) {
	api := startSim(t, "6.5.0")
	p := parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Plain","context":"assign-prog",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`)
	_, raw := run(t, api, p)
	id := decode[ExperimentResult](t, raw).ID
	u := parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`","design":"2x2"}`)
	probs, err := Validate(context.Background(), api, u)
	if err != nil || len(probs) != 1 || probs[0].Field != "factors" || !strings.Contains(probs[0].Message, "a switch to design factorial needs factors") {
		t.Fatalf("simple -> factorial without factors: %v %v", probs, err)
	}
	u = parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`","design":"Simple","description":"same design"}`)
	run(t, api, u)
}
