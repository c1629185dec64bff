package quality

import (
	"context"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The habits real models have when update_experiment switches the
// assignment algorithm (random <-> stratified random sampling), the unit
// and the condition order, and when duplicate_experiment names a context:
// display names and other cases, explicit defaults, "" and null for
// optional fields, numbers as strings, stray spaces. Every case ends with
// the backend holding what was shown and approved.

// seedPrior uploads the factor prior (s1 low, s2 high, s3 low).
func seedPrior(t *testing.T, w *world) {
	t.Helper()
	if _, err := w.client(t).UploadStratification(context.Background(), "uuid,prior\ns1,low\ns2,high\ns3,low\n"); err != nil {
		t.Fatal(err)
	}
}

// drawnRandomly: the experiment draws at random, stratified by nothing.
func drawnRandomly(name string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		e := w.experiment(name)
		if e == nil || e.AssignmentAlgorithm != upgrade.AlgorithmRandom || e.StratificationFactor != nil {
			t.Errorf("experiment %s: %+v", name, e)
		}
	}
}

// describedAs: the experiment has that description.
func describedAs(name, text string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if e := w.experiment(name); e == nil || e.Description != text {
			t.Errorf("experiment %s: %+v, want description %q", name, e, text)
		}
	}
}

const stratifyMathHints = `{experiment_id: Math Hints, assignment_algorithm: stratified random sampling, stratification_factor: prior}`

