package quality

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// actionFixture is one action as the habit classes play it: the request,
// its params whole and key by key, a value the server rejects and its fix,
// and a denial that carries a change.
type actionFixture struct {
	action string
	say    string
	params string   // YAML flow mapping: every param of the request
	keys   []string // update_action_params arguments, in the order a key-by-key model sets them
	yes    []string // flags of the approving turn
	result []string // substrings of the action's result
	after  []check  // the backend once the action ran

	// bad has one value the server rejects (a full set: the person is
	// asked); field is the error's field; fixSay and fix correct it in the
	// next turn (update_action_params arguments).
	bad, field, fixSay, fix string

	// shape has a value of the wrong shape; shapeError are substrings of
	// the tool error, which names the field, the value and what is allowed.
	shape      string
	shapeError []string

	// change is the person's no with a change, changeFix the gatherer's
	// update, changed what the new confirmation's params contain and
	// afterChange the backend once it ran.
	change, changed string
	changeFix       []string
	afterChange     []check
}

var balanceWait = []string{"--wait-jobs", "1m"}

var fixtures = []actionFixture{
	{
		action: "create_experiment",
		say:    "Create Fraction Hints in assign-prog at SelectSection/absolute_value_plot_equality, control and variant 50/50.",
		params: `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 50}, {code: variant, weight: 50}]}`,
		keys: []string{`{key: name, value: Fraction Hints}`, `{key: context, value: assign-prog}`,
			`{key: decision_points, value: [{site: SelectSection, target: absolute_value_plot_equality}]}`,
			`{key: conditions, value: [{code: control, weight: 50}, {code: variant, weight: 50}]}`},
		result:      []string{`"name":"Fraction Hints"`, `"state":"inactive"`},
		after:       []check{hasExp("Fraction Hints", upgrade.StateInactive, "control:50", "variant:50"), experiments(len(seeds) + 1)},
		bad:         `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 50}, {code: variant, weight: 40}]}`,
		field:       "conditions",
		fixSay:      "Make the variant 50 too.",
		fix:         `{key: "conditions[1].weight", value: 50}`,
		shape:       `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: half}, {code: variant, weight: 50}]}`,
		shapeError:  []string{"conditions[0].weight", `"half"`, "number"},
		change:      "no, use 60/40 instead",
		changeFix:   []string{`{key: conditions, value: [{code: control, weight: 60}, {code: variant, weight: 40}]}`},
		changed:     `{"conditions":[{"code":"control","weight":60},{"code":"variant","weight":40}]}`,
		afterChange: []check{hasExp("Fraction Hints", upgrade.StateInactive, "control:60", "variant:40"), experiments(len(seeds) + 1)},
	},
	{
		action: "update_experiment",
		say:    "Change Math Hints to 70% control and 30% variant.",
		params: `{experiment_id: "{{id:Math Hints}}", conditions: [{code: control, weight: 70}, {code: variant, weight: 30}]}`,
		keys: []string{`{key: experiment_id, value: Math Hints}`,
			`{key: conditions, value: [{code: control, weight: 70}, {code: variant, weight: 30}]}`},
		result:      []string{`"id":"{{id:Math Hints}}"`, `"weight":70`},
		after:       []check{hasExp("Math Hints", upgrade.StateInactive, "control:70", "variant:30")},
		bad:         `{experiment_id: "{{id:Math Hints}}", conditions: [{code: control, weight: 70}, {code: variant, weight: 20}]}`,
		field:       "conditions",
		fixSay:      "Sorry, variant 30.",
		fix:         `{key: "conditions[1].weight", value: 30}`,
		shape:       `{experiment_id: "{{id:Math Hints}}", conditions: [{code: control, weight: [70]}, {code: variant, weight: 30}]}`,
		shapeError:  []string{"conditions[0].weight", "a list", "number"},
		change:      "no, make it 60/40",
		changeFix:   []string{`{key: conditions, value: [{code: control, weight: 60}, {code: variant, weight: 40}]}`},
		changed:     `{"conditions":[{"code":"control","weight":60},{"code":"variant","weight":40}]}`,
		afterChange: []check{hasExp("Math Hints", upgrade.StateInactive, "control:60", "variant:40")},
	},
	{
		action:      "update_experiment_status",
		say:         "Start Math Hints.",
		params:      `{experiment_id: "{{id:Math Hints}}", status: enrolling}`,
		keys:        []string{`{key: experiment_id, value: "{{id:Math Hints}}"}`, `{key: status, value: enrolling}`},
		result:      []string{`"state":"enrolling"`},
		after:       []check{hasExp("Math Hints", upgrade.StateEnrolling)},
		bad:         `{experiment_id: "{{id:Math Hints}}", status: enrollmentComplete}`,
		field:       "status",
		fixSay:      "I meant start it.",
		fix:         `{key: status, value: enrolling}`,
		shape:       `{experiment_id: "{{id:Math Hints}}", state: enrolling}`,
		shapeError:  []string{"state", "unknown field", "experiment_id, status"},
		change:      "no, cancel it instead",
		changeFix:   []string{`{key: status, value: cancelled}`},
		changed:     `{"status":"cancelled"}`,
		afterChange: []check{hasExp("Math Hints", upgrade.StateCancelled)},
	},
	{
		action:      "delete_experiment",
		say:         "Delete Math Hints.",
		params:      `{experiment_id: "{{id:Math Hints}}"}`,
		keys:        []string{`{key: experiment_id, value: "{{id:Math Hints}}"}`},
		result:      []string{`{{id:Math Hints}}`},
		after:       []check{noExp("Math Hints"), experiments(len(seeds) - 1)},
		bad:         `{experiment_id: 0b0b0b0b-0000-4000-8000-000000000000}`,
		field:       "experiment_id",
		fixSay:      "The one called Math Hints.",
		fix:         `{key: experiment_id, value: Math Hints}`,
		shape:       `{experiment_id: ["{{id:Math Hints}}", "{{id:Reading Trio}}"]}`,
		shapeError:  []string{"experiment_id", "a list", "string"},
		change:      "no, delete Reading Trio instead",
		changeFix:   []string{`{key: experiment_id, value: Reading Trio}`},
		changed:     `{"experiment_id":"{{id:Reading Trio}}"}`,
		afterChange: []check{noExp("Reading Trio"), hasExp("Math Hints", upgrade.StateInactive), experiments(len(seeds) - 1)},
	},
	{
		action:      "init_experiment_user",
		say:         "Initialise student2 in class c2.",
		params:      `{user_id: student2, group: {classId: [c2]}, working_group: {classId: c2}}`,
		keys:        []string{`{key: user_id, value: student2}`, `{key: group, value: {classId: [c2]}}`, `{key: working_group, value: {classId: c2}}`},
		result:      []string{`"student2"`, `"c2"`},
		after:       []check{hasUser("student2", "classId:c2"), users(2)},
		bad:         `{user_id: student2, group: {classId: [c2]}, working_group: {classId: c3}}`,
		field:       "working_group.classId",
		fixSay:      "c2 is the working group.",
		fix:         `{key: working_group.classId, value: c2}`,
		shape:       `{user_id: student2, group: "classId c2", working_group: {classId: c2}}`,
		shapeError:  []string{"group", `"classId c2"`, "object"},
		change:      "no, use class c3 instead",
		changeFix:   []string{`{key: group, value: {classId: [c3]}}`, `{key: working_group, value: {classId: c3}}`},
		changed:     `{"group":{"classId":["c3"]},"working_group":{"classId":"c3"}}`,
		afterChange: []check{hasUser("student2", "classId:c3"), users(2)},
	},
	{
		action:      "get_decision_point_assignments",
		say:         "Which conditions does student1 get in assign-prog?",
		params:      `{user_id: student1, context: assign-prog}`,
		keys:        []string{`{key: user_id, value: student1}`, `{key: context, value: assign-prog}`},
		result:      []string{`"target":"analyzing_step_functions","experiment_id":"{{id:Math Hints Live}}"`},
		after:       []check{seeded()},
		bad:         `{user_id: student1, context: assign-program}`,
		field:       "context",
		fixSay:      "assign-prog, sorry.",
		fix:         `{key: context, value: assign-prog}`,
		shape:       `{user_id: {id: student1}, context: assign-prog}`,
		shapeError:  []string{"user_id", "an object", "string"},
		change:      "no, in mathstream instead",
		changeFix:   []string{`{key: context, value: mathstream}`},
		changed:     `{"context":"mathstream"}`,
		afterChange: []check{seeded()},
	},
	{
		action: "mark_decision_point",
		say:    "Record that student1 saw control of Math Hints Live at SelectSection/analyzing_step_functions.",
		params: `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}, assigned_condition: {condition_code: control, experiment_id: "{{id:Math Hints Live}}"}}`,
		keys: []string{`{key: user_id, value: student1}`, `{key: decision_point, value: {site: SelectSection, target: analyzing_step_functions}}`,
			`{key: assigned_condition, value: {condition_code: control, experiment_id: Math Hints Live}}`},
		result: []string{`"condition":"control"`, `"status":"condition applied"`},
		// UpGrade 6.5 enrolls a marked user in the condition the experiment
		// gives them, whatever code the mark names (docs/simulator.md): the
		// code sent is checked in the result, the backend counts the user.
		after:       []check{enrolled("Math Hints Live", 1, 0)},
		bad:         `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}, assigned_condition: {condition_code: treatment, experiment_id: "{{id:Math Hints Live}}"}}`,
		field:       "assigned_condition.condition_code",
		fixSay:      "It was control.",
		fix:         `{key: assigned_condition.condition_code, value: control}`,
		shape:       `{user_id: student1, decision_point: "SelectSection/analyzing_step_functions", assigned_condition: {condition_code: control, experiment_id: "{{id:Math Hints Live}}"}}`,
		shapeError:  []string{"decision_point", `"SelectSection/analyzing_step_functions"`, "object"},
		change:      "no, use the variant",
		changeFix:   []string{`{key: assigned_condition.condition_code, value: variant}`},
		changed:     `{"assigned_condition":{"condition_code":"variant"}}`,
		afterChange: []check{enrolled("Math Hints Live", 1, 0)},
	},
	{
		action: "visit_decision_point",
		say:    "Simulate student2 from class c2 visiting SelectSection/analyzing_step_functions in assign-prog.",
		params: `{user_id: student2, context: assign-prog, site: SelectSection, target: analyzing_step_functions, group: {classId: [c2]}, working_group: {classId: c2}}`,
		keys: []string{`{key: user_id, value: student2}`, `{key: context, value: assign-prog}`, `{key: site, value: SelectSection}`,
			`{key: target, value: analyzing_step_functions}`, `{key: group, value: {classId: [c2]}}`, `{key: working_group, value: {classId: c2}}`},
		result:      []string{`"student2"`, `"experiment_id":"{{id:Math Hints Live}}"`},
		after:       []check{hasUser("student2", "classId:c2"), enrolled("Math Hints Live", 1, 0)},
		bad:         `{user_id: student2, context: assign-prog, site: SelectPage, target: analyzing_step_functions, group: {classId: [c2]}, working_group: {classId: c2}}`,
		field:       "site",
		fixSay:      "The site is SelectSection.",
		fix:         `{key: site, value: SelectSection}`,
		shape:       `{user_id: student2, context: assign-prog, site: SelectSection, target: analyzing_step_functions, group: {classId: [c2]}, working_group: {classId: [c2, c3]}}`,
		shapeError:  []string{"working_group.classId", "a list", "string"},
		change:      "no, student3 instead",
		changeFix:   []string{`{key: user_id, value: student3}`},
		changed:     `{"user_id":"student3"}`,
		afterChange: []check{hasUser("student3", "classId:c2"), noUser("student2"), enrolled("Math Hints Live", 1, 0)},
	},
	{
		action: "test_condition_balance",
		say:    "Simulate 20 students at SelectSection/analyzing_step_functions for Math Hints Live.",
		params: `{num_users: 20, context: assign-prog, site: SelectSection, target: analyzing_step_functions, experiment_id: "{{id:Math Hints Live}}"}`,
		keys: []string{`{key: num_users, value: 20}`, `{key: context, value: assign-prog}`, `{key: site, value: SelectSection}`,
			`{key: target, value: analyzing_step_functions}`, `{key: experiment_id, value: Math Hints Live}`},
		yes:         balanceWait,
		result:      []string{`"users":20`, `"assigned":20`},
		after:       []check{enrolled("Math Hints Live", 20, 0), users(21)},
		bad:         `{num_users: 20000, context: assign-prog, site: SelectSection, target: analyzing_step_functions, experiment_id: "{{id:Math Hints Live}}"}`,
		field:       "num_users",
		fixSay:      "20 is enough.",
		fix:         `{key: num_users, value: 20}`,
		shape:       `{num_users: 20.5, context: assign-prog, site: SelectSection, target: analyzing_step_functions, experiment_id: "{{id:Math Hints Live}}"}`,
		shapeError:  []string{"num_users", "20.5", "whole number"},
		change:      "no, use 30 users",
		changeFix:   []string{`{key: num_users, value: 30}`},
		changed:     `{"num_users":30}`,
		afterChange: []check{enrolled("Math Hints Live", 30, 0), users(31)},
	},
	// Feature flags and segments (seedFlags): one fixture per kind of
	// change, so every habit class plays them too.
	{
		action:      "update_feature_flag_status",
		say:         "Turn on the math hints flag.",
		params:      `{flag_id: "{{id:MATH_HINTS}}", status: enabled}`,
		keys:        []string{`{key: flag_id, value: MATH_HINTS}`, `{key: status, value: enabled}`},
		result:      []string{`"status":"enabled"`, `"previous_status":"disabled"`},
		after:       []check{hasFlag("MATH_HINTS", "enabled", "excludeAll", []string{}, []string{"users:u9"})},
		bad:         `{flag_id: "{{id:MATH_HINTS}}", status: running}`,
		field:       "status",
		fixSay:      "I meant enabled.",
		fix:         `{key: status, value: enabled}`,
		shape:       `{flag_id: "{{id:MATH_HINTS}}", status: [enabled]}`,
		shapeError:  []string{"status", "a list", "string"},
		change:      "no, archive it instead",
		changeFix:   []string{`{key: status, value: archived}`},
		changed:     `{"status":"archived"}`,
		afterChange: []check{hasFlag("MATH_HINTS", "archived", "excludeAll", []string{}, []string{"users:u9"})},
	},
	{
		action: "add_feature_flag_list",
		say:    "Give the math hints flag to class c7.",
		params: `{flag_id: "{{id:MATH_HINTS}}", kind: include, groups: [{type: classId, group_id: c7}]}`,
		keys: []string{`{key: flag_id, value: math_hints}`, `{key: kind, value: include}`,
			`{key: groups, value: ["classId:c7"]}`},
		result:      []string{`"action":"added"`, `"group_id":"c7"`},
		after:       []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{"groups:classId=c7"}, []string{"users:u9"})},
		bad:         `{flag_id: "{{id:MATH_HINTS}}", kind: include, groups: [{type: sectionId, group_id: c7}]}`,
		field:       "groups[0].type",
		fixSay:      "It is a class, classId.",
		fix:         `{key: "groups[0].type", value: classId}`,
		shape:       `{flag_id: "{{id:MATH_HINTS}}", kind: include, groups: [{type: classId, group_id: [c7, c8]}]}`,
		shapeError:  []string{"groups[0].group_id", "a list", "string"},
		change:      "no, class c8 instead",
		changeFix:   []string{`{key: groups, value: [{type: classId, group_id: c8}]}`},
		changed:     `{"groups":[{"type":"classId","group_id":"c8"}]}`,
		afterChange: []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{"groups:classId=c8"}, []string{"users:u9"})},
	},
	{
		action: "create_feature_flag",
		say:    "Create a flag Hint panel with key HINT_PANEL in assign-prog for u1 and u2.",
		params: `{name: Hint panel, key: HINT_PANEL, context: assign-prog, include_lists: [{users: [u1, u2]}]}`,
		keys: []string{`{key: name, value: Hint panel}`, `{key: key, value: HINT_PANEL}`, `{key: context, value: assign-prog}`,
			`{key: include_lists, value: [{users: [u1, u2]}]}`},
		result:      []string{`"key":"HINT_PANEL"`, `"status":"disabled"`},
		after:       []check{hasFlag("HINT_PANEL", "disabled", "excludeAll", []string{"users:u1,u2"}, []string{}), flagsSeeded()},
		bad:         `{name: Hint panel, key: MATH_HINTS, context: assign-prog, include_lists: [{users: [u1, u2]}]}`,
		field:       "key",
		fixSay:      "Use the key HINT_PANEL.",
		fix:         `{key: key, value: HINT_PANEL}`,
		shape:       `{name: Hint panel, key: HINT_PANEL, context: assign-prog, include_lists: [{users: [{id: u1}, u2]}]}`,
		shapeError:  []string{"include_lists[0].users[0]", "an object", "string"},
		change:      "no, for u3 instead",
		changeFix:   []string{`{key: include_lists, value: [{users: [u3]}]}`},
		changed:     `{"include_lists":[{"enabled":true,"users":["u3"]}]}`,
		afterChange: []check{hasFlag("HINT_PANEL", "disabled", "excludeAll", []string{"users:u3"}, []string{}), flagsSeeded()},
	},
	{
		action: "update_feature_flag",
		say:    "Rename the math hints flag to Math hint panel, key MATH_HINT_PANEL.",
		params: `{flag_id: "{{id:MATH_HINTS}}", name: Math hint panel, key: MATH_HINT_PANEL}`,
		keys: []string{`{key: flag_id, value: Math Hints}`, `{key: name, value: Math hint panel}`,
			`{key: key, value: MATH_HINT_PANEL}`},
		result:      []string{`"key":"MATH_HINT_PANEL"`, `"name":"Math hint panel"`},
		after:       []check{flagNamed("MATH_HINT_PANEL", "Math hint panel"), hasFlag("MATH_HINT_PANEL", "disabled", "excludeAll", []string{}, []string{"users:u9"}), noFlag("MATH_HINTS")},
		bad:         `{flag_id: "{{id:MATH_HINTS}}", name: Math hint panel, key: READING_AID}`,
		field:       "key",
		fixSay:      "The key is MATH_HINT_PANEL.",
		fix:         `{key: key, value: MATH_HINT_PANEL}`,
		shape:       `{flag_id: "{{id:MATH_HINTS}}", name: [Math hint panel], key: MATH_HINT_PANEL}`,
		shapeError:  []string{"name", "a list", "string"},
		change:      "no, call it Math helper instead",
		changeFix:   []string{`{key: name, value: Math helper}`},
		changed:     `{"name":"Math helper"}`,
		afterChange: []check{flagNamed("MATH_HINT_PANEL", "Math helper"), noFlag("MATH_HINTS")},
	},
	{
		action:      "delete_feature_flag",
		say:         "Delete the math hints flag.",
		params:      `{flag_id: "{{id:MATH_HINTS}}"}`,
		keys:        []string{`{key: flag_id, value: " math_hints "}`},
		result:      []string{`{{id:MATH_HINTS}}`},
		after:       []check{noFlag("MATH_HINTS"), hasFlag("READING_AID", "enabled", "excludeAll", []string{"groups:classId=c7"}, []string{})},
		bad:         `{flag_id: 0b0b0b0b-0000-4000-8000-000000000000}`,
		field:       "flag_id",
		fixSay:      "The one called Math hints.",
		fix:         `{key: flag_id, value: Math hints}`,
		shape:       `{flag_id: ["{{id:MATH_HINTS}}", "{{id:READING_AID}}"]}`,
		shapeError:  []string{"flag_id", "a list", "string"},
		change:      "no, delete the reading aid flag instead",
		changeFix:   []string{`{key: flag_id, value: READING_AID}`},
		changed:     `{"flag_id":"{{id:READING_AID}}"}`,
		afterChange: []check{noFlag("READING_AID"), hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{"users:u9"})},
	},
	{
		action: "update_feature_flag_list",
		say:    "Also exclude u12 from math hints.",
		params: `{flag_id: "{{id:MATH_HINTS}}", kind: exclude, list_id: "{{id:MATH_HINTS exclude}}", users: [u9, u12]}`,
		keys: []string{`{key: flag_id, value: MATH_HINTS}`, `{key: kind, value: Exclude}`,
			`{key: list_id, value: "{{id:MATH_HINTS exclude}}"}`, `{key: users, value: [u9, u12]}`},
		result:      []string{`"u12"`},
		after:       []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{"users:u12,u9"})},
		bad:         `{flag_id: "{{id:MATH_HINTS}}", kind: exclude, list_id: 0b0b0b0b-0000-4000-8000-000000000000, users: [u9, u12]}`,
		field:       "list_id",
		fixSay:      "The exclude list it already has.",
		fix:         `{key: list_id, value: "{{id:MATH_HINTS exclude}}"}`,
		shape:       `{flag_id: "{{id:MATH_HINTS}}", kind: exclude, list_id: "{{id:MATH_HINTS exclude}}", users: [u9, {id: u12}]}`,
		shapeError:  []string{"users[1]", "an object", "string"},
		change:      "no, exclude u13 instead",
		changeFix:   []string{`{key: users, value: [u9, u13]}`},
		changed:     `{"users":["u9","u13"]}`,
		afterChange: []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{"users:u13,u9"})},
	},
	{
		action: "remove_feature_flag_list",
		say:    "Remove the exclude list of math hints.",
		params: `{flag_id: "{{id:MATH_HINTS}}", kind: exclude, list_id: "{{id:MATH_HINTS exclude}}"}`,
		keys: []string{`{key: flag_id, value: Math Hints}`, `{key: kind, value: exclusion}`,
			`{key: list_id, value: "{{id:MATH_HINTS exclude}}"}`},
		result:      []string{`{{id:MATH_HINTS exclude}}`},
		after:       []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{}), hasFlag("READING_AID", "enabled", "excludeAll", []string{"groups:classId=c7"}, []string{})},
		bad:         `{flag_id: "{{id:MATH_HINTS}}", kind: exclude, list_id: "{{id:READING_AID include}}"}`,
		field:       "list_id",
		fixSay:      "The exclude list with u9.",
		fix:         `{key: list_id, value: "{{id:MATH_HINTS exclude}}"}`,
		shape:       `{flag_id: "{{id:MATH_HINTS}}", kind: exclude, list_id: ["{{id:MATH_HINTS exclude}}"]}`,
		shapeError:  []string{"list_id", "a list", "string"},
		change:      "no, remove the class c7 list of reading aid instead",
		changeFix:   []string{`{key: flag_id, value: READING_AID}`, `{key: kind, value: include}`, `{key: list_id, value: "{{id:READING_AID include}}"}`},
		changed:     `{"flag_id":"{{id:READING_AID}}","kind":"include","list_id":"{{id:READING_AID include}}"}`,
		afterChange: []check{hasFlag("READING_AID", "enabled", "excludeAll", []string{}, []string{}), hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{"users:u9"})},
	},
	{
		action:      "create_segment",
		say:         "Make a segment pilot teachers in assign-prog with t1 and t2.",
		params:      `{name: pilot teachers, context: assign-prog, users: [t1, t2]}`,
		keys:        []string{`{key: name, value: pilot teachers}`, `{key: context, value: assign-prog}`, `{key: users, value: [t1, t2]}`},
		result:      []string{`"name":"pilot teachers"`, `"users":["t1","t2"]`},
		after:       []check{hasSegment("pilot teachers", "t1", "t2"), hasSegment("pilot schools", "u1", "u2")},
		bad:         `{name: pilot schools, context: assign-prog, users: [t1, t2]}`,
		field:       "name",
		fixSay:      "Call it pilot teachers.",
		fix:         `{key: name, value: pilot teachers}`,
		shape:       `{name: pilot teachers, context: assign-prog, users: [{id: t1}]}`,
		shapeError:  []string{"users[0]", "an object", "string"},
		change:      "no, use t3 instead",
		changeFix:   []string{`{key: users, value: [t3]}`},
		changed:     `{"users":["t3"]}`,
		afterChange: []check{hasSegment("pilot teachers", "t3")},
	},
	{
		action: "update_segment",
		say:    "Rename pilot schools to pilot classes and add u3.",
		params: `{segment_id: "{{id:pilot schools}}", name: pilot classes, add_users: [u3]}`,
		keys: []string{`{key: segment_id, value: Pilot Schools}`, `{key: name, value: pilot classes}`,
			`{key: add_users, value: [u3]}`},
		result:      []string{`"name":"pilot classes"`, `"u3"`},
		after:       []check{hasSegment("pilot classes", "u1", "u2", "u3"), noSegment("pilot schools"), hasSegment("reading club", "r1")},
		bad:         `{segment_id: "{{id:pilot schools}}", name: reading club, add_users: [u3]}`,
		field:       "name",
		fixSay:      "Call it pilot classes.",
		fix:         `{key: name, value: pilot classes}`,
		shape:       `{segment_id: "{{id:pilot schools}}", name: pilot classes, add_users: [{id: u3}]}`,
		shapeError:  []string{"add_users[0]", "an object", "string"},
		change:      "no, add u4 instead",
		changeFix:   []string{`{key: add_users, value: [u4]}`},
		changed:     `{"add_users":["u4"]}`,
		afterChange: []check{hasSegment("pilot classes", "u1", "u2", "u4")},
	},
	{
		action:      "delete_segment",
		say:         "Delete the pilot schools segment.",
		params:      `{segment_id: "{{id:pilot schools}}"}`,
		keys:        []string{`{key: segment_id, value: "pilot schools "}`},
		result:      []string{`{{id:pilot schools}}`},
		after:       []check{noSegment("pilot schools"), hasSegment("reading club", "r1")},
		bad:         `{segment_id: 0b0b0b0b-0000-4000-8000-000000000000}`,
		field:       "segment_id",
		fixSay:      "The one called pilot schools.",
		fix:         `{key: segment_id, value: pilot schools}`,
		shape:       `{segment_id: ["{{id:pilot schools}}", "{{id:reading club}}"]}`,
		shapeError:  []string{"segment_id", "a list", "string"},
		change:      "no, delete the reading club instead",
		changeFix:   []string{`{key: segment_id, value: Reading Club}`},
		changed:     `{"segment_id":"{{id:reading club}}"}`,
		afterChange: []check{noSegment("reading club"), hasSegment("pilot schools", "u1", "u2")},
	},
}

