package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// QueryOp is what a query computes per condition. CompareFn ("=" or "<>")
// and CompareValue only apply to categorical metrics.
type QueryOp struct {
	OperationType string `json:"operationType"`
	CompareFn     string `json:"compareFn,omitempty"`
	CompareValue  string `json:"compareValue,omitempty"`
}

// Query is an experiment query as read. MetricKey is "" when the server
// holds the query with metric null (a PUT named a metric that does not
// exist): such a query always fails to analyse.
type Query struct {
	ID              string  `json:"id"`
	Name            string  `json:"name"`
	Query           QueryOp `json:"query"`
	MetricKey       string  `json:"metric_key"`
	MetricType      string  `json:"metric_type,omitempty"`
	RepeatedMeasure string  `json:"repeated_measure"`
	Order           int     `json:"order"`
}

type wireQuery struct {
	ID              string          `json:"id"`
	Name            string          `json:"name"`
	Query           json.RawMessage `json:"query"`
	RepeatedMeasure string          `json:"repeatedMeasure"`
	Order           json.Number     `json:"order"`
	Metric          *struct {
		Key  string `json:"key"`
		Type string `json:"type"`
	} `json:"metric"`
}

// QueryList decodes the experiment's queries, in their order. A query
// whose fields cannot be read is an error naming its position.
func (e *Experiment) QueryList() ([]Query, error) {
	out := make([]Query, 0, len(e.Queries))
	for i, raw := range e.Queries {
		var w wireQuery
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, fmt.Errorf("experiment %s: queries[%d]: %w", e.ID, i, err)
		}
		q := Query{ID: w.ID, Name: w.Name, RepeatedMeasure: w.RepeatedMeasure}
		if n, err := w.Order.Int64(); err == nil {
			q.Order = int(n)
		}
		if w.Metric != nil {
			q.MetricKey, q.MetricType = w.Metric.Key, w.Metric.Type
		}
		var op struct {
			OperationType string `json:"operationType"`
			CompareFn     any    `json:"compareFn"`
			CompareValue  any    `json:"compareValue"`
		}
		if len(w.Query) > 0 && json.Unmarshal(w.Query, &op) == nil {
			q.Query.OperationType = op.OperationType
			if op.CompareFn != nil {
				q.Query.CompareFn = fmt.Sprint(op.CompareFn)
			}
			if op.CompareValue != nil {
				q.Query.CompareValue = fmt.Sprint(op.CompareValue)
			}
		}
		out = append(out, q)
	}
	return out, nil
}

// Summary says what the query computes: `percentage of passed = "yes"`;
// a query whose metric is gone names none.
func (q Query) Summary() string {
	key := q.MetricKey
	if key == "" {
		key = "(no metric)"
	}
	s := q.Query.OperationType + " of " + key
	if q.Query.CompareFn != "" {
		s += fmt.Sprintf(" %s %q", q.Query.CompareFn, q.Query.CompareValue)
	}
	return s
}

// AddQuery appends a query to the experiment (to be sent with
// UpdateExperiment), with a fresh id, after every existing query. The
// existing queries are kept as read: a PUT without them deletes them.
func (e *Experiment) AddQuery(name, metricKey, measure string, op QueryOp) (string, error) {
	return e.AddQueryWithID(NewID(), name, metricKey, measure, op)
}

// AddQueryWithID is AddQuery with the query's id chosen by the caller (a
// UUID): a PUT keeps it, so an action that derives it from its
// confirmation finds its query again after a crash.
func (e *Experiment) AddQueryWithID(id, name, metricKey, measure string, op QueryOp) (string, error) {
	order := len(e.Queries) + 1
	if qs, err := e.QueryList(); err == nil {
		for _, q := range qs {
			if q.Order >= order {
				order = q.Order + 1
			}
		}
	}
	raw, err := json.Marshal(map[string]any{
		"id": id, "name": name, "query": op, "metric": map[string]string{"key": metricKey},
		"repeatedMeasure": measure, "order": order,
	})
	if err != nil {
		return "", err
	}
	e.Queries = append(e.Queries, raw)
	return id, nil
}

