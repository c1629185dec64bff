package sim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"testing"
)

// resultsQueries are the queries of the end-to-end example of
// upgrade-results-designs.md section 4, with the values the real server
// gave (control / variant).
var resultsQueries = []struct {
	name, metric, measure string
	query                 map[string]any
	control, variant      float64
}{
	{"avg", "score", "MEAN", map[string]any{"operationType": "avg"}, 11.642857, 13.75},
	{"sum", "score", "MEAN", map[string]any{"operationType": "sum"}, 81.5, 110},
	{"count", "score", "MEAN", map[string]any{"operationType": "count"}, 7, 8},
	{"min", "score", "MEAN", map[string]any{"operationType": "min"}, 1, 10},
	{"max", "score", "MEAN", map[string]any{"operationType": "max"}, 60, 18},
	{"mode", "score", "MEAN", map[string]any{"operationType": "mode"}, 1, 10},
	{"median", "score", "MEAN", map[string]any{"operationType": "median"}, 4.5, 13.5},
	{"stddev", "score", "MEAN", map[string]any{"operationType": "stddev"}, 21.394536, 2.699206},
	{"count =A", "outcome", "EARLIEST", map[string]any{"operationType": "count", "compareFn": "=", "compareValue": "A"}, 3, 3},
	{"pct =A", "outcome", "EARLIEST", map[string]any{"operationType": "percentage", "compareFn": "=", "compareValue": "A"}, 42.857143, 37.5},
	{"count <>A", "outcome", "EARLIEST", map[string]any{"operationType": "count", "compareFn": "<>", "compareValue": "A"}, 4, 5},
	{"count all", "outcome", "EARLIEST", map[string]any{"operationType": "count"}, 7, 8},
	{"g recent", "g@__@k1@__@time", "MOST RECENT", map[string]any{"operationType": "avg"}, 7, 28.25},
	{"g earliest", "g@__@k1@__@time", "EARLIEST", map[string]any{"operationType": "avg"}, 3, 13.625},
	{"g count", "g@__@k1@__@time", "COUNT", map[string]any{"operationType": "avg"}, 3, 13.625},
	{"g mean", "g@__@k1@__@time", "MEAN", map[string]any{"operationType": "avg"}, 5, 20.9375},
}

// exampleValues are user i's score and outcome in the section-4 example:
// v_i = i (i + 0.5 when i%4 == 0), "A" when i%3 == 0, else "B".
func exampleValues(i int) (float64, string) {
	v := float64(i)
	if i%4 == 0 {
		v += 0.5
	}
	if i%3 == 0 {
		return v, "A"
	}
	return v, "B"
}

func logBody(ts string, attrs map[string]any, grouped ...map[string]any) map[string]any {
	metrics := map[string]any{"attributes": attrs}
	if len(grouped) > 0 {
		g := []any{}
		for _, x := range grouped {
			g = append(g, x)
		}
		metrics["groupedMetrics"] = g
	}
	return map[string]any{"value": []any{map[string]any{"timestamp": ts, "metrics": metrics}}}
}

