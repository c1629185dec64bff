package actions

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name   string
		action string
		raw    string
		want   []Problem
	}{
		{"unknown top-level field", "delete_experiment", `{"experiment_id":"x","force":true}`,
			[]Problem{{Field: "force", Value: "true", Message: "unknown field; the fields are experiment_id"}}},
		{"unknown nested field", "create_experiment", `{"name":"A","conditions":[{"code":"control","wieght":50}]}`,
			[]Problem{{Field: "conditions[0].wieght", Value: "50", Message: "unknown field; the fields are code, weight"}}},
		{"a word for a number", "create_experiment", `{"conditions":[{"code":"control","weight":"half"}]}`,
			[]Problem{{Field: "conditions[0].weight", Value: `"half"`, Message: "expected a number"}}},
		{"a list for a string", "update_experiment_status", `{"experiment_id":["x"],"status":"enrolling"}`,
			[]Problem{{Field: "experiment_id", Value: "a list", Message: "expected a string"}}},
		{"a list for an object", "mark_decision_point", `{"decision_point":["SelectSection"]}`,
			[]Problem{{Field: "decision_point", Value: "a list", Message: "expected an object"}}},
		{"a word for a bool", "create_experiment", `{"decision_points":[{"site":"s","target":"t","exclude_if_reached":"maybe"}]}`,
			[]Problem{{Field: "decision_points[0].exclude_if_reached", Value: `"maybe"`, Message: "expected true or false"}}},
		{"fraction for a count", "test_condition_balance", `{"num_users":10.5}`,
			[]Problem{{Field: "num_users", Value: "10.5", Message: "expected a whole number"}}},
		{"a key given twice", "delete_experiment", `{"experiment_id":"a","experimentId":"b"}`,
			[]Problem{{Field: "experiment_id", Message: `given twice (as "experimentId" and "experiment_id")`}}},
		{"several problems at once", "mark_decision_point", `{"user_id":[1],"decision_point":{"site":"s","x":1}}`,
			[]Problem{
				{Field: "decision_point.x", Value: "1", Message: "unknown field; the fields are site, target"},
				{Field: "user_id", Value: "a list", Message: "expected a string"},
			}},
		{"not an object", "delete_experiment", `["x"]`,
			[]Problem{{Value: "a list", Message: "expected an object"}}},
		{"broken JSON", "delete_experiment", `{"experiment_id":`,
			[]Problem{{Message: "arguments are not valid JSON: the JSON ends too early"}}},
		{"conditions as a map with a word for a weight", "create_experiment", `{"conditions":{"control":"half","variant":50}}`,
			[]Problem{{Field: "conditions[0].weight", Value: `"half"`, Message: "expected a number"}}},
		{"trailing data", "delete_experiment", `{"experiment_id":"x"} {}`,
			[]Problem{{Message: "arguments are not valid JSON: unexpected data after the value"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.action, json.RawMessage(tt.raw))
			if err == nil {
				t.Fatalf("Parse accepted %s: %#v", tt.raw, p)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if diff := cmp.Diff(tt.want, pe.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for _, pr := range tt.want {
				if pr.Field != "" && !strings.Contains(err.Error(), pr.Field+": ") {
					t.Errorf("error %q does not name field %s", err, pr.Field)
				}
				if pr.Value != "" && !strings.Contains(err.Error(), "got "+pr.Value) {
					t.Errorf("error %q does not name the value received %s", err, pr.Value)
				}
			}
			if strings.Count(err.Error(), tt.action) > 0 {
				t.Errorf("error %q repeats the action's name: the caller adds it once", err)
			}
		})
	}
}

// TestParseAcceptsWhatModelsWrite: values with one meaning are taken as
// meant, however a model spells them.
func TestParseAcceptsWhatModelsWrite(t *testing.T) {
	w30, w40, w50, w60, w70, w100 := 30.0, 40.0, 50.0, 60.0, 70.0, 100.0
	tests := []struct {
		name, action, raw string
		want              Params
	}{
		{"a number as a string", "test_condition_balance", `{"num_users":"500"}`, BalanceParams{NumUsers: 500}},
		{"a percentage", "create_experiment", `{"conditions":[{"code":"control","weight":"50%"},{"code":"variant","weight":50.0}]}`,
			withDefaults(CreateExperimentParams{Conditions: []ConditionParam{{Code: "control", Weight: &w50}, {Code: "variant", Weight: &w50}}})},
		{"an id as a number", "update_experiment_status", `{"experiment_id":12,"status":"Running"}`,
			UpdateExperimentStatusParams{ExperimentID: "12", Status: "enrolling"}},
		{"one object for a list", "create_experiment", `{"decision_points":{"site":"SelectSection","target":"t"},"conditions":{"code":"c","weight":100}}`,
			withDefaults(CreateExperimentParams{DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "t"}}, Conditions: []ConditionParam{{Code: "c", Weight: &w100}}})},
		{"a bool as a string", "create_experiment", `{"decision_points":[{"site":"s","target":"t","exclude_if_reached":"true"}]}`,
			withDefaults(CreateExperimentParams{DecisionPoints: []DecisionPointParam{{Site: "s", Target: "t", ExcludeIfReached: true}}})},
		{"one id for a group list", "init_experiment_user", `{"user_id":"u","group":{"classId":"c1"}}`,
			InitExperimentUserParams{UserID: "u", Group: map[string][]string{"classId": {"c1"}}}},
		{"keys in another case", "delete_experiment", `{"ExperimentId":" x "}`, DeleteExperimentParams{ExperimentID: "x"}},
		{"params encoded twice", "delete_experiment", `"{\"experiment_id\":\"x\"}"`, DeleteExperimentParams{ExperimentID: "x"}},
		{"a list encoded twice", "create_experiment", `{"tags":"[\"a\", \" b \"]"}`, withDefaults(CreateExperimentParams{Tags: []string{"a", "b"}})},
		{"conditions as a map, sorted by code", "create_experiment", `{"conditions":{"variant":70,"control":30}}`,
			withDefaults(CreateExperimentParams{Conditions: []ConditionParam{{Code: "control", Weight: &w30}, {Code: "variant", Weight: &w70}}})},
		{"conditions as a map with weights as strings", "create_experiment", `{"conditions":{" control ":"50","variant":"50%"}}`,
			withDefaults(CreateExperimentParams{Conditions: []ConditionParam{{Code: "control", Weight: &w50}, {Code: "variant", Weight: &w50}}})},
		{"conditions as a map of objects", "create_experiment", `{"conditions":{"control":{"weight":50},"variant":{"Weight":50}}}`,
			withDefaults(CreateExperimentParams{Conditions: []ConditionParam{{Code: "control", Weight: &w50}, {Code: "variant", Weight: &w50}}})},
		{"conditions as a map encoded twice", "create_experiment", `{"conditions":"{\"control\": 50, \"variant\": 50}"}`,
			withDefaults(CreateExperimentParams{Conditions: []ConditionParam{{Code: "control", Weight: &w50}, {Code: "variant", Weight: &w50}}})},
		{"an update's conditions as a map", "update_experiment", `{"experiment_id":"x","conditions":{"control":40,"variant":60}}`,
			UpdateExperimentParams{ExperimentID: "x", Conditions: &[]ConditionParam{{Code: "control", Weight: &w40}, {Code: "variant", Weight: &w60}}}},
		{"nulls and empties", "create_experiment", `{"description":"","tags":[],"post_experiment_rule":null,"inclusion_users":null,"group_type":""}`,
			withDefaults(CreateExperimentParams{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.action, json.RawMessage(tt.raw))
			if err != nil {
				t.Fatalf("Parse(%s): %v", tt.raw, err)
			}
			if diff := cmp.Diff(tt.want, p); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseUnknownAction(t *testing.T) {
	_, err := Parse("drop_database", json.RawMessage(`{}`))
	if !errors.Is(err, ErrUnknownAction) {
		t.Fatalf("err = %v, want ErrUnknownAction", err)
	}
	if !strings.Contains(err.Error(), "create_experiment") {
		t.Errorf("error %q does not list the known actions", err)
	}
}

func TestParseEmptyAndNull(t *testing.T) {
	for _, raw := range []string{"", "null", "  {}  "} {
		p, err := Parse("delete_experiment", json.RawMessage(raw))
		if err != nil {
			t.Fatalf("Parse(%q): %v", raw, err)
		}
		if diff := cmp.Diff(DeleteExperimentParams{}, p); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", raw, diff)
		}
	}
}

func TestParseNormalizes(t *testing.T) {
	tests := []struct {
		action, raw string
		want        Params
	}{
		{"update_experiment_status", `{"experiment_id":" id ","status":"Running"}`,
			UpdateExperimentStatusParams{ExperimentID: "id", Status: "enrolling"}},
		{"update_experiment_status", `{"experiment_id":"id","status":"paused"}`,
			UpdateExperimentStatusParams{ExperimentID: "id", Status: "enrollmentComplete"}},
		{"update_experiment_status", `{"experiment_id":"id","status":"completed"}`,
			UpdateExperimentStatusParams{ExperimentID: "id", Status: "cancelled"}},
		{"update_experiment_status", `{"experiment_id":"id","status":"ENROLLMENTCOMPLETE"}`,
			UpdateExperimentStatusParams{ExperimentID: "id", Status: "enrollmentComplete"}},
		{"update_experiment_status", `{"experiment_id":"id","status":"bogus"}`,
			UpdateExperimentStatusParams{ExperimentID: "id", Status: "bogus"}},
		{"create_experiment", `{"name":" A ","context":"assign-prog","assignment_unit":"Group","filter_mode":"exclude_all","consistency_rule":"GROUP","post_experiment_rule":{"rule":"Assign","condition_code":"Default"}}`,
			CreateExperimentParams{Name: "A", Context: "assign-prog", AssignmentUnit: "group", FilterMode: "excludeAll",
				ConsistencyRule: "group", PostExperimentRule: &PostRuleParam{Rule: "assign"}}},
		{"create_experiment", `{"assignment_unit":"within_subjects"}`,
			withDefaults(CreateExperimentParams{AssignmentUnit: "within-subjects"})},
		{"mark_decision_point", `{"user_id":"u","decision_point":{"site":"s"},"assigned_condition":null,"status":"No Condition Assigned"}`,
			MarkDecisionPointParams{UserID: "u", DecisionPoint: SiteTarget{Site: "s"}, Status: "no condition assigned"}},
		{"delete_experiment", `{"experiment_id":" 0B0B0B0B-AAAA-4000-8000-00000000000F "}`,
			DeleteExperimentParams{ExperimentID: "0b0b0b0b-aaaa-4000-8000-00000000000f"}},
		{"delete_experiment", `{"experiment_id":"Math HINTS"}`, DeleteExperimentParams{ExperimentID: "Math HINTS"}},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := Parse(tt.action, json.RawMessage(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		action, raw, want string
	}{
		{"create_experiment",
			`{"conditions":[{"weight":50,"code":"control"},{"code":"variant","weight":50}],"name":"Math Hints","decision_points":[{"target":"t","site":"s"}],"context":"assign-prog","tags":[]}`,
			`{"name":"Math Hints","context":"assign-prog","decision_points":[{"site":"s","target":"t"}],"conditions":[{"code":"control","weight":50},{"code":"variant","weight":50}],"assignment_unit":"individual","consistency_rule":"individual","post_experiment_rule":{"rule":"continue"},"filter_mode":"includeAll"}`},
		{"update_experiment",
			`{"tags":[],"experiment_id":"x","conditions":[{"code":"a","weight":100}]}`,
			`{"experiment_id":"x","conditions":[{"code":"a","weight":100}],"tags":[]}`},
		{"init_experiment_user",
			`{"working_group":{"schoolId":"s1","classId":"c1"},"user_id":"u","group":{"schoolId":["s1"],"classId":["c1","c2"]}}`,
			`{"user_id":"u","group":{"classId":["c1","c2"],"schoolId":["s1"]},"working_group":{"classId":"c1","schoolId":"s1"}}`},
		{"update_experiment_status", `{"status":"running","experiment_id":"x"}`, `{"experiment_id":"x","status":"enrolling"}`},
		{"mark_decision_point", `{"user_id":"u","decision_point":{"site":"s","target":"t"},"assigned_condition":null}`,
			`{"user_id":"u","decision_point":{"site":"s","target":"t"},"assigned_condition":null,"status":"no condition assigned"}`},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			p, err := Parse(tt.action, json.RawMessage(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonical(p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical =\n%s\nwant\n%s", got, tt.want)
			}
			// The canonical form is a fixed point.
			p2, err := Parse(tt.action, got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Canonical(p2)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(got) {
				t.Errorf("Canonical is not stable:\n%s\n%s", got, again)
			}
		})
	}
}

// TestGivenBindsAlike: edits start from the params as given, which bind
// to the same action: the members binding derives are left out.
func TestGivenBindsAlike(t *testing.T) {
	tests := []struct {
		action, raw string
	}{
		{"create_experiment",
			`{"name":"A","context":"c","assignment_unit":"individual","filter_mode":"includeAll","post_experiment_rule":{"rule":"continue"},"consistency_rule":"group"}`},
		{"mark_decision_point", `{"user_id":"u","decision_point":{"site":"s","target":"t"}}`},
		{"mark_decision_point", `{"userId":"u","decision_point":{"site":"s","target":"t"},"status":"condition not applied"}`},
		{"update_experiment", `{"experiment_id":"x","tags":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			b, err := Bind(tt.action, json.RawMessage(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			given, err := b.Given()
			if err != nil {
				t.Fatal(err)
			}
			again, err := Bind(tt.action, given)
			if err != nil || again.Hash != b.Hash {
				t.Errorf("the given params %s bind to %v (%v), not to the same params", given, again, err)
			}
		})
	}
}

// TestPatchDerivesAgain: a patch binds once, from the params as given, so
// a member derived from another one follows the edit.
func TestPatchDerivesAgain(t *testing.T) {
	b, err := Bind("mark_decision_point", json.RawMessage(`{"user_id":"u","decision_point":{"site":"s","target":"t"},"assigned_condition":{"condition_code":"control","experiment_id":"e"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Typed().(MarkDecisionPointParams).Status; got != "condition applied" {
		t.Fatalf("status %q", got)
	}
	nb, err := b.Patch(json.RawMessage(`{"assigned_condition":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := nb.Typed().(MarkDecisionPointParams).Status; got != "no condition assigned" || nb.Hash == b.Hash {
		t.Fatalf("after removing the condition: status %q (hash changed: %v)", got, nb.Hash != b.Hash)
	}
	// Read back from a checkpoint, which keeps the canonical form only, the
	// draft derives the status again all the same.
	act, _ := Builtin().Lookup("mark_decision_point")
	stored, err := Restore(act, nb.Params)
	if err != nil || stored.Hash != nb.Hash {
		t.Fatalf("restore: %v, %v", stored, err)
	}
	again, err := stored.Patch(json.RawMessage(`{"assigned_condition":{"condition_code":"variant","experiment_id":"e"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Typed().(MarkDecisionPointParams).Status; got != "condition applied" {
		t.Fatalf("restored draft with a condition: status %q", got)
	}
	if given, _ := stored.Given(); strings.Contains(string(given), "status") {
		t.Fatalf("the restored given form keeps the derived status: %s", given)
	}
}

// TestMergePatch: RFC 7386's cases, plus a key in another spelling
// patching the member it names.
func TestMergePatch(t *testing.T) {
	for _, tt := range []struct{ doc, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{``, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{"experiment_id":"x","post_experiment_rule":{"rule":"continue"}}`, `{"experimentId":"y","Post_Experiment_Rule":{"Rule":"assign"}}`,
			`{"experiment_id":"y","post_experiment_rule":{"rule":"assign"}}`},
	} {
		got, err := MergePatch(json.RawMessage(tt.doc), json.RawMessage(tt.patch))
		if err != nil || string(got) != tt.want {
			t.Errorf("MergePatch(%s, %s) = %s, %v; want %s", tt.doc, tt.patch, got, err, tt.want)
		}
	}
}

// TestPathPatch: update_action_params' key as a merge patch: a key, a
// dotted path, a list item (the whole list patched), an append, a null.
func TestPathPatch(t *testing.T) {
	doc := json.RawMessage(`{"name":"A","conditions":[{"code":"a","weight":50},{"code":"b","weight":50}],"post_experiment_rule":{"rule":"continue"}}`)
	for _, tt := range []struct {
		path  string
		value any
		want  string
	}{
		{"name", "B", `{"name":"B"}`},
		{" Name ", nil, `{"name":null}`},
		{"post_experiment_rule.rule", "assign", `{"post_experiment_rule":{"rule":"assign"}}`},
		{"conditions[1].weight", 40, `{"conditions":[{"code":"a","weight":50},{"code":"b","weight":40}]}`},
		{"conditions[2]", map[string]any{"code": "c"}, `{"conditions":[{"code":"a","weight":50},{"code":"b","weight":50},{"code":"c"}]}`},
		{"tags", []string{"x"}, `{"tags":["x"]}`},
	} {
		got, err := PathPatch(doc, tt.path, tt.value)
		if err != nil || string(got) != tt.want {
			t.Errorf("PathPatch(%q) = %s, %v; want %s", tt.path, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "conditions[5].weight", "conditions[x]", "a..b"} {
		if _, err := PathPatch(doc, bad, 1); err == nil {
			t.Errorf("PathPatch(%q) accepted", bad)
		}
	}
	// The document is not changed by building a patch of it.
	if _, err := PathPatch(doc, "conditions[0].weight", 10); err != nil || !strings.Contains(string(doc), `"weight":50},{"code":"b"`) {
		t.Errorf("doc changed: %s", doc)
	}
}

// TestSpecs: every registered action can be looked up, names itself, has
// a schema and takes empty params. What each declares (destructive,
// long-running, invalidates) is checked against docs/actions.md by
// TestDocsActionTable.
func TestSpecs(t *testing.T) {
	names := Builtin().Names()
	if len(names) == 0 {
		t.Fatal("no action is registered")
	}
	for _, n := range names {
		a, ok := Builtin().Lookup(string(n))
		if !ok {
			t.Fatalf("Lookup(%s) failed", n)
		}
		s := a.Spec()
		if s.Name != string(n) || len(s.Schema) == 0 {
			t.Errorf("%s: spec %+v does not name its action or has no schema", n, s)
		}
		p, err := Parse(string(n), json.RawMessage(`{}`))
		if err != nil {
			t.Errorf("Parse(%s, {}) = %v", n, err)
		} else if p.Action() != n {
			t.Errorf("%s: params %T name %s", n, p, p.Action())
		}
		if _, isJob := a.(JobAction); isJob != s.LongRunning {
			t.Errorf("%s: implements JobAction = %v, long-running %v", n, isJob, s.LongRunning)
		}
	}
	if _, ok := Builtin().Lookup("nope"); ok {
		t.Error("Lookup(nope) succeeded")
	}
}

func TestRequiresConfirmation(t *testing.T) {
	for _, n := range Builtin().Names() {
		a, _ := Builtin().Lookup(string(n))
		s := a.Spec()
		if !s.NeedsConfirmation("always") {
			t.Errorf("always/%s: no confirmation", n)
		}
		if s.NeedsConfirmation("never") {
			t.Errorf("never/%s: confirmation", n)
		}
		if got := s.NeedsConfirmation("destructive"); got != s.Destructive {
			t.Errorf("destructive/%s = %v, want %v", n, got, s.Destructive)
		}
		if !s.NeedsConfirmation("bogus") {
			t.Errorf("unknown policy/%s: no confirmation", n)
		}
	}
}

// TestProblemString: the field, the value and what is wrong, each once.
func TestProblemString(t *testing.T) {
	for _, tt := range []struct {
		p    Problem
		want string
	}{
		{Problem{Field: "conditions[0].weight", Value: `"half"`, Message: "expected a number"}, `conditions[0].weight: got "half": expected a number`},
		{Problem{Field: "status", Message: "status is required (enrolling to start)", Missing: true}, "status is required (enrolling to start)"},
		{Problem{Field: "site", Message: "sites are SelectSection"}, "site: sites are SelectSection"},
		{Problem{Message: "arguments are not valid JSON"}, "arguments are not valid JSON"},
	} {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
