package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// logRow is one stored value. UpGrade keeps a log row per user and
// uniquifier holding the values of every metric key sent together
// (createDataLogsFromCLFormat); the simulator keeps one logRow per key, and
// the keys stored in one server row share its ID, timestamp and times. A
// newer client timestamp replaces a key's value in place and moves the
// timestamp of the whole row.
type logRow struct {
	ID         int    `json:"id"`
	UserID     string `json:"userId"`
	Uniquifier string `json:"uniquifier"`
	Key        string `json:"key"`
	// Value is a json.Number's text or a string, as sent.
	Value     any    `json:"value"`
	TimeStamp string `json:"timeStamp"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
}

// logValue is one value of a log body, before storing.
type logValue struct {
	key   string
	value any
}

// logGroup is what one server row would hold: the attributes of one
// element of "value" (uniquifier "1"), or one of its grouped metrics.
type logGroup struct {
	uniquifier string
	timestamp  string
	values     []logValue
}

// parseLog checks a /v6/log body and splits it into its elements' groups.
func parseLog(m map[string]any) ([][]logGroup, *apiError) {
	ck := &checker{}
	items, _ := ck.array(m, "", "value", true)
	var out [][]logGroup
	for i, it := range items {
		base := fmt.Sprintf("value[%d]", i)
		im, ok := it.(map[string]any)
		if !ok {
			ck.failf(base, "must be an object")
			continue
		}
		ts, _ := im["timestamp"].(string)
		mm := ck.object(im, base, "metrics", true)
		if mm == nil {
			continue
		}
		var groups []logGroup
		if attrs := ck.object(mm, join(base, "metrics"), "attributes", false); attrs != nil {
			g := logGroup{uniquifier: "1", timestamp: ts}
			for _, k := range slices.Sorted(maps.Keys(attrs)) {
				if checkLogValue(ck, join(base, "metrics.attributes."+k), attrs[k]) {
					g.values = append(g.values, logValue{key: k, value: attrs[k]})
				}
			}
			groups = append(groups, g)
		}
		for j, gm := range ck.objects(mm, join(base, "metrics"), "groupedMetrics", false) {
			gb := fmt.Sprintf("%s.metrics.groupedMetrics[%d]", base, j)
			class := ck.str(gm, gb, "groupClass", true)
			gkey := ck.str(gm, gb, "groupKey", true)
			g := logGroup{uniquifier: ck.str(gm, gb, "groupUniquifier", true), timestamp: ts}
			attrs := ck.object(gm, gb, "attributes", true)
			for _, k := range slices.Sorted(maps.Keys(attrs)) {
				if checkLogValue(ck, join(gb, "attributes."+k), attrs[k]) {
					g.values = append(g.values, logValue{key: class + metricSep + gkey + metricSep + k, value: attrs[k]})
				}
			}
			groups = append(groups, g)
		}
		out = append(out, groups)
	}
	return out, ck.err()
}

func checkLogValue(ck *checker, path string, v any) bool {
	switch x := v.(type) {
	case json.Number:
		return true
	case string:
		if x != "" {
			return true
		}
	}
	ck.failf(path, "must be a non-empty string or a number")
	return false
}

func parseClientTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// logData is the row's data as the server shows it: {"score": 12.5}, or
// {"g": {"k1": {"time": 3}}} for a grouped metric.
func logData(key string, v any) any {
	parts := strings.Split(key, metricSep)
	var out any = v
	for i := len(parts) - 1; i >= 0; i-- {
		out = map[string]any{parts[i]: out}
	}
	return out
}

func (s *Sim) handleLog(c *call) {
	uid, ok := requireUser(c)
	if !ok {
		return
	}
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	items, aerr := parseLog(m)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	var out []any
	err := s.mutate(func() (bool, *apiError) {
		u := s.st.Users[uid]
		if u == nil {
			return false, userNotDefined(uid)
		}
		out = []any{}
		changed := false
		for _, groups := range items {
			rows, ch, aerr := s.logItemLocked(uid, u, groups)
			changed = changed || ch
			if aerr != nil {
				return changed, aerr
			}
			out = append(out, rows...)
		}
		return changed, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

// logItemLocked stores one element of a log body as ExperimentAssignment-
// Service.createLog does, and answers its rows: first the existing rows a
// value of it updated (the row's id, uniquifier, timestamp, all its data and
// userId), then the rows it made (with the metrics and the user). Keys no
// query uses are dropped; a value older than its row, or with a timestamp
// that is no date, is dropped when a row holds its key, and a new row with
// such a timestamp fails as the server's insert does.
func (s *Sim) logItemLocked(uid string, u *user, groups []logGroup) ([]any, bool, *apiError) {
	used := s.usedMetricKeysLocked()
	now := s.timestamp()
	var updated []int
	var made []any
	changed := false
	for _, g := range groups {
		t, valid := parseClientTime(g.timestamp)
		var rest []logValue
		for _, v := range g.values {
			if !used[v.key] || s.metricLocked(v.key) == nil {
				continue // logs are kept only for metrics a query uses
			}
			row := s.logRowLocked(uid, g.uniquifier, v.key)
			if row == nil {
				rest = append(rest, v)
				continue
			}
			if old, oldValid := parseClientTime(row.TimeStamp); !valid || (oldValid && t.Before(old)) {
				continue
			}
			row.Value = v.value
			for _, r := range s.st.Logs {
				if r.ID == row.ID {
					r.TimeStamp, r.UpdatedAt = isoTime(t), now
				}
			}
			if !slices.Contains(updated, row.ID) {
				updated = append(updated, row.ID)
			}
			changed = true
		}
		if len(rest) == 0 {
			continue
		}
		if !valid {
			return nil, changed, &apiError{Status: 500, Name: "QueryFailedError",
				Message: `invalid input syntax for type timestamp: "0NaN-NaN-NaNTNaN:NaN:NaN.NaN+NaN:NaN"`}
		}
		s.st.LogSeq++
		metrics := []any{}
		for _, v := range rest {
			s.st.Logs = append(s.st.Logs, &logRow{ID: s.st.LogSeq, UserID: uid, Uniquifier: g.uniquifier, Key: v.key,
				Value: v.value, TimeStamp: isoTime(t), CreatedAt: now, UpdatedAt: now})
			metrics = append(metrics, s.metricView(&v.key))
		}
		changed = true
		made = append(made, obj{"id": s.st.LogSeq, "uniquifier": g.uniquifier, "timeStamp": isoTime(t),
			"data": s.logRowData(s.st.LogSeq), "metrics": metrics,
			// the request's user document: the row of experiment_user
			"user": obj{"id": uid, "requestedUserId": uid, "group": u.Group, "workingGroup": u.WorkingGroup,
				"createdAt": now, "updatedAt": now, "versionNumber": 1}})
	}
	out := make([]any, 0, len(updated)+len(made))
	for _, id := range updated {
		r := s.logRowByIDLocked(id)
		out = append(out, obj{"id": id, "uniquifier": r.Uniquifier, "timeStamp": r.TimeStamp,
			"data": s.logRowData(id), "userId": uid})
	}
	return append(out, made...), changed, nil
}

// isoTime writes a client timestamp as the server reads it back.
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// logRowData is the data of one server row: the values of all its keys.
func (s *Sim) logRowData(id int) map[string]any {
	out := map[string]any{}
	for _, r := range s.st.Logs {
		if r.ID == id {
			mergeData(out, logData(r.Key, r.Value).(map[string]any))
		}
	}
	return out
}

func mergeData(dst, src map[string]any) {
	for k, v := range src {
		d, dok := dst[k].(map[string]any)
		sv, sok := v.(map[string]any)
		if dok && sok {
			mergeData(d, sv)
			continue
		}
		dst[k] = v
	}
}

func (s *Sim) logRowByIDLocked(id int) *logRow {
	for _, r := range s.st.Logs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

func (s *Sim) logRowLocked(uid, uniq, key string) *logRow {
	for _, l := range s.st.Logs {
		if l.UserID == uid && l.Uniquifier == uniq && l.Key == key {
			return l
		}
	}
	return nil
}
