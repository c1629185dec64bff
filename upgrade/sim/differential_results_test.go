package sim

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// The metric, query, log, analysis and enrollment-stats sequences of the
// differential test (labels in brackets are the rows of
// upgrade-results-designs.md sections 1-6). Metrics are global on the
// server, so every key carries the run and scenario and each scenario
// deletes its metrics at the end.

func resultsScenarios() []scenario {
	return []scenario{
		{"metrics", scenarioMetrics},
		{"queries", scenarioQueries},
		{"logs", scenarioLogs},
		{"analyse", scenarioAnalyse},
		{"enrollstats", scenarioEnrollStats},
		{"seeded", scenarioSeeded},
	}
}

// metricKey names a metric of this run and scenario.
func (p *party) metricKey(n string) string { return fmt.Sprintf("dt_%s_%s_%s", p.run, p.scen, n) }

func (p *party) saveMetrics(label string, units ...map[string]any) answer {
	us := make([]any, 0, len(units))
	for _, u := range units {
		us = append(us, u)
	}
	return p.call(label, "POST", "/metric/save", map[string]any{"metricUnit": us, "context": []any{diffContext}}, p.own())
}

func (p *party) dropMetrics(keys ...string) {
	for _, k := range keys {
		deleteQuietly(p.hc, p.base+"/metric/"+k)
	}
}

func leaf(key, typ string, allowed ...any) map[string]any {
	m := map[string]any{"metric": key, "datatype": typ}
	if allowed != nil {
		m["allowedValues"] = allowed
	}
	return m
}

func query(name, key, measure string, q map[string]any) map[string]any {
	return map[string]any{"name": name, "query": q, "metric": map[string]any{"key": key}, "repeatedMeasure": measure}
}

func withQueries(qs ...map[string]any) expOpt {
	return func(_ *party, m map[string]any) {
		l := []any{}
		for _, q := range qs {
			l = append(l, q)
		}
		m["queries"] = l
	}
}

func (p *party) logValues(label, user, ts string, attrs map[string]any, grouped ...map[string]any) answer {
	return p.call(label, "POST", "/v6/log", logBody(ts, attrs, grouped...), as(user), values("#"))
}

func scenarioMetrics(p *party) {
	score, level, grp, lone := p.metricKey("score"), p.metricKey("level"), p.metricKey("g"), p.metricKey("lone")
	defer p.dropMetrics(score, level, grp, lone)
	p.saveMetrics("[save: answer tree]", leaf(score, "continuous"), leaf(level, "categorical", 1, 2),
		map[string]any{"groupClass": grp, "allowedKeys": []any{"k1", "k2"}, "attributes": []any{leaf("time", "continuous"), leaf("done", "categorical", "y", "n")}})
	p.call("[GET /metric: tree as read]", "GET", "/metric", nil, p.own())
	p.call("[metric of 2 contexts, by context]", "GET", "/metric/"+diffContext, nil, p.own())
	p.call("[GET /metric/:context none]", "GET", "/metric/"+p.metricKey("nowhere"), nil, values("name", "type", "message"))
	p.call("[save: context [] / unknown accepted]", "POST", "/metric/save", map[string]any{"metricUnit": []any{leaf(score, "continuous")}, "context": []any{p.metricKey("ctx")}}, values("0.context"))
	p.call("[save: metricUnit []]", "POST", "/metric/save", map[string]any{"metricUnit": []any{}, "context": []any{diffContext}}, values("#"))
	p.call("[save again: overwrite]", "POST", "/metric/save", map[string]any{"metricUnit": []any{leaf(level, "continuous")}, "context": []any{diffContext}},
		values("0.metadata.type", "0.allowedData", "0.context"))
	p.saveMetrics("[save: group w/o keys is a leaf]", map[string]any{"groupClass": lone, "allowedKeys": []any{}, "attributes": []any{}})
	for name, body := range byName(map[string]map[string]any{
		"no context":   {"metricUnit": []any{leaf(score, "continuous")}},
		"bad datatype": {"metricUnit": []any{leaf(score, "number")}, "context": []any{}},
		"empty name":   {"metricUnit": []any{leaf("", "continuous")}, "context": []any{}},
		"object value": {"metricUnit": []any{leaf(score, "categorical", map[string]any{})}, "context": []any{}},
	}) {
		p.call("[save: bad bodies] "+name, "POST", "/metric/save", body, values("name", "errorCode"))
	}
	p.call("[DELETE subtree]", "DELETE", "/metric/"+grp+"@__@k1", nil, values("#", "0.key", "0.children.0.key"))
	p.call("[DELETE root]", "DELETE", "/metric/"+lone, nil, values("#"))
	p.call("[DELETE metric again]", "DELETE", "/metric/"+lone, nil, values("message", "errorCode"))
	id := p.create("create with a query", p.exp("m", withQueries(query("avg", score, "MEAN", map[string]any{"operationType": "avg"}))), "#queries").str("id")
	p.made = append(p.made, id)
	p.call("DELETE the query's metric", "DELETE", "/metric/"+score, nil, values("#"))
	p.call("[DELETE metric drops its queries]", "GET", "/experiments/single/"+id, nil, values("#queries"))
}

