package quality

import (
	"fmt"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The habit classes that are not played for every action by a generator
// of behaviour_actions_test.go: each case is written out.

// fixture returns the fixture of an action.
func fixture(action string) actionFixture {
	for _, f := range fixtures {
		if f.action == action {
			return f
		}
	}
	panic("no fixture for " + action)
}

// ask is a first turn ending on a confirmation of action, after script.
func ask(say, script, action string) turnStep {
	return turnStep{say: say, llm: script, want: turnWant{status: "awaiting_confirmation", confirm: action}}
}

// TestHabitBuildInSteps: name and context first, then lookups of the
// context's metadata, then the rest, each in its own reply.
func TestHabitBuildInSteps(t *testing.T) {
	t.Parallel()
	create, visit, balance := fixture("create_experiment"), fixture("visit_decision_point"), fixture("test_condition_balance")
	runBehaviour(t, []behaviourCase{
		{name: "create", steps: []turnStep{
			ask(create.say, analyze+gather("create_experiment", `{name: Fraction Hints, context: assign-prog}`)+
				parallel(`get_decision_points_for_context: {context: assign-prog}`, `get_conditions_for_context: {context: assign-prog}`)+
				updates(create.keys[2], create.keys[3])+
				"- reply: Ready.\n"+respond, "create_experiment").expect(func(w *turnWant) { w.exact = yamlToJSON(create.params); w.calls = 6 }),
			create.approve(),
		}, backend: create.after},
		{name: "create with metadata", steps: []turnStep{
			ask(create.say, analyze+gather("create_experiment", `{name: Fraction Hints, context: assign-prog}`)+
				"- call: {get_context_metadata: {}}\n"+
				updates(create.keys[2])+
				updates(create.keys[3])+
				"- reply: Ready.\n"+respond, "create_experiment").expect(func(w *turnWant) { w.exact = yamlToJSON(create.params); w.calls = 7 }),
			create.approve(),
		}, backend: create.after},
		{name: "visit", steps: []turnStep{
			ask(visit.say, analyze+gather("visit_decision_point", `{user_id: student2, context: assign-prog}`)+
				"- call: {get_decision_points_for_context: {context: assign-prog}}\n"+
				updates(visit.keys[2:]...)+
				"- reply: Ready.\n"+respond, "visit_decision_point").expect(func(w *turnWant) { w.exact = yamlToJSON(visit.params); w.calls = 6 }),
			visit.approve(),
		}, backend: visit.after},
		{name: "balance", steps: []turnStep{
			ask(balance.say, analyze+gather("test_condition_balance", `{num_users: 20, context: assign-prog}`)+
				parallel(`get_decision_points_for_context: {context: assign-prog}`, `find_experiment: {name: Math Hints Live}`)+
				updates(balance.keys[2:]...)+
				"- reply: Ready.\n"+respond, "test_condition_balance").expect(func(w *turnWant) { w.exact = yamlToJSON(balance.params); w.calls = 6 }),
			balance.approve(),
		}, backend: balance.after},
		// A key set before set_action_needed names its tool result error;
		// the model chooses the action and goes on.
		{name: "update before the action", steps: []turnStep{
			ask("Change Math Hints to 70% control and 30% variant.", analyze+
				"- call: {update_action_params: {key: experiment_id, value: Math Hints}}\n"+
				gather("update_experiment", fixture("update_experiment").params)+respond, "update_experiment").
				expect(func(w *turnWant) { w.toolError = []string{"set_action_needed first"}; w.calls = 4 }),
			yes("update_experiment"),
		}, backend: fixture("update_experiment").after},
	})
}

// TestHabitIgnoresToolChoice: providers that answer the analyzer's forced
// call in plain text, or not at all.
func TestHabitIgnoresToolChoice(t *testing.T) {
	t.Parallel()
	create := fixture("create_experiment")
	runBehaviour(t, []behaviourCase{
		oneTurn("greeting in text", "Hi!", "- reply: Hello! I can create, start and inspect UpGrade experiments.\n",
			turnWant{calls: 1, response: []string{"Hello! I can create"}}),
		oneTurn("concept question in text", "What is an A/B test?", "- reply: An A/B test compares two versions of something by showing each to a random part of the students.\n",
			turnWant{calls: 1, response: []string{"compares two versions"}}),
		oneTurn("empty answer retried once", "Hello", "- reply: \"\"\n"+
			"- call: {analyze_user_request: {intent_type: direct_answer, confidence: 0.9, user_request_summary: A greeting., reasoning: Small talk., direct_response: Hello there.}}\n",
			turnWant{calls: 2, response: []string{"Hello there."}}),
		oneTurn("call written as JSON text", "Hello", `- reply: '{"name": "analyze_user_request", "arguments": {"intent_type": "direct_answer", "confidence": 0.9, "user_request_summary": "A greeting.", "reasoning": "Small talk.", "direct_response": "Hello there."}}'`+"\n",
			turnWant{calls: 1, response: []string{"Hello there."}, noResponse: []string{"intent_type"}}),
		{name: "call in tool_call tags", steps: []turnStep{
			ask(create.say, "- reply: |-\n    <tool_call>\n    {\"name\": \"analyze_user_request\", \"arguments\": {\"intent_type\": \"needs_info\", \"confidence\": 0.9, \"user_request_summary\": \"Create Fraction Hints.\", \"reasoning\": \"An action.\"}}\n    </tool_call>\n"+
				gather("create_experiment", create.params)+respond, "create_experiment").expect(func(w *turnWant) { w.calls = 3 }),
			create.approve(),
		}, backend: create.after},
		{name: "arguments alone as JSON text", steps: []turnStep{
			ask(create.say, "- reply: '```json\n\n    {\"intent_type\": \"needs_info\", \"confidence\": 0.9, \"user_request_summary\": \"Create Fraction Hints.\", \"reasoning\": \"An action.\"}\n\n    ```'\n"+
				gather("create_experiment", create.params)+respond, "create_experiment").expect(func(w *turnWant) { w.calls = 3 }),
			create.approve(),
		}, backend: create.after},
		{name: "invalid classification twice", steps: []turnStep{
			ask(create.say, "- call: {analyze_user_request: {intent_type: create, confidence: 0.9, user_request_summary: Create., reasoning: r}}\n"+
				"- call: {analyze_user_request: {intent_type: action, confidence: 0.9, user_request_summary: Create., reasoning: r}}\n"+
				gather("create_experiment", create.params)+respond, "create_experiment").
				expect(func(w *turnWant) {
					w.calls = 4
					w.toolError = []string{"intent_type", `"create"`, "direct_answer or needs_info"}
				}),
			create.approve(),
		}, backend: create.after},
		{name: "broken call text twice", steps: []turnStep{
			ask(create.say, "- reply: '{\"intent_type\": \"needs_'\n"+"- reply: '<tool_call>{\"name\": \"analyze_user_request\"'\n"+
				gather("create_experiment", create.params)+respond, "create_experiment").expect(func(w *turnWant) { w.calls = 4 }),
			create.approve(),
		}, backend: create.after},
		{name: "text while a confirmation is pending", steps: []turnStep{
			request(create.say, "create_experiment", create.params),
			{say: "Hmm, is that the right context?", llm: "- reply: It is the context you named.\n" + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "create_experiment", exact: yamlToJSON(create.params), calls: 2}},
			create.approve(),
		}, backend: create.after},
	})
}

