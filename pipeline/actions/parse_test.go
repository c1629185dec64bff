package actions

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseStrict(t *testing.T) {
	tests := []struct {
		name   string
		action string
		raw    string
		want   []Problem
	}{
		{"unknown top-level field", "delete_experiment", `{"experiment_id":"x","force":true}`,
			[]Problem{{Field: "force", Message: "unknown field (known fields: experiment_id)"}}},
		{"unknown nested field", "create_experiment", `{"name":"A","conditions":[{"code":"control","wieght":50}]}`,
			[]Problem{{Field: "conditions[0].wieght", Message: "unknown field (known fields: code, weight)"}}},
		{"string for a number", "create_experiment", `{"conditions":[{"code":"control","weight":"50"}]}`,
			[]Problem{{Field: "conditions[0].weight", Message: `expected a number, got a string "50"`}}},
		{"number for a string", "update_experiment_status", `{"experiment_id":12,"status":"enrolling"}`,
			[]Problem{{Field: "experiment_id", Message: "expected a string, got the number 12"}}},
		{"object for a list", "create_experiment", `{"decision_points":{"site":"SelectSection"}}`,
			[]Problem{{Field: "decision_points", Message: "expected a list, got an object"}}},
		{"string for a bool", "create_experiment", `{"decision_points":[{"site":"s","target":"t","exclude_if_reached":"yes"}]}`,
			[]Problem{{Field: "decision_points[0].exclude_if_reached", Message: `expected true or false, got a string "yes"`}}},
		{"fraction for a count", "test_condition_balance", `{"num_users":10.5}`,
			[]Problem{{Field: "num_users", Message: "expected a whole number, got 10.5"}}},
		{"string for a count", "test_condition_balance", `{"num_users":"500"}`,
			[]Problem{{Field: "num_users", Message: `expected a whole number, got a string "500"`}}},
		{"wrong map value", "init_experiment_user", `{"user_id":"u","group":{"classId":"c1"}}`,
			[]Problem{{Field: "group.classId", Message: `expected a list, got a string "c1"`}}},
		{"several problems at once", "mark_decision_point", `{"user_id":1,"decision_point":{"site":"s","x":1}}`,
			[]Problem{
				{Field: "decision_point.x", Message: "unknown field (known fields: site, target)"},
				{Field: "user_id", Message: "expected a string, got the number 1"},
			}},
		{"not an object", "delete_experiment", `["x"]`,
			[]Problem{{Message: "expected an object, got a list"}}},
		{"broken JSON", "delete_experiment", `{"experiment_id":`,
			[]Problem{{Message: "not valid JSON: the JSON ends too early"}}},
		{"trailing data", "delete_experiment", `{"experiment_id":"x"} {}`,
			[]Problem{{Message: "unexpected data after the params object"}}},
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
			if !strings.HasPrefix(err.Error(), tt.action+" params: ") {
				t.Errorf("error %q does not name the action", err)
			}
			for _, pr := range tt.want {
				if pr.Field != "" && !strings.Contains(err.Error(), pr.Field+": ") {
					t.Errorf("error %q does not name field %s", err, pr.Field)
				}
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
			CreateExperimentParams{AssignmentUnit: "within-subjects"}},
		{"mark_decision_point", `{"user_id":"u","decision_point":{"site":"s"},"assigned_condition":null,"status":"No Condition Assigned"}`,
			MarkDecisionPointParams{UserID: "u", DecisionPoint: SiteTarget{Site: "s"}, Status: "no condition assigned"}},
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
			`{"name":"Math Hints","context":"assign-prog","decision_points":[{"site":"s","target":"t"}],"conditions":[{"code":"control","weight":50},{"code":"variant","weight":50}]}`},
		{"update_experiment",
			`{"tags":[],"experiment_id":"x","conditions":[{"code":"a","weight":100}]}`,
			`{"experiment_id":"x","conditions":[{"code":"a","weight":100}],"tags":[]}`},
		{"init_experiment_user",
			`{"working_group":{"schoolId":"s1","classId":"c1"},"user_id":"u","group":{"schoolId":["s1"],"classId":["c1","c2"]}}`,
			`{"user_id":"u","group":{"classId":["c1","c2"],"schoolId":["s1"]},"working_group":{"classId":"c1","schoolId":"s1"}}`},
		{"update_experiment_status", `{"status":"running","experiment_id":"x"}`, `{"experiment_id":"x","status":"enrolling"}`},
		{"mark_decision_point", `{"user_id":"u","decision_point":{"site":"s","target":"t"},"assigned_condition":null}`,
			`{"user_id":"u","decision_point":{"site":"s","target":"t"},"assigned_condition":null}`},
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

func TestSpecs(t *testing.T) {
	names := Names()
	if len(names) != 9 {
		t.Fatalf("Names() has %d actions, want 9", len(names))
	}
	want := map[Name][3]bool{ // destructive, long-running, writes experiments
		CreateExperiment:            {false, false, true},
		UpdateExperiment:            {false, false, true},
		UpdateExperimentStatus:      {true, false, true},
		DeleteExperiment:            {true, false, true},
		InitExperimentUser:          {false, false, false},
		GetDecisionPointAssignments: {false, false, false},
		MarkDecisionPoint:           {true, false, false},
		VisitDecisionPoint:          {true, false, false},
		TestConditionBalance:        {true, true, false},
	}
	for _, n := range names {
		s, ok := Lookup(string(n))
		if !ok {
			t.Fatalf("Lookup(%s) failed", n)
		}
		if got := [3]bool{s.Destructive, s.LongRunning, s.WritesExperiments}; got != want[n] {
			t.Errorf("%s: destructive/long-running/writes = %v, want %v", n, got, want[n])
		}
		p, ok := s.Params.(Params)
		if !ok || p.Action() != n {
			t.Errorf("%s: Params %T does not name its action", n, s.Params)
		}
		if _, err := Parse(string(n), json.RawMessage(`{}`)); err != nil {
			t.Errorf("Parse(%s, {}) = %v", n, err)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) succeeded")
	}
}

func TestRequiresConfirmation(t *testing.T) {
	for _, n := range Names() {
		s, _ := Lookup(string(n))
		if !RequiresConfirmation("always", n) {
			t.Errorf("always/%s: no confirmation", n)
		}
		if RequiresConfirmation("never", n) {
			t.Errorf("never/%s: confirmation", n)
		}
		if got := RequiresConfirmation("destructive", n); got != s.Destructive {
			t.Errorf("destructive/%s = %v, want %v", n, got, s.Destructive)
		}
		if !RequiresConfirmation("bogus", n) {
			t.Errorf("unknown policy/%s: no confirmation", n)
		}
	}
	if !RequiresConfirmation("never", "drop_database") {
		t.Error("an unknown action must always need confirmation")
	}
}