func scenarioQueries(p *party) {
	score, outcome := p.metricKey("score"), p.metricKey("outcome")
	defer p.dropMetrics(score, outcome)
	p.saveMetrics("save", leaf(score, "continuous"), leaf(outcome, "categorical", "A", "B"))
	qs := withQueries(
		query("avg", score, "MEAN", map[string]any{"operationType": "avg"}),
		query("gone", p.metricKey("nope"), "MEAN", map[string]any{"operationType": "avg"}),
		query("pct", outcome, "EARLIEST", map[string]any{"operationType": "percentage", "compareFn": "=", "compareValue": "A"}),
	)
	c := p.create("[create: queries stored]", p.exp("q", qs), "#queries", "queries.0.name", "queries.0.order", "queries.1.order", "queries.1.name")
	id := c.str("id")
	p.made = append(p.made, id)
	p.call("[create: queries element]", "GET", "/experiments/single/"+id, nil, values("#queries", "queries.0.repeatedMeasure", "queries.0.metric.key"))
	p.call("[GET /experiments: query keys]", "GET", "/experiments", nil, noShape())
	p.call("[paginated: queries key]", "POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 5,
		"searchParams": map[string]any{"key": "name", "string": p.run + " queries"}}, values("total"))
	for name, q := range byName(map[string]map[string]any{
		"no name":   {"query": map[string]any{}, "metric": map[string]any{"key": score}, "repeatedMeasure": "MEAN"},
		"bad enum":  {"name": "x", "query": map[string]any{}, "metric": map[string]any{"key": score}, "repeatedMeasure": "LAST"},
		"no metric": {"name": "x", "query": map[string]any{}, "repeatedMeasure": "MEAN"},
	}) {
		p.call("[queries: bad bodies] "+name, "POST", "/experiments", p.exp("bad "+name, withQueries(q)), values("name", "errorCode"))
	}
	p.call("[query: op, id, order not checked]", "POST", "/experiments", p.exp("lax", withQueries(map[string]any{
		"id": "not-a-uuid", "name": "x", "query": map[string]any{"operationType": "nonsense"}, "metric": map[string]any{"key": score}, "repeatedMeasure": "MEAN", "order": "first"})),
		values("#queries", "queries.0.query.operationType"))
	g := p.call("GET", "GET", "/experiments/single/"+id, nil)
	qid := g.str("queries.0.id")
	put := p.call("[PUT: ids kept, unknown metric]", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
		m["queries"] = append(m["queries"].([]any), query("late", p.metricKey("nope"), "MEAN", map[string]any{"operationType": "avg"}))
		m["queries"].([]any)[2].(map[string]any)["id"] = p.id("q/late")
	}), values("#queries"))
	g = p.call("GET after PUT", "GET", "/experiments/single/"+id, nil, values("#queries"))
	p.fact("PUT keeps the query id", g.str("queries.0.id") == qid)
	p.fact("PUT stores an unknown metric as null", strings.Contains(string(g.raw), `"metric":null`))
	_ = put
	p.call("[PUT non-uuid query id]", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
		m["queries"].([]any)[0].(map[string]any)["id"] = "not-a-uuid"
	}), values("name", "errorCode"))
	p.call("rename with queries", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) { m["description"] = "renamed" }), values("#queries"))
	p.call("GET after rename", "GET", "/experiments/single/"+id, nil, values("#queries"))
	p.call("[PUT w/o queries deletes them]", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) { delete(m, "queries") }), values("#queries"))
	p.call("GET after PUT w/o queries", "GET", "/experiments/single/"+id, nil, values("#queries"))
}

