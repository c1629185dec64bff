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
			// The server's answer has no type here.
			c.fail(&apiError{Status: 500, Name: "QueryFailedError",
				Message: fmt.Sprintf("invalid input syntax for type uuid: %q", id)})
			return
		}
		ids = append(ids, id)
	}
	out := []any{}
	if err := s.view(func() {
		archived := false
		for _, id := range ids {
			if e, q := s.queryByIDLocked(id); q != nil && s.st.Runtime[e.ID] != nil && s.st.Runtime[e.ID].Snapshot[q.ID] != nil {
				archived = true
			}
		}
		for _, id := range ids {
			r := s.analyseLocked(id)
			if _, found := r["mainEffect"]; !found && archived {
				continue // unknown ids next to archived ones are dropped
			}
			out = append(out, r)
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
	if rt := s.st.Runtime[e.ID]; rt != nil && rt.Snapshot[q.ID] != nil {
		return rt.Snapshot[q.ID]
	}
	return s.computeLocked(e, q)
}

// computeLocked analyses one query now. A factorial experiment's main
// effect is per level, its interaction effect per condition.
func (s *Sim) computeLocked(e *upgrade.Experiment, q *storedQuery) obj {
	factorial := e.Type == upgrade.TypeFactorial
	var groups []string
	byLevel := "conditionId"
	if factorial {
		byLevel = "levelId"
		for _, f := range sortedFactors(e) {
			for _, l := range f.Levels {
				groups = append(groups, l.ID)
			}
		}
	} else {
		for _, c := range e.Conditions {
			groups = append(groups, c.ID)
		}
	}
	main := s.effectLocked(e, q, groups, byLevel, factorial)
	var inter any
	if factorial {
		var conds []string
		for _, c := range e.Conditions {
			conds = append(conds, c.ID)
		}
		inter = s.effectLocked(e, q, conds, "conditionId", false)
	}
	return obj{"id": q.ID, "mainEffect": main, "interactionEffect": inter}
}

// effectLocked is one list of results: per group (condition or level) in
// order, those without data zero-filled at the end; ["rejected", zeros]
// when the query fails.
func (s *Sim) effectLocked(e *upgrade.Experiment, q *storedQuery, groups []string, key string, byLevel bool) []any {
	zero := func(g string) obj { return obj{key: g, "result": "0", "participantsLogged": 0} }
	results, ok := s.queryResultsLocked(e, q, byLevel)
	if !ok {
		main := []any{"rejected"}
		for _, g := range groups {
			main = append(main, zero(g))
		}
		return main
	}
	main := []any{}
	var empty []string
	for _, g := range groups {
		r, has := results[g]
		if !has {
			empty = append(empty, g)
			continue
		}
		main = append(main, obj{key: g, "result": r.result, "participantsLogged": strconv.Itoa(r.n)})
	}
	for _, g := range empty {
		main = append(main, zero(g))
	}
	return main
}

type condResult struct {
	result any // numeric text, or a number for the median
	n      int
}

// member is one user counted in a group (a condition or a level); uniqs,
// when not nil, are the only log uniquifiers that join (within-subjects).
type member struct {
	group, uid string
	uniqs      []string
}

// membersLocked are the users an analysis counts: enrolled, not excluded,
// by condition (or by each level of it); a within-subjects user once per
// condition marked, joined on the marks' uniquifiers.
func (s *Sim) membersLocked(e *upgrade.Experiment, byLevel bool) []member {
	rt := s.st.Runtime[e.ID]
	if rt == nil {
		return nil
	}
	var out []member
	if e.AssignmentUnit == upgrade.UnitWithinSubjects {
		for _, uid := range slices.Sorted(maps.Keys(rt.WSMarks)) {
			if _, gone := rt.ExcludedUsers[uid]; gone {
				continue
			}
			for _, cid := range wsConditionsOf(rt, uid) {
				uniqs := []string{}
				for _, m := range rt.WSMarks[uid] {
					if m.ConditionID == cid && m.Uniquifier != "" {
						uniqs = append(uniqs, m.Uniquifier)
					}
				}
				out = append(out, member{group: cid, uid: uid, uniqs: uniqs})
			}
		}
		return out
	}
	for _, uid := range slices.Sorted(maps.Keys(rt.Enrolled)) {
		if _, gone := rt.ExcludedUsers[uid]; gone {
			continue
		}
		cid := rt.Enrolled[uid].ConditionID
		if !byLevel {
			out = append(out, member{group: cid, uid: uid})
			continue
		}
		if c := e.ConditionByID(cid); c != nil {
			for _, el := range c.LevelCombinationElements {
				out = append(out, member{group: el.Level.ID, uid: uid})
			}
		}
	}
	return out
}

// queryResultsLocked computes a query per condition (or level); false
// means the query fails on the server (answered as "rejected").
func (s *Sim) queryResultsLocked(e *upgrade.Experiment, q *storedQuery, byLevel bool) (map[string]condResult, bool) {
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
	for _, m := range s.membersLocked(e, byLevel) {
		v, has := s.userValueLocked(m.uid, *q.MetricKey, q.RepeatedMeasure, continuous, m.uniqs)
		if !has {
			continue
		}
		if v == nil {
			return nil, false // a value that is not a number
		}
		perCond[m.group] = append(perCond[m.group], v)
	}
	out := map[string]condResult{}
	for cid, vals := range perCond {
		if continuous {
			nums := make([]pgNum, len(vals))
			for i, v := range vals {
				nums[i] = v.(pgNum)
			}
			out[cid] = condResult{result: aggregate(op.OperationType, nums), n: len(nums)}
			continue
		}
		out[cid] = condResult{result: categorical(op, vals), n: len(vals)}
	}
	return out, true
}

// snapshotLocked freezes the analysis of every query of e, once: the
// first archive's answer is the one every later analyse returns.
func (s *Sim) snapshotLocked(e *upgrade.Experiment) {
	rt := s.runtimeOf(e.ID)
	if rt.Snapshot != nil {
		return
	}
	rt.Snapshot = map[string]obj{}
	for _, q := range decodeQueries(e) {
		q := q
		rt.Snapshot[q.ID] = s.computeLocked(e, &q)
	}
}

// userValueLocked is a user's value of a metric under a repeated measure:
// MEAN averages the user's rows, MOST RECENT takes the row written last
// (server time), the others the row written first. Rows from before the
// user enrolled count too. A continuous value that is not a number gives
// (nil, true).
func (s *Sim) userValueLocked(uid, key, measure string, continuous bool, uniqs []string) (any, bool) {
	var rows []*logRow
	for _, l := range s.st.Logs {
		if l.UserID == uid && l.Key == key && (uniqs == nil || slices.Contains(uniqs, l.Uniquifier)) {
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
		nums := make([]pgNum, 0, len(rows))
		for _, r := range rows {
			f, ok := parsePgNum(r.Value)
			if !ok {
				return nil, true
			}
			nums = append(nums, f)
		}
		return pgAvg(nums), true
	}
	f, ok := parsePgNum(pickRow(rows, measure).Value)
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

// categorical counts the values equal to compareValue ("=") or different
// from it (any other compareFn); without compareFn every value counts.
// percentage is that count over the values, times 100.
func categorical(op queryOp, vals []any) string {
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
		return pgMul(pgDiv(pgInt(n), pgInt(len(vals))), pgInt(100)).text()
	}
	return strconv.Itoa(n)
}

// aggregate applies a continuous operation; the median is a JSON number
// (percentile_cont works on doubles), every other result numeric text.
func aggregate(op string, v []pgNum) any {
	switch op {
	case "sum":
		return pgSum(v).text()
	case "count":
		return strconv.Itoa(len(v))
	case "min", "max":
		best := v[0]
		for _, x := range v[1:] {
			if c := x.v.Cmp(best.v); (op == "min" && c < 0) || (op == "max" && c > 0) {
				best = x
			}
		}
		return best.text()
	case "stddev":
		sd, ok := pgStddev(v)
		if !ok {
			return nil
		}
		return sd.text()
	case "mode":
		// mode() takes the most frequent value, the smallest among ties
		// (it walks the sorted values).
		s := slices.Clone(v)
		slices.SortStableFunc(s, func(a, b pgNum) int { return a.v.Cmp(b.v) })
		best, bestN := s[0], 0
		for i := 0; i < len(s); {
			j := i
			for j < len(s) && s[j].v.Cmp(s[i].v) == 0 {
				j++
			}
			if j-i > bestN {
				best, bestN = s[i], j-i
			}
			i = j
		}
		return best.text()
	case "median":
		f := make([]float64, len(v))
		for i, x := range v {
			f[i] = x.float()
		}
		sort.Float64s(f)
		mid := len(f) / 2
		if len(f)%2 == 1 {
			return f[mid]
		}
		return (f[mid-1] + f[mid]) / 2
	}
	return pgAvg(v).text()
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
