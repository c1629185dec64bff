package actions

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// startSimMeta is startSim with context metadata of its own.
func startSimMeta(t *testing.T, meta upgrade.ContextMetadata) *upgrade.Client {
	t.Helper()
	return startSimWith(t, sim.Options{Seed: 42, Metadata: meta})
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// simPlanGolden compares a plan made on the simulator, ids blanked, with
// testdata/plan/NAME.txt (go test -update rewrites it).
func simPlanGolden(t *testing.T, name string, plan *Plan) {
	t.Helper()
	got := uuidRE.ReplaceAllString(plan.Message, "<id>") + "\n"
	path := filepath.Join("testdata", "plan", name+".txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("plan differs from %s (-want +got):\n%s", path, diff)
	}
}

func problemsOf(t *testing.T, api API, p Params) []Problem {
	t.Helper()
	probs, err := Validate(context.Background(), api, p)
	if err != nil {
		t.Fatalf("%s: %v", p.Action(), err)
	}
	return probs
}

func oneProblem(t *testing.T, probs []Problem, field, text string) {
	t.Helper()
	if len(probs) != 1 || probs[0].Field != field || !strings.Contains(probs[0].Message, text) {
		t.Errorf("want one problem on %s containing %q, got %+v", field, text, probs)
	}
}

// TestUpdateSwitchesAssignmentAlgorithm: update_experiment switches a
// random experiment to stratified random sampling and back, with create's
// checks; delete_stratification_factor is refused while the switched
// experiment uses the factor.
func TestUpdateSwitchesAssignmentAlgorithm(t *testing.T) {
	ctx := context.Background()
	api := startSim(t, "6.5.0")
	run(t, api, CreateStratificationFactorParams{Name: "prior", Values: []StratValueParam{{UserID: "s1", Value: "low"}, {UserID: "s2", Value: "high"}}})
	_, raw := run(t, api, parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Plain","context":"assign-prog",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`))
	id := decode[ExperimentResult](t, raw).ID
	stored := func() *upgrade.Experiment {
		t.Helper()
		e, err := api.Experiment(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	upd := func(fields string) UpdateExperimentParams {
		return parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`",`+fields+`}`)
	}

	// Refused in Go: an unknown factor (naming those that exist), no
	// factor, a factor without stratified sampling, Thompson sampling.
	oneProblem(t, problemsOf(t, api, upd(`"assignment_algorithm":"stratified random sampling","stratification_factor":"grade"`)),
		"stratification_factor", `no stratification factor "grade"; factors: prior`)
	oneProblem(t, problemsOf(t, api, upd(`"assignment_algorithm":"stratified"`)), "stratification_factor", "required with stratified random sampling; factors: prior")
	oneProblem(t, problemsOf(t, api, upd(`"stratification_factor":"prior"`)), "stratification_factor", "applies only with assignment_algorithm stratified random sampling")
	oneProblem(t, problemsOf(t, api, upd(`"assignment_algorithm":"Thompson Sampling"`)), "assignment_algorithm", "mooclets are not enabled on backend")
	if e := stored(); e.AssignmentAlgorithm != upgrade.AlgorithmRandom || e.StratificationFactor != nil {
		t.Fatalf("refused updates changed the experiment: %s %+v", e.AssignmentAlgorithm, e.StratificationFactor)
	}

	plan, raw := run(t, api, upd(`"assignment_algorithm":" Stratified Random Sampling ","stratification_factor":" prior "`))
	if r := decode[updateResult](t, raw); r.AssignmentAlgorithm != upgrade.AlgorithmStratified || r.StratificationFactor != "prior" || r.ID != id {
		t.Errorf("result %+v", r)
	}
	simPlanGolden(t, "update_to_stratified", plan)
	for _, want := range []string{`assignment_algorithm: random -> stratified random sampling`, `stratification_factor: (none) -> "prior"`} {
		if !strings.Contains(plan.Message, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan.Message)
		}
	}
	if !strings.Contains(strings.Join(plan.Warnings, "\n"), "no balancing") {
		t.Errorf("plan warnings %v", plan.Warnings)
	}
	if e := stored(); e.AssignmentAlgorithm != upgrade.AlgorithmStratified || e.StratificationFactor == nil || e.StratificationFactor.Name != "prior" {
		t.Fatalf("after the switch: %s %+v", e.AssignmentAlgorithm, e.StratificationFactor)
	}
	oneProblem(t, problemsOf(t, api, DeleteStratificationFactorParams{Name: "prior"}), "name", `experiment "Plain" (id `+id+`)`)

	// Other fields change, the algorithm stays.
	run(t, api, upd(`"description":"stratified now"`))
	if e := stored(); e.AssignmentAlgorithm != upgrade.AlgorithmStratified || e.StratificationFactor == nil || e.Description != "stratified now" {
		t.Fatalf("after a description update: %s %+v", e.AssignmentAlgorithm, e.StratificationFactor)
	}
	// Giving what it has is no change.
	plan, _ = run(t, api, upd(`"assignment_algorithm":"stratified random sampling","stratification_factor":"prior"`))
	if !strings.Contains(plan.Message, "(no change") {
		t.Errorf("same values plan:\n%s", plan.Message)
	}

	// Back to random: the factor goes with it and may be deleted.
	plan, _ = run(t, api, upd(`"assignment_algorithm":"Random"`))
	simPlanGolden(t, "update_to_random", plan)
	for _, want := range []string{`assignment_algorithm: stratified random sampling -> random`, `stratification_factor: "prior" -> (none)`} {
		if !strings.Contains(plan.Message, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan.Message)
		}
	}
	if e := stored(); e.AssignmentAlgorithm != upgrade.AlgorithmRandom || e.StratificationFactor != nil {
		t.Fatalf("after the switch back: %s %+v", e.AssignmentAlgorithm, e.StratificationFactor)
	}
	if probs := problemsOf(t, api, DeleteStratificationFactorParams{Name: "prior"}); len(probs) != 0 {
		t.Errorf("delete of an unused factor: %+v", probs)
	}
}

// TestUpdateUnitAndConditionOrder: update_experiment makes a simple
// experiment within-subjects (condition order required), changes the order
// and makes it individual again.
func TestUpdateUnitAndConditionOrder(t *testing.T) {
	ctx := context.Background()
	api := startSim(t, "6.5.0")
	_, raw := run(t, api, parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Order","context":"assign-prog","assignment_unit":"group","group_type":"classId","consistency_rule":"group",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`))
	id := decode[ExperimentResult](t, raw).ID
	upd := func(fields string) UpdateExperimentParams {
		return parseAs[UpdateExperimentParams](t, UpdateExperiment, `{"experiment_id":"`+id+`",`+fields+`}`)
	}
	oneProblem(t, problemsOf(t, api, upd(`"assignment_unit":"within-subjects","consistency_rule":"individual"`)), "condition_order", "condition_order is required")
	oneProblem(t, problemsOf(t, api, upd(`"condition_order":"random"`)), "condition_order", "applies only with assignment_unit within-subjects")
	oneProblem(t, problemsOf(t, api, upd(`"assignment_unit":"within subjects","condition_order":"sideways","consistency_rule":"individual"`)), "condition_order", "unknown condition order")

	plan, _ := run(t, api, upd(`"assignment_unit":"Within Subjects","condition_order":"Random Round Robin","consistency_rule":"individual"`))
	simPlanGolden(t, "update_to_within_subjects", plan)
	for _, want := range []string{"assignment_unit: group -> within-subjects", `condition_order: (none) -> "random round robin"`, "group_type: classId -> (none)"} {
		if !strings.Contains(plan.Message, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan.Message)
		}
	}
	e, err := api.Experiment(ctx, id)
	if err != nil || e.AssignmentUnit != upgrade.UnitWithinSubjects || e.ConditionOrder != upgrade.OrderRandomRoundRobin || e.Group != "" {
		t.Fatalf("stored %+v, %v", e, err)
	}
	run(t, api, upd(`"condition_order":"ordered"`))
	if e, _ = api.Experiment(ctx, id); e.ConditionOrder != upgrade.OrderOrderedRoundRobin {
		t.Fatalf("order %q", e.ConditionOrder)
	}
	plan, _ = run(t, api, upd(`"assignment_unit":"individual"`))
	if !strings.Contains(plan.Message, `condition_order: "ordered round robin" -> (none)`) {
		t.Errorf("plan:\n%s", plan.Message)
	}
	if e, _ = api.Experiment(ctx, id); e.AssignmentUnit != upgrade.UnitIndividual || e.ConditionOrder != "" {
		t.Fatalf("stored unit %s order %q", e.AssignmentUnit, e.ConditionOrder)
	}
}

// twoContexts is the default metadata with assign-prog-b, a context with
// assign-prog's sites, targets and conditions, so that a copy can move.
func twoContexts() upgrade.ContextMetadata {
	m := upgrade.DefaultContextMetadata()
	m["assign-prog-b"] = m["assign-prog"]
	return m
}

// TestDuplicateKeepsOrDropsByContext: a copy in the same context keeps the
// source's queries and lists; a copy into another context drops them and
// says so in the plan and the result. Simple (stratified), factorial and
// within-subjects sources.
func TestDuplicateKeepsOrDropsByContext(t *testing.T) {
	ctx := context.Background()
	api := startSimMeta(t, twoContexts())
	run(t, api, CreateStratificationFactorParams{Name: "prior", Values: []StratValueParam{{UserID: "s1", Value: "low"}}})
	run(t, api, CreateMetricParams{Context: []string{"assign-prog", "assign-prog-b"}, Key: "time_on_task", Type: "continuous"})
	sources := map[string]string{
		"simple": `{"name":"Simple src","context":"assign-prog","assignment_algorithm":"stratified","stratification_factor":"prior",
			"filter_mode":"excludeAll","inclusion_users":["u1","u2"],"exclusion_groups":[{"type":"classId","group_id":"c-9"}],
			"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":40,"variant":60}}`,
		"factorial": `{"name":"Factorial src","context":"assign-prog","design":"factorial","exclusion_users":["u9"],
			"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],
			"factors":{"Color":["Red","Blue"],"Shape":["Circle","Square"]}}`,
		"within": `{"name":"Within src","context":"assign-prog","assignment_unit":"within-subjects","condition_order":"ordered round robin","exclusion_users":["u9"],
			"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`,
	}
	for _, kind := range []string{"simple", "factorial", "within"} {
		t.Run(kind, func(t *testing.T) {
			_, raw := runKeyed(t, api, parseAs[CreateExperimentParams](t, CreateExperiment, sources[kind]), "src-"+kind)
			srcID := decode[ExperimentResult](t, raw).ID
			runKeyed(t, api, AddExperimentQueryParams{ExperimentID: srcID, Name: "Mean time", MetricKey: "time_on_task", Operation: "avg"}, "query-"+kind)
			src, err := upgrade.ExperimentWithLists(ctx, api, srcID)
			if err != nil {
				t.Fatal(err)
			}

			// Same context: queries and lists kept.
			plan, raw := runKeyed(t, api, DuplicateExperimentParams{ExperimentID: srcID, Name: kind + " same", Context: "assign-prog"}, "same-"+kind)
			simPlanGolden(t, "duplicate_"+kind+"_same_context", plan)
			if !strings.Contains(plan.Message, "Queries: 1 kept") || !strings.Contains(plan.Message, "Inclusion and exclusion lists kept") {
				t.Errorf("same-context plan:\n%s", plan.Message)
			}
			r := decode[duplicateResult](t, raw)
			if r.Dropped != "" {
				t.Errorf("same-context result says dropped: %q", r.Dropped)
			}
			same := checkCopy(t, api, src, r.ID, "assign-prog")
			if len(same.Queries) != 1 || fmtListsOf(same) != fmtListsOf(src) {
				t.Errorf("same-context copy: %d queries, lists %s (source %s)", len(same.Queries), fmtListsOf(same), fmtListsOf(src))
			}

			// Another context: queries and lists dropped, and said.
			plan, raw = runKeyed(t, api, DuplicateExperimentParams{ExperimentID: srcID, Name: kind + " moved", Context: " assign-prog-b "}, "moved-"+kind)
			simPlanGolden(t, "duplicate_"+kind+"_other_context", plan)
			if !strings.Contains(plan.Message, "Queries: 1 dropped") || !strings.Contains(plan.Message, "Dropped with the move: 1 query and the inclusion and exclusion lists") ||
				!strings.Contains(strings.Join(plan.Warnings, "\n"), "its queries and its inclusion and exclusion lists are dropped") {
				t.Errorf("moved plan:\n%s\n%v", plan.Message, plan.Warnings)
			}
			r = decode[duplicateResult](t, raw)
			if !strings.Contains(r.Dropped, "1 query and the inclusion and exclusion lists") {
				t.Errorf("moved result: %+v", r)
			}
			moved := checkCopy(t, api, src, r.ID, "assign-prog-b")
			if len(moved.Queries) != 0 || fmtListsOf(moved) != "0 users, 0 groups, 0 segments" {
				t.Errorf("moved copy: %d queries, lists %s", len(moved.Queries), fmtListsOf(moved))
			}
		})
	}
}

// checkCopy reads a copy and checks what every copy holds: new ids, the
// source's design, state inactive.
func checkCopy(t *testing.T, api *upgrade.Client, src *upgrade.Experiment, id, context string) *upgrade.Experiment {
	t.Helper()
	e, err := upgrade.ExperimentWithLists(t.Context(), api, id)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID == src.ID || e.State != upgrade.StateInactive || e.ContextName() != context || e.Type != src.Type ||
		e.AssignmentUnit != src.AssignmentUnit || e.ConditionOrder != src.ConditionOrder || e.AssignmentAlgorithm != src.AssignmentAlgorithm ||
		len(e.Conditions) != len(src.Conditions) || len(e.Factors) != len(src.Factors) {
		t.Errorf("copy %s: %+v", id, e)
	}
	if (e.StratificationFactor == nil) != (src.StratificationFactor == nil) {
		t.Errorf("copy stratification %+v, source %+v", e.StratificationFactor, src.StratificationFactor)
	}
	old := map[string]bool{}
	for _, c := range src.Conditions {
		old[c.ID] = true
		for _, el := range c.LevelCombinationElements {
			old[el.ID], old[el.Level.ID] = true, true
		}
	}
	for _, c := range e.Conditions {
		if old[c.ID] || src.ConditionByCode(c.ConditionCode) == nil {
			t.Errorf("copy condition %s (%s): an old id or a code the source lacks", c.ConditionCode, c.ID)
		}
		for _, el := range c.LevelCombinationElements {
			if old[el.ID] || old[el.Level.ID] {
				t.Errorf("copy condition %s keeps the source's level ids", c.ConditionCode)
			}
		}
	}
	return e
}

// TestDuplicateIntoContextWithoutTheSites: a copy into a context lacking
// the source's decision points is refused on the context field.
func TestDuplicateIntoContextWithoutTheSites(t *testing.T) {
	api := startSim(t, "6.5.0")
	_, raw := run(t, api, parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Src","context":"assign-prog",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`))
	id := decode[ExperimentResult](t, raw).ID
	probs := problemsOf(t, api, DuplicateExperimentParams{ExperimentID: id, Name: "Copy", Context: "mathstream"})
	if len(probs) == 0 {
		t.Fatal("no problems")
	}
	for _, p := range probs {
		if p.Field != "context" || !strings.Contains(p.Message, `the copy keeps the`) || !strings.Contains(p.Message, "context mathstream cannot take them") {
			t.Errorf("problem %+v", p)
		}
	}
}

// TestUndoAlgorithmSwitch: the undo of an update that switched to
// stratified random sampling makes the experiment random again, after
// which the factor can be deleted; the undo of that undo stratifies it
// again.
func TestUndoAlgorithmSwitch(t *testing.T) {
	h := newUndoHarness(t)
	factor := "undo_prior_" + undoSuffix
	h.do(CreateStratificationFactorParams{Name: factor, Values: []StratValueParam{{UserID: "s1", Value: "low"}, {UserID: "s2", Value: "high"}}})
	_, raw := h.do(CreateExperimentParams{Name: "Undo strat " + undoSuffix, Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}}})
	id := decode[ExperimentResult](t, raw).ID
	t.Cleanup(func() {
		_, _ = h.api.DeleteExperiment(h.ctx, id)
		if s, err := stratAPI(h.api); err == nil {
			_ = s.DeleteStratificationFactor(h.ctx, factor)
		}
	})
	up, _ := h.do(UpdateExperimentParams{ExperimentID: id, AssignmentAlgorithm: ptr("stratified random sampling"), StratificationFactor: ptr(factor)})
	e, err := h.api.Experiment(h.ctx, id)
	if err != nil || e.AssignmentAlgorithm != upgrade.AlgorithmStratified || e.StratificationFactor == nil {
		t.Fatalf("after the switch: %+v, %v", e, err)
	}
	u := h.undo(up)
	if e, _ = h.api.Experiment(h.ctx, id); e.AssignmentAlgorithm != upgrade.AlgorithmRandom || e.StratificationFactor != nil {
		t.Fatalf("after the undo: %s %+v", e.AssignmentAlgorithm, e.StratificationFactor)
	}
	if probs, err := Validate(h.ctx, h.api, DeleteStratificationFactorParams{Name: factor}); err != nil || len(probs) != 0 {
		t.Errorf("delete after the undo: %+v, %v", probs, err)
	}
	h.undo(u)
	if e, _ = h.api.Experiment(h.ctx, id); e.AssignmentAlgorithm != upgrade.AlgorithmStratified || e.StratificationFactor == nil || e.StratificationFactor.Name != factor {
		t.Fatalf("after the redo: %s %+v", e.AssignmentAlgorithm, e.StratificationFactor)
	}
}

// TestDuplicateMoveWithNothingToDrop: a source without queries or list
// members moves without a warning, and its result drops nothing.
func TestDuplicateMoveWithNothingToDrop(t *testing.T) {
	api := startSimMeta(t, twoContexts())
	_, raw := run(t, api, parseAs[CreateExperimentParams](t, CreateExperiment, `{"name":"Bare","context":"assign-prog",
		"decision_points":[{"site":"SelectSection","target":"absolute_value_plot_equality"}],"conditions":{"control":50,"variant":50}}`))
	id := decode[ExperimentResult](t, raw).ID
	plan, raw := run(t, api, DuplicateExperimentParams{ExperimentID: id, Name: "Bare B", Context: "assign-prog-b"})
	if len(plan.Warnings) != 0 || !strings.Contains(plan.Message, "the source has no queries or list members to drop") {
		t.Errorf("plan:\n%s\n%v", plan.Message, plan.Warnings)
	}
	if r := decode[duplicateResult](t, raw); r.Dropped != "" || r.Context != "assign-prog-b" {
		t.Errorf("result %+v", r)
	}
}
