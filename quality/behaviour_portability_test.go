package quality

import (
	"context"
	"fmt"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The habits real models have with the stratification, import and
// duplicate actions: a factor's values as a map or as rows, numbers as
// strings, stray spaces, display spellings of the algorithm, null and ""
// for optional fields. Every case ends with the backend holding what was
// shown and approved.

// hasFactor: the factor exists with exactly these value counts ("" for
// none at all: the factor does not exist).
func hasFactor(name, counts string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		all, err := w.client(t).StratificationFactors(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, f := range all {
			if f.Factor == name {
				got = fmt.Sprint(f.FactorValue)
			}
		}
		if got != counts {
			t.Errorf("factor %s: %q, want %q", name, got, counts)
		}
	}
}

// stratifiedBy: the experiment exists, inactive, stratified by factor.
func stratifiedBy(name, factor string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		e := w.experiment(name)
		if e == nil || e.AssignmentAlgorithm != upgrade.AlgorithmStratified || e.StratificationFactor == nil || e.StratificationFactor.Name != factor {
			t.Errorf("experiment %s: %+v", name, e)
		}
	}
}

// copyOf: the experiment exists, inactive, with the conditions of the
// source and ids of its own.
func copyOf(name, source string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		e, src := w.experiment(name), w.experiment(source)
		if e == nil || src == nil || e.State != upgrade.StateInactive || e.ID == src.ID || len(e.Conditions) != len(src.Conditions) ||
			e.Conditions[0].ID == src.Conditions[0].ID || e.Conditions[0].ConditionCode != src.Conditions[0].ConditionCode {
			t.Errorf("copy %s of %s: %+v", name, source, e)
		}
	}
}

func noExperiment(name string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if e := w.experiment(name); e != nil {
			t.Errorf("experiment %s exists: %+v", name, e)
		}
	}
}

const priorUpload = `{name: " prior ", values: {s1: low, s2: high, s3: low}}`

func TestHabitPortability(t *testing.T) {
	t.Parallel()
	upload := request("Upload prior: s1 low, s2 high, s3 low.", "create_stratification_factor", priorUpload).
		expect(func(w *turnWant) {
			w.params = `{"name":"prior","values":[{"user_id":"s1","value":"low"},{"user_id":"s2","value":"high"},{"user_id":"s3","value":"low"}]}`
		})
	runBehaviour(t, []behaviourCase{
		{name: "factor values as a map", steps: []turnStep{upload, yes("create_stratification_factor")},
			backend: []check{hasFactor("prior", "map[high:1 low:2]")}},
		{name: "factor values as rows, numbers as strings, stray spaces", steps: []turnStep{
			request("Grade levels: u1 is 7, u2 is 8.", "create_stratification_factor",
				`{name: grade, values: [{user_id: " u1 ", value: 7}, {user_id: u2, value: " 8 "}]}`).
				expect(func(w *turnWant) {
					w.params = `{"name":"grade","values":[{"user_id":"u1","value":"7"},{"user_id":"u2","value":"8"}]}`
				}),
			yes("create_stratification_factor"),
		}, backend: []check{hasFactor("grade", "map[7:1 8:1]")}},
		{name: "an empty value is refused in Go", steps: []turnStep{
			{say: "Upload prior with s1 empty.",
				llm:  analyze + gather("create_stratification_factor", `{name: prior, values: {s1: ""}}`) + respond,
				want: turnWant{field: "values[0].value", calls: 3}},
		}, backend: []check{hasFactor("prior", "")}},
		{name: "stratified create with display spellings and empty optionals", steps: []turnStep{
			upload, yes("create_stratification_factor"),
			request("Create Strat Hints in assign-prog stratified by prior.", "create_experiment",
				`{name: Strat Hints, context: assign-prog, decision_points: [{site: SelectSection, target: analyzing_step_functions}], conditions: {control: "50", variant: 50}, assignment_algorithm: " Stratified ", stratification_factor: " prior ", description: "", tags: [], inclusion_users: null}`).
				expect(func(w *turnWant) {
					w.params = `{"assignment_algorithm":"stratified random sampling","stratification_factor":"prior"}`
				}),
			yes("create_experiment"),
		}, backend: []check{stratifiedBy("Strat Hints", "prior")}},
		{name: "stratified create without a factor asks for it", steps: []turnStep{
			{say: "Create Strat Hints in assign-prog, stratified.",
				llm: analyze + gather("create_experiment", `{name: Strat Hints, context: assign-prog, decision_points: [{site: SelectSection, target: analyzing_step_functions}], conditions: {control: 50, variant: 50}, assignment_algorithm: stratified random sampling, stratification_factor: null}`) + respond + respond,
				// A missing param: the gatherer is asked once more, then the responder asks the person.
				want: turnWant{calls: 4, seen: []string{"stratification_factor is required with stratified random sampling"}}},
		}, backend: []check{noExperiment("Strat Hints")}},
		{name: "a used factor cannot be deleted", steps: []turnStep{
			upload, yes("create_stratification_factor"),
			request("Create Strat Hints stratified by prior.", "create_experiment",
				`{name: Strat Hints, context: assign-prog, decision_points: [{site: SelectSection, target: analyzing_step_functions}], conditions: {control: 50, variant: 50}, assignment_algorithm: stratified, stratification_factor: prior}`),
			yes("create_experiment"),
			{say: "Delete the prior factor.",
				llm:  analyze + gather("delete_stratification_factor", `{name: prior}`) + respond,
				want: turnWant{field: "name", calls: 3}},
		}, backend: []check{hasFactor("prior", "map[high:1 low:2]"), stratifiedBy("Strat Hints", "prior")}},
		{name: "duplicate by name with an empty context", steps: []turnStep{
			request("Copy Math Hints as Math Hints Copy.", "duplicate_experiment", `{experiment_id: math hints, name: " Math Hints Copy ", context: ""}`).
				expect(func(w *turnWant) {
					w.exact = `{"experiment_id":"{{id:Math Hints}}","name":"Math Hints Copy"}`
				}),
			yes("duplicate_experiment"),
		}, backend: []check{copyOf("Math Hints Copy", "Math Hints")}},
		{name: "duplicate under a taken name is refused", steps: []turnStep{
			{say: "Copy Math Hints as Math Hints Live.",
				llm:  analyze + gather("duplicate_experiment", `{experiment_id: "{{id:Math Hints}}", name: Math Hints Live, context: null}`) + respond,
				want: turnWant{field: "name", calls: 3}},
		}, backend: []check{noExperiment("Math Hints Copy")}},
	})
}
