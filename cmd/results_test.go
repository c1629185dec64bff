package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// seedResults builds, on a fresh simulator, an experiment with metrics,
// queries and logging students: users draw their condition as on UpGrade,
// mark it (or, with skew, variant users mark "condition not applied" every
// third time, which excludes them and unbalances the split), and log a
// score and an outcome.
func seedResults(t *testing.T, users int, skew bool) (url string) {
	t.Helper()
	srv, err := sim.Start(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx := context.Background()
	c, err := upgrade.New(upgrade.Config{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SaveMetrics(ctx, []upgrade.MetricUnit{
		{Metric: "score", Datatype: upgrade.MetricContinuous},
		{Metric: "outcome", Datatype: upgrade.MetricCategorical, AllowedValues: []string{"pass", "fail"}},
		{Metric: "unused", Datatype: upgrade.MetricContinuous},
	}, []string{"assign-prog"}); err != nil {
		t.Fatal(err)
	}
	e, err := c.CreateExperiment(ctx, &upgrade.Experiment{
		Name: "Math Hints", Context: []string{"assign-prog"}, State: upgrade.StateInactive,
		ConsistencyRule: "individual", AssignmentUnit: upgrade.UnitIndividual, PostExperimentRule: upgrade.PostRuleContinue,
		FilterMode: "includeAll", Type: upgrade.TypeSimple, Tags: []string{},
		Conditions: []upgrade.Condition{{ConditionCode: "control", AssignmentWeight: 50, Order: 1}, {ConditionCode: "variant", AssignmentWeight: 50, Order: 2}},
		Partitions: []upgrade.DecisionPoint{{Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Queries added the way the agent's actions will: read, append, PUT
	// with every query sent back.
	cur, err := c.Experiment(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		name, key, op, fn, val string
	}{{"Mean score", "score", "avg", "", ""}, {"Score spread", "score", "stddev", "", ""},
		{"Pass rate", "outcome", "percentage", "=", "pass"}, {"Median score", "score", "median", "", ""}} {
		if _, err := cur.AddQuery(q.name, q.key, upgrade.RepeatedMostRecent, upgrade.QueryOp{OperationType: q.op, CompareFn: q.fn, CompareValue: q.val}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.UpdateExperiment(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetState(ctx, e.ID, upgrade.StateEnrolling); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < users; i++ {
		u := fmt.Sprintf("student-%03d", i)
		if _, err := c.Init(ctx, u, upgrade.InitRequest{}); err != nil {
			t.Fatal(err)
		}
		as, err := c.Assign(ctx, u, "assign-prog")
		if err != nil || len(as) == 0 {
			t.Fatalf("assign %s: %v %v", u, as, err)
		}
		code := as[0].AssignedCondition[0].ConditionCode
		status := upgrade.MarkConditionApplied
		if skew && code == "variant" && i%3 != 0 {
			status = upgrade.MarkConditionNotApplied
		}
		if _, err := c.Mark(ctx, u, upgrade.MarkRequest{Status: status, Data: upgrade.MarkData{Site: "SelectSection", Target: "absolute_value_plot_equality",
			AssignedCondition: &upgrade.MarkCondition{ConditionCode: code, ExperimentID: e.ID}}}); err != nil {
			t.Fatal(err)
		}
		score := float64(50 + i%20)
		outcome := "fail"
		if i%5 < 2 || (code == "variant" && i%5 == 2) {
			outcome = "pass"
		}
		if code == "variant" {
			score += 8
		}
		if _, err := c.Log(ctx, u, []upgrade.LogEntry{{Timestamp: "2026-11-28T00:00:00Z", Attributes: map[string]any{"score": score, "outcome": outcome}}}); err != nil {
			t.Fatal(err)
		}
	}
	return srv.URL()
}

func TestExperimentsResults(t *testing.T) {
	url := seedResults(t, 120, false)
	env := map[string]string{"UPGRADE_API_URL": url}
	code, out, errOut := runLine(t, env, "experiments", "results", "Math Hints")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		`Query "Mean score": avg of score (most recent)`,
		"CONDITION  N",
		"VS FIRST",
		`Query "Pass rate": percentage where value = pass of outcome`,
		"Sample ratio: chi-square",
		"the split matches the weights",
		"logs from any time count, also from before they enrolled",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for i, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("line %d is %d columns: %q", i+1, n, line)
		}
	}
	if strings.Contains(out, "Note: no interval") {
		t.Errorf("the mean has a stddev query, so an interval:\n%s", out)
	}
	if code, _, errOut := runLine(t, env, "experiments", "results", "No Such Thing"); code != 2 || !strings.Contains(errOut, "experiments list") {
		t.Errorf("unknown experiment: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runLine(t, env, "experiments", "results", "Math Hints", "-o", "raw"); code != 2 {
		t.Errorf("-o raw is not a results format: exit %d, %s", code, errOut)
	}

	code, out, errOut = runLine(t, env, "experiments", "results", "Math Hints", "-o", "json")
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, errOut)
	}
	var res struct {
		Queries []struct {
			Name       string `json:"name"`
			Kind       string `json:"kind"`
			Conditions []struct {
				Code     string   `json:"code"`
				N        int      `json:"n"`
				Value    *float64 `json:"value"`
				Interval *struct{ Low, High float64 }
				VsFirst  *struct {
					Value    float64 `json:"value"`
					Interval *struct{ Low, High float64 }
				} `json:"vs_first"`
			} `json:"conditions"`
		} `json:"queries"`
		SampleRatio struct {
			Tested bool    `json:"tested"`
			P      float64 `json:"p_value"`
		} `json:"sample_ratio"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(res.Queries) != 4 || !res.SampleRatio.Tested {
		t.Fatalf("json: %+v", res)
	}
	mean := res.Queries[0]
	if mean.Kind != "mean" || mean.Conditions[1].VsFirst == nil || mean.Conditions[1].VsFirst.Interval == nil {
		t.Fatalf("mean query without a Welch interval: %+v", mean)
	}
	// The variant scores 8 more: the interval of the difference holds 8.
	if d := mean.Conditions[1].VsFirst; d.Interval.Low > 8 || d.Interval.High < 8 {
		t.Errorf("difference %v, interval %+v should hold 8", d.Value, d.Interval)
	}
	pass := res.Queries[2]
	if pass.Kind != "proportion" || pass.Conditions[0].Interval == nil || pass.Conditions[0].Interval.High > 100 {
		t.Errorf("pass rate: %+v", pass)
	}
	if n := pass.Conditions[0].N + pass.Conditions[1].N; n != 120 {
		t.Errorf("participants %d, want 120", n)
	}
}

func TestExperimentsResultsSampleRatioWarning(t *testing.T) {
	url := seedResults(t, 90, true)
	env := map[string]string{"UPGRADE_API_URL": url}
	code, out, errOut := runLine(t, env, "experiments", "results", "Math Hints")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "Warning: Sample ratio") || !strings.Contains(out, "check exclusions and assignment") {
		t.Errorf("no SRM warning:\n%s", out)
	}
	if !strings.Contains(out, "too little data") {
		t.Errorf("variant has fewer than 30 users with a value:\n%s", out)
	}
	code, out, _ = runLine(t, env, "experiments", "stats", "Math Hints")
	if code != 0 || !strings.Contains(out, "Warning: Sample ratio") {
		t.Errorf("experiments stats lacks the SRM line (exit %d):\n%s", code, out)
	}
	code, out, _ = runLine(t, env, "experiments", "stats", "Math Hints", "-o", "json")
	if code != 0 || !strings.Contains(out, `"sample_ratio"`) || !strings.Contains(out, `"mismatch": true`) {
		t.Errorf("experiments stats -o json lacks sample_ratio (exit %d):\n%s", code, out)
	}
}

func TestMetricsList(t *testing.T) {
	url := seedResults(t, 2, false)
	env := map[string]string{"UPGRADE_API_URL": url}
	code, out, errOut := runLine(t, env, "metrics", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"KEY", "USED BY", "outcome", "categorical", "pass, fail", "Math Hints: Pass rate", "unused"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runLine(t, env, "metrics", "list", "--context", "nowhere")
	if code != 0 || out != "" || !strings.Contains(errOut, `no metrics in context "nowhere"`) {
		t.Errorf("unknown context: exit %d, out %q, err %q", code, out, errOut)
	}
	code, out, _ = runLine(t, env, "metrics", "list", "--context", " assign-prog ", "-o", "json")
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 3 {
		t.Fatalf("json: exit %d\n%s", code, out)
	}
	if used := list[1]["used_by"].([]any); len(used) != 3 {
		t.Errorf("score is used by 3 queries: %v", used)
	}
}
