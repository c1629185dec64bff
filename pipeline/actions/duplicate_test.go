package actions

import (
	"context"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func TestDuplicateOnSimulator(t *testing.T) {
	ctx := context.Background()
	c := startSim(t, "")
	_, raw := run(t, c, CreateExperimentParams{Name: "Source", Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(40.0)}, {Code: "variant", Weight: ptr(60.0)}},
		ExclusionUsers: []string{"student-9"}})
	src := decode[ExperimentResult](t, raw)

	plan, raw := run(t, c, DuplicateExperimentParams{ExperimentID: src.ID, Name: "Copy"})
	if !strings.Contains(plan.Message, `a copy of "Source"`) || !strings.Contains(plan.Message, "Queries: 0 kept") {
		t.Errorf("plan:\n%s", plan.Message)
	}
	cp := decode[ExperimentResult](t, raw)
	e, err := upgrade.ExperimentWithLists(ctx, c, cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Experiment(ctx, src.ID)
	if e.ID == src.ID || e.State != upgrade.StateInactive || len(e.Conditions) != 2 || e.Conditions[0].ID == s.Conditions[0].ID ||
		e.ConditionByCode("variant").AssignmentWeight != 60 || len(e.Exclusion.Users) != 1 {
		t.Errorf("copy %+v", e)
	}

	// The name must be new.
	probs, err := Validate(ctx, c, DuplicateExperimentParams{ExperimentID: src.ID, Name: "source"})
	if err != nil || len(probs) != 1 || probs[0].Field != "name" {
		t.Errorf("problems %+v, %v", probs, err)
	}
}