// approve is the person's yes to the fixture's action, which runs with
// the fixture's result.
func (f actionFixture) approve() turnStep {
	s := f.approveChanged()
	s.want.result = f.result
	return s
}

// approveChanged is the yes to the fixture's action after a change.
func (f actionFixture) approveChanged() turnStep {
	s := yes(f.action)
	s.args = f.yes
	return s
}

func update(args string) string { return "update_action_params: " + args }

// updates is one reply of update_action_params calls (parallel calls when
// there are several).
func updates(args ...string) string {
	cs := make([]string, len(args))
	for i, a := range args {
		cs[i] = update(a)
	}
	return parallel(cs...)
}

// yamlToJSON turns a YAML flow mapping into JSON.
func yamlToJSON(y string) string {
	var v any
	if err := yaml.Unmarshal([]byte(y), &v); err != nil {
		panic(fmt.Sprintf("fixture %s: %v", y, err))
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fixture %s: %v", y, err))
	}
	return string(b)
}

// keyByKey: set_action_needed, then one update_action_params per reply.
// Once the params are complete the model is asked once more (it may have
// optional keys left) and says it is done.
func keyByKey(f actionFixture) behaviourCase {
	var b strings.Builder
	b.WriteString(analyze)
	fmt.Fprintf(&b, "- call: {set_action_needed: {action: %s, reasoning: Build it key by key.}}\n", f.action)
	for _, k := range f.keys {
		b.WriteString(updates(k))
	}
	b.WriteString("- reply: All parameters are set.\n")
	b.WriteString(respond)
	return behaviourCase{name: f.action, steps: []turnStep{
		{say: f.say, llm: b.String(), want: turnWant{status: "awaiting_confirmation", confirm: f.action, exact: yamlToJSON(f.params), calls: len(f.keys) + 4}},
		f.approve(),
	}, backend: f.after}
}

