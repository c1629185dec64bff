package actions

import (
	"context"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// update_experiment switches a design between simple and factorial (issue
// 30): checked on the simulator's state, both ways, with its undo.

func TestUpdateDesignSwitch(t *testing.T) {
	h := newUndoHarness(t)
	_, raw := h.do(CreateExperimentParams{Name: "Switch " + undoSuffix, Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}}})
	id := decode[ExperimentResult](t, raw).ID
	t.Cleanup(func() { _, _ = h.api.DeleteExperiment(h.ctx, id) })
	dpBefore := readExp(t, h, id).Partitions[0].ID

	toF, _ := h.do(parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`","design":"Factorial",
		"factors":[{"name":"Color","levels":["Red",{"name":"Blue","payload":"blue-ui"}]},{"name":"Shape","levels":["Circle","Square"]}]}`))
	e := readExp(t, h, id)
	if e.Type != upgrade.TypeFactorial || len(e.Factors) != 2 || len(e.Conditions) != 4 {
		t.Fatalf("after the switch: type %s, %d factors, %d conditions", e.Type, len(e.Factors), len(e.Conditions))
	}
	var codes []string
	for _, c := range sortedConditions(e.Conditions) {
		codes = append(codes, c.ConditionCode)
		if len(c.LevelCombinationElements) != 2 || c.AssignmentWeight != 25 {
			t.Errorf("condition %s: %d elements, weight %v", c.ConditionCode, len(c.LevelCombinationElements), c.AssignmentWeight)
		}
	}
	if got := strings.Join(codes, ", "); got != "Color=Red; Shape=Circle, Color=Red; Shape=Square, Color=Blue; Shape=Circle, Color=Blue; Shape=Square" {
		t.Errorf("codes %s", got)
	}
	if len(e.Partitions) != 1 || e.Partitions[0].ID != dpBefore {
		t.Errorf("decision point not kept: %+v", e.Partitions)
	}

	toS, _ := h.do(parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`","design":" simple ",
		"conditions":{"control":30,"variant":70}}`))
	e = readExp(t, h, id)
	if e.Type != upgrade.TypeSimple || len(e.Factors) != 0 || len(e.Conditions) != 2 || e.ConditionByCode("variant") == nil || e.ConditionByCode("variant").AssignmentWeight != 70 {
		t.Fatalf("after the switch back: type %s, %d factors, conditions %+v", e.Type, len(e.Factors), e.Conditions)
	}
	for _, c := range e.Conditions {
		if len(c.LevelCombinationElements) != 0 {
			t.Errorf("simple condition %s keeps elements", c.ConditionCode)
		}
	}

	// Undo each switch: the object is the one before it again.
	h.undo(toS)
	if e = readExp(t, h, id); e.Type != upgrade.TypeFactorial || len(e.Conditions) != 4 {
		t.Fatalf("undo of the switch to simple: type %s, %d conditions", e.Type, len(e.Conditions))
	}
	h.undo(toF)
	if e = readExp(t, h, id); e.Type != upgrade.TypeSimple || len(e.Factors) != 0 || e.ConditionByCode("control") == nil {
		t.Fatalf("undo of the switch to factorial: type %s, conditions %+v", e.Type, e.Conditions)
	}
}

func TestUpdateDesignSwitchRefusals(t *testing.T) {
	api := startSim(t, "6.5.0")
	ctx := context.Background()
	_, raw := run(t, api, parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Switch refusals","context":"assign-prog",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`))
	id := decode[ExperimentResult](t, raw).ID
	factors := `"factors":[{"name":"Color","levels":["Red","Blue"]},{"name":"Shape","levels":["Circle","Square"]}]`
	for _, c := range []struct{ name, params, field, says string }{
		{"factors without design", `{"experiment_id":"` + id + `",` + factors + `}`, "factors", "give design factorial"},
		{"one factor", `{"experiment_id":"` + id + `","design":"factorial","factors":[{"name":"Color","levels":["Red","Blue"]}]}`, "factors", "at least 2 factors"},
		{"to simple on simple is no switch", `{"experiment_id":"` + id + `","design":"simple"}`, "", ""},
	} {
		probs, err := Validate(ctx, api, parseAs[UpdateExperimentParams](t, UpdateExperiment, c.params))
		if err != nil {
			t.Fatal(err)
		}
		if c.field == "" {
			continue // design simple alone names a field; nothing to refuse
		}
		if len(probs) == 0 || probs[0].Field != c.field || !strings.Contains(probs[0].Message, c.says) {
			t.Errorf("%s: %v", c.name, probs)
		}
	}
	run(t, api, parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`","design":"2x2",`+factors+`}`))
	probs, err := Validate(ctx, api, parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`","design":"simple"}`))
	if err != nil || len(probs) != 1 || probs[0].Field != "conditions" || !strings.Contains(probs[0].Message, "a switch to design simple needs conditions") {
		t.Errorf("to simple without conditions: %v %v", probs, err)
	}
	run(t, api, UpdateExperimentStatusParams{ExperimentID: id, Status: "enrolling"})
	probs, err = Validate(ctx, api, parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`","design":"simple","conditions":{"control":50,"variant":50}}`))
	if err != nil || len(probs) != 1 || probs[0].Field != "design" || !strings.Contains(probs[0].Message, "enrolling") || !strings.Contains(probs[0].Message, "only while it is inactive") {
		t.Errorf("switch of an enrolling experiment: %v %v", probs, err)
	}
}

func readExp(t *testing.T, h *undoHarness, id string) *upgrade.Experiment {
	t.Helper()
	e, err := upgrade.ExperimentWithLists(h.ctx, h.api, id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
