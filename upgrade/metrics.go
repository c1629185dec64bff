package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// MetricKeySep joins the parts of a grouped metric's key as UpGrade stores
// it: group@__@key@__@attribute.
const MetricKeySep = "@__@"

// Metric types.
const (
	MetricContinuous  = "continuous"
	MetricCategorical = "categorical"
)

// Repeated measures: how one user's several values of a grouped metric
// become one value.
const (
	RepeatedMean       = "MEAN"
	RepeatedEarliest   = "EARLIEST"
	RepeatedMostRecent = "MOST RECENT"
	RepeatedCount      = "COUNT"
	RepeatedPercentage = "PERCENTAGE"
)

// RepeatedMeasures are UpGrade's five repeated measures.
var RepeatedMeasures = []string{RepeatedMean, RepeatedEarliest, RepeatedMostRecent, RepeatedCount, RepeatedPercentage}

// Operations a query may use, by metric type. A categorical count or
// percentage compares each value with compareValue.
var (
	ContinuousOperations  = []string{"avg", "sum", "count", "min", "max", "stddev", "mode", "median"}
	CategoricalOperations = []string{"count", "percentage"}
)

// MetricUnit is one unit of a metric save: a simple metric (Metric,
// Datatype, AllowedValues) or a group (GroupClass, AllowedKeys, Attributes).
type MetricUnit struct {
	Metric        string
	Datatype      string
	AllowedValues []string
	GroupClass    string
	AllowedKeys   []string
	Attributes    []MetricUnit
}

// MarshalJSON writes the unit's shape: a group always sends allowedKeys
// (UpGrade makes a group without keys a single continuous metric).
func (u MetricUnit) MarshalJSON() ([]byte, error) {
	if u.GroupClass != "" {
		keys := u.AllowedKeys
		if keys == nil {
			keys = []string{}
		}
		attrs := u.Attributes
		if attrs == nil {
			attrs = []MetricUnit{}
		}
		return json.Marshal(struct {
			GroupClass  string       `json:"groupClass"`
			AllowedKeys []string     `json:"allowedKeys"`
			Attributes  []MetricUnit `json:"attributes"`
		}{u.GroupClass, keys, attrs})
	}
	return json.Marshal(struct {
		Metric        string   `json:"metric"`
		Datatype      string   `json:"datatype"`
		AllowedValues []string `json:"allowedValues,omitempty"`
	}{u.Metric, u.Datatype, u.AllowedValues})
}

// MetricNode is one node of UpGrade's metric tree. Interior nodes repeat
// the type, allowed data and context of their first leaf.
type MetricNode struct {
	Key      string       `json:"key"`
	Children []MetricNode `json:"children"`
	Metadata struct {
		Type string `json:"type"`
	} `json:"metadata"`
	// AllowedData is text when read (numbers in a save's answer).
	AllowedData []json.RawMessage `json:"allowedData"`
	Context     []string          `json:"context"`
}

// Metric is one leaf of the tree, with its full stored key.
type Metric struct {
	Key     string   `json:"key"`
	Type    string   `json:"type"`
	Allowed []string `json:"allowed_values,omitempty"`
	Context []string `json:"context"`
}

// Group is the group part of a grouped metric's key ("" for a simple one).
func (m Metric) Group() string {
	if g, _, ok := strings.Cut(m.Key, MetricKeySep); ok {
		return g
	}
	return ""
}

// FlattenMetrics lists the leaves of metric trees, depth first, with keys
// joined as stored.
func FlattenMetrics(trees []MetricNode) []Metric {
	var out []Metric
	var walk func(prefix string, n MetricNode)
	walk = func(prefix string, n MetricNode) {
		key := prefix + n.Key
		if len(n.Children) == 0 {
			m := Metric{Key: key, Type: n.Metadata.Type, Context: n.Context}
			for _, raw := range n.AllowedData {
				m.Allowed = append(m.Allowed, rawText(raw))
			}
			if m.Context == nil {
				m.Context = []string{}
			}
			out = append(out, m)
			return
		}
		for _, c := range n.Children {
			walk(key+MetricKeySep, c)
		}
	}
	for _, t := range trees {
		walk("", t)
	}
	return out
}

// rawText is a JSON string's text or a number's digits.
func rawText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// Metrics returns the metric trees (GET /metric).
func (c *Client) Metrics(ctx context.Context) ([]MetricNode, error) {
	var out []MetricNode
	if err := c.call(ctx, request{method: http.MethodGet, path: "/metric", idempotent: true}, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []MetricNode{}
	}
	return out, nil
}