// fixNextTurn: a full set with a value the server rejects stops the
// gatherer and the person is asked; their correction in the next turn is
// one update_action_params, which re-validates and clears what was wrong.
func fixNextTurn(f actionFixture) behaviourCase {
	return behaviourCase{name: f.action, steps: []turnStep{
		{say: f.say, llm: analyze + gather(f.action, f.bad) + respond, want: turnWant{field: f.field, calls: 3}},
		{say: f.fixSay, llm: analyze + updates(f.fix) + respond,
			want: turnWant{status: "awaiting_confirmation", confirm: f.action, exact: yamlToJSON(f.params), calls: 3}},
		f.approve(),
	}, backend: f.after}
}

// correctInTurn: params of the wrong shape get a tool error naming the
// field, the value and what is allowed; the model's corrected call
// succeeds in the same turn.
func correctInTurn(f actionFixture) behaviourCase {
	script := analyze + gather(f.action, f.shape) +
		fmt.Sprintf("- call: {set_action_params: {action_params: %s}}\n", f.params) + respond
	return behaviourCase{name: f.action, steps: []turnStep{
		{say: f.say, llm: script, want: turnWant{status: "awaiting_confirmation", confirm: f.action, exact: yamlToJSON(f.params), calls: 4, toolError: f.shapeError}},
		f.approve(),
	}, backend: f.after}
}

