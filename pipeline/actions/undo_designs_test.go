package actions

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// undoSuffix keeps names apart between runs on a real server.
var undoSuffix = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)

// Round trips of the metric, query, duplicate and stratification actions:
// do it, undo it, the server's object equals before (spec/undo.md), on the
// simulator, or a real UpGrade 6.5 with UPGRADE_REAL_URL.

func TestUndoMetricsAndQueries(t *testing.T) {
	h := newUndoHarness(t)
	score := "undo_score_" + undoSuffix
	_, raw := h.do(CreateExperimentParams{Name: "Undo metrics " + undoSuffix, Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}}})
	id := decode[ExperimentResult](t, raw).ID
	t.Cleanup(func() { _, _ = h.api.DeleteExperiment(h.ctx, id) })

	mc, _ := h.do(CreateMetricParams{Context: []string{"assign-prog"}, Key: score, Type: "continuous"})
	t.Cleanup(func() { _, _ = h.api.DeleteMetric(h.ctx, score) })
	if mc.Target.ID != score || mc.After == nil {
		t.Fatalf("create_metric's change: target %+v, after %s", mc.Target, mc.After)
	}
	add, _ := h.do(AddExperimentQueryParams{ExperimentID: id, Name: "Mean score", MetricKey: score, Operation: "avg"})
	h.undo(add) // the query is removed
	add, _ = h.do(AddExperimentQueryParams{ExperimentID: id, Name: "Mean score", MetricKey: score, Operation: "avg"})
	e, err := h.api.Experiment(h.ctx, id)
	if err != nil || len(e.Queries) != 1 {
		t.Fatalf("queries after add: %v, %v", e, err)
	}
	qs, _ := e.QueryList()
	rm, _ := h.do(RemoveExperimentQueryParams{ExperimentID: id, QueryID: qs[0].ID})
	h.undo(rm) // the query is back, same metric, operation and compare

	// A deleted metric comes back with the queries UpGrade deleted with it.
	del, _ := h.do(DeleteMetricParams{Key: score})
	plan, err := mustBound(UndoChangeParams{ChangeID: del.ID}).Plan(h.ctx, h.env())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"re-create metric", "queries UpGrade deleted with it are added back", "Cannot come back", "results logged before"} {
		if !strings.Contains(plan.Message, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan.Message)
		}
	}
	h.undo(del)
	if e, _ := h.api.Experiment(h.ctx, id); e == nil || len(e.Queries) != 1 {
		t.Errorf("the query is not back with its metric: %+v", e)
	}
	_ = add
	// Redo of the delete, then the create's undo deletes it.
	h.do(RemoveExperimentQueryParams{ExperimentID: id, QueryID: qs[0].ID})
	h.undo(mc)
}

func TestUndoDuplicateAndStratification(t *testing.T) {
	h := newUndoHarness(t)
	_, raw := h.do(CreateExperimentParams{Name: "Undo dup " + undoSuffix, Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "analyzing_step_functions"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}}})
	id := decode[ExperimentResult](t, raw).ID
	t.Cleanup(func() { _, _ = h.api.DeleteExperiment(h.ctx, id) })
	dup, _ := h.do(DuplicateExperimentParams{ExperimentID: id, Name: "Undo dup copy " + undoSuffix})
	if dup.Target.ID == "" || dup.Target.ID == id {
		t.Fatalf("duplicate's target %+v", dup.Target)
	}
	h.undo(dup)
	if now, _ := readExperimentSnap(h.ctx, h.env(), dup.Target.ID); now != nil {
		t.Error("the copy is still there")
	}

	// An import's undo deletes the experiments it created.
	pa, err := portAPI(h.api)
	if err != nil {
		t.Fatal(err)
	}
	file, err := pa.ExportExperiments(h.ctx, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	imp, _ := h.do(ImportExperimentsParams{Files: []ImportFileParam{{Name: "undo.json", Content: string(file)}}})
	if imp.After == nil || imp.Target.ID == "" || strings.Contains(imp.Target.ID, id) {
		t.Fatalf("import's change: target %+v, after %s", imp.Target, imp.After)
	}
	h.undo(imp)
	if now, _ := readImportedSnap(h.ctx, h.env(), imp.Target.ID); now != nil {
		t.Errorf("the imported experiments are still there: %s", now)
	}

	factor := "undo_grade_" + undoSuffix
	t.Cleanup(func() {
		if s, err := stratAPI(h.api); err == nil {
			_ = s.DeleteStratificationFactor(h.ctx, factor)
		}
	})
	up, _ := h.do(CreateStratificationFactorParams{Name: factor, Values: []StratValueParam{{UserID: "s1", Value: "7"}, {UserID: "s2", Value: "8"}}})
	h.undo(up) // the factor is deleted
	h.do(CreateStratificationFactorParams{Name: factor, Values: []StratValueParam{{UserID: "s1", Value: "7"}, {UserID: "s2", Value: "8"}}})
	more, _ := h.do(CreateStratificationFactorParams{Name: factor, Values: []StratValueParam{{UserID: "s2", Value: "9"}, {UserID: "s3", Value: "7"}}})
	h.undo(more) // s2 is 8 again, s3 has none
	del, _ := h.do(DeleteStratificationFactorParams{Name: factor})
	plan, err := mustBound(UndoChangeParams{ChangeID: del.ID}).Plan(h.ctx, h.env())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.Message, "uploaded again") {
		t.Errorf("plan:\n%s", plan.Message)
	}
	h.undo(del) // its values are uploaded again
}
