package actions

import (
	"context"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// A PUT without queries deletes every query on a 6.5 server: the actions
// that change an experiment must send them back. update_experiment (a
// rename, new weights, a post rule) and update_experiment_status keep the
// query ids of an experiment that has some.
func TestUpdatesKeepQueries(t *testing.T) {
	ctx := context.Background()
	c := startSim(t, "6.5.0")
	if _, err := c.SaveMetrics(ctx, []upgrade.MetricUnit{{Metric: "score", Datatype: upgrade.MetricContinuous}}, []string{"assign-prog"}); err != nil {
		t.Fatal(err)
	}
	_, raw := run(t, c, CreateExperimentParams{Name: "Queried", Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}}})
	id := decode[ExperimentResult](t, raw).ID
	e, err := c.Experiment(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	qid, err := e.AddQuery("Mean score", "score", upgrade.RepeatedMean, upgrade.QueryOp{OperationType: "avg"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateExperiment(ctx, e); err != nil {
		t.Fatal(err)
	}
	queries := func(step string) {
		t.Helper()
		got, err := c.Experiment(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		qs, err := got.QueryList()
		if err != nil || len(qs) != 1 || qs[0].ID != qid {
			t.Fatalf("after %s: queries %+v (%v), want the one with id %s", step, qs, err, qid)
		}
	}
	queries("adding")
	run(t, c, UpdateExperimentParams{ExperimentID: id, Name: ptr("Queried, renamed")})
	queries("a rename")
	run(t, c, UpdateExperimentParams{ExperimentID: id,
		Conditions: &[]ConditionParam{{Code: "control", Weight: ptr(30.0)}, {Code: "variant", Weight: ptr(70.0)}}})
	queries("new weights")
	run(t, c, UpdateExperimentParams{ExperimentID: id, PostExperimentRule: &PostRuleParam{Rule: "assign", ConditionCode: "variant"}})
	queries("a post rule")
	run(t, c, UpdateExperimentStatusParams{ExperimentID: id, Status: "enrolling"})
	queries("a status change")
}
