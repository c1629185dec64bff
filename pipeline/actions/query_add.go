package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// AddExperimentQuery is the name of the add_experiment_query action.
const AddExperimentQuery Name = "add_experiment_query"

// AddExperimentQueryParams are the params of add_experiment_query.
type AddExperimentQueryParams struct {
	ExperimentID    string        `json:"experiment_id" jsonschema:"id (UUID) of the experiment" ref:"experiment"`
	Name            string        `json:"name" jsonschema:"the query's name, e.g. Mean score"`
	MetricKey       string        `json:"metric_key" jsonschema:"the metric's stored key (get_metrics)"`
	Operation       string        `json:"operation" jsonschema:"continuous: avg, sum, count, min, max, stddev, mode, median; categorical: count, percentage"`
	RepeatedMeasure string        `json:"repeated_measure,omitempty" jsonschema:"MEAN, EARLIEST, MOST RECENT (default), COUNT, PERCENTAGE"`
	Compare         *CompareParam `json:"compare,omitempty" jsonschema:"categorical only: which value counts"`
}

// CompareParam is a categorical query's comparison.
type CompareParam struct {
	Fn    string `json:"fn" jsonschema:"the comparison: equals (=) or not equals (<>)"`
	Value string `json:"value"`
}

// Action implements Params.
func (AddExperimentQueryParams) Action() Name { return AddExperimentQuery }

func (p AddExperimentQueryParams) canonical() AddExperimentQueryParams {
	c := AddExperimentQueryParams{ExperimentID: idValue(p.ExperimentID), Name: strings.TrimSpace(p.Name),
		MetricKey: strings.TrimSpace(p.MetricKey), Operation: operation(p.Operation), RepeatedMeasure: repeatedMeasure(p.RepeatedMeasure)}
	if p.Compare != nil {
		cmp := CompareParam{Fn: compareFn(p.Compare.Fn), Value: strings.TrimSpace(p.Compare.Value)}
		if cmp != (CompareParam{}) {
			c.Compare = &cmp
		}
	}
	return c
}

// operation folds an operation as models write it ("AVG", "Mean",
// "average", "std dev") to UpGrade's name.
func operation(s string) string {
	t := strings.TrimSpace(s)
	f := strings.ToLower(strings.Join(strings.FieldsFunc(t, func(r rune) bool { return r == ' ' || r == '_' || r == '-' }), ""))
	switch f {
	case "avg", "mean", "average":
		return "avg"
	case "stddev", "std", "stdev", "standarddeviation", "sd":
		return "stddev"
	case "sum", "count", "min", "max", "mode", "median", "percentage":
		return f
	case "minimum":
		return "min"
	case "maximum":
		return "max"
	case "percent":
		return "percentage"
	}
	return t
}

// repeatedMeasure folds a repeated measure ("most recent", "most_recent",
// "Mean") to UpGrade's spelling; empty is MOST RECENT, UpGrade's default.
func repeatedMeasure(s string) string {
	f := strings.ToUpper(strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '_' || r == '-' }), " "))
	switch f {
	case "":
		return upgrade.RepeatedMostRecent
	case "LATEST", "LAST":
		return upgrade.RepeatedMostRecent
	case "FIRST":
		return upgrade.RepeatedEarliest
	case "AVG", "AVERAGE":
		return upgrade.RepeatedMean
	}
	return f
}

func compareFn(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "=", "==", "eq", "equals", "is":
		return "="
	case "<>", "!=", "ne", "not", "not equals", "is not":
		return "<>"
	}
	return strings.TrimSpace(s)
}

// declareQueryAdd declares this file's action in r.
func declareQueryAdd(r *Registry) {
	Add(r, Def[AddExperimentQueryParams]{
		Name: AddExperimentQuery, Order: 320, Object: ObjectExperiment, Invalidates: []Cache{CacheExperiments},
		Description: "Add a query to an experiment: what its results compute per condition from a metric.",
		Canonical:   AddExperimentQueryParams.canonical,
		Validate:    validateAddQuery,
		Plan:        planAddQuery,
		Execute:     executeAddQuery,
		Reconcile:   reconcileAddQuery,
		Report: ReportAs(func(r queryResult) string {
			return fmt.Sprintf("Added query %q (%s of %s) to experiment %q; get_experiment_results shows it per condition.", r.Name, r.Operation, r.MetricKey, r.Experiment)
		}),
	})
}

