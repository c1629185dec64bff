package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// logRow is one stored value: UpGrade keeps one row per user, uniquifier
// and metric key, replaced in place by a newer client timestamp.
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
	uniquifier string
	key        string
	value      any
	timestamp  string
}

// parseLog checks a /v6/log body and flattens it into values.
func parseLog(m map[string]any) ([]logValue, *apiError) {
	ck := &checker{}
	items, _ := ck.array(m, "", "value", true)
	var out []logValue
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
		if attrs := ck.object(mm, join(base, "metrics"), "attributes", false); attrs != nil {
			for _, k := range slices.Sorted(maps.Keys(attrs)) {
				if checkLogValue(ck, join(base, "metrics.attributes."+k), attrs[k]) {
					out = append(out, logValue{uniquifier: "1", key: k, value: attrs[k], timestamp: ts})
				}
			}
		}
		for j, g := range ck.objects(mm, join(base, "metrics"), "groupedMetrics", false) {
			gb := fmt.Sprintf("%s.metrics.groupedMetrics[%d]", base, j)
			class := ck.str(g, gb, "groupClass", true)
			gkey := ck.str(g, gb, "groupKey", true)
			uniq := ck.str(g, gb, "groupUniquifier", true)
			attrs := ck.object(g, gb, "attributes", true)
			for _, k := range slices.Sorted(maps.Keys(attrs)) {
				if checkLogValue(ck, join(gb, "attributes."+k), attrs[k]) {
					out = append(out, logValue{uniquifier: uniq,
						key: class + metricSep + gkey + metricSep + k, value: attrs[k], timestamp: ts})
				}
			}
		}
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
	vals, aerr := parseLog(m)
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
		used := s.usedMetricKeysLocked()
		now := s.timestamp()
		out = []any{}
		changed := false
		for _, v := range vals {
			if !used[v.key] || s.metricLocked(v.key) == nil {
				continue // logs are kept only for metrics a query uses
			}
			row := s.logRowLocked(uid, v.uniquifier, v.key)
			t, valid := parseClientTime(v.timestamp)
			if row != nil {
				old, oldValid := parseClientTime(row.TimeStamp)
				if !valid || (oldValid && t.Before(old)) {
					continue
				}
				row.Value, row.TimeStamp, row.UpdatedAt = v.value, v.timestamp, now
				changed = true
				out = append(out, obj{"id": row.ID, "uniquifier": row.Uniquifier, "timeStamp": row.TimeStamp,
					"data": logData(row.Key, row.Value), "userId": uid})
				continue
			}
			if !valid {
				return false, &apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
					Message: fmt.Sprintf("invalid input syntax for type timestamp: %q", v.timestamp)}
			}
			s.st.LogSeq++
			row = &logRow{ID: s.st.LogSeq, UserID: uid, Uniquifier: v.uniquifier, Key: v.key, Value: v.value,
				TimeStamp: v.timestamp, CreatedAt: now, UpdatedAt: now}
			s.st.Logs = append(s.st.Logs, row)
			changed = true
			out = append(out, obj{"id": row.ID, "uniquifier": row.Uniquifier, "timeStamp": row.TimeStamp,
				"data": logData(row.Key, row.Value), "metrics": []any{s.metricView(&row.Key)},
				"user": obj{"id": uid, "group": u.Group, "workingGroup": u.WorkingGroup}})
		}
		return changed, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

func (s *Sim) logRowLocked(uid, uniq, key string) *logRow {
	for _, l := range s.st.Logs {
		if l.UserID == uid && l.Uniquifier == uniq && l.Key == key {
			return l
		}
	}
	return nil
}
