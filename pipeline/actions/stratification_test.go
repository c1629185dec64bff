package actions

import (
	"context"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func TestStratificationOnSimulator(t *testing.T) {
	ctx := context.Background()
	c := startSim(t, "")
	upload := CreateStratificationFactorParams{Name: " prior ", Values: []StratValueParam{
		{UserID: "s1", Value: "low"}, {UserID: "s2", Value: "high"}, {UserID: "s3", Value: "low"}}}
	plan, raw := run(t, c, upload)
	if !strings.Contains(plan.Message, `Create stratification factor "prior" with 3 users' values (high: 1, low: 2).`) {
		t.Errorf("plan:\n%s", plan.Message)
	}
	if r := decode[stratResult](t, raw); r.Users != 3 || r.Values["low"] != 2 {
		t.Errorf("result %+v", r)
	}
	// A re-upload replaces a value.
	run(t, c, CreateStratificationFactorParams{Name: "prior", Values: []StratValueParam{{UserID: "s1", Value: "high"}}})
	all, err := c.StratificationFactors(ctx)
	if err != nil || len(all) != 1 || all[0].FactorValue["high"] != 2 || all[0].FactorValue["low"] != 1 {
		t.Fatalf("factors %+v, %v", all, err)
	}
	csv, err := c.StratificationDownload(ctx, "prior")
	if err != nil || csv != "uuid,prior\r\ns1,high\r\ns2,high\r\ns3,low" {
		t.Errorf("download %q, %v", csv, err)
	}

	// A stratified experiment needs an existing factor.
	exp := CreateExperimentParams{Name: "Strat", Context: "assign-prog",
		DecisionPoints:      []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:          []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}},
		AssignmentAlgorithm: "stratified", StratificationFactor: "nope"}
	probs, err := Validate(ctx, c, exp)
	if err != nil || len(probs) != 1 || probs[0].Field != "stratification_factor" || !strings.Contains(probs[0].Message, "factors: prior") {
		t.Fatalf("problems %+v, %v", probs, err)
	}
	exp.StratificationFactor = "prior"
	plan, raw = run(t, c, exp)
	if !strings.Contains(plan.Message, `stratified random sampling by factor "prior"`) || len(plan.Warnings) == 0 {
		t.Errorf("plan:\n%s\n%v", plan.Message, plan.Warnings)
	}
	id := decode[ExperimentResult](t, raw).ID
	e, err := c.Experiment(ctx, id)
	if err != nil || e.AssignmentAlgorithm != upgrade.AlgorithmStratified || e.StratificationFactor == nil || e.StratificationFactor.Name != "prior" {
		t.Fatalf("experiment %+v, %v", e, err)
	}

	// Deleting a used factor is refused in Go, naming the experiment.
	probs, err = Validate(ctx, c, DeleteStratificationFactorParams{Name: "prior"})
	if err != nil || len(probs) != 1 || !strings.Contains(probs[0].Message, `experiment "Strat" (id `+id+`)`) {
		t.Fatalf("problems %+v, %v", probs, err)
	}
	run(t, c, DeleteExperimentParams{ExperimentID: id})
	_, raw = run(t, c, DeleteStratificationFactorParams{Name: "prior"})
	if r := decode[stratResult](t, raw); !r.Deleted || r.Users != 3 {
		t.Errorf("result %+v", r)
	}
	if all, _ := c.StratificationFactors(ctx); len(all) != 0 {
		t.Errorf("factors left: %+v", all)
	}
	probs, _ = Validate(ctx, c, DeleteStratificationFactorParams{Name: "prior"})
	if len(probs) != 1 || !strings.Contains(probs[0].Message, "no stratification factor") {
		t.Errorf("problems %+v", probs)
	}
}
