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

// CreateMetric is the name of the create_metric action.
const CreateMetric Name = "create_metric"

// CreateMetricParams are the params of create_metric: a simple metric
// (key, type, allowed_values) or a grouped one (group, keys, attributes).
type CreateMetricParams struct {
	Context       []string               `json:"context" jsonschema:"app contexts the metric belongs to"`
	Key           string                 `json:"key,omitempty" jsonschema:"a simple metric's key"`
	Type          string                 `json:"type,omitempty" jsonschema:"continuous (numbers) or categorical (named values)"`
	AllowedValues []string               `json:"allowed_values,omitempty" jsonschema:"a categorical metric's values"`
	Group         string                 `json:"group,omitempty" jsonschema:"a grouped metric's group (instead of key)"`
	Keys          []string               `json:"keys,omitempty" jsonschema:"the group's keys, e.g. workspace ids"`
	Attributes    []MetricAttributeParam `json:"attributes,omitempty" jsonschema:"the group's attributes"`
}

// MetricAttributeParam is one attribute of a grouped metric.
type MetricAttributeParam struct {
	Key           string   `json:"key"`
	Type          string   `json:"type" jsonschema:"continuous or categorical"`
	AllowedValues []string `json:"allowed_values,omitempty"`
}

// Action implements Params.
func (CreateMetricParams) Action() Name { return CreateMetric }

func (p CreateMetricParams) canonical() CreateMetricParams {
	c := CreateMetricParams{Context: trimList(p.Context), Key: strings.TrimSpace(p.Key), Type: metricType(p.Type),
		AllowedValues: trimList(p.AllowedValues), Group: strings.TrimSpace(p.Group), Keys: trimList(p.Keys)}
	for _, a := range p.Attributes {
		c.Attributes = append(c.Attributes, MetricAttributeParam{Key: strings.TrimSpace(a.Key), Type: metricType(a.Type),
			AllowedValues: trimList(a.AllowedValues)})
	}
	return c
}

// metricType folds the spellings models use ("Continuous", "numeric",
// "Categorical") to UpGrade's two types; anything else stays as written
// (trimmed) for validation to name.
func metricType(s string) string {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "continuous", "numeric", "number":
		return upgrade.MetricContinuous
	case "categorical", "category", "categoric":
		return upgrade.MetricCategorical
	}
	return t
}

// declareMetricCreate declares this file's action in r.
func declareMetricCreate(r *Registry) {
	Add(r, Def[CreateMetricParams]{
		Name: CreateMetric, Order: 300, Object: ObjectMetric,
		Description: "Define a metric clients log values of: continuous or categorical, simple or grouped.",
		Canonical:   CreateMetricParams.canonical,
		Validate:    validateCreateMetric,
		Plan:        planCreateMetric,
		Execute:     executeCreateMetric,
		Reconcile:   reconcileCreateMetric,
		Report: ReportAs(func(r metricResult) string {
			return fmt.Sprintf("Created metric %s (%s). Clients can log its values now; UpGrade keeps them only once an experiment query uses it.", strings.Join(r.Keys, ", "), r.Type)
		}),
	})
}

// storedKeys are the leaf keys the metric is stored under.
func (p CreateMetricParams) storedKeys() []string {
	if p.Group == "" {
		return []string{p.Key}
	}
	var out []string
	for _, k := range p.Keys {
		for _, a := range p.Attributes {
			out = append(out, p.Group+upgrade.MetricKeySep+k+upgrade.MetricKeySep+a.Key)
		}
	}
	return out
}

// metricsNow reads the stored metrics as leaves.
func metricsNow(ctx context.Context, api MetricAPI) ([]upgrade.Metric, error) {
	trees, err := api.Metrics(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the metrics: %w", err)
	}
	return upgrade.FlattenMetrics(trees), nil
}

func findMetric(ms []upgrade.Metric, key string) (upgrade.Metric, bool) {
	i := slices.IndexFunc(ms, func(m upgrade.Metric) bool { return m.Key == key })
	if i < 0 {
		return upgrade.Metric{}, false
	}
	return ms[i], true
}

// metricHint names a stored key that differs from key only in case or
// blanks, for the error message.
func metricHint(ms []upgrade.Metric, key string) string {
	for _, m := range ms {
		if strings.EqualFold(strings.TrimSpace(m.Key), strings.TrimSpace(key)) {
			return fmt.Sprintf(" (did you mean %q?)", m.Key)
		}
	}
	keys := make([]string, 0, len(ms))
	for _, m := range ms {
		keys = append(keys, m.Key)
	}
	return "; metrics: " + listOrNone(keys)
}

func (c *Checker) metricType(field, typ string, allowed []string, allowedField string) {
	switch typ {
	case "":
		c.Missing(field, "%s is required: continuous or categorical", field)
	case upgrade.MetricContinuous:
		if len(allowed) > 0 {
			c.Add(allowedField, "a continuous metric has no allowed values; make it categorical or leave them out")
		}
	case upgrade.MetricCategorical:
		if len(allowed) == 0 {
			c.Missing(allowedField, "a categorical metric needs its allowed values, e.g. [\"pass\", \"fail\"]")
		}
	default:
		c.AddValue(field, typ, "unknown metric type; use continuous or categorical")
	}
}