// RemoveQuery drops a query by id; false when the experiment has none.
func (e *Experiment) RemoveQuery(id string) bool {
	for i, raw := range e.Queries {
		var w struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &w) == nil && w.ID == id {
			e.Queries = append(e.Queries[:i:i], e.Queries[i+1:]...)
			return true
		}
	}
	return false
}

// ConditionResult is one condition's (or factorial level's) value of a
// query. Value is nil when the server gave no number (a standard
// deviation of one value). Participants are the enrolled users with a
// value; 0 with Value 0 is UpGrade's filler for "no data".
type ConditionResult struct {
	ConditionID  string   `json:"condition_id,omitempty"`
	LevelID      string   `json:"level_id,omitempty"`
	Value        *float64 `json:"value"`
	Participants int      `json:"participants"`
}

// QueryResult is the analysis of one query. Found is false when the server
// does not know the query id; Rejected when the query failed there (an
// operation the metric type does not have, a value that is not a number,
// a query without metric), in which case every condition is a zero filler.
type QueryResult struct {
	QueryID     string            `json:"query_id"`
	Found       bool              `json:"found"`
	Rejected    bool              `json:"rejected"`
	MainEffect  []ConditionResult `json:"main_effect"`
	Interaction []ConditionResult `json:"interaction_effect,omitempty"`
}

