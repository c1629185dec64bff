package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Results in scenarios (spec/results.md): setup.metrics (the params of
// create_metric), setup.queries (the params of add_experiment_query;
// experiment_id may name the experiment), setup.students (simulated
// students who reach an experiment's decision point and log values), and
// backend.metrics, backend.metric_absent, backend.queries.

// SetupMetric is one metric to create.
type SetupMetric struct {
	Key    string // the key, or the group of a grouped metric
	Params json.RawMessage
	Line   int
}

// SetupQuery is one experiment query to add.
type SetupQuery struct {
	Name   string
	Params json.RawMessage
	Line   int
}

// SetupStudents are Count students who each initialise, are assigned at
// the experiment's first decision point, are marked there and log the
// values of their condition (Log: condition code -> metric key -> values,
// taken in turn); Unmarked is the share of a condition's students who
// never reach the decision point (so are not enrolled and log nothing).
type SetupStudents struct {
	Experiment string
	Count      int
	Prefix     string
	Log        map[string]map[string][]any
	Unmarked   map[string]float64
	Line       int
}

// metricYAML is a metric of setup: the params of create_metric.
type metricYAML struct {
	Context       yaml.Node `yaml:"context"`
	Key           yaml.Node `yaml:"key"`
	Type          yaml.Node `yaml:"type"`
	AllowedValues yaml.Node `yaml:"allowed_values"`
	Group         yaml.Node `yaml:"group"`
	Keys          yaml.Node `yaml:"keys"`
	Attributes    yaml.Node `yaml:"attributes"`
}

// querySetupYAML is a query of setup: the params of add_experiment_query.
type querySetupYAML struct {
	ExperimentID    yaml.Node `yaml:"experiment_id"`
	Name            yaml.Node `yaml:"name"`
	MetricKey       yaml.Node `yaml:"metric_key"`
	Operation       yaml.Node `yaml:"operation"`
	RepeatedMeasure yaml.Node `yaml:"repeated_measure"`
	Compare         yaml.Node `yaml:"compare"`
}

type studentsYAML struct {
	Experiment yaml.Node `yaml:"experiment"`
	Count      yaml.Node `yaml:"count"`
	Prefix     yaml.Node `yaml:"prefix"`
	Log        yaml.Node `yaml:"log"`
	Unmarked   yaml.Node `yaml:"unmarked"`
}

// metricExpectYAML is a metric of expect.backend, by key.
type metricExpectYAML struct {
	Key           yaml.Node `yaml:"key"`
	Type          yaml.Node `yaml:"type"`
	AllowedValues yaml.Node `yaml:"allowed_values"`
	Context       yaml.Node `yaml:"context"`
}

// queryExpectYAML is a query of expect.backend, by experiment and name.
type queryExpectYAML struct {
	Experiment      yaml.Node `yaml:"experiment"`
	Name            yaml.Node `yaml:"name"`
	MetricKey       yaml.Node `yaml:"metric_key"`
	Operation       yaml.Node `yaml:"operation"`
	RepeatedMeasure yaml.Node `yaml:"repeated_measure"`
	Compare         yaml.Node `yaml:"compare"`
}

func (d *decoder) setupResults(x *setupYAML, s *Setup) {
	setupList(d, &s.Metrics, x.Metrics, "metrics", func(m *metricYAML, n *yaml.Node, i int) SetupMetric {
		idKey := "key"
		if m.Group.Kind != 0 {
			idKey = "group"
		}
		key, raw := d.setupParams(m, n, fmt.Sprintf("setup.metrics[%d]", i), "metric", idKey, nil)
		return SetupMetric{Key: key, Params: raw, Line: n.Line}
	})
	setupList(d, &s.Queries, x.Queries, "queries", func(q *querySetupYAML, n *yaml.Node, i int) SetupQuery {
		name, raw := d.setupParams(q, n, fmt.Sprintf("setup.queries[%d]", i), "experiment_query", "name", nil)
		return SetupQuery{Name: name, Params: raw, Line: n.Line}
	})
	setupList(d, &s.Students, x.Students, "students", d.setupStudents)
}

func (d *decoder) setupStudents(x *studentsYAML, n *yaml.Node, i int) SetupStudents {
	what := fmt.Sprintf("setup.students[%d]", i)
	s := SetupStudents{Prefix: "student", Line: n.Line}
	set(d, &s.Experiment, &x.Experiment, what+".experiment", d.str)
	set(d, &s.Count, &x.Count, what+".count", d.nonNegative)
	set(d, &s.Prefix, &x.Prefix, what+".prefix", d.str)
	set(d, &s.Log, &x.Log, what+".log", func(n *yaml.Node, what string) (map[string]map[string][]any, error) {
		if n.Kind != yaml.MappingNode {
			return nil, d.errf(n, "%s: want {condition code: {metric key: [values]}}, got %s", what, kindName(n))
		}
		out := map[string]map[string][]any{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			code, byKey := resolve(n.Content[j]).Value, resolve(n.Content[j+1])
			if byKey.Kind != yaml.MappingNode {
				return nil, d.errf(byKey, "%s.%s: want {metric key: [values]}, got %s", what, code, kindName(byKey))
			}
			out[code] = map[string][]any{}
			for k := 0; k+1 < len(byKey.Content); k += 2 {
				key, vn := resolve(byKey.Content[k]).Value, resolve(byKey.Content[k+1])
				v, err := d.value(vn, 0)
				if err != nil {
					return nil, err
				}
				vals, ok := v.([]any)
				if !ok {
					vals = []any{v}
				}
				for _, one := range vals {
					switch one := one.(type) {
					case float64:
					case string:
						if one == "" {
							return nil, d.errf(vn, "%s.%s.%s: a value is empty text; UpGrade takes a number or non-empty text", what, code, key)
						}
					default:
						return nil, d.errf(vn, "%s.%s.%s: want numbers or text, got %v", what, code, key, one)
					}
				}
				if len(vals) > 0 {
					out[code][key] = vals
				}
			}
		}
		return out, nil
	})
	set(d, &s.Unmarked, &x.Unmarked, what+".unmarked", func(n *yaml.Node, what string) (map[string]float64, error) {
		if n.Kind != yaml.MappingNode {
			return nil, d.errf(n, "%s: want {condition code: share from 0 to 1}, got %s", what, kindName(n))
		}
		out := map[string]float64{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			code, vn := resolve(n.Content[j]).Value, resolve(n.Content[j+1])
			v, err := d.value(vn, 0)
			f, ok := v.(float64)
			if err != nil || !ok || f < 0 || f > 1 {
				return nil, d.errf(vn, "%s.%s: want a share from 0 to 1, got %s", what, code, kindName(vn))
			}
			out[code] = f
		}
		return out, nil
	})
	switch {
	case d.err != nil:
	case s.Experiment == "":
		d.fail(n, "%s: experiment is required (the name of a setup experiment)", what)
	case s.Count == 0:
		d.fail(n, "%s: count is required (how many students)", what)
	}
	return s
}

// expectResults converts backend.metrics, backend.metric_absent and
// backend.queries.
func (d *decoder) expectResults(b *backendYAML, e *ExpectBackend, step int, bw string) {
	e.Metrics = backendList(d, b.Metrics, step, bw, "metrics", "key")
	set(d, &e.MetricAbsent, &b.MetricAbsent, bw+".metric_absent", d.strList)
	e.Queries = backendList(d, b.Queries, step, bw, "queries", "name")
	for j, q := range e.Queries {
		if s, _ := q["experiment"].(string); d.err == nil && s == "" {
			d.fail(d.at("steps", step, "expect", "backend", "queries", j), "%s.queries[%d]: experiment is required", bw, j)
		}
	}
}

// expectsResults reports whether b names metrics or queries.
func (b *ExpectBackend) expectsResults() bool {
	return len(b.Metrics)+len(b.MetricAbsent)+len(b.Queries) > 0
}

// applyResultsSetup creates the metrics, then the queries (through the
// actions' own code, found by object in the registry), then plays the
// students; it returns what the transcript shows of them.
func (r *run) applyResultsSetup(ctx context.Context) ([]string, error) {
	env := actions.Env{API: r.admin}
	var lines []string
	for i, m := range r.sc.Setup.Metrics {
		if err := r.setupCreate(ctx, env, "metric", m.Key, m.Line, i, m.Params); err != nil {
			return nil, err
		}
	}
	if len(r.sc.Setup.Metrics) > 0 {
		trees, err := r.admin.Metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: reading the metrics: %w", r.sc.File, err)
		}
		for _, m := range upgrade.FlattenMetrics(trees) {
			line := fmt.Sprintf("metric %s: %s", m.Key, m.Type)
			if len(m.Allowed) > 0 {
				line += " (" + strings.Join(m.Allowed, ", ") + ")"
			}
			lines = append(lines, line+", context "+strings.Join(m.Context, ", "))
		}
	}
	for i, q := range r.sc.Setup.Queries {
		if err := r.setupCreate(ctx, env, "experiment_query", q.Name, q.Line, i, q.Params); err != nil {
			return nil, err
		}
	}
	if len(r.sc.Setup.Queries) > 0 {
		es, err := r.admin.Experiments(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: reading the experiments: %w", r.sc.File, err)
		}
		for _, e := range es {
			qs, _ := e.QueryList()
			for _, q := range qs {
				lines = append(lines, fmt.Sprintf("query %q of %q: %s, %s", q.Name, e.Name, q.Summary(), q.RepeatedMeasure))
			}
		}
	}
	for _, s := range r.sc.Setup.Students {
		line, err := r.playStudents(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: setup students of %q: %w", r.sc.File, s.Line, s.Experiment, err)
		}
		lines = append(lines, line)
	}
	return lines, nil
}

