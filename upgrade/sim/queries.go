package sim

import (
	"encoding/json"
	"fmt"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// storedQuery is an experiment query as the simulator keeps it inside the
// experiment's Queries: the metric by key (nil: the PUT named a metric
// that does not exist, which UpGrade stores as metric null).
type storedQuery struct {
	ID              string          `json:"id"`
	Name            string          `json:"name"`
	Query           json.RawMessage `json:"query"`
	RepeatedMeasure string          `json:"repeatedMeasure"`
	Order           int             `json:"order"`
	MetricKey       *string         `json:"metricKey"`
	CreatedAt       string          `json:"createdAt"`
	UpdatedAt       string          `json:"updatedAt"`
	VersionNumber   int             `json:"versionNumber"`
}

// queryOp is the query's operation and comparison.
type queryOp struct {
	OperationType string  `json:"operationType"`
	CompareFn     *string `json:"compareFn"`
	CompareValue  any     `json:"compareValue"`
}

// sentQuery is a query as a client sends it.
type sentQuery struct {
	ID              string          `json:"id"`
	Name            string          `json:"name"`
	Query           json.RawMessage `json:"query"`
	RepeatedMeasure string          `json:"repeatedMeasure"`
	Order           *float64        `json:"order"`
	Metric          *struct {
		Key string `json:"key"`
	} `json:"metric"`
}

func decodeQueries(e *upgrade.Experiment) []storedQuery {
	out := make([]storedQuery, 0, len(e.Queries))
	for _, raw := range e.Queries {
		var q storedQuery
		if json.Unmarshal(raw, &q) == nil && q.ID != "" {
			out = append(out, q)
		}
	}
	return out
}

func encodeQueries(qs []storedQuery) []json.RawMessage {
	if len(qs) == 0 {
		return nil
	}
	out := make([]json.RawMessage, 0, len(qs))
	for _, q := range qs {
		b, err := json.Marshal(q)
		if err == nil {
			out = append(out, b)
		}
	}
	return out
}

// storeQueriesLocked turns the queries sent with a create or update into
// stored ones. A create gives new ids, numbers them by position and drops
// the queries whose metric does not exist (the positions keep the gap); an
// update keeps the ids and order sent, stores an unknown metric as null and
// fails like PostgreSQL on an id that is not a UUID. old is the stored
// experiment an update replaces (nil on create).
func (s *Sim) storeQueriesLocked(e, old *upgrade.Experiment, create bool) *apiError {
	sent := make([]sentQuery, 0, len(e.Queries))
	for i, raw := range e.Queries {
		var q sentQuery
		if err := json.Unmarshal(raw, &q); err != nil {
			return badBody(fmt.Sprintf("queries[%d]: %v", i, err))
		}
		sent = append(sent, q)
	}
	prev := map[string]storedQuery{}
	if old != nil {
		for _, q := range decodeQueries(old) {
			prev[q.ID] = q
		}
	}
	now := s.timestamp()
	var out []storedQuery
	for i, q := range sent {
		var key *string
		if q.Metric != nil && s.metricLocked(q.Metric.Key) != nil {
			k := q.Metric.Key
			key = &k
		}
		st := storedQuery{Name: q.Name, Query: q.Query, RepeatedMeasure: q.RepeatedMeasure,
			Order: i + 1, MetricKey: key, CreatedAt: now, UpdatedAt: now, VersionNumber: 1}
		if len(st.Query) == 0 {
			st.Query = json.RawMessage("{}")
		}
		if create {
			if key == nil {
				continue
			}
			st.ID = s.newID()
		} else {
			if q.ID != "" && !upgrade.IsUUID(q.ID) {
				return &apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
					Message: fmt.Sprintf("invalid input syntax for type uuid: %q", q.ID)}
			}
			st.ID = q.ID
			if st.ID == "" {
				st.ID = s.newID()
			}
			if q.Order != nil {
				st.Order = int(*q.Order)
			}
			if p, ok := prev[st.ID]; ok {
				st.CreatedAt, st.VersionNumber = p.CreatedAt, p.VersionNumber+1
			}
		}
		out = append(out, st)
	}
	e.Queries = encodeQueries(out)
	return nil
}

// dropQueriesLocked removes the queries whose metric is gone, as deleting
// a metric does on the server.
func (s *Sim) dropQueriesLocked(gone func(key string) bool) {
	for _, e := range s.st.Experiments {
		qs := decodeQueries(e)
		keep := qs[:0]
		for _, q := range qs {
			if q.MetricKey != nil && gone(*q.MetricKey) {
				continue
			}
			keep = append(keep, q)
		}
		if len(keep) != len(qs) {
			e.Queries = encodeQueries(keep)
		}
	}
}

// metricView is a metric row as it shows inside a query.
func (s *Sim) metricView(key *string) any {
	if key == nil {
		return nil
	}
	m := s.metricLocked(*key)
	if m == nil {
		return nil
	}
	var allowed any
	if m.AllowedData != nil {
		allowed = m.AllowedData
	}
	return obj{"key": m.Key, "type": m.Type, "allowedData": allowed, "context": m.Context,
		"createdAt": m.CreatedAt, "updatedAt": m.UpdatedAt, "versionNumber": m.VersionNumber}
}

// queriesView shows an experiment's queries; the create answer embeds the
// experiment row in each, the update answer its id.
func (s *Sim) queriesView(e *upgrade.Experiment, v view) []any {
	qs := decodeQueries(e)
	out := make([]any, 0, len(qs))
	for _, q := range qs {
		o := obj{"id": q.ID, "name": q.Name, "query": q.Query, "repeatedMeasure": q.RepeatedMeasure,
			"order": q.Order, "metric": s.metricView(q.MetricKey), "createdAt": q.CreatedAt,
			"updatedAt": q.UpdatedAt, "versionNumber": q.VersionNumber}
		switch v {
		case viewCreate:
			o["experiment"] = s.baseView(e, true)
		case viewUpdate:
			o["experimentId"] = e.ID
		}
		out = append(out, o)
	}
	return out
}

// queryByIDLocked finds a query and its experiment.
func (s *Sim) queryByIDLocked(id string) (*upgrade.Experiment, *storedQuery) {
	for _, e := range s.st.Experiments {
		for _, q := range decodeQueries(e) {
			if q.ID == id {
				return e, &q
			}
		}
	}
	return nil, nil
}

// usedMetricKeysLocked are the metric keys some query of a non-archived
// experiment uses: the only ones whose logs are kept.
func (s *Sim) usedMetricKeysLocked() map[string]bool {
	used := map[string]bool{}
	for _, e := range s.st.Experiments {
		if e.State == upgrade.StateArchived {
			continue
		}
		for _, q := range decodeQueries(e) {
			if q.MetricKey != nil {
				used[*q.MetricKey] = true
			}
		}
	}
	return used
}