// TestHabitErrorResults: the model acts on error results; each names the
// field, the value received and what is allowed, once, in plain words,
// and the corrected call succeeds.
func TestHabitErrorResults(t *testing.T) {
	t.Parallel()
	create, status, update := fixture("create_experiment"), fixture("update_experiment_status"), fixture("update_experiment")
	runBehaviour(t, []behaviourCase{
		{name: "unknown action", steps: []turnStep{
			ask(status.say, analyze+"- call: {set_action_needed: {action: start_experiment, reasoning: r}}\n"+
				gather("update_experiment_status", status.params)+respond, "update_experiment_status").
				expect(func(w *turnWant) {
					w.toolError = []string{"action", `"start_experiment"`, "update_experiment_status"}
					w.exact = yamlToJSON(status.params)
				}),
			status.approve(),
		}, backend: status.after},
		{name: "unknown tool", steps: []turnStep{
			ask(status.say, analyze+"- call: {get_experiment: {name: Math Hints}}\n"+"- call: {find_experiment: {name: Math Hints}}\n"+
				gather("update_experiment_status", status.params)+respond, "update_experiment_status").
				expect(func(w *turnWant) { w.toolError = []string{`"get_experiment"`, "find_experiment"}; w.calls = 5 }),
			status.approve(),
		}, backend: status.after},
		{name: "index past the list", steps: []turnStep{
			ask(update.say, analyze+gather("update_experiment", update.params)+respond, "update_experiment"),
			{say: "no, make the variant 40", llm: analyzeAnswer("user_confirmed: false, change_requested: true") +
				"- call: {update_action_params: {key: \"conditions[5].weight\", value: 40}}\n" +
				updates(`{key: "conditions[0].weight", value: 60}`, `{key: "conditions[1].weight", value: 40}`) + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "update_experiment", calls: 4,
					params:    `{"conditions":[{"code":"control","weight":60},{"code":"variant","weight":40}]}`,
					toolError: []string{"conditions[5].weight", "conditions", "2 items"}}},
			update.approveChanged(),
		}, backend: []check{hasExp("Math Hints", upgrade.StateInactive, "control:60", "variant:40")}},
		{name: "broken JSON", steps: []turnStep{
			ask(create.say, analyze+"- call: {set_action_needed: {action: create_experiment, reasoning: r}}\n"+
				rawCall("set_action_params", `{"action_params": {"name": "Fraction Hints", "context": "assign-prog"`)+
				"- call: {set_action_params: {action_params: "+create.params+"}}\n"+respond, "create_experiment").
				expect(func(w *turnWant) {
					w.toolError = []string{"not valid JSON"}
					w.exact = yamlToJSON(create.params)
					w.calls = 5
				}),
			create.approve(),
		}, backend: create.after},
		{name: "unknown experiment", steps: []turnStep{
			ask(status.say, analyze+"- call: {get_experiment_details: {experiment_id: Math Hintz}}\n"+"- call: {find_experiment: {name: Math}}\n"+
				gather("update_experiment_status", `{experiment_id: "{{id:Math Hints}}", status: enrolling}`)+respond, "update_experiment_status").
				expect(func(w *turnWant) {
					w.toolError = []string{`"Math Hintz"`}
					w.seen = []string{"{{id:Math Hints}}"}
				}),
			status.approve(),
		}, backend: status.after},
		{name: "ambiguous prefix", steps: []turnStep{
			ask(status.say, analyze+gather("update_experiment_status", `{experiment_id: Math, status: enrolling}`)+
				"- call: {set_action_params: {action_params: "+status.params+"}}\n"+respond, "update_experiment_status").
				expect(func(w *turnWant) {
					w.toolError = []string{"experiment_id", `"Math" matches 2 experiments`, "{{id:Math Hints}}", "Math Hints Live"}
					w.exact = yamlToJSON(status.params)
				}),
			status.approve(),
		}, backend: status.after},
		{name: "unknown param", steps: []turnStep{
			ask(create.say, analyze+gather("create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], weights: {control: 50, variant: 50}}`)+
				"- call: {set_action_params: {action_params: "+create.params+"}}\n"+respond, "create_experiment").
				expect(func(w *turnWant) {
					w.toolError = []string{"weights", "unknown field", "conditions"}
					w.exact = yamlToJSON(create.params)
				}),
			create.approve(),
		}, backend: create.after},
		{name: "unknown enum value", steps: []turnStep{
			{say: create.say, llm: analyze + gather("create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 50}, {code: variant, weight: 50}], assignment_unit: team}`) + respond,
				want: turnWant{field: "assignment_unit", seen: []string{`unknown assignment unit \"team\"; use individual, group or within-subjects`}}},
			{say: "individual", llm: analyze + "- call: {update_action_params: {key: assignment_unit, value: individual}}\n" + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "create_experiment", exact: yamlToJSON(create.params)}},
			create.approve(),
		}, backend: create.after},
		{name: "unknown context in a lookup", steps: []turnStep{
			ask(create.say, analyze+"- call: {get_conditions_for_context: {context: assign-program}}\n"+
				"- call: {get_conditions_for_context: {context: assign-prog}}\n"+
				gather("create_experiment", create.params)+respond, "create_experiment").
				expect(func(w *turnWant) { w.toolError = []string{`"assign-program"`, "assign-prog, livehint-ai"}; w.calls = 5 }),
			create.approve(),
		}, backend: create.after},
		oneTurn("wrong argument type", "Which experiments are running?", analyze+"- call: {get_all_experiments: {status: [running, enrolling]}}\n"+
			"- call: {get_all_experiments: {status: running}}\n"+"- reply: Math Hints Live and Stream Hints are running.\n"+respond,
			turnWant{calls: 5, toolError: []string{"status", "a list", "string"}, seen: []string{"Math Hints Live"}}),
		{name: "extra field in the classification", steps: []turnStep{
			ask(status.say, "- call: {analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: Start Math Hints., reasoning: r, language: en}}\n"+
				analyze+gather("update_experiment_status", status.params)+respond, "update_experiment_status").
				expect(func(w *turnWant) { w.toolError = []string{"language", "unknown field", "intent_type"}; w.calls = 4 }),
			status.approve(),
		}, backend: status.after},
		{name: "extra field in a tool", steps: []turnStep{
			ask(status.say, analyze+
				"- call:\n    set_action_needed: {action: update_experiment_status, reasoning: r, confidence: 0.9}\n    set_action_params: {action_params: "+status.params+"}\n"+
				gather("update_experiment_status", status.params)+respond, "update_experiment_status").
				expect(func(w *turnWant) {
					w.toolError = []string{"confidence", "unknown field", "action, reasoning, next_step"}
					w.calls = 4
				}),
			status.approve(),
		}, backend: status.after},
	})
}

