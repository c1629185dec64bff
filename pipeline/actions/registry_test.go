package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestInScope: the actions of a scope come from the registry: those of
// that object and the shared ones, in the declared order; no scope holds
// all of them, and the unknown scope holds every one. The gatherer's notes
// are those of the actions in scope that have one.
func TestInScope(t *testing.T) {
	r := Builtin()
	all := r.Names()
	if got := r.InScope(ObjectNone); !slices.Equal(got, all) {
		t.Errorf("InScope(none) = %v, want every action", got)
	}
	if got := r.PromptNotes(ObjectNone); got != promptNotesOf(r, all) {
		t.Errorf("PromptNotes(none) = %q, want every note", got)
	}
	for _, o := range r.Objects() {
		var want []Name
		for _, n := range all {
			a, _ := r.Lookup(string(n))
			if obj := a.Spec().Object; obj == o || obj == ObjectNone {
				want = append(want, n)
			}
		}
		if got := r.InScope(o); !slices.Equal(got, want) {
			t.Errorf("InScope(%s) = %v, want %v", o, got, want)
		}
		if got := r.PromptNotes(o); got != promptNotesOf(r, want) {
			t.Errorf("PromptNotes(%s) = %q, want %q", o, got, promptNotesOf(r, want))
		}
		if o != ObjectMetric && (len(want) == 0 || len(want) == len(all)) {
			t.Errorf("scope %s offers %d of %d actions", o, len(want), len(all))
		}
	}
	for i := 1; i < len(all); i++ {
		if a, b := r.entries[string(all[i-1])].order, r.entries[string(all[i])].order; a > b {
			t.Errorf("%s (order %d) listed before %s (order %d)", all[i-1], a, all[i], b)
		}
	}
}

func promptNotesOf(r *Registry, names []Name) string {
	var parts []string
	for _, n := range names {
		a, _ := r.Lookup(string(n))
		if note := a.Spec().Note; note != "" {
			parts = append(parts, string(n)+": "+note)
		}
	}
	return strings.Join(parts, "; ")
}

