package quality

import (
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The habits real models have with the design params of create_experiment
// and update_experiment (design, factors, assignment_unit within-subjects,
// condition_order) and with archiving: display names and other cases,
// "2x2" for factorial, levels as plain names, factors as one object,
// explicit defaults, "" and null for optional fields, one key per
// update_action_params call. Every case ends with the backend holding
// what was shown and approved.

// hasDesign: the experiment exists with that type, number of conditions,
// unit and condition order.
func hasDesign(name, typ string, conds int, unit, order string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		e := w.experiment(name)
		if e == nil {
			t.Errorf("backend: no experiment %q", name)
			return
		}
		if e.Type != typ || len(e.Conditions) != conds || e.AssignmentUnit != unit || e.ConditionOrder != order {
			t.Errorf("backend: %q is %s with %d conditions, unit %s, order %q; want %s, %d, %s, %q",
				name, e.Type, len(e.Conditions), e.AssignmentUnit, e.ConditionOrder, typ, conds, unit, order)
		}
		if typ == upgrade.TypeFactorial {
			for _, c := range e.Conditions {
				if len(c.LevelCombinationElements) != len(e.Factors) {
					t.Errorf("backend: condition %s has %d levels for %d factors", c.ConditionCode, len(c.LevelCombinationElements), len(e.Factors))
				}
			}
		}
	}
}

// inState: the experiment is in that state.
func inState(name string, st upgrade.State) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if e := w.experiment(name); e == nil || e.State != st {
			t.Errorf("backend: %q not in state %s (%v)", name, st, e)
		}
	}
}

const hintLook = `name: Hint Look, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}]`

