package cmd

import (
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// TestDesignTables: stats and results of a factorial name its levels, and
// a within-subjects enrollment says why the conditions add up to more.
func TestDesignTables(t *testing.T) {
	var b strings.Builder
	v := &humanView{out: &b, errOut: &b, output: "text"}
	st := readmodel.Enrollment{Users: 6, Conditions: []readmodel.ConditionEnrollment{{Condition: "Color=Red; Shape=Circle", Users: 6, Share: 1}},
		Levels: []readmodel.LevelEnrollment{{Factor: "Color", Level: "Red", Users: 6}, {Factor: "Color", Level: "Blue"}}}
	if err := v.Stats(st, &upgrade.EnrollmentStats{}); err != nil {
		t.Fatal(err)
	}
	ten := 10.0
	res := readmodel.Results{ExperimentName: "Hint Look", Status: upgrade.StateEnrolling, Queries: []readmodel.QueryResults{{
		Name: "mean score", MetricKey: "score", Operation: "avg", RepeatedMeasure: "MEAN",
		Levels:     []readmodel.LevelValue{{Factor: "Color", Level: "Red", N: 6, Value: &ten}, {Factor: "Color", Level: "Blue"}},
		Conditions: []readmodel.ConditionValue{{Code: "Color=Red; Shape=Circle", N: 6, Value: &ten}},
	}}}
	if err := writeResults(&b, res, 100); err != nil {
		t.Fatal(err)
	}
	ws := readmodel.Enrollment{Users: 1, WithinSubjects: true, Conditions: []readmodel.ConditionEnrollment{{Condition: "control", Users: 1}, {Condition: "variant", Users: 1}}}
	if err := v.Stats(ws, &upgrade.EnrollmentStats{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"FACTOR", "Blue", "Main effect (per level):", "Interaction (per condition):", "no data", "Within-subjects: a user counts in every condition"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