func validateAddQuery(c *Checker, p AddExperimentQueryParams) error {
	e, err := c.Experiment("experiment_id", p.ExperimentID)
	if err != nil {
		return err
	}
	if p.Name == "" {
		c.Missing("name", "name is required: how the results call the query")
	}
	if e != nil && p.Name != "" {
		if qs, err := e.QueryList(); err == nil && slices.ContainsFunc(qs, func(q upgrade.Query) bool { return strings.EqualFold(q.Name, p.Name) }) {
			c.AddValue("name", p.Name, "experiment %q already has a query of this name", e.Name)
		}
	}
	if !slices.Contains(upgrade.RepeatedMeasures, p.RepeatedMeasure) {
		c.AddValue("repeated_measure", p.RepeatedMeasure, "unknown repeated measure; use one of %s", strings.Join(upgrade.RepeatedMeasures, ", "))
	}
	if p.MetricKey == "" {
		c.Missing("metric_key", "metric_key is required (get_metrics lists the metrics)")
		return nil
	}
	ms, err := metricsNow(c.ctx, c.api)
	if err != nil {
		return err
	}
	m, ok := findMetric(ms, p.MetricKey)
	if !ok {
		// UpGrade would drop the query on create and store metric null on
		// update: either way it never answers.
		c.NotFound("metric_key", "no metric %q%s; create it first (create_metric)", p.MetricKey, metricHint(ms, p.MetricKey))
		return nil
	}
	ops := upgrade.ContinuousOperations
	if m.Type == upgrade.MetricCategorical {
		ops = upgrade.CategoricalOperations
	}
	switch {
	case p.Operation == "":
		c.Missing("operation", "operation is required; for a %s metric: %s", m.Type, strings.Join(ops, ", "))
	case !slices.Contains(ops, p.Operation):
		c.AddValue("operation", p.Operation, "does not fit %s metric %s; use one of %s", m.Type, m.Key, strings.Join(ops, ", "))
	}
	switch {
	case m.Type == upgrade.MetricCategorical && p.Compare == nil:
		c.Missing("compare", "a categorical query needs compare {fn: \"=\" or \"<>\", value: one of %s}", strings.Join(m.Allowed, ", "))
	case m.Type == upgrade.MetricCategorical:
		if p.Compare.Fn != "=" && p.Compare.Fn != "<>" {
			c.AddValue("compare.fn", p.Compare.Fn, "use = or <>")
		}
		if !slices.Contains(m.Allowed, p.Compare.Value) {
			c.AddValue("compare.value", p.Compare.Value, "not a value of metric %s; use one of %s", m.Key, strings.Join(m.Allowed, ", "))
		}
	case p.Compare != nil:
		c.Add("compare", "compare is for categorical metrics; %s is continuous", m.Key)
	}
	return nil
}

func (p AddExperimentQueryParams) describe() string {
	s := p.Operation + " of " + p.MetricKey
	if p.Compare != nil {
		s += fmt.Sprintf(" %s %s", p.Compare.Fn, quote(p.Compare.Value))
	}
	return s + ", repeated measure " + p.RepeatedMeasure
}

func planAddQuery(b *Planner, p AddExperimentQueryParams) error {
	e, err := b.Experiment(p.ExperimentID)
	if err != nil {
		return err
	}
	b.Pin(e)
	qs, err := e.QueryList()
	if err != nil {
		return err
	}
	b.Line("add query %s to experiment %s (id %s): %s.", quote(p.Name), quote(e.Name), e.ID, p.describe())
	if len(qs) > 0 {
		b.Line("The experiment's %s kept.", plural(len(qs), "other query is", "other queries are"))
	}
	if p.Operation == "avg" && !slices.ContainsFunc(qs, func(q upgrade.Query) bool {
		return q.MetricKey == p.MetricKey && q.Query.OperationType == "stddev"
	}) {
		b.Line("For an interval on the difference of means, also add a stddev query on %s (operation stddev, repeated measure %s).", p.MetricKey, p.RepeatedMeasure)
	}
	return nil
}

type queryResult struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Experiment string `json:"experiment"`
	MetricKey  string `json:"metric_key"`
	Operation  string `json:"operation"`
}

// queryID is the id an add sends: derived from the approved confirmation
// and the query, so that a repeat after a crash finds the query it added.
func queryID(key string, p AddExperimentQueryParams) string {
	return createID(key + "/query/" + p.Name + "/" + p.MetricKey + "/" + p.Operation)
}

func executeAddQuery(ctx context.Context, env Env, p AddExperimentQueryParams, key string) (Outcome, error) {
	e, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		return Outcome{}, err
	}
	id := queryID(key, p)
	res := queryResult{ID: id, Name: p.Name, Experiment: e.Name, MetricKey: p.MetricKey, Operation: p.Operation}
	if hasQuery(e, id) {
		return Result(res)
	}
	op := upgrade.QueryOp{OperationType: p.Operation}
	if p.Compare != nil {
		op.CompareFn, op.CompareValue = p.Compare.Fn, p.Compare.Value
	}
	if _, err := e.AddQueryWithID(id, p.Name, p.MetricKey, p.RepeatedMeasure, op); err != nil {
		return Outcome{}, err
	}
	if _, err := env.API.UpdateExperiment(ctx, e); err != nil {
		return Outcome{}, err
	}
	back, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		return Outcome{}, fmt.Errorf("query %q was added, but reading experiment %q back failed: %w", p.Name, e.Name, err)
	}
	qs, err := back.QueryList()
	if err != nil {
		return Outcome{}, err
	}
	i := slices.IndexFunc(qs, func(q upgrade.Query) bool { return q.ID == id })
	switch {
	case i < 0:
		return Outcome{}, fmt.Errorf("experiment %q: the server answered the update, but has no query %q", e.Name, p.Name)
	case qs[i].MetricKey != p.MetricKey:
		return Outcome{}, fmt.Errorf("experiment %q: query %q holds metric %q, not %s", e.Name, p.Name, qs[i].MetricKey, p.MetricKey)
	}
	return Result(res)
}

func hasQuery(e *upgrade.Experiment, id string) bool {
	qs, err := e.QueryList()
	return err == nil && slices.ContainsFunc(qs, func(q upgrade.Query) bool { return q.ID == id })
}

func reconcileAddQuery(ctx context.Context, env Env, p AddExperimentQueryParams, key string, _ time.Time) (Reconciliation, error) {
	e, err := env.API.Experiment(ctx, p.ExperimentID)
	if err != nil {
		if isNotFound(err) {
			return Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("experiment %s no longer exists", p.ExperimentID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile add_experiment_query: reading experiment %s: %w", p.ExperimentID, err)
	}
	id := queryID(key, p)
	if !hasQuery(e, id) {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("experiment %q has no query %q: the add did not happen", e.Name, p.Name)}, nil
	}
	raw, _ := json.Marshal(queryResult{ID: id, Name: p.Name, Experiment: e.Name, MetricKey: p.MetricKey, Operation: p.Operation})
	return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("experiment %q has query %q: the add happened", e.Name, p.Name)}, nil
}