func TestHabitDesigns(t *testing.T) {
	t.Parallel()
	factorial := hasDesign("Hint Look", upgrade.TypeFactorial, 4, upgrade.UnitIndividual, "")
	within := func(order string) check {
		return hasDesign("Practice Order", upgrade.TypeSimple, 2, upgrade.UnitWithinSubjects, order)
	}
	const practice = `name: Practice Order, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: {control: 50, variant: 50}`
	runBehaviour(t, []behaviourCase{
		{name: "factorial as a display name, factors as one object, levels as names", steps: []turnStep{
			request("Create a factorial Hint Look: Color Red/Blue by Shape Circle/Square.", "create_experiment",
				`{`+hintLook+`, design: Factorial, factors: {Color: [Red, Blue], Shape: [Circle, Square]}}`).
				expect(func(w *turnWant) {
					w.params = `{"design":"factorial","conditions":[{"code":"Color=Red; Shape=Circle","weight":25},{"code":"Color=Red; Shape=Square","weight":25},{"code":"Color=Blue; Shape=Circle","weight":25},{"code":"Color=Blue; Shape=Square","weight":25}]}`
				}),
			yes("create_experiment"),
		}, backend: []check{factorial}},
		{name: "2x2, explicit defaults, empty and null optional fields", steps: []turnStep{
			request("Create a 2x2 Hint Look.", "create_experiment",
				`{`+hintLook+`, design: " 2x2 ", assignment_unit: Individual, condition_order: "", group_type: null, conditions: null, tags: [], description: "",
				  factors: [{name: " Color ", levels: [{name: Red, payload: ""}, {name: Blue, payload: null}]}, {name: Shape, levels: [Circle, " Square "]}]}`).
				expect(func(w *turnWant) {
					w.params = `{"design":"factorial","assignment_unit":"individual","factors":[{"name":"Color","levels":[{"name":"Red"},{"name":"Blue"}]},{"name":"Shape","levels":[{"name":"Circle"},{"name":"Square"}]}]}`
				}),
			yes("create_experiment"),
		}, backend: []check{factorial}},
		{name: "factors without design, weights as strings per combination", steps: []turnStep{
			request("Create Hint Look with Color and Shape, 40% on red circles.", "create_experiment",
				`{`+hintLook+`, factors: {Color: [Red, Blue], Shape: [Circle, Square]}, conditions: {"red_circle": "40", "Red Square": "20", "blue/circle": "20", "Color=Blue; Shape=Square": "20"}}`).
				expect(func(w *turnWant) {
					w.params = `{"design":"factorial","conditions":[{"code":"Color=Red; Shape=Circle","weight":40},{"code":"Color=Red; Shape=Square","weight":20},{"code":"Color=Blue; Shape=Circle","weight":20},{"code":"Color=Blue; Shape=Square","weight":20}]}`
				}),
			yes("create_experiment"),
		}, backend: []check{factorial}},
		{name: "factorial key by key", steps: []turnStep{
			{say: "Create a factorial Hint Look.", llm: analyze + "- call: {set_action_needed: {action: create_experiment, reasoning: Key by key.}}\n" +
				updates(`{key: name, value: Hint Look}`) + updates(`{key: context, value: assign-prog}`) +
				updates(`{key: decision_points, value: [{site: SelectSection, target: absolute_value_plot_equality}]}`) +
				updates(`{key: design, value: factorial}`) + updates(`{key: factors, value: {Color: [Red, Blue], Shape: [Circle, Square]}}`) +
				"- reply: All parameters are set.\n" + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "create_experiment", params: `{"design":"factorial"}`, calls: 9}},
			yes("create_experiment"),
		}, backend: []check{factorial}},
		{name: "one factor is refused in Go", steps: []turnStep{
			{say: "Create a factorial Hint Look with Color only.",
				llm:  analyze + gather("create_experiment", `{`+hintLook+`, design: factorial, factors: {Color: [Red, Blue]}}`) + respond,
				want: turnWant{field: "factors", calls: 3}},
		}, backend: []check{noExp("Hint Look")}},
		{name: "factors changed on a factorial", steps: []turnStep{
			request("Create a factorial Hint Look.", "create_experiment", `{`+hintLook+`, design: factorial, factors: {Color: [Red, Blue], Shape: [Circle, Square]}}`),
			yes("create_experiment"),
			request("Add Green to the colors of Hint Look.", "update_experiment", `{experiment_id: Hint Look, factors: {Color: [Red, Blue, Green], Shape: [Circle, Square]}}`).
				expect(func(w *turnWant) {
					w.params = `{"factors":[{"name":"Color","levels":[{"name":"Red"},{"name":"Blue"},{"name":"Green"}]},{"name":"Shape","levels":[{"name":"Circle"},{"name":"Square"}]}]}`
				}),
			yes("update_experiment"),
		}, backend: []check{hasDesign("Hint Look", upgrade.TypeFactorial, 6, upgrade.UnitIndividual, "")}},
		{name: "within-subjects in display spellings with stray spaces", steps: []turnStep{
			request("Create Practice Order where every student sees both, in order.", "create_experiment",
				`{`+practice+`, assignment_unit: " Within Subjects ", condition_order: "Ordered Round Robin", group_type: "", consistency_rule: null}`).
				expect(func(w *turnWant) {
					w.params = `{"assignment_unit":"within-subjects","condition_order":"ordered round robin"}`
				}),
			yes("create_experiment"),
		}, backend: []check{within(upgrade.OrderOrderedRoundRobin)}},
		{name: "condition order with underscores, design simple", steps: []turnStep{
			request("Create Practice Order, within subjects, shuffled round robin.", "create_experiment",
				`{`+practice+`, design: simple, assignment_unit: within_subjects, condition_order: random_round_robin}`).
				expect(func(w *turnWant) {
					w.params = `{"assignment_unit":"within-subjects","condition_order":"random round robin"}`
				}),
			yes("create_experiment"),
		}, backend: []check{within(upgrade.OrderRandomRoundRobin)}},
		{name: "within-subjects without an order is asked for", steps: []turnStep{
			{say: "Create Practice Order within subjects.",
				llm: analyze + gather("create_experiment", `{`+practice+`, assignment_unit: within-subjects}`) +
					"- reply: In which order should each student get the conditions?\n" + respond,
				want: turnWant{calls: 4, seen: []string{`"missing":["condition_order"]`}}},
		}, backend: []check{noExp("Practice Order")}},
		{name: "condition order changed, display case, design given as it is", steps: []turnStep{
			request("Create Practice Order where every student sees both, in order.", "create_experiment",
				`{`+practice+`, assignment_unit: within-subjects, condition_order: ordered round robin}`),
			yes("create_experiment"),
			request("Make the order of Practice Order random.", "update_experiment", `{experiment_id: Practice Order, condition_order: " Random ", design: Simple, factors: null}`).
				expect(func(w *turnWant) { w.params = `{"condition_order":"random","design":""}` }),
			yes("update_experiment"),
		}, backend: []check{within(upgrade.OrderRandom)}},
		{name: "a switch to 2x2 without factors is asked for", steps: []turnStep{
			{say: "Make Math Hints a 2x2 factorial.",
				llm: analyze + gather("update_experiment", `{experiment_id: Math Hints, design: 2x2}`) +
					"- reply: Which factors and levels should Math Hints have?\n" + respond,
				want: turnWant{calls: 4, seen: []string{`"missing":["factors"]`}}},
		}, backend: []check{hasExp("Math Hints", upgrade.StateInactive, "control:50", "variant:50")}},
		{name: "simple to factorial, display case, stray spaces, levels as names", steps: []turnStep{
			request("Make Math Hints a factorial of Color and Shape.", "update_experiment",
				`{experiment_id: Math Hints, design: " Factorial ", factors: {Color: [Red, " Blue "], Shape: [Circle, Square]}, conditions: null}`).
				expect(func(w *turnWant) {
					w.params = `{"design":"factorial","factors":[{"name":"Color","levels":[{"name":"Red"},{"name":"Blue"}]},{"name":"Shape","levels":[{"name":"Circle"},{"name":"Square"}]}]}`
				}),
			yes("update_experiment"),
		}, backend: []check{hasDesign("Math Hints", upgrade.TypeFactorial, 4, upgrade.UnitIndividual, "")}},
		{name: "factorial back to simple, weights as strings, factors []", steps: []turnStep{
			request("Create a factorial Hint Look.", "create_experiment", `{`+hintLook+`, design: factorial, factors: {Color: [Red, Blue], Shape: [Circle, Square]}}`),
			yes("create_experiment"),
			request("Make Hint Look a plain control/variant experiment again.", "update_experiment",
				`{experiment_id: Hint Look, design: Simple, factors: [], conditions: {control: "50", variant: "50"}}`).
				expect(func(w *turnWant) { w.params = `{"design":""}` }),
			yes("update_experiment"),
		}, backend: []check{hasDesign("Hint Look", upgrade.TypeSimple, 2, upgrade.UnitIndividual, "")}},
		{name: "a switch of a running experiment is refused in Go", steps: []turnStep{
			{say: "Make Math Hints Live a 2x2 factorial of Color and Shape.",
				llm:  analyze + gather("update_experiment", `{experiment_id: Math Hints Live, design: factorial, factors: {Color: [Red, Blue], Shape: [Circle, Square]}}`) + respond,
				want: turnWant{field: "design", calls: 3}},
		}, backend: []check{inState("Math Hints Live", upgrade.StateEnrolling)}},
		{name: "archive a running experiment, display name", steps: []turnStep{
			request("Archive Math Hints Live.", "update_experiment_status", `{experiment_id: Math Hints Live, status: " Archived "}`).
				expect(func(w *turnWant) { w.params = `{"status":"archived"}` }),
			yes("update_experiment_status"),
		}, backend: []check{inState("Math Hints Live", upgrade.StateArchived)}},
	})
}
