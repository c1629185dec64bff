package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/scenario"
)

// TestPromptBudget: the scenario suite keeps the prompt budget of the cost
// issue: the reference flows within their calls and characters, and no
// gatherer request above gathererMaxChars (the room new actions and
// lookups of a scope grow into). It runs the suite as `benchtable -flows`
// does.
func TestPromptBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the scenario suite")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	scs, err := scenario.LoadAll([]string{filepath.Join(root, "scenarios")})
	if err != nil {
		t.Fatal(err)
	}
	reps, _, err := runScenarios(context.Background(), scs, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := append(referenceRows(scs, reps), gathererCallRow(reps))
	if len(rows) < 3 {
		t.Fatalf("no reference flows in the suite: %+v", rows)
	}
	for _, r := range rows {
		if r.mark == "MISS" {
			t.Errorf("%s: %s, target %s", r.figure, r.measured, r.target)
		}
		t.Logf("%s: %s", r.figure, r.measured)
	}
	per, all := offeredTools(reps)
	if g := per[pipeline.NodeGatherer]; g.calls == 0 || g.most == 0 || all.sum == 0 {
		t.Errorf("no tool definitions measured: gatherer %v, all %v", g, all)
	}
	t.Log(toolsRow(reps).measured)
}

// TestOfferedTools: the tool row sums what each call offered, per node
// (a retried call counts for its node) and over all calls.
func TestOfferedTools(t *testing.T) {
	reps := []*scenario.Report{{Steps: []scenario.StepReport{
		{CallChars: []scenario.CallChars{{Node: "analyzer", Chars: 900, Tools: 300}, {Node: "gatherer", Chars: 5000, Tools: 4000}}},
		{CallChars: []scenario.CallChars{{Node: "gatherer after 2 attempts", Chars: 6000, Tools: 2000}, {Node: "responder", Chars: 700}}},
	}}}
	per, all := offeredTools(reps)
	if g := per["gatherer"]; g != (toolStat{calls: 2, sum: 6000, most: 4000}) {
		t.Errorf("gatherer: %+v", g)
	}
	if r := per["responder"]; r != (toolStat{calls: 1}) {
		t.Errorf("responder: %+v", r)
	}
	if all != (toolStat{calls: 4, sum: 6300, most: 4000}) {
		t.Errorf("all: %+v", all)
	}
	got := toolsRow(reps).measured
	for _, want := range []string{"analyzer avg 300, max 300 (1 calls)", "gatherer avg 3000, max 4000 (2 calls)", "all calls avg 1575, max 4000 (4 calls)"} {
		if !strings.Contains(got, want) {
			t.Errorf("row %q lacks %q", got, want)
		}
	}
}
