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

// TestGathererKnowsTheRegistry: in every scope, get_action_schema's enum
// holds exactly the actions in scope, and the gatherer's prompt carries
// their notes; no other tool enumerates the actions (set_action_needed's
// action is checked in Go); the unknown scope offers every action and every
// tool, each scope's tools are the shared ones plus its object's.
func TestGathererKnowsTheRegistry(t *testing.T) {
	a := &Agent{deps: Deps{Actions: actions.Builtin()}}
	reg := a.reg()
	all := a.gTools(actions.ObjectNone)
	if d := cmp.Diff(strs(reg.Names()), enumOf(t, all, "get_action_schema", "action")); d != "" {
		t.Errorf("full get_action_schema enum (-registry +got):\n%s", d)
	}
	if got := enumOf(t, all, "set_action_needed", "action"); got != nil {
		t.Errorf("set_action_needed enumerates the actions again: %v", got)
	}
	for _, scope := range append(reg.Objects(), actions.ObjectNone) {
		if scope != actions.ObjectNone && !reg.Declares(scope) {
			continue
		}
		sys := a.gathererSystem(scope)
		if notes := reg.PromptNotes(scope); strings.Contains(sys, "{{") || notes != "" && !strings.Contains(sys, "Actions: "+notes+".") {
			t.Errorf("scope %q: the gatherer's prompt lacks the notes of the actions in scope:\n%s", scope, sys)
		}
		ts := a.gTools(scope)
		if d := cmp.Diff(strs(reg.InScope(scope)), enumOf(t, ts, "get_action_schema", "action")); d != "" {
			t.Errorf("scope %q: get_action_schema enum (-registry +got):\n%s", scope, d)
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
	if got := enumOf(t, nb, "get_action_schema", "action"); !slices.Contains(got, any("x_note")) || slices.Contains(got, any("create_experiment")) {
		t.Errorf("notebook scope's actions: %v", got)
	}
	if got := enumOf(t, grown.aTools(), analyzeToolName, "object"); !slices.Contains(got, any("notebook")) || !slices.Contains(got, nil) {
		t.Errorf("the analyzer's object enum: %v", got)
	}
}

type noteArgs struct {
	Text string `json:"text" jsonschema:"the note"`
}

// testAction is an action that does nothing, of object o.
func testAction(name actions.Name, o actions.Object, order int, desc string) actions.Def[noteArgs] {
	return actions.Def[noteArgs]{Name: name, Object: o, Order: order, Description: desc,
		Validate: func(*actions.Checker, noteArgs) error { return nil },
		Plan:     func(*actions.Planner, noteArgs) error { return nil },
		Execute: func(context.Context, actions.Env, noteArgs, string) (actions.Outcome, error) {
			return actions.Outcome{}, nil
		},
		Reconcile: func(context.Context, actions.Env, noteArgs, string, time.Time) (actions.Reconciliation, error) {
			return actions.Reconciliation{Outcome: actions.OutcomeRepeat}, nil
		},
	}
}

func addNotebook(r *actions.Registry) {
	actions.Add(r, testAction("x_note", "notebook", 1000, "Write a note."))
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

// TestOneMoreActionCostsItsName: an action added to a scope grows that
// scope's prompt and tools by its name in get_action_schema's enum and, when
// it has one, its note ("name: note; "): nothing else, so a scope takes
// a dozen more actions within the gatherer's budget.
func TestOneMoreActionCostsItsName(t *testing.T) {
	size := func(r *actions.Registry) int {
		a := &Agent{deps: Deps{Actions: r}}
		b, err := json.Marshal(a.gTools(actions.ObjectExperiment).llm)
		if err != nil {
			t.Fatal(err)
		}
		return len(a.gathererSystem(actions.ObjectExperiment)) + len(b)
	}
	base := actions.Builtin()
	grown := actions.Builtin()
	plain := testAction("x_plain_experiment_action", actions.ObjectExperiment, 1000,
		"A test action with a long description the gatherer's prompt never carries.")
	actions.Add(grown, plain)
	if got, want := size(grown)-size(base), len(`,"`+string(plain.Name)+`"`); got != want {
		t.Errorf("an action without a note added %d characters to its scope, want %d (its name once)", got, want)
	}
	noted := plain
	noted.Name, noted.Note, noted.Order = "x_noted_experiment_action", "a short note", 1001
	before := size(grown)
	actions.Add(grown, noted)
	if got, want := size(grown)-before, len(`,"`+string(noted.Name)+`"`)+len("; "+string(noted.Name)+": "+noted.Note); got != want {
		t.Errorf("an action with a note added %d characters to its scope, want %d (its name and its note)", got, want)
	}
}

// TestSetActionNeededTakesNamesAsWritten: with no enum on
// set_action_needed, Go takes an action name as models write it, and a
// name that is no action gets an error that lists the actions.
func TestSetActionNeededTakesNamesAsWritten(t *testing.T) {
	h := newHarness(t)
	h.ask("delete the experiment Math Hints", analyze(IntentNeedsInfo, "delete Math Hints", map[string]any{"object": "experiment", "needs_action": true}),
		calls(call("set_action_needed", map[string]any{"action": "drop_everything", "reasoning": "r"}),
			call("set_action_needed", map[string]any{"action": " Delete Experiment ", "reasoning": "r"})),
		text("Which experiment?"), text("Which experiment?"))
	var results []string
	for _, r := range h.llm.Requests() {
		for _, m := range r.Messages {
			if m.Name == "set_action_needed" && !slices.Contains(results, m.Content) {
				results = append(results, m.Content)
			}
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], "not an action") || !strings.Contains(results[0], "delete_experiment") ||
		results[1] != `{"action":"delete_experiment","ok":true}` {
		t.Errorf("set_action_needed results: %q", results)
	}
}