// setupCreate binds, validates and executes the action that makes the
// i-th setup object of its kind (written on line); a refused object is an
// error naming its fields.
func (r *run) setupCreate(ctx context.Context, env actions.Env, object, id string, line, i int, raw json.RawMessage) error {
	where := fmt.Sprintf("%s:%d: setup %s %q", r.sc.File, line, strings.ReplaceAll(object, "_", " "), id)
	key := fmt.Sprintf("scenario-setup/%s/%s/%d", r.sc.Name, object, i)
	b, err := actions.BindCreate(object, raw)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if b, err = actions.ResolveBound(ctx, r.admin, b); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	probs, err := b.Validate(ctx, env)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if len(probs) > 0 {
		msgs := make([]string, len(probs))
		for i, p := range probs {
			msgs[i] = p.Field + ": " + p.Message
		}
		return fmt.Errorf("%s: %s", where, strings.Join(msgs, "; "))
	}
	if _, err := b.Execute(ctx, env, key); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// playStudents initialises, assigns, marks and logs each student of s,
// in order, and says how they were split.
func (r *run) playStudents(ctx context.Context, s SetupStudents) (string, error) {
	names, err := r.admin.ExperimentNames(ctx)
	if err != nil {
		return "", err
	}
	id, err := upgrade.ResolveExperiment(names, s.Experiment)
	if err != nil {
		return "", err
	}
	e, err := r.admin.Experiment(ctx, id)
	if err != nil {
		return "", err
	}
	if len(e.Partitions) == 0 {
		return "", fmt.Errorf("the experiment has no decision point")
	}
	dp := e.Partitions[0]
	seen, marked, logged := map[string]int{}, map[string]int{}, 0
	ts := r.clk.now().UTC().Format("2006-01-02T15:04:05.000Z")
	for i := 1; i <= s.Count; i++ {
		user := fmt.Sprintf("%s-%03d", s.Prefix, i)
		if _, err := r.admin.Init(ctx, user, upgrade.InitRequest{}); err != nil {
			return "", fmt.Errorf("init %s: %w", user, err)
		}
		as, err := r.admin.Assign(ctx, user, e.ContextName())
		if err != nil {
			return "", fmt.Errorf("assign %s: %w", user, err)
		}
		var cond *upgrade.AssignedCondition
		for _, a := range as {
			if a.Site != dp.Site || a.Target != dp.Target {
				continue
			}
			for j := range a.AssignedCondition {
				if a.AssignedCondition[j].ExperimentID == e.ID {
					cond = &a.AssignedCondition[j]
				}
			}
		}
		if cond == nil {
			return "", fmt.Errorf("student %s got no condition at %s/%s: is the experiment enrolling?", user, dp.Site, dp.Target)
		}
		code := cond.ConditionCode
		k := seen[code]
		seen[code]++
		// Every (1/share)-th student of a condition stays away, so the
		// share holds at every count and on every run.
		if f := s.Unmarked[code]; math.Floor(float64(k+1)*f) > math.Floor(float64(k)*f) {
			continue
		}
		req := upgrade.MarkRequest{Data: upgrade.MarkData{Site: dp.Site, Target: dp.Target,
			AssignedCondition: &upgrade.MarkCondition{ID: cond.ID, ConditionCode: code, ExperimentID: e.ID}}}
		if _, err := r.admin.Mark(ctx, user, req); err != nil {
			return "", fmt.Errorf("mark %s: %w", user, err)
		}
		marked[code]++
		attrs := map[string]any{}
		for key, vals := range s.Log[code] {
			attrs[key] = vals[(marked[code]-1)%len(vals)]
		}
		if len(attrs) == 0 {
			continue
		}
		if _, err := r.admin.Log(ctx, user, []upgrade.LogEntry{{Timestamp: ts, Attributes: attrs}}); err != nil {
			return "", fmt.Errorf("log %s: %w", user, err)
		}
		logged++
	}
	codes := make([]string, 0, len(seen))
	for c := range seen {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s %d assigned, %d marked", c, seen[c], marked[c])
	}
	return fmt.Sprintf("students %s-001..%s-%03d at %q: %s; %d logged", s.Prefix, s.Prefix, s.Count, e.Name, strings.Join(parts, ", "), logged), nil
}

// resultsState is the metrics and queries as the expectations see them.
type resultsState struct {
	metrics []upgrade.Metric
	err     error
}

func (r *run) readResults(ctx context.Context) resultsState {
	trees, err := r.admin.Metrics(ctx)
	if err != nil {
		return resultsState{err: err}
	}
	return resultsState{metrics: upgrade.FlattenMetrics(trees)}
}

// checkResults compares backend.metrics (by key), backend.metric_absent
// and backend.queries (by experiment and name) with the backend.
func checkResults(b *ExpectBackend, be *backendState) []string {
	if !b.expectsResults() {
		return nil
	}
	if be.results.err != nil {
		return []string{fmt.Sprintf("backend: cannot read the metrics: %v", be.results.err)}
	}
	byKey := map[string][]upgrade.Metric{}
	for _, m := range be.results.metrics {
		byKey[m.Key] = append(byKey[m.Key], m)
	}
	out := absent("metric_absent", "metric", b.MetricAbsent, byKey)
	out = append(out, matchOne("metrics", "key", "metrics have that key", b.Metrics, byKey, func(m upgrade.Metric) any {
		allowed := m.Allowed
		if allowed == nil {
			allowed = []string{}
		}
		return jsonValue(map[string]any{"key": m.Key, "type": m.Type, "allowed_values": allowed, "context": m.Context})
	})...)
	byName := map[string][]upgrade.Query{}
	for _, e := range be.experiments {
		qs, _ := e.QueryList()
		for _, q := range qs {
			byName[e.Name+"\x00"+q.Name] = append(byName[e.Name+"\x00"+q.Name], q)
		}
	}
	for i, want := range b.Queries {
		exp, name := want["experiment"].(string), want["name"].(string)
		p := fmt.Sprintf("backend.queries[%d] (%s of %s)", i, name, exp)
		list := byName[exp+"\x00"+name]
		if len(list) != 1 {
			have := []string{}
			for k := range byName {
				if e, n, _ := strings.Cut(k, "\x00"); e == exp {
					have = append(have, n)
				}
			}
			slices.Sort(have)
			out = append(out, fmt.Sprintf("%s: %d queries have that name (the experiment has %s)", p, len(list), strings.Join(have, ", ")))
			continue
		}
		q := list[0]
		view := map[string]any{"experiment": exp, "name": q.Name, "metric_key": q.MetricKey, "operation": q.Query.OperationType,
			"repeated_measure": q.RepeatedMeasure}
		if q.Query.CompareFn != "" {
			view["compare"] = map[string]any{"fn": q.Query.CompareFn, "value": q.Query.CompareValue}
		}
		out = append(out, subset(p, want, jsonValue(view))...)
	}
	return out
}