// denyWithChange: "no, use 60/40 instead" denies the action shown; the
// gatherer applies the change in the same turn and a new confirmation is
// asked, which one yes runs. explicit says whether the analyzer fills
// change_requested or leaves the change to the message's words.
func denyWithChange(f actionFixture, explicit bool) behaviourCase {
	fields := "user_confirmed: false, change_requested: true"
	if !explicit {
		fields = "user_confirmed: false"
	}
	return behaviourCase{name: f.action, steps: []turnStep{
		request(f.say, f.action, f.params),
		{say: f.change, llm: analyzeAnswer(fields) + updates(f.changeFix...) + respond,
			want: turnWant{status: "awaiting_confirmation", confirm: f.action, params: f.changed, calls: 3}},
		f.approveChanged(),
	}, backend: f.afterChange}
}

// nullArguments: nulls for every optional tool argument (the analyzer's
// direct_response, user_confirmed and change_requested, next_step).
func nullArguments(f actionFixture) behaviourCase {
	script := "- call: {analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: The request., reasoning: Needs the server., direct_response: null, user_confirmed: null, change_requested: null}}\n" +
		fmt.Sprintf("- call:\n    set_action_needed: {action: %s, reasoning: null, next_step: null}\n    set_action_params: {action_params: %s}\n", f.action, f.params) +
		respond
	return behaviourCase{name: f.action, steps: []turnStep{
		{say: f.say, llm: script, want: turnWant{status: "awaiting_confirmation", confirm: f.action, exact: yamlToJSON(f.params), calls: 3}},
		f.approve(),
	}, backend: f.after}
}