func validateCreateMetric(c *Checker, p CreateMetricParams) error {
	if len(p.Context) == 0 {
		c.Missing("context", "context is required: the app contexts the metric belongs to")
	}
	for _, name := range p.Context {
		if _, _, err := c.context(name); err != nil {
			return err
		}
	}
	switch {
	case p.Key == "" && p.Group == "":
		c.Missing("key", "key is required (or group, keys and attributes for a grouped metric)")
		return nil
	case p.Key != "" && p.Group != "":
		c.Add("key", "give key for a simple metric or group for a grouped one, not both")
		return nil
	case p.Group == "":
		if strings.Contains(p.Key, upgrade.MetricKeySep) {
			c.AddValue("key", p.Key, "%s separates the parts of grouped keys; use group, keys and attributes", upgrade.MetricKeySep)
		}
		c.metricType("type", p.Type, p.AllowedValues, "allowed_values")
	default:
		if p.Type != "" || len(p.AllowedValues) > 0 {
			c.Add("type", "a grouped metric's types are those of its attributes; leave type and allowed_values out")
		}
		if len(p.Keys) == 0 {
			c.Missing("keys", "a grouped metric needs its keys (UpGrade makes a group without keys a single continuous metric)")
		}
		if len(p.Attributes) == 0 {
			c.Missing("attributes", "a grouped metric needs at least one attribute {key, type}")
		}
		for i, a := range p.Attributes {
			f := fmt.Sprintf("attributes[%d]", i)
			if a.Key == "" {
				c.Missing(f+".key", "attribute key is required")
			}
			c.metricType(f+".type", a.Type, a.AllowedValues, f+".allowed_values")
		}
	}
	ms, err := metricsNow(c.ctx, c.api)
	if err != nil {
		return err
	}
	for _, k := range p.storedKeys() {
		if _, ok := findMetric(ms, k); ok {
			// UpGrade would overwrite its type and context in place.
			c.Add("key", "metric %q already exists; delete it first or choose another key", k)
		}
	}
	return nil
}

func planCreateMetric(b *Planner, p CreateMetricParams) error {
	if p.Group == "" {
		allowed := ""
		if len(p.AllowedValues) > 0 {
			allowed = ", values " + strings.Join(p.AllowedValues, ", ")
		}
		b.Line("create metric %s (%s%s) in context %s.", quote(p.Key), p.Type, allowed, strings.Join(p.Context, ", "))
	} else {
		b.Line("create grouped metric %s in context %s, keys %s, attributes:", quote(p.Group), strings.Join(p.Context, ", "), strings.Join(p.Keys, ", "))
		for _, a := range p.Attributes {
			line := "  " + a.Key + " (" + a.Type
			if len(a.AllowedValues) > 0 {
				line += ", values " + strings.Join(a.AllowedValues, ", ")
			}
			b.Line("%s)", line)
		}
	}
	b.Line("UpGrade keeps logged values only of metrics an experiment query uses: add a query before students log.")
	return nil
}

type metricResult struct {
	Keys []string `json:"keys"`
	Type string   `json:"type,omitempty"`
}

func (p CreateMetricParams) units() []upgrade.MetricUnit {
	if p.Group == "" {
		return []upgrade.MetricUnit{{Metric: p.Key, Datatype: p.Type, AllowedValues: p.AllowedValues}}
	}
	u := upgrade.MetricUnit{GroupClass: p.Group, AllowedKeys: p.Keys}
	for _, a := range p.Attributes {
		u.Attributes = append(u.Attributes, upgrade.MetricUnit{Metric: a.Key, Datatype: a.Type, AllowedValues: a.AllowedValues})
	}
	return []upgrade.MetricUnit{u}
}

func executeCreateMetric(ctx context.Context, env Env, p CreateMetricParams, _ string) (Outcome, error) {
	// Saving the same metric again changes nothing, so a repeat after a
	// crash is harmless; the read back proves the save.
	if _, err := env.API.SaveMetrics(ctx, p.units(), p.Context); err != nil {
		return Outcome{}, err
	}
	ms, err := metricsNow(ctx, env.API)
	if err != nil {
		return Outcome{}, fmt.Errorf("the metric was saved, but %w", err)
	}
	if missing := missingMetrics(ms, p); len(missing) > 0 {
		return Outcome{}, fmt.Errorf("the server answered the save, but does not have metric %s", strings.Join(missing, ", "))
	}
	return Result(metricResult{Keys: p.storedKeys(), Type: p.Type})
}

func missingMetrics(ms []upgrade.Metric, p CreateMetricParams) []string {
	var missing []string
	for _, k := range p.storedKeys() {
		if _, ok := findMetric(ms, k); !ok {
			missing = append(missing, k)
		}
	}
	return missing
}

func reconcileCreateMetric(ctx context.Context, env Env, p CreateMetricParams, _ string, _ time.Time) (Reconciliation, error) {
	ms, err := metricsNow(ctx, env.API)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile create_metric: %w", err)
	}
	if missing := missingMetrics(ms, p); len(missing) > 0 {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("metric %s does not exist: the create did not happen", strings.Join(missing, ", "))}, nil
	}
	raw, _ := json.Marshal(metricResult{Keys: p.storedKeys(), Type: p.Type})
	return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: "the metric exists: the create happened"}, nil
}
