package actions

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPromptList: the gatherer's list of actions comes from the registry,
// in the declared order; the built-in actions keep the order and notes the
// prompt had when it was written by hand.
func TestPromptList(t *testing.T) {
	want := "create_experiment, update_experiment, update_experiment_status (enrolling = start, enrollmentComplete = stop, cancelled, archived), " +
		"delete_experiment, init_experiment_user, get_decision_point_assignments, mark_decision_point, visit_decision_point, " +
		"test_condition_balance (simulates many synthetic users as a background job), " +
		"create_feature_flag, update_feature_flag, update_feature_flag_status (enabled = on, disabled = off, archived), delete_feature_flag, " +
		"add_feature_flag_list (kind include or exclude; one of users, groups, segment_ids), " +
		"update_feature_flag_list (list_id from get_feature_flag_details), remove_feature_flag_list, create_segment, update_segment, delete_segment"
	if d := cmp.Diff(want, PromptList()); d != "" {
		t.Errorf("PromptList (-want +got):\n%s", d)
	}
}

// TestDocsActionTable: docs/actions.md's table of actions is the registry:
// a registered action missing from it, one it lists that is not
// registered, or a declaration that differs fails here.
func TestDocsActionTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "actions.md"))
	if err != nil {
		t.Fatal(err)
	}
	const header = "| action | file | destructive | long-running | invalidates |"
	_, rest, ok := strings.Cut(string(doc), header+"\n|---|---|---|---|---|\n")
	if !ok {
		t.Fatalf("docs/actions.md has no table starting %q", header)
	}
	table, _, _ := strings.Cut(rest, "\n\n")
	var want []string
	for _, n := range Names() {
		a, _ := Lookup(string(n))
		s := a.Spec()
		inv := make([]string, len(s.Invalidates))
		for i, c := range s.Invalidates {
			inv[i] = string(c)
		}
		want = append(want, "| `"+s.Name+"` | `"+File(s.Name)+"` | "+yes(s.Destructive)+" | "+yes(s.LongRunning)+" | "+strings.Join(inv, ", ")+" |")
	}
	var got []string
	for _, row := range strings.Split(strings.TrimSpace(table), "\n") {
		got = append(got, strings.Join(strings.Fields(row), " "))
	}
	for i, row := range want {
		want[i] = strings.Join(strings.Fields(row), " ")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("docs/actions.md's table differs from the registry (-registry +docs):\n%s", d)
	}
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

// TestRefsFromTags: the params that name an experiment are read from the
// `ref` tags of the params types, nested and in lists too.
func TestRefsFromTags(t *testing.T) {
	for name, want := range map[Name][]Ref{
		DeleteExperiment:     {{Kind: RefExperiment, Path: "experiment_id"}},
		MarkDecisionPoint:    {{Kind: RefExperiment, Path: "assigned_condition.experiment_id"}},
		TestConditionBalance: {{Kind: RefExperiment, Path: "experiment_id"}},
		CreateExperiment:     nil,
	} {
		a, _ := Lookup(string(name))
		if d := cmp.Diff(want, a.Spec().Refs); d != "" {
			t.Errorf("%s refs (-want +got):\n%s", name, d)
		}
	}
	type item struct {
		ID string `json:"id" ref:"segment"`
	}
	type params struct {
		Items []item   `json:"items"`
		IDs   []string `json:"ids" ref:"segment"`
		Inner *struct {
			Flag string `json:"flag_id" ref:"flag"`
		} `json:"inner,omitempty"`
	}
	refs := refsOf(reflectType[params](), "")
	wantRefs := []Ref{{Kind: "segment", Path: "items[].id"}, {Kind: "segment", Path: "ids[]"}, {Kind: "flag", Path: "inner.flag_id"}}
	if d := cmp.Diff(wantRefs, refs); d != "" {
		t.Fatalf("refs (-want +got):\n%s", d)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(`{"items":[{"id":"Gold"},{"id":"x-1"}],"ids":["Gold"],"inner":{"flag_id":"Beta"}}`), &m)
	upper := func(v string) (string, error) {
		if v == "x-1" {
			return v, nil
		}
		return strings.ToUpper(v), nil
	}
	for _, r := range refs {
		if _, err := r.Resolve(m, upper); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := json.Marshal(m)
	if want := `{"ids":["GOLD"],"inner":{"flag_id":"BETA"},"items":[{"id":"GOLD"},{"id":"x-1"}]}`; string(got) != want {
		t.Errorf("resolved: %s, want %s", got, want)
	}
}

// TestRegisterRefuses: a declaration that cannot work panics at init.
func TestRegisterRefuses(t *testing.T) {
	ok := func(*Checker, struct{}) error { return nil }
	plan := func(*Planner, struct{}) error { return nil }
	for name, d := range map[string]Def[struct{}]{
		"taken":      {Name: DeleteExperiment, Validate: ok, Plan: plan, Execute: nil},
		"no name":    {Validate: ok, Plan: plan},
		"CamelCase":  {Name: "CamelCase", Validate: ok, Plan: plan},
		"no plan":    {Name: "x_no_plan", Validate: ok},
		"half a job": {Name: "x_half_job", Validate: ok, Plan: plan, Total: func(struct{}) int { return 1 }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			Register(d)
		}()
	}
	if _, ok := Lookup("x_no_plan"); ok {
		t.Error("a refused declaration was registered")
	}
}

func reflectType[T any]() reflect.Type { return reflect.TypeOf(*new(T)) }