func TestHabitDesigns2(t *testing.T) {
	t.Parallel()
	stratify := request("Stratify Math Hints by prior.", "update_experiment", stratifyMathHints)
	runBehaviour(t, []behaviourCase{
		{name: "switch to stratified: display name, stray spaces, null optionals", seed: seedPrior, steps: []turnStep{
			request("Make Math Hints use Stratified Random Sampling by prior.", "update_experiment",
				`{experiment_id: " Math Hints ", assignment_algorithm: " Stratified Random Sampling ", stratification_factor: " prior ", description: null, inclusion_users: null, condition_order: null}`).
				expect(func(w *turnWant) {
					w.exact = `{"experiment_id":"{{id:Math Hints}}","assignment_algorithm":"stratified random sampling","stratification_factor":"prior"}`
				}),
			yes("update_experiment"),
		}, backend: []check{stratifiedBy("Math Hints", "prior"), hasExp("Math Hints", upgrade.StateInactive, "control:50", "variant:50")}},
		{name: "switch to stratified in other spellings, weights as strings", seed: seedPrior, steps: []turnStep{
			request("Math Hints: stratified by prior, 40/60.", "update_experiment",
				`{experiment_id: Math Hints, assignment_algorithm: STRATIFIED_RANDOM_SAMPLING, stratification_factor: prior, conditions: {control: "40", variant: " 60 "}}`).
				expect(func(w *turnWant) {
					w.params = `{"assignment_algorithm":"stratified random sampling","stratification_factor":"prior","conditions":[{"code":"control","weight":40},{"code":"variant","weight":60}]}`
				}),
			yes("update_experiment"),
		}, backend: []check{stratifiedBy("Math Hints", "prior"), hasExp("Math Hints", upgrade.StateInactive, "control:40", "variant:60")}},
		{name: "a factor named by a number", seed: func(t *testing.T, w *world) {
			t.Helper()
			if _, err := w.client(t).UploadStratification(context.Background(), "uuid,2024\ns1,a\ns2,b\n"); err != nil {
				t.Fatal(err)
			}
		}, steps: []turnStep{
			request("Stratify Math Hints by the 2024 factor.", "update_experiment", `{experiment_id: Math Hints, assignment_algorithm: stratified, stratification_factor: 2024}`).
				expect(func(w *turnWant) {
					w.params = `{"assignment_algorithm":"stratified random sampling","stratification_factor":"2024"}`
				}),
			yes("update_experiment"),
		}, backend: []check{stratifiedBy("Math Hints", "2024")}},
		{name: "back to random: explicit default in capitals, empty factor", seed: seedPrior, steps: []turnStep{
			stratify, yes("update_experiment"),
			request("Make Math Hints random again.", "update_experiment", `{experiment_id: Math Hints, assignment_algorithm: RANDOM, stratification_factor: ""}`).
				expect(func(w *turnWant) {
					w.exact = `{"experiment_id":"{{id:Math Hints}}","assignment_algorithm":"random"}`
				}),
			yes("update_experiment"),
		}, backend: []check{drawnRandomly("Math Hints"), hasFactor("prior", "map[high:1 low:2]")}},
		{name: "empty algorithm and null factor change nothing", seed: seedPrior, steps: []turnStep{
			stratify, yes("update_experiment"),
			request("Describe Math Hints as stratified hints.", "update_experiment",
				`{experiment_id: Math Hints, description: " stratified hints ", assignment_algorithm: "", stratification_factor: null}`).
				expect(func(w *turnWant) {
					w.exact = `{"experiment_id":"{{id:Math Hints}}","description":"stratified hints"}`
				}),
			yes("update_experiment"),
		}, backend: []check{stratifiedBy("Math Hints", "prior"), describedAs("Math Hints", "stratified hints")}},
		{name: "an unknown factor is refused in Go, naming the factors", seed: seedPrior, steps: []turnStep{
			{say: "Stratify Math Hints by grade.",
				llm:  analyze + gather("update_experiment", `{experiment_id: Math Hints, assignment_algorithm: stratified, stratification_factor: grade}`) + respond,
				want: turnWant{field: "stratification_factor", calls: 3}},
		}, backend: []check{drawnRandomly("Math Hints")}},
		{name: "a factor alone is refused in Go", seed: seedPrior, steps: []turnStep{
			{say: "Use the prior factor for Math Hints.",
				llm:  analyze + gather("update_experiment", `{experiment_id: Math Hints, stratification_factor: prior}`) + respond,
				want: turnWant{field: "stratification_factor", calls: 3}},
		}, backend: []check{drawnRandomly("Math Hints")}},
		{name: "Thompson sampling is refused on update", steps: []turnStep{
			{say: "Switch Math Hints to Thompson sampling.",
				llm:  analyze + gather("update_experiment", `{experiment_id: Math Hints, assignment_algorithm: Thompson Sampling}`) + respond,
				want: turnWant{field: "assignment_algorithm", calls: 3}},
		}, backend: []check{drawnRandomly("Math Hints")}},
		{name: "a factor switched on by update cannot be deleted", seed: seedPrior, steps: []turnStep{
			stratify, yes("update_experiment"),
			{say: "Delete the prior factor.",
				llm:  analyze + gather("delete_stratification_factor", `{name: " prior "}`) + respond,
				want: turnWant{field: "name", calls: 3}},
		}, backend: []check{hasFactor("prior", "map[high:1 low:2]"), stratifiedBy("Math Hints", "prior")}},
		{name: "within-subjects on update: display names, empty group type", steps: []turnStep{
			request("Let every student of Math Hints see both conditions, shuffled round robin.", "update_experiment",
				`{experiment_id: Math Hints, assignment_unit: " Within-Subjects ", condition_order: "Random Round Robin", group_type: "", factors: null, design: null}`).
				expect(func(w *turnWant) {
					w.params = `{"assignment_unit":"within-subjects","condition_order":"random round robin"}`
				}),
			yes("update_experiment"),
		}, backend: []check{hasDesign("Math Hints", upgrade.TypeSimple, 2, upgrade.UnitWithinSubjects, upgrade.OrderRandomRoundRobin)}},
		{name: "duplicate into the same context spelled with spaces", steps: []turnStep{
			request("Copy Math Hints as Math Hints B in assign-prog.", "duplicate_experiment", `{experiment_id: Math Hints, name: Math Hints B, context: " assign-prog "}`).
				expect(func(w *turnWant) {
					w.exact = `{"experiment_id":"{{id:Math Hints}}","name":"Math Hints B","context":"assign-prog"}`
				}),
			yes("duplicate_experiment").expect(func(w *turnWant) { w.unseen = []string{"Dropped"} }),
		}, backend: []check{copyOf("Math Hints B", "Math Hints")}},
		{name: "duplicate into a context without the decision points is refused", steps: []turnStep{
			{say: "Copy Math Hints into mathstream.",
				llm:  analyze + gather("duplicate_experiment", `{experiment_id: Math Hints, name: Math Hints Stream, context: mathstream}`) + respond,
				want: turnWant{field: "context", calls: 3}},
		}, backend: []check{noExperiment("Math Hints Stream")}},
	})
}