// TestHabitQuirks: numbers as strings, weights as floats and thirds, ids
// by name, prefix and case, tool names in another case, arguments encoded
// twice, text next to tool calls, duplicate parallel calls.
func TestHabitQuirks(t *testing.T) {
	t.Parallel()
	create, status, del, update := fixture("create_experiment"), fixture("update_experiment_status"), fixture("delete_experiment"), fixture("update_experiment")
	mark, balance := fixture("mark_decision_point"), fixture("test_condition_balance")
	// trio is a create in the context of three conditions, weights "a/b/c".
	trio := func(weights string) string {
		w := strings.Split(weights, "/")
		return fmt.Sprintf(`{name: Trio Two, context: reading-lab, decision_points: [{site: ReadPage, target: chapter-1}], conditions: [{code: baseline, weight: %s}, {code: hint, weight: %s}, {code: worked-example, weight: %s}]}`, w[0], w[1], w[2])
	}
	statusBy := func(ref string) behaviourCase {
		return behaviourCase{steps: []turnStep{
			request(status.say, "update_experiment_status", `{experiment_id: "`+ref+`", status: enrolling}`).
				expect(func(w *turnWant) { w.exact = yamlToJSON(status.params) }),
			status.approve(),
		}, backend: status.after}
	}
	cases := []behaviourCase{
		{name: "weights as strings with percent", steps: []turnStep{
			request(create.say, "create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: "60%"}, {code: variant, weight: " 40 "}]}`),
			create.approve(),
		}, backend: []check{hasExp("Fraction Hints", upgrade.StateInactive, "control:60", "variant:40")}},
		{name: "conditions as a map", steps: []turnStep{
			request(create.say, "create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: {control: 50, variant: 50}}`).
				expect(func(w *turnWant) {
					w.exact = `{"name":"Fraction Hints","context":"assign-prog","decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":[{"code":"control","weight":50},{"code":"variant","weight":50}],"assignment_unit":"individual","consistency_rule":"individual","post_experiment_rule":{"rule":"continue"},"filter_mode":"includeAll"}`
				}),
			create.approve(),
		}, backend: []check{hasExp("Fraction Hints", upgrade.StateInactive, "control:50", "variant:50")}},
		{name: "conditions as a map with weights as strings", steps: []turnStep{
			request(create.say, "create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: {variant: "60%", control: "40"}}`).
				expect(func(w *turnWant) {
					w.exact = `{"name":"Fraction Hints","context":"assign-prog","decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":[{"code":"control","weight":40},{"code":"variant","weight":60}],"assignment_unit":"individual","consistency_rule":"individual","post_experiment_rule":{"rule":"continue"},"filter_mode":"includeAll"}`
				}),
			create.approve(),
		}, backend: []check{hasExp("Fraction Hints", upgrade.StateInactive, "control:40", "variant:60")}},
		{name: "assignment algorithm: explicit default with stray blanks", steps: []turnStep{
			request(create.say, "create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 50}, {code: variant, weight: 50}], assignment_algorithm: " Random "}`).
				expect(func(w *turnWant) { w.exact = yamlToJSON(create.params) }),
			create.approve(),
		}, backend: create.after},
		{name: "assignment algorithm null", steps: []turnStep{
			request(create.say, "create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 50}, {code: variant, weight: 50}], assignment_algorithm: null}`).
				expect(func(w *turnWant) { w.exact = yamlToJSON(create.params) }),
			create.approve(),
		}, backend: create.after},
		{name: "assignment algorithm Thompson sampling refused with the reason", steps: []turnStep{
			{say: create.say, llm: analyze + gather("create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 50}, {code: variant, weight: 50}], assignment_algorithm: Thompson Sampling}`) + respond,
				want: turnWant{field: "assignment_algorithm", seen: []string{"ts_configurable (Thompson sampling) cannot be used", "mooclets are not enabled on backend"}}},
			{say: "random then", llm: analyze + "- call: {update_action_params: {key: assignment_algorithm, value: random}}\n" + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "create_experiment", exact: yamlToJSON(create.params)}},
			create.approve(),
		}, backend: create.after},
		{name: "weights as floats", steps: []turnStep{
			request(create.say, "create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 49.5}, {code: variant, weight: 50.50}]}`),
			create.approve(),
		}, backend: []check{hasExp("Fraction Hints", upgrade.StateInactive, "control:49.5", "variant:50.5")}},
		{name: "thirds to two places", steps: []turnStep{
			request("Create Trio Two in reading-lab with three equal conditions.", "create_experiment", trio("33.33/33.33/33.34")),
			yes("create_experiment"),
		}, backend: []check{hasExp("Trio Two", upgrade.StateInactive, "baseline:33.33", "hint:33.33", "worked-example:33.34")}},
		{name: "thirds to one place", steps: []turnStep{
			request("Create Trio Two in reading-lab with three equal conditions.", "create_experiment", trio(`"33.3"/"33.3"/"33.4"`)),
			yes("create_experiment"),
		}, backend: []check{hasExp("Trio Two", upgrade.StateInactive, "baseline:33.3", "hint:33.3", "worked-example:33.4")}},
		{name: "thirds that sum to 99.99", steps: []turnStep{
			request("Create Trio Two in reading-lab with three equal conditions.", "create_experiment", trio("33.33/33.33/33.33")),
			yes("create_experiment"),
		}, backend: []check{hasExp("Trio Two", upgrade.StateInactive)}},
		{name: "update thirds as floats", steps: []turnStep{
			request("Give Reading Trio 50/25/25.", "update_experiment", `{experiment_id: Reading Trio, conditions: [{code: baseline, weight: 50.0}, {code: hint, weight: "25.0"}, {code: worked-example, weight: 25}]}`).
				expect(func(w *turnWant) {
					w.exact = `{"experiment_id":"{{id:Reading Trio}}","conditions":[{"code":"baseline","weight":50},{"code":"hint","weight":25},{"code":"worked-example","weight":25}]}`
				}),
			yes("update_experiment"),
		}, backend: []check{hasExp("Reading Trio", upgrade.StateInactive, "baseline:50", "hint:25", "worked-example:25")}},
		named("id by name", statusBy("Math Hints")),
		named("id by name in another case", statusBy("math hints")),
		named("id by prefix", statusBy("{{prefix:Math Hints}}")),
		named("id in upper case", statusBy("{{upper:Math Hints}}")),
		{name: "id by name prefix", steps: []turnStep{
			request("Delete Reading Trio.", "delete_experiment", `{experiment_id: readi}`).
				expect(func(w *turnWant) { w.params = `{"experiment_id":"{{id:Reading Trio}}"}` }),
			yes("delete_experiment"),
		}, backend: []check{noExp("Reading Trio"), hasExp("Math Hints", upgrade.StateInactive)}},
		{name: "nested id by name", steps: []turnStep{
			request(mark.say, "mark_decision_point", `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}, assigned_condition: {condition_code: control, experiment_id: MATH HINTS LIVE}}`).
				expect(func(w *turnWant) { w.exact = yamlToJSON(mark.params) }),
			mark.approve(),
		}, backend: mark.after},
		{name: "tool names in another case", steps: []turnStep{
			ask(status.say, "- call: {ANALYZE_USER_REQUEST: {intent_type: needs_info, confidence: 0.9, user_request_summary: Start., reasoning: r}}\n"+
				"- call:\n    Set_Action_Needed: {action: Update_Experiment_Status, reasoning: r}\n    functions.set_action_params: {action_params: "+status.params+"}\n"+respond,
				"update_experiment_status").expect(func(w *turnWant) { w.exact = yamlToJSON(status.params); w.calls = 3 }),
			status.approve(),
		}, backend: status.after},
		{name: "arguments encoded twice", steps: []turnStep{
			ask(create.say, rawCall("analyze_user_request", `"{\"intent_type\": \"needs_info\", \"confidence\": 0.9, \"user_request_summary\": \"Create.\", \"reasoning\": \"r\"}"`)+
				"- call: {set_action_needed: {action: create_experiment, reasoning: r}}\n"+
				rawCall("set_action_params", `"{\"action_params\": \"{\\\"name\\\": \\\"Fraction Hints\\\", \\\"context\\\": \\\"assign-prog\\\", \\\"decision_points\\\": \\\"[{\\\\\\\"site\\\\\\\": \\\\\\\"SelectSection\\\\\\\", \\\\\\\"target\\\\\\\": \\\\\\\"absolute_value_plot_equality\\\\\\\"}]\\\", \\\"conditions\\\": [{\\\"code\\\": \\\"control\\\", \\\"weight\\\": \\\"50\\\"}, {\\\"code\\\": \\\"variant\\\", \\\"weight\\\": 50}]}\"}"`)+
				respond, "create_experiment").expect(func(w *turnWant) { w.exact = yamlToJSON(create.params); w.calls = 4 }),
			create.approve(),
		}, backend: create.after},
		{name: "update value encoded twice", steps: []turnStep{
			ask(update.say, analyze+"- call: {set_action_needed: {action: update_experiment, reasoning: r}}\n"+
				"- call: {update_action_params: {key: experiment_id, value: Math Hints}}\n"+
				`- call: {update_action_params: {key: conditions, value: '[{"code": "control", "weight": 70}, {"code": "variant", "weight": 30}]'}}`+"\n"+
				"- reply: Set.\n"+respond, "update_experiment").expect(func(w *turnWant) { w.exact = yamlToJSON(update.params); w.calls = 6 }),
			update.approve(),
		}, backend: update.after},
		{name: "text next to tool calls", steps: []turnStep{
			ask(del.say, "- reply: Let me classify this.\n  call: {analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: Delete., reasoning: r}}\n"+
				"- reply: I will prepare the delete.\n  call:\n    set_action_needed: {action: delete_experiment, reasoning: r}\n    set_action_params: {action_params: "+del.params+"}\n"+respond,
				"delete_experiment").expect(func(w *turnWant) {
				w.exact = yamlToJSON(del.params)
				w.calls = 3
				w.noResponse = []string{"Let me classify"}
			}),
			del.approve(),
		}, backend: del.after},
		{name: "duplicate parallel calls", steps: []turnStep{
			ask(create.say, analyze+
				parallel("get_context_metadata: {}", "get_context_metadata: {}", "set_action_needed: {action: create_experiment, reasoning: r}",
					"set_action_needed: {action: create_experiment, reasoning: r}", "set_action_params: {action_params: "+create.params+"}",
					"set_action_params: {action_params: "+create.params+"}")+respond,
				"create_experiment").expect(func(w *turnWant) { w.exact = yamlToJSON(create.params); w.calls = 3 }),
			create.approve(),
		}, backend: create.after},
		{name: "duplicate parallel updates", steps: []turnStep{
			ask(balance.say, analyze+gather("test_condition_balance", `{num_users: 10, context: assign-prog, site: SelectSection, target: analyzing_step_functions, experiment_id: Math Hints Live}`)+respond, "test_condition_balance"),
			{say: "no, use 20 users", llm: analyzeAnswer("user_confirmed: false, change_requested: true") +
				updates(`{key: num_users, value: 20}`, `{key: num_users, value: "20"}`) + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "test_condition_balance", exact: yamlToJSON(balance.params), calls: 3}},
			balance.approve(),
		}, backend: balance.after},
	}
	runBehaviour(t, cases)
}

// named gives a case its name.
func named(name string, c behaviourCase) behaviourCase { c.name = name; return c }

// oneTurn is a case of one turn that changes nothing on the server.
func oneTurn(name, say, script string, want turnWant) behaviourCase {
	return behaviourCase{name: name, steps: []turnStep{{say: say, llm: script, want: want}}, backend: []check{seeded()}}
}

// info is a question answered from the server: the analyzer, one gatherer
// reply of reads, the gatherer's last line, the responder.
func info(say, reads string, want turnWant) behaviourCase {
	want.calls = 4
	return behaviourCase{steps: []turnStep{{say: say, llm: analyze + reads + "- reply: I have what was asked.\n" + respond, want: want}},
		backend: []check{seeded()}}
}

// TestHabitInformation: information questions under the same habits:
// nulls for optional arguments, spellings, ids by name, prefix and case,
// tool names in another case, arguments encoded twice.
func TestHabitInformation(t *testing.T) {
	t.Parallel()
	running := turnWant{seen: []string{"Math Hints Live", "Stream Hints"}, unseen: []string{`"name":"Math Hints","`, "Reading Trio"}}
	runBehaviour(t, []behaviourCase{
		named("running, nulls for the other filters", info("Which experiments are running?",
			"- call: {get_all_experiments: {context: null, status: running, name: null}}\n", running)),
		named("status as a state name", info("Which experiments are enrolling?",
			"- call: {get_all_experiments: {status: Enrolling}}\n", running)),
		named("context in another case", info("What runs in assign-prog?",
			"- call: {get_all_experiments: {context: \"Assign-Prog \", status: null}}\n",
			turnWant{seen: []string{"Math Hints Live", `"name":"Math Hints","`}, unseen: []string{"Stream Hints", "Reading Trio"}})),
		named("details by name in another case", info("Tell me about math hints live.",
			"- call: {get_experiment_details: {experiment_id: math hints live}}\n",
			turnWant{seen: []string{"{{id:Math Hints Live}}", "analyzing_step_functions"}})),
		named("details by id prefix", info("Show experiment {{prefix:Reading Trio}}.",
			"- call: {get_experiment_details: {experiment_id: \"{{prefix:Reading Trio}}\"}}\n",
			turnWant{seen: []string{"{{id:Reading Trio}}", "worked-example"}})),
		named("enrollment by upper-case id", info("How many students are in Math Hints Live?",
			"- call: {get_enrollment_details: {experiment_id: \"{{upper:Math Hints Live}}\"}}\n",
			turnWant{seen: []string{"{{id:Math Hints Live}}", `"users":0`}})),
		named("find by part of a name", info("Is there a hints experiment?",
			"- call: {find_experiment: {name: HINTS}}\n", turnWant{seen: []string{"Math Hints Live", "Stream Hints"}})),
		named("null arguments object", info("Which contexts are there?",
			rawCall("get_available_contexts", "null"), turnWant{seen: []string{"reading-lab", "mathstream"}})),
		named("parallel reads, one twice", info("What can reading-lab and mathstream use?",
			parallel("get_conditions_for_context: {context: reading-lab}", "get_conditions_for_context: {context: mathstream}",
				"get_conditions_for_context: {context: reading-lab}"),
			turnWant{seen: []string{"worked-example"}})),
		named("tool name in another case, arguments encoded twice", info("Which experiments are running?",
			rawCall("Get_All_Experiments", `"{\"status\": \"running\", \"context\": null}"`), running)),
		named("text next to the reads", info("Which experiments are running?",
			"- reply: Let me look.\n  call: {functions.get_all_experiments: {status: running}}\n", running)),
		oneTurn("direct answer without text", "What is a decision point?", "- call: {analyze_user_request: {intent_type: Direct_Answer, confidence: 0.9, user_request_summary: A concept question., reasoning: r, direct_response: null}}\n"+
			"- reply: A decision point is a place in the app where UpGrade picks a condition.\n",
			turnWant{calls: 2, response: []string{"A decision point is"}}),
		oneTurn("intent in another case", "Which experiments are running?", "- call: {analyze_user_request: {intent_type: NEEDS_INFO, confidence: \"0.9\", user_request_summary: List., reasoning: r}}\n"+
			"- call: {get_all_experiments: {status: running}}\n- reply: Done looking.\n"+respond, running),
	})
}

// TestHabitDenials: denials that carry a change, or only look as if they
// did.
func TestHabitDenials(t *testing.T) {
	t.Parallel()
	update, create := fixture("update_experiment"), fixture("create_experiment")
	runBehaviour(t, []behaviourCase{
		// "rather" is a change word, but there is no change: the gatherer
		// changes nothing and the action is dropped, not shown again.
		{name: "no change after all", steps: []turnStep{
			request(update.say, "update_experiment", update.params),
			{say: "no, I would rather keep it as it is", llm: analyzeAnswer("user_confirmed: false") + "- reply: Nothing to change.\n" + "- reply: Okay, I left Math Hints as it is.\n",
				want: turnWant{calls: 3}},
		}, backend: []check{seeded()}},
		{name: "change with every param again", steps: []turnStep{
			request(create.say, "create_experiment", create.params),
			{say: "no, use 60/40 instead", llm: analyzeAnswer("user_confirmed: false, change_requested: true") +
				"- call: {set_action_params: {action_params: {name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}], conditions: [{code: control, weight: 60}, {code: variant, weight: 40}]}}}\n" + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "create_experiment", params: create.changed, calls: 3}},
			create.approve(),
		}, backend: create.afterChange},
		{name: "change to another action", steps: []turnStep{
			request(update.say, "update_experiment", update.params),
			{say: "no, just delete it instead", llm: analyzeAnswer("user_confirmed: false, change_requested: true") +
				gather("delete_experiment", `{experiment_id: Math Hints}`) + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "delete_experiment", params: `{"experiment_id":"{{id:Math Hints}}"}`, calls: 3}},
			yes("delete_experiment"),
		}, backend: []check{noExp("Math Hints"), experiments(len(seeds) - 1)}},
		{name: "two changes in a row", steps: []turnStep{
			request(update.say, "update_experiment", update.params),
			{say: "no, use 60/40", llm: analyzeAnswer("user_confirmed: false") + updates(update.changeFix...) + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "update_experiment", params: update.changed, calls: 3}},
			{say: "no, 55/45 instead", llm: analyzeAnswer("user_confirmed: false") +
				updates(`{key: "conditions[0].weight", value: 55}`, `{key: "conditions[1].weight", value: 45}`) + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "update_experiment", calls: 3}},
			update.approveChanged(),
		}, backend: []check{hasExp("Math Hints", upgrade.StateInactive, "control:55", "variant:45")}},
		{name: "model claims approval", steps: []turnStep{
			request(update.say, "update_experiment", update.params),
			{say: "hmm, maybe later, first tell me about its weights", llm: analyzeAnswer("user_confirmed: true") + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "update_experiment", exact: yamlToJSON(update.params), calls: 2}},
			{say: "ok, do it", llm: done, want: turnWant{ran: "update_experiment"}},
		}, backend: update.after},
	})
}