// TestBuiltinObjects: every built-in action declares one of the built-in
// objects.
func TestBuiltinObjects(t *testing.T) {
	r := Builtin()
	for _, n := range r.Names() {
		a, _ := r.Lookup(string(n))
		if n == UndoChange {
			continue // shared by every scope (spec/undo.md)
		}
		if o := a.Spec().Object; !slices.Contains(builtinObjects[:], o) {
			t.Errorf("%s declares object %q, want one of %v", n, o, builtinObjects)
		}
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
	r := Builtin()
	for _, n := range r.Names() {
		a, _ := r.Lookup(string(n))
		s := a.Spec()
		inv := make([]string, len(s.Invalidates))
		for i, c := range s.Invalidates {
			inv[i] = string(c)
		}
		want = append(want, "| `"+s.Name+"` | `"+r.File(s.Name)+"` | "+yes(s.Destructive)+" | "+yes(s.LongRunning)+" | "+strings.Join(inv, ", ")+" |")
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
		a, _ := Builtin().Lookup(string(name))
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
	var p params
	_ = json.Unmarshal([]byte(`{"items":[{"id":"Gold"},{"id":"x-1"}],"ids":["Gold"],"inner":{"flag_id":"Beta"}}`), &p)
	upper := func(v string) (string, error) {
		if v == "x-1" {
			return v, nil
		}
		return strings.ToUpper(v), nil
	}
	for _, r := range refs {
		if _, err := refParamsOf(&p).resolve(r, upper); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := json.Marshal(p)
	if want := `{"items":[{"id":"GOLD"},{"id":"x-1"}],"ids":["GOLD"],"inner":{"flag_id":"BETA"}}`; string(got) != want {
		t.Errorf("resolved: %s, want %s", got, want)
	}
}

// TestRegisterRefuses: a declaration that cannot work panics when it is
// added.
func TestRegisterRefuses(t *testing.T) {
	r := Builtin()
	ok := func(*Checker, struct{}) error { return nil }
	plan := func(*Planner, struct{}) error { return nil }
	for name, d := range map[string]Def[struct{}]{
		"taken":      {Name: DeleteExperiment, Validate: ok, Plan: plan, Execute: nil},
		"no name":    {Validate: ok, Plan: plan},
		"CamelCase":  {Name: "CamelCase", Validate: ok, Plan: plan},
		"no plan":    {Name: "x_no_plan", Validate: ok},
		"half a job": {Name: "x_half_job", Validate: ok, Plan: plan, Total: func(struct{}) int { return 1 }},
		"Object":     {Name: "x_bad_object", Object: "Feature Flags", Validate: ok, Plan: plan},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			Add(r, d)
		}()
	}
	if _, ok := r.Lookup("x_no_plan"); ok {
		t.Error("a refused declaration was registered")
	}
}

func reflectType[T any]() reflect.Type { return reflect.TypeOf(*new(T)) }

type noteParams struct {
	Text string `json:"text"`
}

func noteDef(name Name, o Object) Def[noteParams] {
	return Def[noteParams]{Name: name, Object: o, Note: "a test note",
		Validate: func(*Checker, noteParams) error { return nil },
		Plan:     func(*Planner, noteParams) error { return nil },
		Execute: func(context.Context, Env, noteParams, string) (Outcome, error) {
			return Outcome{}, nil
		},
		Reconcile: func(context.Context, Env, noteParams, string, time.Time) (Reconciliation, error) {
			return Reconciliation{Outcome: OutcomeRepeat}, nil
		},
	}
}

// TestRegistryIsAValue: what a test adds to its copy is seen by no other
// copy; an action of a new object adds that object and changes no other
// scope's list.
func TestRegistryIsAValue(t *testing.T) {
	mine := Builtin()
	before := map[Object]string{}
	for _, o := range mine.Objects() {
		before[o] = fmt.Sprint(mine.InScope(o), mine.PromptNotes(o))
	}
	Add(mine, noteDef("x_note", "notebook"))
	AddLookup(mine, LookupDef[noteParams]{Name: "x_find_note", Object: "notebook", Description: "Find a note.",
		Run: func(context.Context, Env, noteParams) (any, error) { return "found", nil }})
	if _, ok := Builtin().Lookup("x_note"); ok {
		t.Fatal("an action added to one copy is in the built-in set")
	}
	if slices.ContainsFunc(Builtin().Lookups(), func(l LookupTool) bool { return l.Name == "x_find_note" }) {
		t.Fatal("a lookup added to one copy is in the built-in set")
	}
	if got := mine.Objects(); !slices.Contains(got, "notebook") {
		t.Fatalf("objects %v lack notebook", got)
	}
	for o, was := range before {
		if got := fmt.Sprint(mine.InScope(o), mine.PromptNotes(o)); got != was {
			t.Errorf("scope %s changed: %q, was %q", o, got, was)
		}
	}
	if got := mine.PromptNotes("notebook"); got != "x_note: a test note" {
		t.Errorf("notebook scope: %q", got)
	}
	if got := mine.PromptNotes(ObjectNone); !strings.Contains(got, "x_note: a test note") {
		t.Errorf("the full notes lack the new action: %q", got)
	}
	mineLookups := mine.Lookups()
	i := slices.IndexFunc(mineLookups, func(l LookupTool) bool { return l.Name == "x_find_note" })
	res, err := mineLookups[i].Run(context.Background(), Env{}, json.RawMessage(`{"text":"a"}`))
	if err != nil || res != "found" {
		t.Errorf("lookup: %v, %v", res, err)
	}
	if _, err := mineLookups[i].Run(context.Background(), Env{}, json.RawMessage(`{"text":{"a":1}}`)); err == nil {
		t.Error("a lookup took an object for a string")
	}
}

// TestParseObject: the object as models write it.
func TestParseObject(t *testing.T) {
	r := Builtin()
	Add(r, noteDef("x_note", "notebook"))
	for in, want := range map[string]Object{
		"experiment": ObjectExperiment, " Experiment ": ObjectExperiment, "experiments": ObjectExperiment,
		"Feature Flag": ObjectFeatureFlag, "feature flag": ObjectFeatureFlag, "flags": ObjectFeatureFlag,
		"feature_flag": ObjectFeatureFlag, "feature-flags": ObjectFeatureFlag, "FLAG": ObjectFeatureFlag,
		"segment": ObjectSegment, "Segments": ObjectSegment, "metric": ObjectMetric, "notebooks": "notebook",
	} {
		if got, ok := r.ParseObject(in); !ok || got != want {
			t.Errorf("ParseObject(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "  ", "null", "None", "unknown", "not sure", "weather", "class"} {
		if got, ok := r.ParseObject(in); ok {
			t.Errorf("ParseObject(%q) = %q, want not known", in, got)
		}
	}
	if _, ok := Builtin().ParseObject("notebook"); ok {
		t.Error("the built-in set knows the test object")
	}
}

// TestNothingComputedOnAdd: adding an action works out no schema; the
// first Spec does, once.
func TestNothingComputedOnAdd(t *testing.T) {
	type unschemable struct {
		C chan int `json:"c"`
	}
	r := NewRegistry()
	Add(r, Def[unschemable]{Name: "x_lazy", Object: "notebook",
		Validate: func(*Checker, unschemable) error { return nil },
		Plan:     func(*Planner, unschemable) error { return nil },
		Execute:  func(context.Context, Env, unschemable, string) (Outcome, error) { return Outcome{}, nil },
		Reconcile: func(context.Context, Env, unschemable, string, time.Time) (Reconciliation, error) {
			return Reconciliation{}, nil
		},
	})
	if got := r.InScope("notebook"); !slices.Equal(got, []Name{"x_lazy"}) || r.PromptNotes("notebook") != "" {
		t.Errorf("InScope: %v, notes %q", got, r.PromptNotes("notebook"))
	}
	a, _ := r.Lookup("x_lazy")
	defer func() {
		if recover() == nil {
			t.Error("the schema of a channel was made")
		}
	}()
	_ = a.Spec()
}
