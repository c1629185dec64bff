package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestUpdateActionParamsAsModelsSendThem: update_action_params is a merge
// patch of the params as given, bound once per call. Models send one key
// per call, dotted paths, keys in camelCase, numbers as strings, display
// names, explicit nulls and names where ids belong; each lands in the one
// member it names, and a member derived from another follows the edit.
func TestUpdateActionParamsAsModelsSendThem(t *testing.T) {
	h := newHarness(t)
	e := h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "")
	ctx := context.Background()
	tr, err := h.agent.begin(ctx, h.sess)
	if err != nil {
		t.Fatal(err)
	}
	tr.sess.chooseAction("mark_decision_point")
	params := func() map[string]any {
		var m map[string]any
		if err := json.Unmarshal(tr.sess.draft.params(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, step := range []struct {
		key   string
		value any
	}{
		{"userId", " student1 "},
		{"decision_point.site", "SelectSection"},
		{"Decision_Point.Target", "absolute_value_plot_equality"},
		{"assigned_condition", map[string]any{"condition_code": "control", "experiment_id": "math hints"}},
	} {
		if _, err := tr.patchParams(ctx, step.key, step.value); err != nil {
			t.Fatalf("update %s: %v", step.key, err)
		}
	}
	m := params()
	ac, _ := m["assigned_condition"].(map[string]any)
	if m["user_id"] != "student1" || m["status"] != "condition applied" || ac["experiment_id"] != e.ID || strings.Contains(string(tr.sess.draft.params()), "userId") {
		t.Fatalf("after the keys: %s", tr.sess.draft.params())
	}
	// A null removes the condition; the status derived from it follows.
	if _, err := tr.patchParams(ctx, "assigned_condition", nil); err != nil {
		t.Fatal(err)
	}
	if m := params(); m["status"] != "no condition assigned" || m["assigned_condition"] != nil {
		t.Fatalf("after the null: %s", tr.sess.draft.params())
	}
	// A key the action does not have is refused, naming it; the draft stays.
	before := string(tr.sess.draft.params())
	if _, err := tr.patchParams(ctx, "colour", "red"); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := tr.patchParams(ctx, "decision_point[1].site", "x"); err == nil {
		t.Fatal("an index into an object accepted")
	}
	if string(tr.sess.draft.params()) != before {
		t.Fatalf("a refused update changed the draft: %s", tr.sess.draft.params())
	}
}

// TestUpdateActionParamsListItems: a path through a list patches that
// item; a number as a string is a number.
func TestUpdateActionParamsListItems(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tr, err := h.agent.begin(ctx, h.sess)
	if err != nil {
		t.Fatal(err)
	}
	tr.sess.chooseAction("create_experiment")
	if _, err := tr.setParams(ctx, json.RawMessage(`{"name":"A","context":"assign-prog","conditions":{"control":50,"variant":50},
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}]}`)); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		key   string
		value any
	}{{"conditions[0].weight", "60"}, {"conditions[1].weight", 40}, {"conditions[2]", map[string]any{"code": "third", "weight": "0"}}} {
		if _, err := tr.patchParams(ctx, step.key, step.value); err != nil {
			t.Fatalf("update %s: %v", step.key, err)
		}
	}
	got := string(tr.sess.draft.params())
	if !strings.Contains(got, `"conditions":[{"code":"control","weight":60},{"code":"variant","weight":40},{"code":"third","weight":0}]`) {
		t.Fatalf("conditions: %s", got)
	}
}

// TestOneBindPerChange: params are bound once per change, references
// resolved on the way: set_action_params naming an experiment by its name
// binds once (no second bind for the resolved id), and update_action_params
// binds once; a flag named by its key (in another case) is resolved on the
// typed value within the one bind too.
func TestOneBindPerChange(t *testing.T) {
	experiment := func(h *harness) string {
		return h.createExperiment("Math Hints", "assign-prog", upgrade.StateInactive, "").ID
	}
	flag := func(h *harness) string {
		f, err := h.api.CreateFlag(context.Background(), &upgrade.FeatureFlag{Name: "Math hints", Key: "MATH_HINTS",
			Context: []string{"assign-prog"}, Tags: []string{}, Status: "disabled", FilterMode: "includeAll"})
		if err != nil {
			h.t.Fatal(err)
		}
		return f.ID
	}
	// setParams chooses action, sets params, then updates key to value
	// (patch: a key and a value, or none).
	setParams := func(action string, params map[string]any, patch ...any) llmtest.Reply {
		cs := []llmtest.Call{call("set_action_needed", map[string]any{"action": action, "reasoning": "asked"}),
			call("set_action_params", map[string]any{"action_params": params})}
		if len(patch) == 2 {
			cs = append(cs, call("update_action_params", map[string]any{"key": patch[0], "value": patch[1]}))
		}
		return calls(cs...)
	}
	for _, tc := range []struct {
		name   string
		action string
		setup  func(h *harness) string // the id the name must resolve to
		reply  llmtest.Reply
		binds  int
	}{
		{"set_action_params with a name", "update_experiment_status", experiment,
			setParams("update_experiment_status", map[string]any{"experiment_id": "math hints", "status": "enrolling"}), 1},
		{"set_action_params, then update_action_params", "update_experiment_status", experiment,
			setParams("update_experiment_status", map[string]any{"experiment_id": "Math Hints"}, "status", "enrolling"), 2},
		{"a flag by its key", "update_feature_flag_status", flag,
			setParams("update_feature_flag_status", map[string]any{"flag_id": "math_hints", "status": "enabled"}), 1},
		{"a flag by its name, then update_action_params", "update_feature_flag_status", flag,
			setParams("update_feature_flag_status", map[string]any{"flag_id": "Math hints"}, "status", "enabled"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			id := tc.setup(h)
			h.llm.Enqueue(analyze(IntentNeedsInfo, "start Math Hints", nil), tc.reply, text("Start it?"))
			binds := 0
			remove := actions.OnBind(func(action string) {
				if action == tc.action {
					binds++
				}
			})
			res, err := h.agent.Ask(context.Background(), h.sess, "start Math Hints")
			remove()
			if err != nil || res.Status != StatusAwaitingConfirmation {
				t.Fatalf("got %+v, %v", res, err)
			}
			if binds != tc.binds {
				t.Errorf("%d binds, want %d", binds, tc.binds)
			}
			if c := res.Confirmation; c == nil || !strings.Contains(string(c.Params), id) {
				t.Errorf("the name was not resolved to the id %s: %+v", id, c)
			}
		})
	}
}