// TestHabitMissingNextTurn: what only the person can give is asked; their
// answer in the next turn is set with update_action_params (or a full
// set_action_params), which re-validates and clears the missing list.
func TestHabitMissingNextTurn(t *testing.T) {
	t.Parallel()
	create, balance, mark, initUser := fixture("create_experiment"), fixture("test_condition_balance"), fixture("mark_decision_point"), fixture("init_experiment_user")
	missing := func(action, params, names string) string {
		return fmt.Sprintf("- call:\n    set_action_needed: {action: %s, reasoning: r}\n    set_action_params: {action_params: %s}\n    set_missing_params: {missing_params: [%s]}\n", action, params, names)
	}
	asked := turnWant{calls: 3, seen: []string{`"missing":[`}}
	runBehaviour(t, []behaviourCase{
		{name: "create", steps: []turnStep{
			{say: "Create Fraction Hints in assign-prog at SelectSection/absolute_value_plot_equality.", llm: analyze +
				missing("create_experiment", `{name: Fraction Hints, context: assign-prog, decision_points: [{site: SelectSection, target: absolute_value_plot_equality}]}`, "conditions") + respond, want: asked},
			{say: "control and variant, 50/50", llm: analyze + updates(create.keys[3]) + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "create_experiment", exact: yamlToJSON(create.params), calls: 3}},
			create.approve(),
		}, backend: create.after},
		{name: "balance", steps: []turnStep{
			{say: "Simulate students at SelectSection/analyzing_step_functions for Math Hints Live.", llm: analyze +
				missing("test_condition_balance", `{context: assign-prog, site: SelectSection, target: analyzing_step_functions, experiment_id: Math Hints Live}`, "num_users") + respond, want: asked},
			{say: "20 students", llm: analyze + "- call: {update_action_params: {key: num_users, value: \"20\"}}\n" + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "test_condition_balance", exact: yamlToJSON(balance.params), calls: 3}},
			balance.approve(),
		}, backend: balance.after},
		// The draft without a condition holds the status that goes with
		// none; the condition given next turn brings its own status.
		{name: "mark", steps: []turnStep{
			{say: "Record what student1 saw at SelectSection/analyzing_step_functions.", llm: analyze +
				missing("mark_decision_point", `{user_id: student1, decision_point: {site: SelectSection, target: analyzing_step_functions}}`, "assigned_condition") + respond, want: asked},
			{say: "control of Math Hints Live", llm: analyze + updates(mark.keys[2]) + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "mark_decision_point", exact: yamlToJSON(mark.params), calls: 3}},
			mark.approve(),
		}, backend: mark.after},
		{name: "init with a full set", steps: []turnStep{
			{say: "Initialise student2.", llm: analyze + missing("init_experiment_user", `{user_id: student2}`, "group, working_group") + respond, want: asked},
			{say: "class c2", llm: analyze + "- call: {set_action_params: {action_params: " + initUser.params + "}}\n" + respond,
				want: turnWant{status: "awaiting_confirmation", confirm: "init_experiment_user", exact: yamlToJSON(initUser.params), calls: 3}},
			initUser.approve(),
		}, backend: initUser.after},
	})
}
