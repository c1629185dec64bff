package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// handleAnalyse answers POST /query/analyse: per query, one result per
// condition computed over the enrolled, not excluded users that logged a
// value for the query's metric, at any time.
func (s *Sim) handleAnalyse(c *call) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	raw, ok := m["queryIds"].([]any)
	if !ok {
		c.fail(badBody("queryIds: must be an array of strings"))
		return
	}
	ids := make([]string, 0, len(raw))
	for _, v := range raw {
		id, isStr := v.(string)
		if !isStr {
			c.fail(badBody("queryIds: must be an array of strings"))
			return
		}
		if !upgrade.IsUUID(id) {
			c.fail(&apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
				Message: fmt.Sprintf("invalid input syntax for type uuid: %q", id)})
			return
		}
		ids = append(ids, id)
	}
	out := []any{}
	if err := s.view(func() {
		for _, id := range ids {
			out = append(out, s.analyseLocked(id))
		}
	}); err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

var continuousOps = []string{"avg", "sum", "count", "min", "max", "stddev", "mode", "median"}

func (s *Sim) analyseLocked(id string) obj {
	e, q := s.queryByIDLocked(id)
	if q == nil {
		return obj{"id": id, "interactionEffect": nil}
	}
	zero := func(cond string) obj { return obj{"conditionId": cond, "result": "0", "participantsLogged": 0} }
	var main []any
	results, ok := s.queryResultsLocked(e, q)
	if !ok {
		main = append(main, "rejected")
		for _, cnd := range e.Conditions {
			main = append(main, zero(cnd.ID))
		}
		return obj{"id": id, "mainEffect": main, "interactionEffect": nil}
	}
	main = []any{}
	var empty []string
	for _, cnd := range e.Conditions {
		r, has := results[cnd.ID]
		if !has {
			empty = append(empty, cnd.ID)
			continue
		}
		main = append(main, obj{"conditionId": cnd.ID, "result": r.result, "participantsLogged": strconv.Itoa(r.n)})
	}
	for _, cid := range empty {
		main = append(main, zero(cid))
	}
	return obj{"id": id, "mainEffect": main, "interactionEffect": nil}
}

type condResult struct {
	result any // numeric text, or a number for the median
	n      int
}

// queryResultsLocked computes a query per condition; false means the query
// fails on the server (answered as "rejected").
func (s *Sim) queryResultsLocked(e *upgrade.Experiment, q *storedQuery) (map[string]condResult, bool) {
	if q.MetricKey == nil {
		return nil, false
	}
	metric := s.metricLocked(*q.MetricKey)
	if metric == nil {
		return nil, false
	}
	var op queryOp
	_ = json.Unmarshal(q.Query, &op)
	continuous := metric.Type == "continuous"
	if continuous && !slices.Contains(continuousOps, op.OperationType) {
		return nil, false
	}
	perCond := map[string][]any{}
	rt := s.st.Runtime[e.ID]
	if rt != nil {
		for _, uid := range slices.Sorted(maps.Keys(rt.Enrolled)) {
			if _, out := rt.ExcludedUsers[uid]; out {
				continue
			}
			v, has := s.userValueLocked(uid, *q.MetricKey, q.RepeatedMeasure, continuous)
			if !has {
				continue
			}
			if v == nil {
				return nil, false // a value that is not a number
			}
			cid := rt.Enrolled[uid].ConditionID
			perCond[cid] = append(perCond[cid], v)
		}
	}
	out := map[string]condResult{}
	for cid, vals := range perCond {
		if continuous {
			nums := make([]float64, len(vals))
			for i, v := range vals {
				nums[i] = v.(float64)
			}
			out[cid] = condResult{result: aggregate(op.OperationType, nums), n: len(nums)}
			continue
		}
		out[cid] = condResult{result: numText(categorical(op, vals)), n: len(vals)}
	}
	return out, true
}

// userValueLocked is a user's value of a metric under a repeated measure:
// MEAN averages the user's rows, MOST RECENT takes the row written last
// (server time), the others the row written first. Rows from before the
// user enrolled count too. A continuous value that is not a number gives
// (nil, true).
func (s *Sim) userValueLocked(uid, key, measure string, continuous bool) (any, bool) {
	var rows []*logRow
	for _, l := range s.st.Logs {
		if l.UserID == uid && l.Key == key {
			rows = append(rows, l)
		}
	}
	if len(rows) == 0 {
		return nil, false
	}
	if !continuous {
		return fmt.Sprint(pickRow(rows, measure).Value), true
	}
	if measure == "MEAN" {
		sum := 0.0
		for _, r := range rows {
			f, ok := numberOf(r.Value)
			if !ok {
				return nil, true
			}
			sum += f
		}
		return sum / float64(len(rows)), true
	}
	f, ok := numberOf(pickRow(rows, measure).Value)
	if !ok {
		return nil, true
	}
	return f, true
}

func pickRow(rows []*logRow, measure string) *logRow {
	best := rows[0]
	for _, r := range rows[1:] {
		if measure == "MOST RECENT" {
			if r.UpdatedAt > best.UpdatedAt || (r.UpdatedAt == best.UpdatedAt && r.ID > best.ID) {
				best = r
			}
		} else if r.CreatedAt < best.CreatedAt || (r.CreatedAt == best.CreatedAt && r.ID < best.ID) {
			best = r
		}
	}
	return best
}

func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// categorical counts the values equal to compareValue ("=") or different
// from it (any other compareFn); without compareFn every value counts.
// percentage is that count over the values, times 100.
func categorical(op queryOp, vals []any) float64 {
	want := ""
	if op.CompareValue != nil {
		want = fmt.Sprint(op.CompareValue)
	}
	n := 0
	for _, v := range vals {
		sv := v.(string)
		switch {
		case op.CompareFn == nil:
			n++
		case *op.CompareFn == "=":
			if sv == want {
				n++
			}
		default:
			if sv != want {
				n++
			}
		}
	}
	if op.OperationType == "percentage" {
		return float64(n) / float64(len(vals)) * 100
	}
	return float64(n)
}

// aggregate applies a continuous operation; the median is a JSON number,
// every other result numeric text.
func aggregate(op string, v []float64) any {
	n := float64(len(v))
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	switch op {
	case "sum":
		return numText(sum)
	case "count":
		return numText(n)
	case "min":
		return numText(slices.Min(v))
	case "max":
		return numText(slices.Max(v))
	case "stddev":
		if len(v) < 2 {
			return nil
		}
		mean := sum / n
		ss := 0.0
		for _, x := range v {
			ss += (x - mean) * (x - mean)
		}
		return numText(math.Sqrt(ss / (n - 1)))
	case "mode":
		counts := map[float64]int{}
		for _, x := range v {
			counts[x]++
		}
		best, bestN := math.Inf(1), 0
		for x, c := range counts {
			if c > bestN || (c == bestN && x < best) {
				best, bestN = x, c
			}
		}
		return numText(best)
	case "median":
		s := slices.Clone(v)
		sort.Float64s(s)
		mid := len(s) / 2
		if len(s)%2 == 1 {
			return s[mid]
		}
		return (s[mid-1] + s[mid]) / 2
	}
	return numText(sum / n) // avg
}

func numText(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