func scenarioLogs(p *party) {
	score, unused := p.metricKey("score"), p.metricKey("unused")
	defer p.dropMetrics(score, unused)
	p.saveMetrics("save", leaf(score, "continuous"), leaf(unused, "continuous"))
	u := p.user("u1")
	p.call("[log w/o User-Id]", "POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{score: 1}), values("message"))
	p.call("[log uninitialised user]", "POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{score: 1}), as(p.user("nobody")), values("type"))
	p.initUser("init", u, nil)
	p.logValues("[log: metric w/o query dropped]", u, "2026-01-01T00:00:00Z", map[string]any{score: 1})
	id := p.create("create", p.exp("l", withQueries(query("avg", score, "MEAN", map[string]any{"operationType": "avg"})))).str("id")
	p.made = append(p.made, id)
	p.call("[log: invalid ts, new row]", "POST", "/v6/log", logBody("yesterday", map[string]any{score: 1}), as(u), values("errorCode"))
	p.logValues("[POST /v6/log]", u, "2026-01-01T00:00:00Z", map[string]any{score: 1, unused: 2})
	p.logValues("[log: newer ts updates the row]", u, "2026-01-02T00:00:00Z", map[string]any{score: 2})
	p.logValues("[log: older ts ignored]", u, "2025-12-31T00:00:00Z", map[string]any{score: 3})
	p.logValues("[log: invalid ts, row exists]", u, "yesterday", map[string]any{score: 4})
	p.call("[log: nothing to store]", "POST", "/v6/log", map[string]any{"value": []any{}}, as(u), values("#"))
	for name, v := range byName(map[string]any{"empty string": "", "bool": true, "object": map[string]any{}}) {
		p.call("[log: bad bodies] "+name, "POST", "/v6/log", logBody("2026-01-01T00:00:00Z", map[string]any{score: v}), as(u), values("name", "errorCode"))
	}
	p.state("archive", id, "archived")
	p.logValues("[log after archive dropped]", u, "2026-02-01T00:00:00Z", map[string]any{score: 5})
}

// scenarioAnalyse is the end-to-end example of section 4 (see
// TestAnalyseEndToEnd, which pins the server's numbers on the simulator).
func scenarioAnalyse(p *party) {
	score, outcome, grp := p.metricKey("score"), p.metricKey("outcome"), p.metricKey("g")
	defer p.dropMetrics(score, outcome, grp)
	p.saveMetrics("save", leaf(score, "continuous"), leaf(outcome, "categorical", "A", "B"),
		map[string]any{"groupClass": grp, "allowedKeys": []any{"k1"}, "attributes": []any{leaf("time", "continuous")}})
	var qs []map[string]any
	for _, q := range resultsQueries {
		key := score
		switch q.metric {
		case "outcome":
			key = outcome
		case "g@__@k1@__@time":
			key = grp + "@__@k1@__@time"
		}
		qs = append(qs, query(q.name, key, q.measure, q.query))
	}
	qs = append(qs, query("text in a number", p.metricKey("textual"), "MEAN", map[string]any{"operationType": "avg"}))
	c := p.create("create", p.exp("a", withQueries(qs...)), "#queries")
	id := c.str("id")
	p.made = append(p.made, id)
	users := make([]string, 20)
	for i := range users {
		users[i] = p.user(fmt.Sprintf("a%02d", i))
		p.initUser(fmt.Sprintf("init %d", i), users[i], nil)
	}
	p.logValues("[pre-start log stored]", users[0], "2026-01-01T00:00:01Z", map[string]any{score: 50})
	p.state("start", id, "enrolling")
	mark := func(from, to int) {
		for i := from; i < to; i++ {
			if i == 9 || i == 19 {
				continue
			}
			status := "condition applied"
			if i == 8 {
				status = "condition not applied"
			}
			a := p.call(fmt.Sprintf("assign %d", i), "POST", "/v6/assign", map[string]any{"context": diffContext}, as(users[i]), noShape())
			code := ""
			for _, el := range a.body.([]any) {
				if t, _ := lookup(el, "target").(string); t == p.target("t1") {
					code, _ = lookup(el, "assignedCondition.0.conditionCode").(string)
				}
			}
			p.mark(fmt.Sprintf("mark %d", i), users[i], p.markData("t1", code, id), status, "condition")
		}
	}
	mark(0, 10)
	g := p.call("GET", "GET", "/experiments/single/"+id, nil)
	p.call("[assign follows the weights] PUT 0/100", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
		for _, c := range m["conditions"].([]any) {
			cm := c.(map[string]any)
			cm["assignmentWeight"] = 100 - cm["assignmentWeight"].(float64)
		}
	}), values("#queries"))
	mark(10, 20)
	for i := 0; i < 20; i++ {
		if i == 7 || i == 17 {
			continue
		}
		v, cat := exampleValues(i)
		p.logValues(fmt.Sprintf("log %d", i), users[i], "2026-02-01T00:00:00Z", map[string]any{score: v, outcome: cat},
			map[string]any{"groupClass": grp, "groupKey": "k1", "groupUniquifier": "try-1", "attributes": map[string]any{"time": i}})
		p.logValues(fmt.Sprintf("log %d again", i), users[i], "2026-01-15T00:00:00Z", map[string]any{},
			map[string]any{"groupClass": grp, "groupKey": "k1", "groupUniquifier": "try-2", "attributes": map[string]any{"time": 2*i + 1}})
	}
	p.logValues("user 0 newer", users[0], "2026-03-01T00:00:00Z", map[string]any{score: 60})
	p.logValues("user 0 older", users[0], "2026-02-15T00:00:00Z", map[string]any{score: 70})
	g = p.call("GET queries", "GET", "/experiments/single/"+id, nil, values("#queries"))
	ids := []any{}
	for i := range resultsQueries {
		ids = append(ids, g.str(fmt.Sprintf("queries.%d.id", i)))
	}
	vals := []string{"#"}
	for i := range resultsQueries {
		for j := 0; j < 2; j++ {
			vals = append(vals, fmt.Sprintf("%d.mainEffect.%d.result", i, j), fmt.Sprintf("%d.mainEffect.%d.participantsLogged", i, j))
		}
	}
	p.call("[analyse continuous ops] [analyse categorical ops] [analyse repeated measures]", "POST", "/query/analyse", map[string]any{"queryIds": ids}, values(vals...))
	p.call("[analyse: answer order = queryIds]", "POST", "/query/analyse", map[string]any{"queryIds": []any{ids[1], ids[0]}}, values("0.mainEffect.0.result", "1.mainEffect.0.result"))
	p.call("[analyse []]", "POST", "/query/analyse", map[string]any{"queryIds": []any{}}, values("#"))
	p.call("[analyse unknown id]", "POST", "/query/analyse", map[string]any{"queryIds": []any{p.id("nobody")}}, values("#", "0.interactionEffect"))
	p.call("[analyse: bad requests] non-UUID", "POST", "/query/analyse", map[string]any{"queryIds": []any{"x"}}, values("errorCode"))
	p.call("[analyse: bad requests] not a list", "POST", "/query/analyse", map[string]any{"queryIds": "x"}, values("errorCode"))
	p.call("[analyse: allowedValues not enforced]", "POST", "/v6/log", logBody("2026-04-01T00:00:00Z", map[string]any{outcome: "C"}), as(users[1]), values("#"))
	p.stats("stats", id)
	p.call("[POST /stats/enrollment]", "POST", "/stats/enrollment", map[string]any{"experimentIds": []any{id, p.id("nobody")}}, values("0.users", "0.groups", "1.users", "1.groups"))
}

