package pipeline

import (
	"slices"
	"strings"
	"testing"
)

// gathererTools are the tool names of the gatherer's requests, from the
// request numbered from on (1-based).
func (h *harness) gathererTools(from int) [][]string {
	var out [][]string
	for _, r := range h.llm.Requests()[from-1:] {
		if r.Node == NodeGatherer {
			out = append(out, r.Tools)
		}
	}
	return out
}

// TestScopeFromTheAnalyzer: the gatherer is offered the tools of the object
// the analyzer names, however the model spells it; an object it cannot
// tell (empty, null, unknown, absent) gets every tool.
func TestScopeFromTheAnalyzer(t *testing.T) {
	const (
		flagOnly = "find_feature_flag"
		expOnly  = "find_experiment"
		segOnly  = "find_segment"
	)
	for _, tc := range []struct {
		object any // absent when nil and not "null"
		want   []string
		not    []string
	}{
		{"feature_flag", []string{flagOnly, "get_core_terms", "get_action_schema"}, []string{expOnly, segOnly}},
		{"Feature Flag", []string{flagOnly}, []string{expOnly}},
		{"feature flag", []string{flagOnly}, []string{expOnly}},
		{"flags", []string{flagOnly}, []string{expOnly}},
		{" Experiment ", []string{expOnly, "get_context_metadata", "get_experiment_results"}, []string{flagOnly, segOnly, "get_metrics"}},
		{"segments", []string{segOnly}, []string{flagOnly, expOnly}},
		{"", []string{flagOnly, expOnly, segOnly}, nil},
		{"null", []string{flagOnly, expOnly, segOnly}, nil},
		{"weather", []string{flagOnly, expOnly, segOnly}, nil},
		{"Metrics", []string{"get_metrics", "get_core_terms"}, []string{flagOnly, expOnly, segOnly, "get_experiment_results"}},
		{nil, []string{flagOnly, expOnly, segOnly}, nil},
	} {
		name, _ := tc.object.(string)
		t.Run("object="+name, func(t *testing.T) {
			h := newHarness(t)
			extra := map[string]any{"needs_action": false}
			switch {
			case tc.object == "null":
				extra["object"] = nil
			case tc.object != nil:
				extra["object"] = tc.object
			}
			h.ask("what is there?", analyze(IntentNeedsInfo, "a question", extra), text("Nothing to look up."), text("Here it is."))
			tools := h.gathererTools(1)
			if len(tools) != 1 {
				t.Fatalf("%d gatherer calls, want 1", len(tools))
			}
			for _, w := range tc.want {
				if !slices.Contains(tools[0], w) {
					t.Errorf("not offered %s: %v", w, tools[0])
				}
			}
			for _, n := range tc.not {
				if slices.Contains(tools[0], n) {
					t.Errorf("offered %s: %v", n, tools[0])
				}
			}
		})
	}
}

// TestScopeOfAnotherObjectsDraft: a request about experiments while a flag
// action is being prepared gets every tool; the scoped tool list is the
// same bytes in every call of a turn and in the next turn; a tool of
// another scope that the model names anyway still runs.
func TestScopeOfAnotherObjectsDraft(t *testing.T) {
	h := newHarness(t)
	flag := map[string]any{"needs_action": true, "object": "feature_flag"}
	h.ask("create a flag", analyze(IntentNeedsInfo, "create a flag", flag),
		calls(call("get_action_schema", map[string]any{"action": " Create_Feature_Flag "}),
			call("set_action_needed", map[string]any{"action": "create_feature_flag", "reasoning": "asked"}),
			call("find_experiment", map[string]any{"name": "Math"})), // not in the flag scope: runs all the same
		calls(call("set_missing_params", map[string]any{"missing_params": []string{"name", "key", "context"}})),
		text("Which name, key and context?"))
	first := h.gathererTools(1)
	if len(first) != 2 || !slices.Equal(first[0], first[1]) || slices.Contains(first[0], "find_experiment") {
		t.Fatalf("flag scope: %v", first)
	}
	var schemaResult, findResult string
	for _, r := range h.llm.Requests() {
		for _, m := range r.Messages {
			switch m.Name {
			case "get_action_schema":
				schemaResult = m.Content
			case "find_experiment":
				findResult = m.Content
			}
		}
	}
	if !strings.Contains(schemaResult, `"action":"create_feature_flag"`) || !strings.Contains(schemaResult, `"filter_mode"`) {
		t.Errorf("get_action_schema result: %s", schemaResult)
	}
	if !strings.Contains(findResult, `"matches"`) {
		t.Errorf("find_experiment outside its scope: %s", findResult)
	}
	if _, ok := h.sess.st.GatheredInfo["create_feature_flag_schema"]; !ok {
		t.Errorf("gathered_info lacks create_feature_flag_schema: %v", h.sess.st.GatheredInfo)
	}

	next := len(h.llm.Requests()) + 1
	h.ask("key BETA, name Beta, in assign-prog", analyze(IntentNeedsInfo, "the flag's settings", flag),
		calls(call("set_action_params", map[string]any{"action_params": map[string]any{"name": "Beta", "key": "BETA"}})),
		text("Which context?"), text("Which context?"))
	if again := h.gathererTools(next); len(again) == 0 || !slices.Equal(again[0], first[0]) {
		t.Errorf("the flag scope changed between turns:\n%v\n%v", first[0], again)
	}

	next = len(h.llm.Requests()) + 1
	h.ask("what experiments are there?", analyze(IntentNeedsInfo, "list experiments", map[string]any{"needs_action": false, "object": "experiment"}),
		text("Let me see."), text("There are none."))
	tools := h.gathererTools(next)
	if len(tools) != 1 || !slices.Contains(tools[0], "find_experiment") || !slices.Contains(tools[0], "find_feature_flag") {
		t.Errorf("a flag draft with an experiment question: %v, want every tool", tools)
	}
}