// TestAnalyseEndToEnd replays the section-4 example: 20 users, weights
// 100/0 for users 0-9 and 0/100 after a PUT for 10-19, users 9 and 19
// never mark, 8 marks "condition not applied", 7 and 17 never log; user 0
// logs before the start, then newer and older values.
func TestAnalyseEndToEnd(t *testing.T) {
	ts := startSim(t, Options{})
	ts.must("POST", "/metric/save", map[string]any{"context": []any{"assign-prog"}, "metricUnit": []any{
		map[string]any{"metric": "score", "datatype": "continuous"},
		map[string]any{"metric": "outcome", "datatype": "categorical", "allowedValues": []any{"A", "B"}},
		map[string]any{"groupClass": "g", "allowedKeys": []any{"k1"}, "attributes": []any{
			map[string]any{"metric": "time", "datatype": "continuous"}}},
	}})
	qs := []any{}
	for _, q := range resultsQueries {
		qs = append(qs, map[string]any{"name": q.name, "query": q.query, "metric": map[string]any{"key": q.metric}, "repeatedMeasure": q.measure})
	}
	e := ts.create(expBody("results", func(m map[string]any) {
		m["conditions"] = []any{cond("c1", "control", 100, 1), cond("c2", "variant", 0, 2)}
		m["queries"] = qs
	}))
	if len(e.Queries) != len(resultsQueries) {
		t.Fatalf("create stored %d queries, want %d", len(e.Queries), len(resultsQueries))
	}
	user := func(i int) string { return fmt.Sprintf("res-u%02d", i) }
	for i := 0; i < 20; i++ {
		ts.initUser(user(i), nil, nil)
	}
	// User 0 logs before the experiment starts: it still counts.
	ts.must("POST", "/v6/log", logBody("2026-01-01T00:00:01Z", map[string]any{"score": 50}), "User-Id", user(0))
	ts.setState(e.ID, "enrolling")
	site, target := "SelectSection", "absolute_value_plot_equality"
	markRange := func(from, to int) {
		for i := from; i < to; i++ {
			if i == 9 || i == 19 {
				continue
			}
			status := "condition applied"
			if i == 8 {
				status = "condition not applied"
			}
			code := codeAt(t, ts.assign(user(i), "assign-prog"), site, target)
			ts.mark(user(i), site, target, code, e.ID, status)
		}
	}
	markRange(0, 10)
	// The PUT sends the queries back, as a client must: without them the
	// server deletes every query.
	var cur map[string]any
	ts.must("GET", "/experiments/single/"+e.ID, nil).decode(t, &cur)
	for _, c := range cur["conditions"].([]any) {
		cm := c.(map[string]any)
		cm["assignmentWeight"] = 100 - cm["assignmentWeight"].(float64)
	}
	ts.must("PUT", "/experiments/"+e.ID, cur)
	markRange(10, 20)
	for i := 0; i < 20; i++ {
		if i == 7 || i == 17 {
			continue
		}
		v, cat := exampleValues(i)
		ts.must("POST", "/v6/log", logBody("2026-02-01T00:00:00Z", map[string]any{"score": v, "outcome": cat},
			map[string]any{"groupClass": "g", "groupKey": "k1", "groupUniquifier": "try-1", "attributes": map[string]any{"time": i}}), "User-Id", user(i))
		// A later write with an earlier client timestamp, in another
		// uniquifier.
		ts.must("POST", "/v6/log", logBody("2026-01-15T00:00:00Z", map[string]any{},
			map[string]any{"groupClass": "g", "groupKey": "k1", "groupUniquifier": "try-2", "attributes": map[string]any{"time": 2*i + 1}}), "User-Id", user(i))
	}
	var rows []any
	ts.must("POST", "/v6/log", logBody("2026-03-01T00:00:00Z", map[string]any{"score": 60}), "User-Id", user(0)).decode(t, &rows)
	if len(rows) != 1 {
		t.Fatalf("newer value: %d rows answered, want 1 (updated)", len(rows))
	}
	ts.must("POST", "/v6/log", logBody("2026-02-15T00:00:00Z", map[string]any{"score": 70}), "User-Id", user(0)).decode(t, &rows)
	if len(rows) != 0 {
		t.Fatalf("older value: %d rows answered, want 0", len(rows))
	}

	var stored struct {
		Queries []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"queries"`
		Conditions []struct {
			ID   string `json:"id"`
			Code string `json:"conditionCode"`
		} `json:"conditions"`
	}
	ts.must("GET", "/experiments/single/"+e.ID, nil).decode(t, &stored)
	if len(stored.Queries) != len(resultsQueries) {
		t.Fatalf("after the PUT %d queries, want %d", len(stored.Queries), len(resultsQueries))
	}
	ids := []any{}
	for _, q := range stored.Queries {
		ids = append(ids, q.ID)
	}
	var out []struct {
		ID         string           `json:"id"`
		MainEffect []map[string]any `json:"mainEffect"`
	}
	ts.must("POST", "/query/analyse", map[string]any{"queryIds": ids}).decode(t, &out)
	code := map[string]string{}
	for _, c := range stored.Conditions {
		code[c.ID] = c.Code
	}
	for i, q := range resultsQueries {
		if out[i].ID != stored.Queries[i].ID {
			t.Fatalf("answer %d is query %s, want %s", i, out[i].ID, stored.Queries[i].ID)
		}
		got := map[string]float64{}
		for _, me := range out[i].MainEffect {
			var f float64
			switch r := me["result"].(type) {
			case string:
				f, _ = strconv.ParseFloat(r, 64)
				if q.name == "median" {
					t.Errorf("median result %q is text, want a number", r)
				}
			case float64:
				f = r
			}
			got[code[me["conditionId"].(string)]] = f
		}
		if math.Abs(got["control"]-q.control) > 1e-5 || math.Abs(got["variant"]-q.variant) > 1e-5 {
			t.Errorf("%s: control %v variant %v, want %v / %v", q.name, got["control"], got["variant"], q.control, q.variant)
		}
	}
}

func TestAnalyseEdges(t *testing.T) {
	ts := startSim(t, Options{})
	var out []any
	ts.must("POST", "/query/analyse", map[string]any{"queryIds": []any{}}).decode(t, &out)
	if len(out) != 0 {
		t.Errorf("[]: %v", out)
	}
	unknown := "00000000-0000-4000-8000-000000000001"
	ts.must("POST", "/query/analyse", map[string]any{"queryIds": []any{unknown}}).decode(t, &out)
	if m := out[0].(map[string]any); m["id"] != unknown || m["mainEffect"] != nil {
		t.Errorf("unknown id: %v", m)
	}
	if r := ts.do("POST", "/query/analyse", map[string]any{"queryIds": []any{"x"}}); r.status != 500 {
		t.Errorf("non-UUID: %d", r.status)
	}
	if r := ts.do("POST", "/query/analyse", map[string]any{"queryIds": "x"}); r.status != 400 {
		t.Errorf("bad body: %d", r.status)
	}
	// A query on a categorical metric with a continuous operation, and a
	// continuous percentage: rejected, with zero entries.
	ts.must("POST", "/metric/save", map[string]any{"context": []any{"assign-prog"}, "metricUnit": []any{
		map[string]any{"metric": "score", "datatype": "continuous"}}})
	e := ts.create(expBody("rej", func(m map[string]any) {
		m["queries"] = []any{
			map[string]any{"name": "pct", "query": map[string]any{"operationType": "percentage"}, "metric": map[string]any{"key": "score"}, "repeatedMeasure": "MEAN"},
			map[string]any{"name": "gone", "query": map[string]any{"operationType": "avg"}, "metric": map[string]any{"key": "nope"}, "repeatedMeasure": "MEAN"},
		}
	}))
	var single struct {
		Queries []struct {
			ID    string `json:"id"`
			Order int    `json:"order"`
		} `json:"queries"`
	}
	ts.must("GET", "/experiments/single/"+e.ID, nil).decode(t, &single)
	if len(single.Queries) != 1 || single.Queries[0].Order != 1 {
		t.Fatalf("create should drop the query on an unknown metric: %+v", single.Queries)
	}
	ts.must("POST", "/query/analyse", map[string]any{"queryIds": []any{single.Queries[0].ID}}).decode(t, &out)
	me := out[0].(map[string]any)["mainEffect"].([]any)
	if me[0] != "rejected" || len(me) != 3 {
		t.Errorf("continuous percentage: %v", me)
	}
	// A PUT without queries deletes them all.
	var cur map[string]any
	ts.must("GET", "/experiments/single/"+e.ID, nil).decode(t, &cur)
	delete(cur, "queries")
	ts.must("PUT", "/experiments/"+e.ID, cur)
	ts.must("GET", "/experiments/single/"+e.ID, nil).decode(t, &single)
	if len(single.Queries) != 0 {
		t.Errorf("PUT without queries kept %d", len(single.Queries))
	}
}

func TestMetricRoutes(t *testing.T) {
	ts := startSim(t, Options{})
	save := func(body map[string]any) reply { return ts.do("POST", "/metric/save", body) }
	for name, body := range map[string]map[string]any{
		"no context":   {"metricUnit": []any{map[string]any{"metric": "x", "datatype": "continuous"}}},
		"bad datatype": {"context": []any{}, "metricUnit": []any{map[string]any{"metric": "x", "datatype": "number"}}},
		"empty name":   {"context": []any{}, "metricUnit": []any{map[string]any{"metric": "", "datatype": "continuous"}}},
		"object value": {"context": []any{}, "metricUnit": []any{map[string]any{"metric": "x", "datatype": "categorical", "allowedValues": []any{map[string]any{}}}}},
		"unknown unit": {"context": []any{}, "metricUnit": []any{map[string]any{"name": "x"}}},
	} {
		if r := save(body); r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d", name, r.status)
		}
	}
	var tree []map[string]any
	save(map[string]any{"context": []any{"assign-prog", "other"}, "metricUnit": []any{
		map[string]any{"metric": "level", "datatype": "categorical", "allowedValues": []any{1, 2}},
		map[string]any{"groupClass": "quiz", "allowedKeys": []any{"q1", "q2"}, "attributes": []any{
			map[string]any{"metric": "time", "datatype": "continuous"},
			map[string]any{"metric": "done", "datatype": "categorical", "allowedValues": []any{"y", "n"}}}},
		map[string]any{"groupClass": "lone", "allowedKeys": []any{}},
	}}).decode(t, &tree)
	if len(tree) != 3 || tree[0]["allowedData"].([]any)[0] != float64(1) {
		t.Fatalf("save answer: %v", tree)
	}
	ts.must("GET", "/metric", nil).decode(t, &tree)
	if tree[0]["allowedData"].([]any)[0] != "1" {
		t.Errorf("read allowed values should be text: %v", tree[0])
	}
	quiz := tree[1]
	if quiz["metadata"].(map[string]any)["type"] != "continuous" || len(quiz["children"].([]any)) != 2 {
		t.Errorf("group tree: %v", quiz)
	}
	if lone := tree[2]; lone["metadata"].(map[string]any)["type"] != "continuous" || len(lone["children"].([]any)) != 0 {
		t.Errorf("group without keys: %v", lone)
	}
	ts.must("GET", "/metric/other", nil).decode(t, &tree)
	if len(tree) != 3 {
		t.Errorf("by context: %d roots", len(tree))
	}
	r := ts.do("GET", "/metric/none", nil)
	if m := r.object(t); r.status != 404 || m["message"] != "Metrics context not found: none" {
		t.Errorf("unknown context: %d %v", r.status, m)
	}
	ts.must("DELETE", "/metric/quiz@__@q1", nil).decode(t, &tree)
	if len(tree) != 1 || len(tree[0]["children"].([]any)) != 1 {
		t.Errorf("delete subtree answers the rest: %v", tree)
	}
	ts.must("DELETE", "/metric/level", nil).decode(t, &tree)
	if len(tree) != 0 {
		t.Errorf("delete root: %v", tree)
	}
	if r := ts.do("DELETE", "/metric/level", nil); r.status != 404 || r.object(t)["message"] != "Metric key not found: level" {
		t.Errorf("delete again: %d %s", r.status, r.body)
	}
}

func TestLogRules(t *testing.T) {
	ts := startSim(t, Options{})
	if r := ts.do("POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{"score": 1})); r.status != 400 {
		t.Errorf("no User-Id: %d", r.status)
	}
	if r := ts.do("POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{"score": 1}), "User-Id", "nobody"); r.status != 404 {
		t.Errorf("uninitialised: %d", r.status)
	}
	ts.initUser("u1", nil, nil)
	for _, bad := range []any{"", true, map[string]any{}} {
		if r := ts.do("POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{"score": bad}), "User-Id", "u1"); r.status != 400 {
			t.Errorf("value %v: %d", bad, r.status)
		}
	}
	ts.must("POST", "/metric/save", map[string]any{"context": []any{"assign-prog"}, "metricUnit": []any{
		map[string]any{"metric": "score", "datatype": "continuous"}, map[string]any{"metric": "unused", "datatype": "continuous"}}})
	var rows []any
	ts.must("POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{"score": 1}), "User-Id", "u1").decode(t, &rows)
	if len(rows) != 0 {
		t.Errorf("a metric no query uses is dropped: %v", rows)
	}
	ts.create(expBody("log", func(m map[string]any) {
		m["queries"] = []any{map[string]any{"name": "avg", "query": map[string]any{"operationType": "avg"}, "metric": map[string]any{"key": "score"}, "repeatedMeasure": "MEAN"}}
	}))
	if r := ts.do("POST", "/v6/log", logBody("yesterday", map[string]any{"score": 1}), "User-Id", "u1"); r.status != 500 {
		t.Errorf("invalid timestamp, new row: %d", r.status)
	}
	ts.must("POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{"score": 1, "unused": 2}), "User-Id", "u1").decode(t, &rows)
	if len(rows) != 1 || rows[0].(map[string]any)["data"].(map[string]any)["score"] != float64(1) {
		t.Errorf("new row: %v", rows)
	}
	ts.must("POST", "/v6/log", logBody("yesterday", map[string]any{"score": 1}), "User-Id", "u1").decode(t, &rows)
	if len(rows) != 0 {
		t.Errorf("invalid timestamp, row exists: %v", rows)
	}
	ts.must("POST", "/v6/log", map[string]any{"value": []any{}}, "User-Id", "u1").decode(t, &rows)
	if len(rows) != 0 {
		t.Errorf("nothing to store: %v", rows)
	}
}

func TestEnrollmentTotalsAndDates(t *testing.T) {
	ts := startSim(t, Options{})
	e := ts.create(expBody("dates"))
	ts.setState(e.ID, "enrolling")
	for _, u := range []string{"d1", "d2", "d3"} {
		ts.initUser(u, nil, nil)
		code := codeAt(t, ts.assign(u, "assign-prog"), "SelectSection", "absolute_value_plot_equality")
		ts.mark(u, "SelectSection", "absolute_value_plot_equality", code, e.ID, "condition applied")
	}
	var totals []map[string]any
	ts.must("POST", "/stats/enrollment", map[string]any{"experimentIds": []any{e.ID, "00000000-0000-4000-8000-000000000009"}}).decode(t, &totals)
	if totals[0]["users"] != float64(3) || totals[1]["users"] != float64(0) {
		t.Errorf("totals: %v", totals)
	}
	var days []map[string]any
	ts.must("POST", "/stats/enrollment/date", map[string]any{"experimentId": e.ID, "dateEnum": "last_seven_days", "clientOffset": 0}).decode(t, &days)
	if len(days) != 7 || days[0]["date"] != "Tue Mar 04 2025" {
		t.Fatalf("days: %d, first %v", len(days), days[0]["date"])
	}
	n := 0
	for _, c := range days[0]["stats"].(map[string]any)["conditions"].([]any) {
		for _, p := range c.(map[string]any)["partitions"].([]any) {
			n += int(p.(map[string]any)["users"].(float64))
		}
	}
	if n != 3 {
		t.Errorf("today's enrollments: %d, want 3", n)
	}
	// clientOffset shifts the day: 15 hours ahead of 10:00 UTC is tomorrow.
	ts.must("POST", "/stats/enrollment/date", map[string]any{"experimentId": e.ID, "dateEnum": "last_three_months", "clientOffset": 900}).decode(t, &days)
	if len(days) != 3 || days[0]["date"] != "Sat Mar 01 2025" || days[1]["date"] != "Sat Feb 01 2025" {
		t.Errorf("months: %v", days)
	}
	ts.must("POST", "/stats/enrollment/date", map[string]any{"experimentId": e.ID, "dateEnum": "last_seven_days", "clientOffset": 900}).decode(t, &days)
	if days[0]["date"] != "Wed Mar 05 2025" {
		t.Errorf("offset day: %v", days[0]["date"])
	}
	for name, body := range map[string]map[string]any{
		"no offset": {"experimentId": e.ID, "dateEnum": "total"},
		"bad enum":  {"experimentId": e.ID, "dateEnum": "week", "clientOffset": 0},
	} {
		if r := ts.do("POST", "/stats/enrollment/date", body); r.status != 400 {
			t.Errorf("%s: %d", name, r.status)
		}
	}
	if r := ts.do("POST", "/stats/enrollment/date", map[string]any{"experimentId": "00000000-0000-4000-8000-000000000009", "dateEnum": "total", "clientOffset": 0}); r.status != 500 {
		t.Errorf("unknown experiment: %d", r.status)
	}
}

// Metrics, queries, logs and enrollment times survive in the data file:
// a second simulator on the same file analyses the same numbers.
func TestResultsPersist(t *testing.T) {
	file := t.TempDir() + "/data.json"
	a := startSim(t, Options{DataFile: file})
	a.must("POST", "/metric/save", map[string]any{"context": []any{"assign-prog"}, "metricUnit": []any{
		map[string]any{"metric": "score", "datatype": "continuous"}, map[string]any{"metric": "outcome", "datatype": "categorical"}}})
	e := a.create(expBody("persist", func(m map[string]any) {
		m["conditions"] = []any{cond("c1", "control", 100, 1), cond("c2", "variant", 0, 2)}
		m["queries"] = []any{
			map[string]any{"name": "avg", "query": map[string]any{"operationType": "avg"}, "metric": map[string]any{"key": "score"}, "repeatedMeasure": "MEAN"},
			map[string]any{"name": "A", "query": map[string]any{"operationType": "count", "compareFn": "=", "compareValue": "1"}, "metric": map[string]any{"key": "outcome"}, "repeatedMeasure": "MEAN"},
		}
	}))
	a.setState(e.ID, "enrolling")
	for i, v := range []float64{2, 4} {
		u := fmt.Sprintf("p%d", i)
		a.initUser(u, nil, nil)
		a.mark(u, "SelectSection", "absolute_value_plot_equality", "control", e.ID, "condition applied")
		// A number logged for a categorical metric compares as text.
		a.must("POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{"score": v, "outcome": i}), "User-Id", u)
	}
	b := startSim(t, Options{DataFile: file})
	var single struct {
		Queries []struct{ ID string } `json:"queries"`
	}
	b.must("GET", "/experiments/single/"+e.ID, nil).decode(t, &single)
	var out []struct {
		MainEffect []map[string]any `json:"mainEffect"`
	}
	b.must("POST", "/query/analyse", map[string]any{"queryIds": []any{single.Queries[0].ID, single.Queries[1].ID}}).decode(t, &out)
	if r := out[0].MainEffect[0]; r["result"] != "3.0000000000000000" || r["participantsLogged"] != "2" {
		t.Errorf("avg after reload: %v", r)
	}
	if r := out[1].MainEffect[0]; r["result"] != "1" {
		t.Errorf("categorical count after reload: %v", r)
	}
	var days []map[string]any
	b.must("POST", "/stats/enrollment/date", map[string]any{"experimentId": e.ID, "dateEnum": "last_seven_days", "clientOffset": 0}).decode(t, &days)
	if c := days[0]["stats"].(map[string]any)["conditions"].([]any)[0].(map[string]any)["partitions"].([]any)[0].(map[string]any)["users"]; c != float64(2) {
		t.Errorf("enrollments today after reload: %v", c)
	}
}
