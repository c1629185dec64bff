package actions

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// queriedExperiment makes experiment "Queried" in assign-prog on a fresh
// simulator and returns its id.
func queriedExperiment(t *testing.T, c *upgrade.Client) string {
	t.Helper()
	_, raw := run(t, c, CreateExperimentParams{Name: "Queried", Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}}})
	return decode[ExperimentResult](t, raw).ID
}

// parsed binds raw params as a model writes them.
func parsed(t *testing.T, name, raw string) Params {
	t.Helper()
	p, err := Parse(name, json.RawMessage(raw))
	if err != nil {
		t.Fatalf("%s %s: %v", name, raw, err)
	}
	return p
}

func problemFields(t *testing.T, c *upgrade.Client, p Params) []string {
	t.Helper()
	probs, err := Validate(context.Background(), c, p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pr := range probs {
		out = append(out, pr.Field)
	}
	return out
}

func queriesNow(t *testing.T, c *upgrade.Client, id string) []upgrade.Query {
	t.Helper()
	e, err := c.Experiment(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := e.QueryList()
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

func TestMetricAndQueryLifecycle(t *testing.T) {
	ctx := context.Background()
	c := startSim(t, "6.5.0")
	id := queriedExperiment(t, c)

	// Display names, stray blanks, a context as a one-item list.
	run(t, c, parsed(t, "create_metric", `{"context": [" assign-prog "], "key": " score ", "type": "Continuous", "allowed_values": []}`))
	run(t, c, parsed(t, "create_metric", `{"context": ["assign-prog"], "key": "outcome", "type": "CATEGORICAL", "allowed_values": ["pass", " fail "]}`))
	ms, err := metricsNow(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := findMetric(ms, "outcome"); !ok || m.Type != upgrade.MetricCategorical || !slices.Equal(m.Allowed, []string{"pass", "fail"}) {
		t.Fatalf("outcome: %+v %v", m, ok)
	}
	if got := problemFields(t, c, parsed(t, "create_metric", `{"context": ["assign-prog"], "key": "score", "type": "continuous"}`)); !slices.Equal(got, []string{"key"}) {
		t.Errorf("a second score: problems %v, want key", got)
	}

	// The traps: unknown metric, an operation of the other type, a
	// repeated measure UpGrade does not have, compare on a continuous one.
	for raw, want := range map[string][]string{
		`{"experiment_id": "` + id + `", "name": "x", "metric_key": "nope", "operation": "avg"}`:                                             {"metric_key"},
		`{"experiment_id": "` + id + `", "name": "x", "metric_key": "score", "operation": "percentage"}`:                                     {"operation"},
		`{"experiment_id": "` + id + `", "name": "x", "metric_key": "outcome", "operation": "avg", "compare": {"fn": "=", "value": "pass"}}`: {"operation"},
		`{"experiment_id": "` + id + `", "name": "x", "metric_key": "outcome", "operation": "percentage"}`:                                   {"compare"},
		`{"experiment_id": "` + id + `", "name": "x", "metric_key": "score", "operation": "avg", "repeated_measure": "median"}`:              {"repeated_measure"},
		`{"experiment_id": "` + id + `", "name": "x", "metric_key": "score", "operation": "avg", "compare": {"fn": "=", "value": "1"}}`:      {"compare"},
		`{"experiment_id": "` + id + `", "name": "x", "metric_key": "Score", "operation": "avg"}`:                                            {"metric_key"},
	} {
		if got := problemFields(t, c, parsed(t, "add_experiment_query", raw)); !slices.Equal(got, want) {
			t.Errorf("%s: problems %v, want %v", raw, got, want)
		}
	}
	if len(queriesNow(t, c, id)) != 0 {
		t.Fatal("a refused query reached the server")
	}

	// "AVG", a null optional, a repeated measure in other case: the plan
	// offers the matching stddev.
	plan, _ := run(t, c, parsed(t, "add_experiment_query", `{"experiment_id": "`+id+`", "name": " Mean score ", "metric_key": "score", "operation": "AVG", "repeated_measure": " most_recent ", "compare": null}`))
	if !strings.Contains(plan.Message, "stddev query on score") {
		t.Errorf("the avg plan does not offer the stddev: %+v", plan)
	}
	run(t, c, parsed(t, "add_experiment_query", `{"experiment_id": "`+id+`", "name": "SD score", "metric_key": "score", "operation": "Standard Deviation"}`))
	run(t, c, parsed(t, "add_experiment_query", `{"experiment_id": "`+id+`", "name": "Pass rate", "metric_key": "outcome", "operation": "Percentage", "compare": {"fn": "equals", "value": "pass"}}`))
	qs := queriesNow(t, c, id)
	if len(qs) != 3 || qs[0].Name != "Mean score" || qs[0].Query.OperationType != "avg" || qs[0].RepeatedMeasure != upgrade.RepeatedMostRecent ||
		qs[1].Query.OperationType != "stddev" || qs[2].Query.CompareFn != "=" || qs[2].Query.CompareValue != "pass" {
		t.Fatalf("queries %+v", qs)
	}
	if got := problemFields(t, c, parsed(t, "add_experiment_query", `{"experiment_id": "`+id+`", "name": "mean SCORE", "metric_key": "score", "operation": "avg"}`)); !slices.Equal(got, []string{"name"}) {
		t.Errorf("a second query of the same name: problems %v", got)
	}

	// An experiment update keeps them.
	run(t, c, UpdateExperimentParams{ExperimentID: id, Name: ptr("Queried again")})
	if len(queriesNow(t, c, id)) != 3 {
		t.Fatal("a rename lost queries")
	}

	// Remove by name, in other case: the others stay.
	run(t, c, parsed(t, "remove_experiment_query", `{"experiment_id": "`+id+`", "query_id": " sd SCORE "}`))
	if qs := queriesNow(t, c, id); len(qs) != 2 || slices.ContainsFunc(qs, func(q upgrade.Query) bool { return q.Name == "SD score" }) {
		t.Fatalf("after the remove: %+v", qs)
	}
	if got := problemFields(t, c, parsed(t, "remove_experiment_query", `{"experiment_id": "`+id+`", "query_id": "SD score"}`)); !slices.Equal(got, []string{"query_id"}) {
		t.Errorf("removing it again: problems %v", got)
	}

	// Deleting score: the plan names the query that disappears with it.
	plan, raw := run(t, c, parsed(t, "delete_metric", `{"key": " score "}`))
	if !plan.Destructive || !strings.Contains(plan.Message, `"Mean score" of experiment "Queried again"`) {
		t.Errorf("delete plan %+v", plan)
	}
	if r := decode[metricDeleteResult](t, raw); !r.Deleted || len(r.Queries) != 1 {
		t.Errorf("delete result %+v", r)
	}
	if qs := queriesNow(t, c, id); len(qs) != 1 || qs[0].Name != "Pass rate" {
		t.Fatalf("after deleting score: %+v", qs)
	}
	if got := problemFields(t, c, parsed(t, "delete_metric", `{"key": "score"}`)); !slices.Equal(got, []string{"key"}) {
		t.Errorf("deleting it again: problems %v", got)
	}
}

// After a crash, each action finds out from the server whether it
// happened, and an add executed twice adds once.
func TestMetricActionsReconcile(t *testing.T) {
	ctx := context.Background()
	c := startSim(t, "6.5.0")
	id := queriedExperiment(t, c)
	env := Env{API: c}
	const key = "crash-1"

	create := mustBound(parsed(t, "create_metric", `{"context": ["assign-prog"], "key": "score", "type": "continuous"}`))
	add := mustBound(parsed(t, "add_experiment_query", `{"experiment_id": "`+id+`", "name": "Mean", "metric_key": "score", "operation": "avg"}`))
	remove := mustBound(parsed(t, "remove_experiment_query", `{"experiment_id": "`+id+`", "query_id": "Mean"}`))
	del := mustBound(parsed(t, "delete_metric", `{"key": "score"}`))

	outcome := func(b *Bound) string {
		t.Helper()
		r, err := b.Reconcile(ctx, env, key, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return r.Outcome
	}
	exec := func(b *Bound) {
		t.Helper()
		if _, err := b.Execute(ctx, env, key); err != nil {
			t.Fatal(err)
		}
	}
	if outcome(create) != OutcomeNotDone {
		t.Error("create: done before it ran")
	}
	exec(create)
	if outcome(create) != OutcomeDone {
		t.Error("create: not done after it ran")
	}
	if outcome(add) != OutcomeNotDone {
		t.Error("add: done before it ran")
	}
	exec(add)
	exec(add)
	if outcome(add) != OutcomeDone || len(queriesNow(t, c, id)) != 1 {
		t.Errorf("add twice: %d queries", len(queriesNow(t, c, id)))
	}
	if outcome(remove) != OutcomeNotDone {
		t.Error("remove: done before it ran")
	}
	exec(remove)
	if outcome(remove) != OutcomeDone {
		t.Error("remove: not done after it ran")
	}
	if outcome(del) != OutcomeNotDone {
		t.Error("delete: done before it ran")
	}
	exec(del)
	if outcome(del) != OutcomeDone {
		t.Error("delete: not done after it ran")
	}
}

// runLookup calls what a metric lookup of the pipeline computes, with raw
// arguments as a model writes them, decoded as the pipeline decodes them.
func runLookup(t *testing.T, c *upgrade.Client, name, raw string) (any, error) {
	t.Helper()
	switch name {
	case "get_metrics":
		a, err := Decode[struct {
			Context string `json:"context,omitempty"`
		}](name, json.RawMessage(raw))
		if err != nil {
			return nil, err
		}
		return MetricsInfo(context.Background(), c, a.Context)
	case "get_experiment_results":
		a, err := Decode[struct {
			ExperimentID string `json:"experiment_id"`
		}](name, json.RawMessage(raw))
		if err != nil {
			return nil, err
		}
		return ExperimentResults(context.Background(), c, a.ExperimentID)
	}
	t.Fatalf("no lookup %s", name)
	return nil, nil
}

func TestMetricLookups(t *testing.T) {
	c := startSim(t, "6.5.0")
	id := queriedExperiment(t, c)
	run(t, c, parsed(t, "create_metric", `{"context": ["assign-prog"], "key": "score", "type": "continuous"}`))
	run(t, c, parsed(t, "add_experiment_query", `{"experiment_id": "`+id+`", "name": "Mean score", "metric_key": "score", "operation": "avg"}`))

	for _, args := range []string{`{}`, `{"context": null}`, `{"context": ""}`, `{"context": " ASSIGN-PROG "}`} {
		got, err := runLookup(t, c, "get_metrics", args)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		b, _ := json.Marshal(got)
		if !strings.Contains(string(b), `"key":"score"`) || !strings.Contains(string(b), `"query_name":"Mean score"`) {
			t.Errorf("get_metrics %s = %s", args, b)
		}
	}
	if got, err := runLookup(t, c, "get_metrics", `{"context": "other"}`); err != nil || !strings.Contains(mustJSON(t, got), "[]") {
		t.Errorf("another context: %v %v", mustJSON(t, got), err)
	}

	for _, args := range []string{`{"experiment_id": "` + strings.ToUpper(id) + `"}`, `{"experiment_id": " queried "}`} {
		got, err := runLookup(t, c, "get_experiment_results", args)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		b := mustJSON(t, got)
		if !strings.Contains(b, `"name":"Mean score"`) || !strings.Contains(b, `"sample_ratio"`) || !strings.Contains(b, `"meaning"`) {
			t.Errorf("get_experiment_results %s = %s", args, b)
		}
	}
	var pe *ParseError
	if _, err := runLookup(t, c, "get_experiment_results", `{"experiment_id": "no such thing"}`); !errors.As(err, &pe) || pe.Problems[0].Field != "experiment_id" {
		t.Errorf("unknown experiment: %v", err)
	}
	if _, err := runLookup(t, c, "get_experiment_results", `{"experiment_id": "  "}`); !errors.As(err, &pe) {
		t.Errorf("empty experiment_id: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// withMetrics gives the fake a continuous score and a categorical outcome
// metric, and Math Hints a query on each.
func withMetrics(f *fakeAPI) {
	score := upgrade.MetricNode{Key: "score", Context: []string{"assign-prog"}, Children: []upgrade.MetricNode{}}
	score.Metadata.Type = upgrade.MetricContinuous
	outcome := upgrade.MetricNode{Key: "outcome", Context: []string{"assign-prog"}, Children: []upgrade.MetricNode{},
		AllowedData: []json.RawMessage{json.RawMessage(`"pass"`), json.RawMessage(`"fail"`)}}
	outcome.Metadata.Type = upgrade.MetricCategorical
	f.metrics = []upgrade.MetricNode{score, outcome}
	e := f.get(mathHintsID)
	if _, err := e.AddQueryWithID("c0de0000-0000-4000-8000-000000000001", "Mean score", "score", upgrade.RepeatedMostRecent, upgrade.QueryOp{OperationType: "avg"}); err != nil {
		panic(err)
	}
	if _, err := e.AddQueryWithID("c0de0000-0000-4000-8000-000000000002", "Pass rate", "outcome", upgrade.RepeatedMostRecent,
		upgrade.QueryOp{OperationType: "percentage", CompareFn: "=", CompareValue: "pass"}); err != nil {
		panic(err)
	}
	f.add(e)
}

// metricPlanCases are the confirmations of the metric actions (plan_test.go).
func metricPlanCases() []planCase {
	return []planCase{
		{name: "metric_create_continuous", setup: withMetrics, p: CreateMetricParams{Context: []string{"assign-prog"}, Key: "time_on_task", Type: "continuous"}},
		{name: "metric_create_grouped", setup: withMetrics, p: CreateMetricParams{Context: []string{"assign-prog"}, Group: "workspace",
			Keys: []string{"w1", "w2"}, Attributes: []MetricAttributeParam{{Key: "time", Type: "continuous"}, {Key: "result", Type: "categorical", AllowedValues: []string{"solved", "gave up"}}}}},
		{name: "metric_delete_used", setup: withMetrics, p: DeleteMetricParams{Key: "score"}},
		{name: "query_add_avg", setup: withMetrics, p: AddExperimentQueryParams{ExperimentID: mathHintsID, Name: "Best score", MetricKey: "score",
			Operation: "avg", RepeatedMeasure: upgrade.RepeatedMostRecent}},
		{name: "query_add_categorical", setup: withMetrics, p: AddExperimentQueryParams{ExperimentID: mathHintsID, Name: "Fail count", MetricKey: "outcome",
			Operation: "count", RepeatedMeasure: upgrade.RepeatedEarliest, Compare: &CompareParam{Fn: "=", Value: "fail"}}},
		{name: "query_remove", setup: withMetrics, p: RemoveExperimentQueryParams{ExperimentID: mathHintsID, QueryID: "c0de0000-0000-4000-8000-000000000002"}},
	}
}