// UnmarshalJSON reads UpGrade's analysis element: numeric text parsed,
// the "rejected" marker recognised, a missing mainEffect meaning unknown.
func (q *QueryResult) UnmarshalJSON(b []byte) error {
	var w struct {
		ID          string            `json:"id"`
		MainEffect  []json.RawMessage `json:"mainEffect"`
		Interaction []json.RawMessage `json:"interactionEffect"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*q = QueryResult{QueryID: w.ID, Found: w.MainEffect != nil}
	var err error
	q.MainEffect, q.Rejected, err = parseEffects(w.MainEffect)
	if err != nil {
		return fmt.Errorf("query %s: mainEffect: %w", w.ID, err)
	}
	q.Interaction, _, err = parseEffects(w.Interaction)
	if err != nil {
		return fmt.Errorf("query %s: interactionEffect: %w", w.ID, err)
	}
	return nil
}

func parseEffects(raw []json.RawMessage) ([]ConditionResult, bool, error) {
	out := []ConditionResult{}
	rejected := false
	for _, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			if s == "rejected" {
				rejected = true
			}
			continue
		}
		var w struct {
			ConditionID  string          `json:"conditionId"`
			LevelID      string          `json:"levelId"`
			Result       json.RawMessage `json:"result"`
			Participants json.RawMessage `json:"participantsLogged"`
		}
		if err := json.Unmarshal(r, &w); err != nil {
			return nil, false, err
		}
		cr := ConditionResult{ConditionID: w.ConditionID, LevelID: w.LevelID}
		if v, ok, err := numberText(w.Result); err != nil {
			return nil, false, fmt.Errorf("result: %w", err)
		} else if ok {
			cr.Value = &v
		}
		if v, ok, err := numberText(w.Participants); err != nil {
			return nil, false, fmt.Errorf("participantsLogged: %w", err)
		} else if ok {
			cr.Participants = int(v)
		}
		out = append(out, cr)
	}
	return out, rejected, nil
}

// numberText reads a JSON number or numeric text; null or absent is
// (0, false).
func numberText(raw json.RawMessage) (float64, bool, error) {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return 0, false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t = strings.TrimSpace(s)
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not a number", t)
	}
	return f, true, nil
}

// Analyse runs queries on the server (POST /query/analyse): one result per
// id, in the order asked. Read-only, so retried.
func (c *Client) Analyse(ctx context.Context, queryIDs []string) ([]QueryResult, error) {
	const path = "/query/analyse"
	for _, id := range queryIDs {
		if !IsUUID(id) {
			return nil, c.localError(http.MethodPost, path, CategoryValidation, fmt.Sprintf("query id %q is not a UUID", id))
		}
	}
	if queryIDs == nil {
		queryIDs = []string{}
	}
	var out []QueryResult
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: map[string]any{"queryIds": queryIDs}, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// EnrollmentTotal is one experiment's enrolled users and groups.
type EnrollmentTotal struct {
	ID     string `json:"id"`
	Users  int    `json:"users"`
	Groups int    `json:"groups"`
}

// EnrollmentTotals returns enrolled users and groups per experiment (POST
// /stats/enrollment); unknown ids count 0. Retried.
func (c *Client) EnrollmentTotals(ctx context.Context, ids []string) ([]EnrollmentTotal, error) {
	if ids == nil {
		ids = []string{}
	}
	var out []EnrollmentTotal
	r := request{method: http.MethodPost, path: "/stats/enrollment", body: map[string]any{"experimentIds": ids}, idempotent: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Date ranges of EnrollmentByDate.
var DateRanges = []string{"last_seven_days", "last_fourteen_days", "last_thirty_days",
	"last_three_months", "last_six_months", "last_twelve_months", "total"}

// EnrollmentDay is one bucket of EnrollmentByDate: the enrollments made in
// it per condition and decision point.
type EnrollmentDay struct {
	Date  string `json:"date"`
	Stats struct {
		ID         string           `json:"id"`
		Conditions []ConditionStats `json:"conditions"`
	} `json:"stats"`
}

// EnrollmentByDate returns enrollments per day or month, newest first
// (POST /stats/enrollment/date). offsetMinutes shifts the server's clock to
// the reader's day. Retried.
func (c *Client) EnrollmentByDate(ctx context.Context, id, dateRange string, offsetMinutes int) ([]EnrollmentDay, error) {
	const path = "/stats/enrollment/date"
	ok := false
	for _, r := range DateRanges {
		ok = ok || r == dateRange
	}
	if !ok {
		return nil, c.localError(http.MethodPost, path, CategoryValidation,
			fmt.Sprintf("date range %q is not one of %s", dateRange, strings.Join(DateRanges, ", ")))
	}
	var out []EnrollmentDay
	r := request{method: http.MethodPost, path: path, idempotent: true, experimentID: id,
		body: map[string]any{"experimentId": id, "dateEnum": dateRange, "clientOffset": offsetMinutes}}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ResultsInput is everything the results of one experiment are computed
// from: the experiment (with its queries), the analysis of each query, the
// enrollment and the experiment's audit entries (to tell whether it was
// edited while enrolling).
type ResultsInput struct {
	Experiment *Experiment
	Analyses   []QueryResult
	Stats      *EnrollmentStats
	Audit      []AuditEntry
}

// auditPageForResults bounds the audit read: the edits that matter are
// the experiment's own, far fewer than this.
const auditPageForResults = 500

// ReadResults reads what the results of experiment id need. Every call is
// a read.
func (c *Client) ReadResults(ctx context.Context, id string) (*ResultsInput, error) {
	e, err := c.Experiment(ctx, id)
	if err != nil {
		return nil, err
	}
	qs, err := e.QueryList()
	if err != nil {
		return nil, err
	}
	in := &ResultsInput{Experiment: e, Analyses: []QueryResult{}}
	var ids []string
	for _, q := range qs {
		if IsUUID(q.ID) {
			ids = append(ids, q.ID)
		}
	}
	if len(ids) > 0 {
		if in.Analyses, err = c.Analyse(ctx, ids); err != nil {
			return nil, err
		}
	}
	if in.Stats, err = c.EnrollmentStats(ctx, id); err != nil {
		return nil, err
	}
	in.Audit = c.ExperimentAudit(ctx, id)
	return in, nil
}

// ExperimentAudit is the experiment's audit entries, or nil when the
// server cannot give them (a server without the audit route): the results
// then cannot tell an edit while enrolling, which only decides whether the
// sample-ratio test is skipped.
func (c *Client) ExperimentAudit(ctx context.Context, id string) []AuditEntry {
	page, err := c.Audit(ctx, AuditRequest{Take: auditPageForResults, ExperimentID: id})
	if err != nil {
		return nil
	}
	return page.Nodes
}
