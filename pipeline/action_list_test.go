package pipeline

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// enumOf is the enum of a tool's argument in a tool set.
func enumOf(t *testing.T, ts *toolSet, tool, arg string) []any {
	t.Helper()
	var s struct {
		Properties map[string]struct {
			Enum []any `json:"enum"`
		} `json:"properties"`
	}
	d := ts.byName[tool]
	if d == nil {
		t.Fatalf("no tool %s in %v", tool, ts.names())
	}
	if err := json.Unmarshal(d.schema, &s); err != nil {
		t.Fatal(err)
	}
	return s.Properties[arg].Enum
}

func strs(names []actions.Name) []any {
	out := []any{}
	for _, n := range names {
		out = append(out, string(n))
	}
	return out
}

// TestGathererKnowsTheRegistry: in every scope, the gatherer's prompt lists
// the actions in scope, and get_action_schema's and set_action_needed's
// enums hold exactly them; the unknown scope offers every action and every
// tool, each scope's tools are the shared ones plus its object's.
func TestGathererKnowsTheRegistry(t *testing.T) {
	a := &Agent{deps: Deps{Actions: actions.Builtin()}}
	reg := a.reg()
	all := a.gTools(actions.ObjectNone)
	if d := cmp.Diff(strs(reg.Names()), enumOf(t, all, "set_action_needed", "action")); d != "" {
		t.Errorf("full set_action_needed enum (-registry +got):\n%s", d)
	}
	for _, scope := range append(reg.Objects(), actions.ObjectNone) {
		if scope != actions.ObjectNone && !reg.Declares(scope) {
			continue
		}
		sys := a.gathererSystem(scope)
		if strings.Contains(sys, "{{") || !strings.Contains(sys, "Actions: "+reg.PromptList(scope)+".") {
			t.Errorf("scope %q: the gatherer's prompt does not list the actions in scope:\n%s", scope, sys)
		}
		ts := a.gTools(scope)
		want := strs(reg.InScope(scope))
		for _, tool := range []string{"get_action_schema", "set_action_needed"} {
			if d := cmp.Diff(want, enumOf(t, ts, tool, "action")); d != "" {
				t.Errorf("scope %q: %s enum (-registry +got):\n%s", scope, tool, d)
			}
		}
		for _, d := range all.list {
			offered := ts.byName[d.name] != nil
			if want := inScope(d.object, scope); offered != want {
				t.Errorf("scope %q: tool %s (object %q) offered %v", scope, d.name, d.object, offered)
			}
		}
		if ts != a.gTools(scope) || sys != a.gathererSystem(scope) {
			t.Errorf("scope %q: the tool list or the prompt was made twice", scope)
		}
	}
	for _, name := range []string{"find_experiment", "find_feature_flag", "find_segment", "get_core_terms", "set_action_params"} {
		if all.byName[name] == nil {
			t.Errorf("the full set lacks %s", name)
		}
	}
	for _, d := range all.list {
		if strings.HasPrefix(d.name, "get_") && strings.HasSuffix(d.name, "_schema") && d.name != "get_action_schema" {
			t.Errorf("a per-action schema tool is offered: %s", d.name)
		}
	}
}

// TestScopesAreStable: each scope's tool definitions are the same bytes
// from agent to agent (and so from process to process), and adding an
// action and a lookup of a new object changes no other scope's prompt or
// tools.
func TestScopesAreStable(t *testing.T) {
	encode := func(a *Agent, scope actions.Object) string {
		b, err := json.Marshal(a.gTools(scope).llm)
		if err != nil {
			t.Fatal(err)
		}
		return a.gathererSystem(scope) + string(b)
	}
	one, two := &Agent{deps: Deps{Actions: actions.Builtin()}}, &Agent{deps: Deps{Actions: actions.Builtin()}}
	mine := actions.Builtin()
	addNotebook(mine)
	grown := &Agent{deps: Deps{Actions: mine}}
	for _, scope := range one.reg().Objects() {
		if encode(one, scope) != encode(two, scope) {
			t.Errorf("scope %q differs between two agents", scope)
		}
		if encode(one, scope) != encode(grown, scope) {
			t.Errorf("scope %q changed when an action of another object was added", scope)
		}
	}
	nb := grown.gTools("notebook")
	if nb.byName["x_find_note"] == nil || one.gTools(actions.ObjectNone).byName["x_find_note"] != nil {
		t.Error("the notebook lookup is not offered in its scope only")
	}
	if got := enumOf(t, nb, "set_action_needed", "action"); !slices.Contains(got, any("x_note")) || slices.Contains(got, any("create_experiment")) {
		t.Errorf("notebook scope's actions: %v", got)
	}
	if got := enumOf(t, grown.aTools(), analyzeToolName, "object"); !slices.Contains(got, any("notebook")) || !slices.Contains(got, nil) {
		t.Errorf("the analyzer's object enum: %v", got)
	}
}

type noteArgs struct {
	Text string `json:"text" jsonschema:"the note"`
}

func addNotebook(r *actions.Registry) {
	actions.Add(r, actions.Def[noteArgs]{Name: "x_note", Object: "notebook", Order: 1000, Description: "Write a note.",
		Validate: func(*actions.Checker, noteArgs) error { return nil },
		Plan:     func(*actions.Planner, noteArgs) error { return nil },
		Execute: func(context.Context, actions.Env, noteArgs, string) (actions.Outcome, error) {
			return actions.Outcome{}, nil
		},
		Reconcile: func(context.Context, actions.Env, noteArgs, string, time.Time) (actions.Reconciliation, error) {
			return actions.Reconciliation{Outcome: actions.OutcomeRepeat}, nil
		},
	})
	actions.AddLookup(r, actions.LookupDef[noteArgs]{Name: "x_find_note", Object: "notebook", Description: "Find a note.",
		Run: func(_ context.Context, _ actions.Env, a noteArgs) (any, error) {
			return map[string]string{"found": a.Text}, nil
		}})
}

// TestScopesConcurrently: turns of one agent may make the same scope's tool
// list at the same time; each scope is made once and every caller gets it.
func TestScopesConcurrently(t *testing.T) {
	a := &Agent{deps: Deps{Actions: actions.Builtin()}}
	scopes := []actions.Object{actions.ObjectNone, actions.ObjectExperiment, actions.ObjectFeatureFlag, actions.ObjectSegment}
	got := make([][]*toolSet, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			for _, s := range scopes {
				got[i] = append(got[i], a.gTools(s))
				_ = a.gathererSystem(s)
			}
			got[i] = append(got[i], a.aTools(), a.rTools())
		})
	}
	wg.Wait()
	for i := range got {
		for j := range got[i] {
			if got[i][j] != got[0][j] {
				t.Fatalf("goroutine %d got another tool list %d", i, j)
			}
		}
	}
}