func perAction(t *testing.T, class func(actionFixture) behaviourCase) {
	t.Helper()
	var cases []behaviourCase
	for _, f := range fixtures {
		cases = append(cases, class(f))
	}
	runBehaviour(t, cases)
}

func TestHabitKeyByKey(t *testing.T) { t.Parallel(); perAction(t, keyByKey) }

func TestHabitFixNextTurn(t *testing.T) { t.Parallel(); perAction(t, fixNextTurn) }

func TestHabitCorrectInTurn(t *testing.T) { t.Parallel(); perAction(t, correctInTurn) }

func TestHabitDenyWithChange(t *testing.T) {
	t.Parallel()
	perAction(t, func(f actionFixture) behaviourCase { return denyWithChange(f, true) })
}

// TestHabitDenyWithChangeWords: the analyzer says only no; the change is in
// the person's words ("instead", "use", figures).
func TestHabitDenyWithChangeWords(t *testing.T) {
	t.Parallel()
	perAction(t, func(f actionFixture) behaviourCase { return denyWithChange(f, false) })
}

func TestHabitNullArguments(t *testing.T) { t.Parallel(); perAction(t, nullArguments) }

// callAsText: the provider ignores tool_choice and the model writes the
// analyzer's call as text, in one of the formats models use.
func callAsText(f actionFixture) behaviourCase {
	args := `{"intent_type": "needs_info", "confidence": 0.9, "user_request_summary": "The request.", "reasoning": "An action."}`
	formats := []string{
		"<tool_call>\n" + `{"name": "analyze_user_request", "arguments": ` + args + "}\n</tool_call>", // Qwen, Hermes
		`{"name": "analyze_user_request", "parameters": ` + args + "}",                                // Llama
		"```json\n" + args + "\n```", // the arguments alone, fenced
	}
	i := 0
	for j, g := range fixtures {
		if g.action == f.action {
			i = j
		}
	}
	return behaviourCase{name: f.action, steps: []turnStep{
		{say: f.say, llm: "- reply: " + yamlQuote(formats[i%len(formats)]) + "\n" + gather(f.action, f.params) + respond,
			want: turnWant{status: "awaiting_confirmation", confirm: f.action, exact: yamlToJSON(f.params), calls: 3}},
		f.approve(),
	}, backend: f.after}
}

func TestHabitCallAsText(t *testing.T) { t.Parallel(); perAction(t, callAsText) }
