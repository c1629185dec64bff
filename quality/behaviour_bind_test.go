package quality

import (
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// bindVariant is one way a model writes the params of an action.
type bindVariant struct {
	habit  string
	params string // YAML flow mapping
}

// bindFamily is an action's plain params and the ways of writing them that
// canonicalise to the same params.
type bindFamily struct {
	action  string
	say     string
	plain   string // JSON: the canonical params every variant must show
	args    []string
	backend []check
	vars    []bindVariant
}

// TestBindingInvariant is issue 13's table: params that differ only in
// what canonicalises away (explicit defaults, empty optional lists and
// strings, null optionals, enum and state spellings the parser accepts)
// show the same confirmation and are approved and executed by one yes,
// through the CLI.
func TestBindingInvariant(t *testing.T) {
	t.Parallel()
	families := []bindFamily{
		{action: "create_experiment", say: "Create Fraction Hints in assign-prog at SelectSection/absolute_value_plot_equality, control and variant 50/50.",
			plain:   `{"name":"Fraction Hints","context":"assign-prog","decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":[{"code":"control","weight":50},{"code":"variant","weight":50}]}`,
			backend: []check{hasExp("Fraction Hints", upgrade.StateInactive, "control:50", "variant:50"), experiments(len(seeds) + 1)},
			vars: []bindVariant{
				{"explicit defaults", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality, exclude_if_reached: false}], conditions: [{code: control, weight: 50}, {code: variant, weight: 50}], assignment_unit: individual, consistency_rule: individual, post_experiment_rule: {rule: continue}, filter_mode: includeAll}`},
				{"empty optionals", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 50}, {code: variant, weight: 50}], description: "", tags: [], group_type: "", inclusion_users: [], inclusion_groups: [], exclusion_users: [], exclusion_groups: []}`},
				{"null optionals", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality, exclude_if_reached: null}], conditions: [{code: control, weight: 50}, {code: variant, weight: 50}], description: null, tags: null, group_type: null, assignment_unit: null, post_experiment_rule: null, filter_mode: null, exclusion_users: null}`},
				{"spellings and blanks", `{name: " Fraction Hints", context: "assign-prog ", decision_points: [{site: SelectSection, target: "absolute_value_plot_equality "}], conditions: [{code: " control", weight: "50"}, {code: variant, weight: 50.0}], assignment_unit: Individual, consistency_rule: INDIVIDUAL, post_experiment_rule: {rule: Continue}, filter_mode: include_all}`},
			}},
		{action: "update_experiment", say: "Change Math Hints to 70% control and 30% variant.",
			plain:   `{"experiment_id":"{{id:Math Hints}}","conditions":[{"code":"control","weight":70},{"code":"variant","weight":30}]}`,
			backend: []check{hasExp("Math Hints", upgrade.StateInactive, "control:70", "variant:30")},
			vars: []bindVariant{
				{"null optionals", `{experiment_id: "{{id:Math Hints}}", conditions: [{code: control, weight: 70}, {code: variant, weight: 30}], name: null, description: null, tags: null, decision_points: null, post_experiment_rule: null, filter_mode: null, assignment_unit: null}`},
				{"spellings and blanks", `{experiment_id: " {{id:Math Hints}} ", conditions: [{code: "control ", weight: "70"}, {code: variant, weight: "30%"}]}`},
			}},
		{action: "update_experiment_status", say: "Start Math Hints.",
			plain:   `{"experiment_id":"{{id:Math Hints}}","status":"enrolling"}`,
			backend: []check{hasExp("Math Hints", upgrade.StateEnrolling)},
			vars: []bindVariant{
				{"display name", `{experiment_id: "{{id:Math Hints}}", status: running}`},
				{"capitalised", `{experiment_id: "{{id:Math Hints}}", status: Enrolling}`},
				{"blanks", `{experiment_id: "{{id:Math Hints}} ", status: " enrolling"}`},
			}},
		{action: "delete_experiment", say: "Delete Math Hints.",
			plain:   `{"experiment_id":"{{id:Math Hints}}"}`,
			backend: []check{noExp("Math Hints"), experiments(len(seeds) - 1)},
			vars: []bindVariant{
				{"blanks", `{experiment_id: " {{id:Math Hints}}"}`},
				{"key in camelCase", `{experimentId: "{{id:Math Hints}}"}`},
			}},
		{action: "init_experiment_user", say: "Initialise student2 in class c2.",
			plain:   `{"user_id":"student2","group":{"classId":["c2"]},"working_group":{"classId":"c2"}}`,
			backend: []check{hasUser("student2", "classId:c2"), users(2)},
			vars: []bindVariant{
				{"one value for a list", `{user_id: student2, group: {classId: c2}, working_group: {classId: c2}}`},
				{"blanks", `{user_id: "student2 ", group: {classId: [" c2"]}, working_group: {classId: "c2 "}}`},
			}},
		{action: "init_experiment_user", say: "Initialise student3.",
			plain:   `{"user_id":"student3"}`,
			backend: []check{hasUser("student3"), users(2)},
			vars: []bindVariant{
				{"empty groups", `{user_id: student3, group: {}, working_group: {}}`},
				{"null groups", `{user_id: student3, group: null, working_group: null}`},
			}},
		{action: "get_decision_point_assignments", say: "Which conditions does student1 get in assign-prog?",
			plain:   `{"user_id":"student1","context":"assign-prog"}`,
			backend: []check{seeded()},
			vars: []bindVariant{
				{"trailing space", `{user_id: student1, context: "assign-prog "}`},
				{"keys in another case", `{UserId: student1, Context: assign-prog}`},
			}},
		{action: "mark_decision_point", say: "Record that student1 saw control of Math Hints Live at SelectSection/analyzing_step_functions.",
			plain:   `{"user_id":"student1","decision_point":{"site":"SelectSection","target":"analyzing_step_functions"},"assigned_condition":{"condition_code":"control","experiment_id":"{{id:Math Hints Live}}"}}`,
			backend: []check{enrolled("Math Hints Live", 1, 0)},
			vars: []bindVariant{
				{"status as shown", `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}, assigned_condition: {condition_code: control, experiment_id: "{{id:Math Hints Live}}"}, status: Condition Applied}`},
				{"status in snake case", `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}, assigned_condition: {condition_code: control, experiment_id: "{{id:Math Hints Live}}"}, status: condition_applied}`},
				{"status explicit", `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}, assigned_condition: {condition_code: control, experiment_id: "{{id:Math Hints Live}}"}, status: condition applied}`},
			}},
		{action: "mark_decision_point", say: "Record that student1 reached SelectSection/analyzing_step_functions with no condition.",
			plain:   `{"user_id":"student1","decision_point":{"site":"SelectSection","target":"analyzing_step_functions"},"assigned_condition":null}`,
			backend: []check{seeded()},
			vars: []bindVariant{
				{"empty object", `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}, assigned_condition: {}}`},
				{"status spelled", `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}, status: No Condition Assigned}`},
			}},
		{action: "visit_decision_point", say: "Simulate student2 visiting SelectSection/analyzing_step_functions in assign-prog.",
			plain:   `{"user_id":"student2","context":"assign-prog","site":"SelectSection","target":"analyzing_step_functions"}`,
			backend: []check{hasUser("student2"), enrolled("Math Hints Live", 1, 0)},
			vars: []bindVariant{
				{"empty groups", `{user_id: student2, context: assign-prog, site: SelectSection, target: analyzing_step_functions, group: {}, working_group: {}}`},
				{"blanks", `{user_id: student2, context: " assign-prog", site: "SelectSection ", target: analyzing_step_functions}`},
			}},
		{action: "test_condition_balance", say: "Simulate 20 students at SelectSection/analyzing_step_functions for Math Hints Live.",
			plain:   `{"num_users":20,"context":"assign-prog","site":"SelectSection","target":"analyzing_step_functions","experiment_id":"{{id:Math Hints Live}}"}`,
			args:    []string{"--wait-jobs", "1m"},
			backend: []check{enrolled("Math Hints Live", 20, 0), users(21)},
			vars: []bindVariant{
				{"number as string", `{num_users: "20", context: assign-prog, site: SelectSection, target: analyzing_step_functions, experiment_id: "{{id:Math Hints Live}}"}`},
				{"empty groups", `{num_users: 20, context: assign-prog, site: SelectSection, target: analyzing_step_functions, experiment_id: "{{id:Math Hints Live}}", group: {}, working_group: {}}`},
			}},
	}
	runBehaviour(t, bindCases(families))
}

// bindCases is one case per variant: the variant's params show the
// family's plain params, and one yes runs them.
func bindCases(families []bindFamily) []behaviourCase {
	var cases []behaviourCase
	for _, f := range families {
		for _, v := range f.vars {
			y := yes(f.action)
			y.args = f.args
			cases = append(cases, behaviourCase{
				name: f.action + "/" + v.habit,
				steps: []turnStep{
					request(f.say, f.action, v.params).expect(func(w *turnWant) { w.exact = f.plain }),
					y,
				},
				backend: f.backend,
			})
		}
	}
	return cases
}