func scenarioEnrollStats(p *party) {
	// The experiment's id is sent: a random assignment draws from
	// seedrandom(experimentId + "_" + user), so both sides draw alike.
	id := p.running(p.exp("s", weights(50, 50), set("id", p.id("s"))))
	p.made = append(p.made, id)
	u1, u2 := p.twoUsers()
	for _, u := range []string{u1, u2} {
		a := p.assignCodes("assign", u)
		code := ""
		for _, el := range a.body.([]any) {
			if t, _ := lookup(el, "target").(string); t == p.target("t1") {
				code, _ = lookup(el, "assignedCondition.0.conditionCode").(string)
			}
		}
		p.mark("mark", u, p.markData("t1", code, id), "condition applied")
	}
	for _, r := range []string{"last_seven_days", "last_three_months", "total"} {
		p.call("[stats date: entries per range] "+r, "POST", "/stats/enrollment/date", map[string]any{"experimentId": id, "dateEnum": r, "clientOffset": 0}, values("#"))
	}
	a := p.call("[stats date: newest entry counts]", "POST", "/stats/enrollment/date", map[string]any{"experimentId": id, "dateEnum": "last_seven_days", "clientOffset": 0}, noShape())
	n := 0
	if list, ok := a.body.([]any); ok && len(list) > 0 {
		for _, c := range lookup(list[0], "stats.conditions").([]any) {
			for _, pt := range lookup(c, "partitions").([]any) {
				u, _ := lookup(pt, "users").(float64)
				n += int(u)
			}
		}
	}
	p.fact("[stats date: newest entry counts] users", n)
	p.call("[stats: errors] no clientOffset", "POST", "/stats/enrollment/date", map[string]any{"experimentId": id, "dateEnum": "total"}, values("errorCode"))
	p.call("[stats: errors] bad enum", "POST", "/stats/enrollment/date", map[string]any{"experimentId": id, "dateEnum": "week", "clientOffset": 0}, values("errorCode"))
	p.call("[stats: errors] unknown experiment", "POST", "/stats/enrollment/date", map[string]any{"experimentId": p.id("nobody"), "dateEnum": "total", "clientOffset": 0}, values("name", "errorCode"))
}