// MetricsInContext returns the trees whose context holds appContext. The
// server answers 404 when none does; that is an empty list here.
func (c *Client) MetricsInContext(ctx context.Context, appContext string) ([]MetricNode, error) {
	if strings.TrimSpace(appContext) == "" {
		return c.Metrics(ctx)
	}
	var out []MetricNode
	err := c.call(ctx, request{method: http.MethodGet, path: "/metric/" + url.PathEscape(appContext), idempotent: true}, &out)
	if err != nil {
		if CategoryOf(err) == CategoryNotFound {
			return []MetricNode{}, nil
		}
		return nil, err
	}
	if out == nil {
		out = []MetricNode{}
	}
	return out, nil
}

// SaveMetrics creates (or overwrites) metrics in the given contexts and
// returns the trees saved. Never retried.
func (c *Client) SaveMetrics(ctx context.Context, units []MetricUnit, contexts []string) ([]MetricNode, error) {
	const path = "/metric/save"
	if len(units) == 0 {
		return nil, c.localError(http.MethodPost, path, CategoryValidation, "no metric to save")
	}
	if contexts == nil {
		contexts = []string{}
	}
	var out []MetricNode
	body := map[string]any{"metricUnit": units, "context": contexts}
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: body}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteMetric removes a metric (a stored key or a group prefix) and,
// silently on the server, every experiment query that uses it. It returns
// what is left of the metric's tree. An unknown key is not_found.
func (c *Client) DeleteMetric(ctx context.Context, key string) ([]MetricNode, error) {
	path := "/metric/" + url.PathEscape(key)
	if strings.TrimSpace(key) == "" {
		return nil, c.localError(http.MethodDelete, "/metric/", CategoryValidation, "metric key is empty")
	}
	var out []MetricNode
	if err := c.call(ctx, request{method: http.MethodDelete, path: path}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// LogEntry is one element of a /v6/log body: a client timestamp and the
// values, simple metrics by key and grouped ones with their uniquifier.
type LogEntry struct {
	Timestamp string
	// Attributes holds simple metrics: a number (float64, int) or a
	// non-empty string each.
	Attributes map[string]any
	Grouped    []GroupedLog
}

// GroupedLog is one attempt at a grouped metric.
type GroupedLog struct {
	GroupClass      string         `json:"groupClass"`
	GroupKey        string         `json:"groupKey"`
	GroupUniquifier string         `json:"groupUniquifier"`
	Attributes      map[string]any `json:"attributes"`
}

// MarshalJSON writes the entry as UpGrade's log body element.
func (l LogEntry) MarshalJSON() ([]byte, error) {
	type metrics struct {
		Attributes     map[string]any `json:"attributes,omitempty"`
		GroupedMetrics []GroupedLog   `json:"groupedMetrics,omitempty"`
	}
	return json.Marshal(struct {
		Timestamp string  `json:"timestamp"`
		Metrics   metrics `json:"metrics"`
	}{l.Timestamp, metrics{l.Attributes, l.Grouped}})
}

// LogRow is one stored row the server answers for a log call (new or
// updated); rows the server dropped are not in the answer.
type LogRow struct {
	ID         json.Number     `json:"id"`
	Uniquifier string          `json:"uniquifier"`
	TimeStamp  string          `json:"timeStamp"`
	Data       json.RawMessage `json:"data"`
}

// Log sends metric values for a user (POST /v6/log). The server keeps only
// values of metrics that a query of a non-archived experiment uses, and a
// value only when its timestamp is not older than the stored one. Sending
// the same values again changes nothing, so it is retried.
func (c *Client) Log(ctx context.Context, userID string, entries []LogEntry) ([]LogRow, error) {
	r := request{method: http.MethodPost, path: "/v6/log", body: map[string]any{"value": entries}, userID: userID, idempotent: true}
	if err := c.checkUser(r); err != nil {
		return nil, err
	}
	for i, e := range entries {
		for k, v := range e.Attributes {
			if err := checkLogValue(v); err != nil {
				return nil, c.localError(http.MethodPost, r.path, CategoryValidation, fmt.Sprintf("value[%d].%s: %v", i, k, err))
			}
		}
	}
	var out []LogRow
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func checkLogValue(v any) error {
	switch x := v.(type) {
	case string:
		if x == "" {
			return fmt.Errorf("an empty string is refused by UpGrade")
		}
	case float64, float32, int, int64, int32, json.Number:
	default:
		return fmt.Errorf("must be a number or a non-empty string, not %T", v)
	}
	return nil
}
