package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/pipeline/scenario"
)

// TestTokenRowCanFail: the prompt-token target row is a real comparison:
// reference flows of more than a third of the original's quoted characters
// miss it, a third or less pass, nothing measured misses. The estimate rows
// are context (info): a baseline that sends what we send reads 1.00, a
// baseline whose tool lists are much larger than ours reads lower, and the
// dropped history counts on every call.
func TestTokenRowCanFail(t *testing.T) {
	orig := referenceSystems[0].chars
	if r := quotedTokenRow(orig/3 + 1); r.mark != "MISS" {
		t.Errorf("over a third of the original: %+v, want MISS", r)
	}
	if r := quotedTokenRow(orig / 3); r.mark != "PASS" {
		t.Errorf("a third of the original: %+v, want PASS", r)
	}
	if r := quotedTokenRow(0); r.mark != "MISS" {
		t.Errorf("nothing measured: %+v, want MISS", r)
	}

	sr := scenario.StepReport{CallChars: []scenario.CallChars{
		{Node: "analyzer", Chars: 3000, Tools: 2000},
		{Node: "gatherer after 2 attempts", Chars: 6000, Tools: 4000},
	}}
	same := originalTools{chars: map[string]int{"analyzer": 2000, "gatherer": 4000}}
	ours, base := stepTokens(sr, same, 0)
	if ours != 2250 || base != ours {
		t.Fatalf("same tool lists: ours %d, base %d; want 2250 both", ours, base)
	}
	if r := tokenRow("x", ours, base); r.mark != info || !strings.Contains(r.measured, "(1.00)") {
		t.Errorf("equal baseline: %+v, want info at 1.00", r)
	}
	big := originalTools{chars: map[string]int{"analyzer": 2000, "gatherer": 40_000}}
	ours, base = stepTokens(sr, big, 0)
	if base != 750+10_500 {
		t.Fatalf("big gatherer list: base %d, want %d", base, 750+10_500)
	}
	if r := tokenRow("x", ours, base); !strings.Contains(r.measured, "(0.20)") {
		t.Errorf("a baseline five times ours: %+v, want 0.20", r)
	}
	if _, withHistory := stepTokens(sr, same, 400); withHistory != ours+2*100 {
		t.Errorf("dropped history of 400 characters: base %d, want %d", withHistory, ours+200)
	}
	// A node the original had no list for keeps its own tools.
	out := scenario.StepReport{CallChars: []scenario.CallChars{{Node: "output", Chars: 800, Tools: 300}}}
	if o, b := stepTokens(out, big, 0); o != b {
		t.Errorf("output node: ours %d, base %d", o, b)
	}
}

// TestDroppedHistory: exchanges before the step beyond the window count,
// as JSON messages.
func TestDroppedHistory(t *testing.T) {
	var hist []pipeline.Exchange
	for i := 1; i <= historyWindow+2; i++ {
		hist = append(hist, pipeline.Exchange{User: "hi", Assistant: "hello", At: scenario.FixedTime().Add(time.Duration(i) * time.Minute)})
	}
	if n := droppedHistory(hist, historyWindow+1); n != 0 {
		t.Errorf("within the window: %d", n)
	}
	one := len(`{"role":"user","content":"hi"},`) + len(`{"role":"assistant","content":"hello"},`)
	if n := droppedHistory(hist, historyWindow+3); n != 2*one {
		t.Errorf("two exchanges dropped: %d, want %d", n, 2*one)
	}
}

// oneMoreAction registers a test action of object o in reg.
func oneMoreAction(reg *actions.Registry, name string, o actions.Object) *actions.Registry {
	actions.Add(reg, benchAction(actions.Name(name), 20_000, o))
	return reg
}

// TestUnscopedToolsGrow: the original's gatherer list is the agent's
// unscoped one, in the original's shape (one schema tool per action,
// set_action_needed enumerating them), and it grows when an action is
// registered in any scope, an existing object's or a new one's.
func TestUnscopedToolsGrow(t *testing.T) {
	ctx := context.Background()
	base, err := unscopedTools(ctx, actions.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	names := base.names(pipeline.NodeGatherer)
	if slices.Contains(names, "get_action_schema") {
		t.Errorf("get_action_schema left in the original list: %v", names)
	}
	for _, n := range actions.Builtin().Names() {
		if !slices.Contains(names, "get_"+string(n)+"_schema") {
			t.Errorf("no get_%s_schema in %v", n, names)
		}
	}
	for _, want := range []string{"get_experiment_names", "get_feature_flags", "get_segments", "set_action_needed"} {
		if !slices.Contains(names, want) {
			t.Errorf("unscoped gatherer list lacks %s: %v", want, names)
		}
	}
	for _, tc := range []struct {
		name   string
		reg    *actions.Registry
		action string
		tools  []string
	}{
		{"existing object", oneMoreAction(actions.Builtin(), "bench_flag_change", actions.ObjectFeatureFlag), "bench_flag_change", nil},
		{"new object", withTestObject(actions.Builtin()), "bench_change_01", []string{"bench_lookup_01"}},
	} {
		grown, err := unscopedTools(ctx, tc.reg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if grown.chars[pipeline.NodeGatherer] <= base.chars[pipeline.NodeGatherer] {
			t.Errorf("%s: gatherer list %d characters, not more than %d", tc.name, grown.chars[pipeline.NodeGatherer], base.chars[pipeline.NodeGatherer])
		}
		got := grown.names(pipeline.NodeGatherer)
		for _, want := range append(tc.tools, "get_"+tc.action+"_schema") {
			if !slices.Contains(got, want) {
				t.Errorf("%s: no %s in %v", tc.name, want, got)
			}
		}
		if !enumHas(t, grown, tc.action) {
			t.Errorf("%s: set_action_needed's enum lacks %s", tc.name, tc.action)
		}
	}
}

func enumHas(t *testing.T, o originalTools, action string) bool {
	t.Helper()
	for _, tl := range o.lists[pipeline.NodeGatherer] {
		if tl.Name != "set_action_needed" {
			continue
		}
		var s struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tl.Parameters, &s); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(s.Properties["action"].Enum, action)
	}
	return false
}