// scenarioSeeded pins the draws of section 6: the experiment keeps the id
// it is sent, so the same users draw the same conditions on both sides.
func scenarioSeeded(p *party) {
	for _, split := range []struct {
		label string
		c     float64
	}{{"[seeded assignment 50/50]", 50}, {"[seeded assignment 30/70]", 30}} {
		name := fmt.Sprintf("seed%v", split.c)
		body := p.exp(name, weights(split.c, 100-split.c), onTarget(name))
		body["id"] = p.id(name)
		c := p.create("[create keeps the sent id] "+name, body)
		id := c.str("id")
		p.made = append(p.made, id)
		p.fact("[create keeps the sent id] "+name+" kept", id == p.id(name))
		p.state("start", id, "enrolling")
		codes := ""
		for i := 0; i < 8; i++ {
			u := p.user(fmt.Sprintf("%s-u%d", name, i))
			p.initUser("init", u, nil)
			a := p.call("assign", "POST", "/v6/assign", map[string]any{"context": diffContext}, as(u), noShape())
			codes += strings.Join(p.ownCodes(a), ",") + ";"
		}
		p.fact(split.label, codes)
	}
}

// The results sequences also run on the simulator alone (CI has no real
// server): every probe answers, and the facts whose server values
// upgrade-results-designs.md records come out as recorded.
func TestResultsProbesOnSimulator(t *testing.T) {
	srv, err := Start(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hc := &http.Client{}
	for _, sc := range resultsScenarios() {
		p := &party{name: "sim", base: srv.URL(), hc: hc, run: "ci", scen: sc.name, tb: t}
		sc.run(p)
		p.cleanup()
		for _, o := range p.obs {
			if o.status >= 500 && !expects5xx(o.label) {
				t.Errorf("%s / %s: status %d", sc.name, o.label, o.status)
			}
			// Every yes/no fact of these sequences is a rule the server
			// showed to hold.
			if b, ok := o.body.(bool); ok && o.kind == "fact" && !b {
				t.Errorf("%s / %s: false on the simulator", sc.name, o.label)
			}
		}
	}
}

func expects5xx(label string) bool {
	for _, s := range []string{"invalid ts, new row", "non-uuid query id", "non-UUID", "unknown experiment"} {
		if strings.Contains(label, s) {
			return true
		}
	}
	return false
}
