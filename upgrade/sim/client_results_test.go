package sim

import (
	"context"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The client's metric and query methods against the simulator: an update
// of any other field sends the queries back (a PUT without them deletes
// them), a metric delete takes its queries along, a context without
// metrics is an empty list.
func TestClientKeepsQueriesThroughUpdates(t *testing.T) {
	ts := startSim(t, Options{})
	ctx := context.Background()
	c, err := upgrade.New(upgrade.Config{BaseURL: ts.base})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SaveMetrics(ctx, []upgrade.MetricUnit{{Metric: "score", Datatype: upgrade.MetricContinuous},
		{GroupClass: "quiz", AllowedKeys: []string{"q1"}, Attributes: []upgrade.MetricUnit{{Metric: "time", Datatype: upgrade.MetricContinuous}}}},
		[]string{"assign-prog"}); err != nil {
		t.Fatal(err)
	}
	e := ts.create(expBody("keep"))
	cur, err := c.Experiment(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	qid, _ := cur.AddQuery("Mean", "score", upgrade.RepeatedMean, upgrade.QueryOp{OperationType: "avg"})
	gid, _ := cur.AddQuery("Time", "quiz@__@q1@__@time", upgrade.RepeatedEarliest, upgrade.QueryOp{OperationType: "avg"})
	if _, err := c.UpdateExperiment(ctx, cur); err != nil {
		t.Fatal(err)
	}
	count := func() []upgrade.Query {
		t.Helper()
		got, err := c.Experiment(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		qs, err := got.QueryList()
		if err != nil {
			t.Fatal(err)
		}
		return qs
	}
	if qs := count(); len(qs) != 2 || qs[0].ID != qid || qs[1].ID != gid || qs[0].MetricType != "continuous" {
		t.Fatalf("after adding: %+v", qs)
	}
	// A rename, a post rule and a state change keep the queries.
	cur, _ = c.Experiment(ctx, e.ID)
	cur.Name = "kept"
	if _, err := c.UpdateExperiment(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPostRule(ctx, e.ID, upgrade.PostRuleRevert, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetState(ctx, e.ID, upgrade.StateEnrolling); err != nil {
		t.Fatal(err)
	}
	if qs := count(); len(qs) != 2 {
		t.Fatalf("an update lost queries: %+v", qs)
	}
	res, err := c.Analyse(ctx, []string{qid, gid})
	if err != nil || len(res) != 2 || !res[0].Found || res[0].Rejected || len(res[0].MainEffect) != 2 {
		t.Fatalf("analyse: %+v %v", res, err)
	}
	// Deleting the group removes its query and leaves the other.
	if _, err := c.DeleteMetric(ctx, "quiz"); err != nil {
		t.Fatal(err)
	}
	if qs := count(); len(qs) != 1 || qs[0].ID != qid {
		t.Fatalf("after deleting the metric: %+v", qs)
	}
	if _, err := c.DeleteMetric(ctx, "quiz"); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("deleting again: %v", err)
	}
	trees, err := c.MetricsInContext(ctx, "nowhere")
	if err != nil || len(trees) != 0 {
		t.Errorf("context without metrics: %v %v", trees, err)
	}
	trees, err = c.MetricsInContext(ctx, "assign-prog")
	if err != nil || len(upgrade.FlattenMetrics(trees)) != 1 {
		t.Errorf("context metrics: %v %v", trees, err)
	}
	tot, err := c.EnrollmentTotals(ctx, []string{e.ID})
	if err != nil || len(tot) != 1 || tot[0].ID != e.ID {
		t.Errorf("totals: %+v %v", tot, err)
	}
	days, err := c.EnrollmentByDate(ctx, e.ID, "last_seven_days", 0)
	if err != nil || len(days) != 7 {
		t.Errorf("by date: %d %v", len(days), err)
	}
	ts.initUser("logger", nil, nil)
	rows, err := c.Log(ctx, "logger", []upgrade.LogEntry{{Timestamp: "2026-01-01T00:00:00Z", Attributes: map[string]any{"score": 3}}})
	if err != nil || len(rows) != 1 {
		t.Errorf("log: %+v %v", rows, err)
	}
}
