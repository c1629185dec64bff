package quality

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The habits real models have with the metric actions and lookups
// (spec/results.md): types and operations in other spellings, nulls and
// empty optionals, a context as one string, an experiment by name, a
// categorical compare written as words. Every case ends with the
// simulator holding what was shown and approved.

// seedMetrics adds metric score (continuous) and passed (categorical yes,
// no) in assign-prog, and on Math Hints Live the queries "Mean score" (avg
// of score) and "Pass rate" (percentage of passed = yes), whose ids fill
// {{id:Mean score}} and {{id:Pass rate}}.
func seedMetrics(t *testing.T, w *world) {
	t.Helper()
	ctx := context.Background()
	c := w.client(t)
	if _, err := c.SaveMetrics(ctx, []upgrade.MetricUnit{{Metric: "score", Datatype: upgrade.MetricContinuous},
		{Metric: "passed", Datatype: upgrade.MetricCategorical, AllowedValues: []string{"yes", "no"}}}, []string{"assign-prog"}); err != nil {
		t.Fatal(err)
	}
	e, err := c.Experiment(ctx, w.ids["Math Hints Live"])
	if err != nil {
		t.Fatal(err)
	}
	if w.ids["Mean score"], err = e.AddQuery("Mean score", "score", upgrade.RepeatedMostRecent, upgrade.QueryOp{OperationType: "avg"}); err != nil {
		t.Fatal(err)
	}
	if w.ids["Pass rate"], err = e.AddQuery("Pass rate", "passed", upgrade.RepeatedMostRecent,
		upgrade.QueryOp{OperationType: "percentage", CompareFn: "=", CompareValue: "yes"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateExperiment(ctx, e); err != nil {
		t.Fatal(err)
	}
}

// hasMetrics: the stored metric leaves are exactly these, "key:type".
func hasMetrics(want ...string) check {
	// Sorted once, here: the check runs in parallel cases, and want may be
	// the backing array of a slice they share.
	want = slices.Sorted(slices.Values(want))
	return func(t *testing.T, w *world) {
		t.Helper()
		trees, err := w.client(t).Metrics(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range upgrade.FlattenMetrics(trees) {
			s := m.Key + ":" + m.Type
			if len(m.Allowed) > 0 {
				s += "(" + strings.Join(m.Allowed, ",") + ")"
			}
			got = append(got, s)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("backend: metrics %q, want %q", got, want)
		}
	}
}

// hasQueries: the experiment's queries are exactly these, in order, each
// "name=operation of key[ fn value]/measure".
func hasQueries(exp string, want ...string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		e, err := w.client(t).Experiment(context.Background(), w.ids[exp])
		if err != nil {
			t.Fatal(err)
		}
		qs, err := e.QueryList()
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, q := range qs {
			s := q.Name + "=" + q.Query.OperationType + " of " + q.MetricKey
			if q.Query.CompareFn != "" {
				s += " " + q.Query.CompareFn + " " + q.Query.CompareValue
			}
			got = append(got, s+"/"+q.RepeatedMeasure)
		}
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("backend: %s queries %q, want %q", exp, got, want)
		}
	}
}

const (
	meanScore = "Mean score=avg of score/MOST RECENT"
	passRate  = "Pass rate=percentage of passed = yes/MOST RECENT"
)

var seededMetrics = []string{"score:continuous", "passed:categorical(yes,no)"}

// seedCases gives every case the metric seed.
func seedCases(cases []behaviourCase) []behaviourCase {
	for i := range cases {
		cases[i].seed = seedMetrics
	}
	return cases
}

// TestBindingMetrics: issue 13's table for the metric actions.
func TestBindingMetrics(t *testing.T) {
	t.Parallel()
	families := []bindFamily{
		{action: "create_metric", say: "Define a continuous metric time_on_task in assign-prog.",
			plain:   `{"context":["assign-prog"],"key":"time_on_task","type":"continuous"}`,
			backend: []check{hasMetrics(append([]string{"time_on_task:continuous"}, seededMetrics...)...), hasQueries("Math Hints Live", meanScore, passRate)},
			vars: []bindVariant{
				{"empty optionals", `{context: [assign-prog], key: time_on_task, type: continuous, allowed_values: [], group: "", keys: [], attributes: []}`},
				{"null optionals", `{context: [assign-prog], key: time_on_task, type: continuous, allowed_values: null, group: null, keys: null, attributes: null}`},
				{"display name, one context as a string, blanks", `{context: " assign-prog ", key: " time_on_task", type: Numeric}`},
			}},
		{action: "create_metric", say: "Define a categorical metric mastery with values low, mid and high in assign-prog.",
			plain:   `{"context":["assign-prog"],"key":"mastery","type":"categorical","allowed_values":["low","mid","high"]}`,
			backend: []check{hasMetrics(append([]string{"mastery:categorical(low,mid,high)"}, seededMetrics...)...)},
			vars: []bindVariant{
				{"capitalised type, blanks in values", `{context: [assign-prog], key: mastery, type: Categorical, allowed_values: [" low", "mid ", high]}`},
			}},
		{action: "create_metric", say: "Define a categorical metric level with values 1, 2 and 3 in assign-prog.",
			plain:   `{"context":["assign-prog"],"key":"level","type":"categorical","allowed_values":["1","2","3"]}`,
			backend: []check{hasMetrics(append([]string{"level:categorical(1,2,3)"}, seededMetrics...)...)},
			vars: []bindVariant{
				{"numbers for values", `{context: [assign-prog], key: level, type: categorical, allowed_values: [1, 2, 3]}`},
			}},
		{action: "delete_metric", say: "Delete the metric passed.",
			plain:   `{"key":"passed"}`,
			backend: []check{hasMetrics("score:continuous"), hasQueries("Math Hints Live", meanScore)},
			vars: []bindVariant{
				{"blanks", `{key: " passed "}`},
			}},
		{action: "add_experiment_query", say: "Add a query Best score to Math Hints Live: the maximum of score.",
			plain:   `{"experiment_id":"{{id:Math Hints Live}}","name":"Best score","metric_key":"score","operation":"max","repeated_measure":"MOST RECENT"}`,
			backend: []check{hasQueries("Math Hints Live", meanScore, passRate, "Best score=max of score/MOST RECENT"), hasMetrics(seededMetrics...)},
			vars: []bindVariant{
				{"explicit default and null compare", `{experiment_id: "{{id:Math Hints Live}}", name: Best score, metric_key: score, operation: max, repeated_measure: MOST RECENT, compare: null}`},
				{"display names", `{experiment_id: "{{id:Math Hints Live}}", name: Best score, metric_key: score, operation: Maximum, repeated_measure: most_recent}`},
				{"experiment by name, blanks", `{experiment_id: " Math Hints Live ", name: "Best score ", metric_key: " score", operation: " MAX", repeated_measure: ""}`},
			}},
		{action: "add_experiment_query", say: "Add a query Fail count to Math Hints Live counting passed = no, first value.",
			plain:   `{"experiment_id":"{{id:Math Hints Live}}","name":"Fail count","metric_key":"passed","operation":"count","repeated_measure":"EARLIEST","compare":{"fn":"=","value":"no"}}`,
			backend: []check{hasQueries("Math Hints Live", meanScore, passRate, "Fail count=count of passed = no/EARLIEST")},
			vars: []bindVariant{
				{"compare in words", `{experiment_id: "{{id:Math Hints Live}}", name: Fail count, metric_key: passed, operation: COUNT, repeated_measure: first, compare: {fn: equals, value: " no"}}`},
				{"compare as ==", `{experiment_id: "{{id:Math Hints Live}}", name: Fail count, metric_key: passed, operation: count, repeated_measure: Earliest, compare: {fn: "==", value: no}}`},
			}},
		{action: "remove_experiment_query", say: "Remove the pass rate query from Math Hints Live.",
			plain:   `{"experiment_id":"{{id:Math Hints Live}}","query_id":"{{id:Pass rate}}"}`,
			backend: []check{hasQueries("Math Hints Live", meanScore), hasMetrics(seededMetrics...)},
			vars: []bindVariant{
				{"upper-case ids with blanks", `{experiment_id: " {{upper:Math Hints Live}}", query_id: "{{upper:Pass rate}} "}`},
				{"experiment by name", `{experiment_id: Math Hints Live, query_id: "{{id:Pass rate}}"}`},
			}},
	}
	runBehaviour(t, seedCases(bindCases(families)))
}

// TestHabitMetrics: what Go refuses before any confirmation, a query named
// instead of its id, one key per update, and the lookups' arguments as
// models write them.
func TestHabitMetrics(t *testing.T) {
	t.Parallel()
	unchanged := []check{hasMetrics(seededMetrics...), hasQueries("Math Hints Live", meanScore, passRate)}
	lookup := func(call string) string {
		return "- call:\n    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: Results., reasoning: A read., needs_action: false}\n" +
			"    " + call + "\n" + respond
	}
	runBehaviour(t, seedCases([]behaviourCase{
		{name: "query on a metric that does not exist", steps: []turnStep{
			{say: "Add a query Mean time to Math Hints Live: average of time.",
				llm:  analyze + gather("add_experiment_query", `{experiment_id: Math Hints Live, name: Mean time, metric_key: time, operation: avg}`) + respond,
				want: turnWant{field: "metric_key", calls: 3}},
		}, backend: unchanged},
		{name: "operation that does not fit the type", steps: []turnStep{
			{say: "Add the mean of passed to Math Hints Live.",
				llm:  analyze + gather("add_experiment_query", `{experiment_id: Math Hints Live, name: Mean passed, metric_key: passed, operation: avg, compare: {fn: "=", value: "yes"}}`) + respond,
				want: turnWant{field: "operation", calls: 3}},
		}, backend: unchanged},
		{name: "metric that exists already", steps: []turnStep{
			{say: "Define the continuous metric score in assign-prog.",
				llm:  analyze + gather("create_metric", `{key: score, type: continuous, context: [assign-prog]}`) + respond,
				want: turnWant{field: "key", calls: 3}},
		}, backend: unchanged},
		{name: "query by its name", steps: []turnStep{
			request("Remove the pass rate query from Math Hints Live.", "remove_experiment_query", `{experiment_id: Math Hints Live, query_id: pass rate}`),
			yes("remove_experiment_query"),
		}, backend: []check{hasQueries("Math Hints Live", meanScore), hasMetrics(seededMetrics...)}},
		{name: "one key per update", steps: []turnStep{
			ask("Add a query Top score to Math Hints Live: the maximum of score.", analyze+
				"- call: {set_action_needed: {action: add_experiment_query, reasoning: r}}\n"+
				updates(`{key: experiment_id, value: Math Hints Live}`, `{key: name, value: Top score}`, `{key: metric_key, value: score}`, `{key: operation, value: Max}`)+
				"- reply: Ready.\n"+respond, "add_experiment_query").
				expect(func(w *turnWant) {
					w.exact = `{"experiment_id":"{{id:Math Hints Live}}","name":"Top score","metric_key":"score","operation":"max","repeated_measure":"MOST RECENT"}`
					w.calls = 5
				}),
			yes("add_experiment_query"),
		}, backend: []check{hasQueries("Math Hints Live", meanScore, passRate, "Top score=max of score/MOST RECENT")}},
		{name: "delete names the queries that go with the metric", steps: []turnStep{
			request("Delete the score metric.", "delete_metric", `{key: score}`).
				expect(func(w *turnWant) { w.response = []string{`"Mean score" of experiment "Math Hints Live"`} }),
			{say: "no", llm: done, want: turnWant{}},
		}, backend: unchanged},
		{name: "metrics with a null context", steps: []turnStep{
			{say: "Which metrics are there?", llm: lookup("get_metrics: {context: null}"),
				want: turnWant{calls: 2, seen: []string{`"key":"passed"`, `"query_name":"Pass rate"`}}},
		}, backend: unchanged},
		{name: "metrics of a context in another case", steps: []turnStep{
			{say: "Which metrics does assign-prog have?", llm: lookup(`get_metrics: {context: " ASSIGN-PROG "}`),
				want: turnWant{calls: 2, seen: []string{`"key":"score"`}}},
		}, backend: unchanged},
		{name: "results by name", steps: []turnStep{
			{say: "How is Math Hints Live doing?", llm: lookup("get_experiment_results: {experiment_id: math hints live}"),
				want: turnWant{calls: 2, seen: []string{`"name":"Pass rate"`, `"sample_ratio"`, `"note":"no data"`}}},
		}, backend: unchanged},
		{name: "results by upper-case id", steps: []turnStep{
			{say: "Results of Math Hints Live?", llm: lookup(`get_experiment_results: {experiment_id: " {{upper:Math Hints Live}}"}`),
				want: turnWant{calls: 2, seen: []string{`"name":"Mean score"`, `"meaning"`}}},
		}, backend: unchanged},
	}))
}
