package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The request sequences of the differential test. Each runs unchanged on
// both sides; values that are random on the server (ids, 50/50 draws) are
// compared by shape only, deterministic ones (weights 100/0, statuses,
// counts, state names) by value too.

const diffContext = "assign-prog"

type expOpt func(p *party, m map[string]any)

// exp builds a create body the way the client writes one: UUIDs for the
// conditions and decision points, 6.5 segment arrays.
func (p *party) exp(name string, opts ...expOpt) map[string]any {
	m := map[string]any{
		"name":                diffPrefix + " " + p.run + " " + p.scen + " " + name,
		"description":         "differential probe",
		"context":             []any{diffContext},
		"state":               "inactive",
		"consistencyRule":     "individual",
		"assignmentUnit":      "individual",
		"postExperimentRule":  "continue",
		"tags":                []any{"difftest"},
		"filterMode":          "includeAll",
		"type":                "Simple",
		"revertTo":            nil,
		"assignmentAlgorithm": "random",
		"conditions": []any{
			map[string]any{"id": p.id(name + "/c1"), "conditionCode": "control", "assignmentWeight": 100, "order": 1},
			map[string]any{"id": p.id(name + "/c2"), "conditionCode": "variant", "assignmentWeight": 0, "order": 2},
		},
		"partitions": []any{
			map[string]any{"id": p.id(name + "/p1"), "site": "SelectSection", "target": p.target("t1"), "order": 1, "excludeIfReached": false},
		},
		"conditionPayloads":          []any{},
		"experimentSegmentInclusion": segment(nil, nil),
		"experimentSegmentExclusion": segment(nil, nil),
	}
	for _, f := range opts {
		f(p, m)
	}
	return m
}

func weights(a, b float64) expOpt {
	return func(_ *party, m map[string]any) {
		cs := m["conditions"].([]any)
		cs[0].(map[string]any)["assignmentWeight"] = a
		cs[1].(map[string]any)["assignmentWeight"] = b
	}
}

func excludeIfReached(_ *party, m map[string]any) {
	for _, d := range m["partitions"].([]any) {
		d.(map[string]any)["excludeIfReached"] = true
	}
}

func onTarget(t string) expOpt {
	return func(p *party, m map[string]any) {
		for _, d := range m["partitions"].([]any) {
			d.(map[string]any)["target"] = p.target(t)
		}
	}
}

func groupUnit(consistency string) expOpt {
	return func(_ *party, m map[string]any) {
		m["assignmentUnit"] = "group"
		m["consistencyRule"] = consistency
		m["group"] = "schoolId"
	}
}

func set(key string, v any) expOpt { return func(_ *party, m map[string]any) { m[key] = v } }

// edit turns an experiment answer into a PUT body with changes.
func edit(a answer, f func(m map[string]any)) map[string]any {
	b, _ := json.Marshal(a.body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m == nil {
		m = map[string]any{}
	}
	f(m)
	return m
}

func (p *party) create(label string, body map[string]any, vals ...string) answer {
	return p.call(label, "POST", "/experiments", body, values(vals...))
}

func (p *party) state(label, id, st string) answer {
	return p.call(label, "POST", "/experiments/state", map[string]any{"experimentId": id, "state": st}, values("state"))
}

func (p *party) initUser(label, user string, body map[string]any) answer {
	if body == nil {
		body = map[string]any{}
	}
	return p.call(label, "POST", "/v6/init", body, as(user))
}

// assignCodes asks for a user's conditions and compares the codes given at
// each decision point of the probe's target(s).
func (p *party) assignCodes(label, user string) answer {
	a := p.call(label, "POST", "/v6/assign", map[string]any{"context": diffContext}, as(user), noShape())
	p.fact(label+": codes", p.ownCodes(a))
	return a
}

// ownCodes lists target=code for this scenario's decision points only (a
// real server may run other experiments in the context).
func (p *party) ownCodes(a answer) []string {
	var out []string
	list, _ := a.body.([]any)
	for _, el := range list {
		t, _ := lookup(el, "target").(string)
		if !strings.HasPrefix(t, fmt.Sprintf("dt-%s-%s-", p.run, p.scen)) {
			continue
		}
		code, _ := lookup(el, "assignedCondition.0.conditionCode").(string)
		out = append(out, strings.TrimPrefix(t, fmt.Sprintf("dt-%s-%s-", p.run, p.scen))+"="+code)
	}
	sort.Strings(out)
	return out
}

func (p *party) mark(label, user string, data map[string]any, status string, vals ...string) answer {
	body := map[string]any{"data": data}
	if status != "" {
		body["status"] = status
	}
	return p.call(label, "POST", "/v6/mark", body, as(user), values(vals...))
}

func (p *party) markData(target, code, expID string) map[string]any {
	d := map[string]any{"site": "SelectSection", "target": p.target(target)}
	ac := map[string]any{}
	if code != "" {
		ac["conditionCode"] = code
	}
	if expID != "" {
		ac["experimentId"] = expID
	}
	if len(ac) > 0 {
		d["assignedCondition"] = ac
	}
	return d
}

func (p *party) stats(label, id string) answer {
	return p.call(label, "POST", "/stats/enrollment/detail", map[string]any{"experimentId": id},
		values("users", "groups", "usersExcluded", "groupsExcluded", "conditions.0.users", "conditions.1.users",
			"conditions.0.groups", "conditions.1.groups", "conditions.0.partitions.0.users", "conditions.1.partitions.0.users"))
}

// running creates an experiment and starts it; it returns the id.
func (p *party) running(body map[string]any, vals ...string) string {
	id := p.create("create", body, vals...).str("id")
	p.state("start", id, "enrolling")
	return id
}

// twoUsers initialises users u1 and u2 without groups.
func (p *party) twoUsers() (string, string) {
	u1, u2 := p.user("u1"), p.user("u2")
	p.initUser("init u1", u1, nil)
	p.initUser("init u2", u2, nil)
	return u1, u2
}

func condID(a answer, i int) string { return a.str(fmt.Sprintf("conditions.%d.id", i)) }

func diffScenarios() []scenario {
	return []scenario{
		{"root", func(p *party) {
			p.call("GET /api", "GET", "", nil, values("version"))
			p.call("context metadata", "GET", "/experiments/contextMetaData", nil, values(""))
		}},
		{"crud", scenarioCRUD},
		{"rules", scenarioPostRule},
		{"errors", scenarioErrors},
		{"init", scenarioInit},
		{"markcheck", scenarioMarkChecks},
		{"payloads", scenarioPayloads},
		{"complete", scenarioUnmarkedAfterComplete},
		{"reweight", scenarioReweight},
		{"eir", scenarioExcludeIfReached},
		{"prior", scenarioMarkedBeforeExists},
		{"restart", scenarioRestart},
		{"marks", scenarioMarkStatuses},
		{"late", scenarioMarkAfterComplete},
		{"group", scenarioGroup},
		{"weights", scenarioWeights},
		{"ecc", scenarioEnrollmentCompleteCondition},
		{"shared", scenarioShared},
		{"pages", scenarioPages},
		{"segments", scenarioSegments},
		{"lists", scenarioLists},
		{"client", scenarioClient},
	}
}

func scenarioCRUD(p *party) {
	c := p.create("create", p.exp("crud"), "name", "state", "postExperimentRule", "#conditions", "#partitions",
		"conditions.0.conditionCode", "conditions.0.order", "partitions.0.order", "partitions.0.site")
	id := c.str("id")
	p.fact("create replaces condition ids", c.str("conditions.0.id") != p.id("crud/c1"))
	p.call("GET single", "GET", "/experiments/single/"+id, nil, values("state", "name"))
	p.call("GET names", "GET", "/experiments/names", nil)
	p.call("GET list", "GET", "/experiments", nil)
	p.call("paginated", "POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 5,
		"searchParams": map[string]any{"key": "name", "string": p.run + " crud"},
		"sortParams":   map[string]any{"key": "name", "sortAs": "ASC"}}, values("total", "#nodes"))
	p.state("start", id, "enrolling")
	g := p.call("GET single running", "GET", "/experiments/single/"+id, nil, values("state", "stateTimeLogs.0.fromState", "stateTimeLogs.0.toState"))
	p.call("PUT", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) { m["description"] = "changed" }),
		values("description", "state", "postExperimentRule"))
	p.state("pause", id, "enrollmentComplete")
	p.state("complete", id, "cancelled")
	p.call("DELETE", "DELETE", "/experiments/"+id, nil, values("#", "0.state", "0.name"))
	p.call("GET deleted", "GET", "/experiments/single/"+id, nil, values("name", "type", "errorCode"))
}

func scenarioPostRule(p *party) {
	body := p.exp("rules", set("postExperimentRule", "assign"), weights(50, 50))
	body["revertTo"] = p.id("rules/c2")
	c := p.create("create with assign", body, "postExperimentRule")
	id := c.str("id")
	p.fact("revertTo is the id sent", c.str("revertTo") == p.id("rules/c2"))
	p.fact("revertTo names a condition", c.str("revertTo") == condID(c, 0) || c.str("revertTo") == condID(c, 1))
	g := p.call("GET single", "GET", "/experiments/single/"+id, nil, values("postExperimentRule"))
	put := p.call("PUT rule", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
		m["postExperimentRule"] = "assign"
		m["revertTo"] = condID(g, 1)
	}), values("postExperimentRule"))
	p.fact("PUT revertTo names the variant", put.str("revertTo") == condID(g, 1))
	g = p.call("GET after PUT", "GET", "/experiments/single/"+id, nil, values("postExperimentRule"))
	p.fact("stored revertTo names the variant", g.str("revertTo") == condID(g, 1))
	p.call("PUT without conditionPayloads", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
		delete(m, "conditionPayloads")
	}), values("name"))
	p.call("PUT unknown id", "PUT", "/experiments/"+p.id("nobody"), edit(g, func(m map[string]any) {
		m["id"] = p.id("nobody")
	}), values("name"))
}

func scenarioErrors(p *party) {
	p.call("GET single non-UUID", "GET", "/experiments/single/xyz", nil, values("name", "type", "errorCode"))
	p.call("GET single unknown", "GET", "/experiments/single/"+p.id("nobody"), nil, values("name", "type", "errorCode"))
	p.call("stats non-UUID", "POST", "/stats/enrollment/detail", map[string]any{"experimentId": "xyz"}, values("name", "type", "errorCode"))
	p.call("stats unknown", "POST", "/stats/enrollment/detail", map[string]any{"experimentId": p.id("nobody")}, values("name", "errorCode"))
	p.call("state unknown", "POST", "/experiments/state", map[string]any{"experimentId": p.id("nobody"), "state": "enrolling"}, values("name", "errorCode"))
	p.call("state bad value", "POST", "/experiments/state", map[string]any{"experimentId": p.id("nobody"), "state": "nonsense"}, values("name", "type", "errorCode"))
	p.call("DELETE unknown", "DELETE", "/experiments/"+p.id("nobody"), nil, values("name", "type", "errorCode"))
	p.call("DELETE non-UUID", "DELETE", "/experiments/xyz", nil, values("name", "type", "errorCode"))
	p.call("create without name", "POST", "/experiments", p.exp("bad", set("name", nil)), values("name", "type", "errorCode", "message"))
	p.call("create unknown context", "POST", "/experiments", p.exp("bad", set("context", []any{"no-such-context"})), values("errorCode"))
	p.call("create bad weight type", "POST", "/experiments", p.exp("bad", func(_ *party, m map[string]any) {
		m["conditions"].([]any)[0].(map[string]any)["assignmentWeight"] = "x"
	}), values("name", "errorCode"))
	p.call("unknown route", "GET", "/nothing-here", nil)
	p.call("init without User-Id", "POST", "/v6/init", map[string]any{}, values("name", "type", "errorCode"))
	p.call("assign without User-Id", "POST", "/v6/assign", map[string]any{"context": diffContext}, values("name", "type", "errorCode"))
	p.call("assign unknown user", "POST", "/v6/assign", map[string]any{"context": diffContext}, as(p.user("ghost")), values("name", "type", "errorCode"))
	p.call("mark unknown user", "POST", "/v6/mark", map[string]any{"data": p.markData("t1", "", "")}, as(p.user("ghost")), values("name", "type", "errorCode"))
	u := p.user("u1")
	p.initUser("init", u, nil)
	p.call("assign unknown context", "POST", "/v6/assign", map[string]any{"context": "no-such-context"}, as(u), values("name", "type", "errorCode", "message"))
	p.call("assign without context", "POST", "/v6/assign", map[string]any{}, as(u), values("name", "type", "errorCode"))
}

func scenarioInit(p *party) {
	u := p.user("u1")
	p.initUser("init groups", u, map[string]any{"group": map[string]any{"schoolId": []any{"s1"}}, "workingGroup": map[string]any{"schoolId": "s1"}})
	p.call("re-init working group outside the group", "POST", "/v6/init", map[string]any{"workingGroup": map[string]any{"schoolId": "s9"}}, as(u), values("workingGroup", "group"))
	p.call("re-init nothing", "POST", "/v6/init", map[string]any{}, as(u), values("workingGroup", "group"))
	p.call("init unknown key", "POST", "/v6/init", map[string]any{"x": 1}, as(u), values("name", "type", "errorCode"))
	p.initUser("init bare", p.user("u2"), nil)
}

func scenarioMarkChecks(p *party) {
	u := p.user("u1")
	p.initUser("init", u, nil)
	p.call("mark without target", "POST", "/v6/mark", map[string]any{"data": map[string]any{"site": "SelectSection"}}, as(u), values("name", "type", "errorCode"))
	p.call("mark without site", "POST", "/v6/mark", map[string]any{"data": map[string]any{"target": p.target("t1")}}, as(u), values("name", "type", "errorCode"))
	p.call("mark bad status", "POST", "/v6/mark", map[string]any{"data": p.markData("t1", "", ""), "status": "nonsense"}, as(u), values("name", "errorCode"))
	p.mark("mark nowhere", u, p.markData("t0", "control", ""), "condition applied", "site", "condition", "experimentId")
	c := p.create("create", p.exp("mc"))
	id := c.str("id")
	p.mark("mark inactive, foreign experiment id", u, p.markData("t1", "control", p.id("foreign")), "condition applied", "name", "type", "errorCode")
	p.mark("mark inactive, unknown code", u, p.markData("t1", "nonsense", id), "condition applied", "name", "type", "errorCode")
	p.mark("mark inactive", u, p.markData("t1", "control", id), "condition applied", "condition")
	p.state("start", id, "enrolling")
	p.mark("mark running, foreign experiment id", u, p.markData("t1", "control", p.id("foreign")), "condition applied", "name", "type", "errorCode")
	p.mark("mark running, unknown code", u, p.markData("t1", "nonsense", ""), "condition applied", "name", "type", "errorCode")
}

func scenarioPayloads(p *party) {
	body := p.exp("pay", weights(0, 100), func(p *party, m map[string]any) {
		m["partitions"] = append(m["partitions"].([]any), map[string]any{"id": p.id("pay/p2"), "site": "SelectSection",
			"target": p.target("t2"), "order": 2, "excludeIfReached": false})
		m["conditionPayloads"] = []any{
			map[string]any{"id": p.id("pay/cp1"), "payload": map[string]any{"type": "string", "value": "at-dp1"},
				"parentCondition": p.id("pay/c2"), "decisionPoint": p.id("pay/p1")},
			map[string]any{"id": p.id("pay/cp2"), "payload": map[string]any{"type": "string", "value": "everywhere"},
				"parentCondition": p.id("pay/c2")},
		}
	})
	c := p.create("create", body, "#conditionPayloads")
	id := c.str("id")
	p.state("start", id, "enrolling")
	u := p.user("u1")
	p.initUser("init", u, nil)
	a := p.assignCodes("assign", u)
	var pays []string
	list, _ := a.body.([]any)
	for _, el := range list {
		t, _ := lookup(el, "target").(string)
		if strings.HasPrefix(t, "dt-"+p.run) {
			pays = append(pays, strings.TrimPrefix(t, fmt.Sprintf("dt-%s-%s-", p.run, p.scen))+"="+render(lookup(el, "assignedCondition.0.payload")))
		}
	}
	sort.Strings(pays)
	p.fact("payloads", pays)
}

func scenarioUnmarkedAfterComplete(p *party) {
	id := p.running(p.exp("cmp"))
	u1, u2 := p.twoUsers()
	p.assignCodes("u1 assign running", u1)
	p.assignCodes("u2 assign running", u2)
	p.mark("u2 mark", u2, p.markData("t1", "control", id), "condition applied")
	p.state("pause", id, "enrollmentComplete")
	p.assignCodes("u1 assign (continue)", u1)
	p.assignCodes("u2 assign (continue)", u2)
	g := p.call("GET", "GET", "/experiments/single/"+id, nil, values("state"))
	p.call("PUT assign variant", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
		m["postExperimentRule"] = "assign"
		m["revertTo"] = condID(g, 1)
	}), values("postExperimentRule", "state"))
	p.assignCodes("u1 assign (assign)", u1)
	p.assignCodes("u2 assign (assign)", u2)
	p.stats("stats", id)
}

func scenarioReweight(p *party) {
	id := p.running(p.exp("rw", weights(0, 100)))
	u1, u2 := p.twoUsers()
	p.assignCodes("u1 assign", u1)
	p.assignCodes("u2 assign", u2)
	p.mark("u2 mark", u2, p.markData("t1", "variant", id), "condition applied")
	g := p.call("GET", "GET", "/experiments/single/"+id, nil)
	p.call("PUT 100/0", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
		cs := m["conditions"].([]any)
		cs[0].(map[string]any)["assignmentWeight"] = 100
		cs[1].(map[string]any)["assignmentWeight"] = 0
	}), values("conditions.0.assignmentWeight"))
	p.assignCodes("u1 assign after reweight", u1)
	p.assignCodes("u2 assign after reweight", u2)
	p.stats("stats", id)
}

func scenarioExcludeIfReached(p *party) {
	c := p.create("create", p.exp("eir", excludeIfReached), "partitions.0.excludeIfReached")
	id := c.str("id")
	u1, u2 := p.twoUsers()
	p.assignCodes("u1 assign inactive", u1)
	m := p.mark("u2 mark inactive", u2, p.markData("t1", "", ""), "condition applied")
	p.fact("a mark names an inactive experiment", m.str("experimentId") == id)
	p.state("start", id, "enrolling")
	p.assignCodes("u1 assign running", u1)
	p.assignCodes("u2 assign running", u2)
	p.stats("stats", id)
}

func scenarioMarkedBeforeExists(p *party) {
	u1, u2 := p.twoUsers()
	p.mark("u1 mark before", u1, p.markData("t1", "", ""), "condition applied", "experimentId", "condition", "target")
	id := p.running(p.exp("pr", excludeIfReached))
	p.assignCodes("u1 assign", u1)
	p.assignCodes("u2 assign", u2)
	p.stats("stats", id)
}

func scenarioRestart(p *party) {
	c := p.create("create", p.exp("rs", excludeIfReached))
	id := c.str("id")
	c2 := p.create("create plain", p.exp("rs2", onTarget("t2")))
	id2 := c2.str("id")
	u1 := p.user("u1")
	p.initUser("init u1", u1, nil)
	p.state("start", id, "enrolling")
	p.state("start plain", id2, "enrolling")
	p.assignCodes("u1 assign", u1)
	p.mark("u1 mark", u1, p.markData("t1", "control", id), "condition applied")
	p.mark("u1 mark plain", u1, p.markData("t2", "control", id2), "condition applied")
	p.state("stop", id, "inactive")
	p.state("stop plain", id2, "inactive")
	p.state("restart", id, "enrolling")
	p.state("restart plain", id2, "enrolling")
	p.assignCodes("u1 assign after restart", u1)
	p.stats("stats", id)
	p.stats("stats plain", id2)
}

func scenarioMarkStatuses(p *party) {
	id := p.running(p.exp("ms", weights(0, 100)))
	cases := []struct {
		n      string
		data   map[string]any
		status string
	}{
		{"applied, no condition", p.markData("t1", "", ""), "condition applied"},
		{"no condition assigned", p.markData("t1", "", ""), "no condition assigned"},
		{"no status", p.markData("t1", "variant", ""), ""},
		{"applied, other code", p.markData("t1", "control", id), "condition applied"},
		{"not applied", p.markData("t1", "variant", id), "condition not applied"},
	}
	for i, tc := range cases {
		u := p.user(fmt.Sprintf("u%d", i))
		p.initUser("init "+tc.n, u, nil)
		p.mark("mark "+tc.n, u, tc.data, tc.status, "condition", "site")
		p.stats("stats after "+tc.n, id)
	}
}

func scenarioMarkAfterComplete(p *party) {
	id := p.running(p.exp("late"))
	u1, u2 := p.twoUsers()
	p.mark("u1 mark running", u1, p.markData("t1", "control", id), "condition applied")
	p.state("pause", id, "enrollmentComplete")
	p.mark("u2 mark paused", u2, p.markData("t1", "control", id), "condition applied")
	p.assignCodes("u2 assign", u2)
	p.assignCodes("u1 assign", u1)
	p.stats("stats", id)
}

func scenarioGroup(p *party) {
	c := p.create("create", p.exp("grp", groupUnit("group"), weights(0, 100)), "group", "assignmentUnit")
	id := c.str("id")
	p.state("start", id, "enrolling")
	u1, u2, u3, u4 := p.user("u1"), p.user("u2"), p.user("u3"), p.user("u4")
	school := "s-" + p.run
	p.initUser("init u1 no working group", u1, map[string]any{"group": map[string]any{"schoolId": []any{school}}})
	p.initUser("init u2", u2, map[string]any{"group": map[string]any{"schoolId": []any{school}}, "workingGroup": map[string]any{"schoolId": school}})
	p.initUser("init u3 outside", u3, map[string]any{"group": map[string]any{"schoolId": []any{school}}, "workingGroup": map[string]any{"schoolId": school + "x"}})
	p.initUser("init u4", u4, map[string]any{"group": map[string]any{"schoolId": []any{school}}, "workingGroup": map[string]any{"schoolId": school}})
	p.assignCodes("u1 assign", u1)
	p.mark("u1 mark", u1, p.markData("t1", "variant", id), "condition applied")
	p.assignCodes("u2 assign", u2)
	p.mark("u2 mark", u2, p.markData("t1", "variant", id), "condition applied")
	p.assignCodes("u3 assign", u3)
	p.mark("u3 mark", u3, p.markData("t1", "variant", id), "condition applied")
	p.assignCodes("u4 assign", u4)
	p.stats("stats", id)
}

func scenarioWeights(p *party) {
	for _, w := range [][2]float64{{0, 0}, {0, 100}, {100, 0}} {
		n := fmt.Sprintf("w%v-%v", w[0], w[1])
		c := p.create("create "+n, p.exp(n, weights(w[0], w[1]), onTarget(n)))
		p.state("start "+n, c.str("id"), "enrolling")
		for i := 0; i < 3; i++ {
			u := p.user(fmt.Sprintf("%s-u%d", n, i))
			p.initUser("init", u, nil)
			p.assignCodes(fmt.Sprintf("assign %s u%d", n, i), u)
		}
		p.cleanup()
	}
}

func scenarioEnrollmentCompleteCondition(p *party) {
	school := "s-" + p.run
	c := p.create("create individual", p.exp("ecc1", set("enrollmentCompleteCondition", map[string]any{"userCount": 2, "groupCount": 0})),
		"enrollmentCompleteCondition")
	id := c.str("id")
	p.state("start", id, "enrolling")
	for i := 0; i < 2; i++ {
		u := p.user(fmt.Sprintf("i%d", i))
		p.initUser("init", u, nil)
		p.mark(fmt.Sprintf("mark i%d", i), u, p.markData("t1", "control", id), "condition applied")
		p.call(fmt.Sprintf("state after i%d", i), "GET", "/experiments/single/"+id, nil, values("state"))
	}
	p.cleanup()
	c = p.create("create group", p.exp("ecc2", groupUnit("group"), onTarget("t2"),
		set("enrollmentCompleteCondition", map[string]any{"userCount": 2, "groupCount": 2})))
	id = c.str("id")
	p.state("start group", id, "enrolling")
	for i, sg := range []string{"a", "a", "b", "b"} {
		u := p.user(fmt.Sprintf("g%d", i))
		p.initUser("init", u, map[string]any{"group": map[string]any{"schoolId": []any{school + sg}}, "workingGroup": map[string]any{"schoolId": school + sg}})
		p.mark(fmt.Sprintf("mark g%d", i), u, p.markData("t2", "control", id), "condition applied")
		p.call(fmt.Sprintf("state after g%d", i), "GET", "/experiments/single/"+id, nil, values("state"))
	}
}

func scenarioShared(p *party) {
	a := p.create("create running", p.exp("sh1"))
	b := p.create("create inactive", p.exp("sh2", weights(0, 100)))
	p.state("start running", a.str("id"), "enrolling")
	seen := map[string]bool{}
	for i := 0; i < 10; i++ {
		u := p.user(fmt.Sprintf("u%d", i))
		p.initUser("init", u, nil)
		m := p.mark(fmt.Sprintf("mark u%d", i), u, p.markData("t1", "", ""), "condition applied")
		switch m.str("experimentId") {
		case a.str("id"):
			seen["running"] = true
		case b.str("id"):
			seen["inactive"] = true
		}
	}
	p.fact("marks landed on", seen)
	p.state("start inactive", b.str("id"), "enrolling")
	u := p.user("both")
	p.initUser("init both", u, nil)
	got := p.call("assign with two running", "POST", "/v6/assign", map[string]any{"context": diffContext}, as(u), noShape())
	p.fact("entries for the shared point", len(p.ownCodes(got)))
}

func scenarioPages(p *party) {
	for _, n := range []string{"b", "c", "a"} {
		p.create("create "+n, p.exp("pg-"+n))
	}
	p.call("page 1", "POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 2,
		"searchParams": map[string]any{"key": "name", "string": p.run + " pages"},
		"sortParams":   map[string]any{"key": "name", "sortAs": "ASC"}}, values("total", "#nodes", "skip", "take", "searchParams", "sortParams"))
	p.call("page 2", "POST", "/experiments/paginated", map[string]any{"skip": 2, "take": 2,
		"searchParams": map[string]any{"key": "name", "string": p.run + " pages"}}, values("total", "#nodes", "skip", "take"))
	p.call("no search", "POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 1}, values("#nodes", "skip", "take"))
	p.call("page without take", "POST", "/experiments/paginated", map[string]any{"skip": 0}, values("name", "errorCode"))
}

func scenarioSegments(p *party) {
	school := "s-" + p.run
	in, out := p.user("in"), p.user("out")
	body := p.exp("seg", set("filterMode", "excludeAll"),
		set("experimentSegmentInclusion", segment([]string{in, out}, [][2]string{{"schoolId", school}})),
		set("experimentSegmentExclusion", segment([]string{out}, [][2]string{{"classId", "c-" + p.run}})))
	c := p.create("create", body, "filterMode")
	id := c.str("id")
	g := p.call("GET single", "GET", "/experiments/single/"+id, nil, values("#experimentSegmentInclusion", "#experimentSegmentExclusion",
		"experimentSegmentInclusion.0.segment.type", "#experimentSegmentInclusion.0.segment.individualForSegment",
		"#experimentSegmentInclusion.0.segment.groupForSegment", "#experimentSegmentExclusion.0.segment.individualForSegment"))
	p.call("GET list", "GET", "/experiments", nil, values("#", "0.experimentSegmentInclusion.0.segment.type",
		"#0.experimentSegmentInclusion.0.segment.individualForSegment", "#0.experimentSegmentExclusion.0.segment.groupForSegment"))
	p.state("start", id, "enrolling")
	p.initUser("init in", in, nil)
	p.initUser("init out", out, nil)
	p.initUser("init school", p.user("sch"), map[string]any{"group": map[string]any{"schoolId": []any{school}}, "workingGroup": map[string]any{"schoolId": school}})
	p.initUser("init other", p.user("oth"), nil)
	p.assignCodes("assign included", in)
	p.assignCodes("assign excluded", out)
	p.assignCodes("assign by school", p.user("sch"))
	p.assignCodes("assign other", p.user("oth"))
	p.call("PUT unchanged", "PUT", "/experiments/"+id, edit(g, func(map[string]any) {}), values("#experimentSegmentInclusion"))
}

// scenarioClient runs the agent's own client: a create asking for the
// assign rule, the follow-up that makes the server hold it, and an update.
func scenarioClient(p *party) {
	ctx := context.Background()
	cl, err := upgrade.New(upgrade.Config{BaseURL: p.base, MaxRetries: -1})
	if err != nil {
		p.tb.Fatal(err)
	}
	e := upgrade.Experiment{
		Name: diffPrefix + " " + p.run + " client", Context: []string{diffContext}, State: upgrade.StateInactive,
		ConsistencyRule: upgrade.ConsistencyIndividual, AssignmentUnit: upgrade.UnitIndividual,
		PostExperimentRule: upgrade.PostRuleAssign, Tags: []string{}, FilterMode: upgrade.FilterIncludeAll,
		Type: upgrade.TypeSimple, AssignmentAlgorithm: upgrade.AlgorithmRandom,
		Conditions: []upgrade.Condition{{ConditionCode: "control", AssignmentWeight: 50, Order: 1},
			{ConditionCode: "variant", AssignmentWeight: 50, Order: 2}},
		Partitions: []upgrade.DecisionPoint{{Site: "SelectSection", Target: p.target("t1"), Order: 1}},
	}
	created, err := cl.CreateExperiment(ctx, &e)
	p.fact("client create", errText(err))
	if err != nil {
		return
	}
	p.made = append(p.made, created.ID)
	p.fact("create holds the assign rule", created.HoldsPostRule(upgrade.PostRuleAssign, ""))
	p.fact("create stores", created.PostExperimentRule)
	held, err := cl.SetPostRule(ctx, created.ID, upgrade.PostRuleAssign, "variant")
	p.fact("SetPostRule", errText(err))
	if err != nil {
		p.tb.Logf("%s: SetPostRule: %v", p.name, err)
	}
	p.fact("held after SetPostRule", held != nil && held.HoldsPostRule(upgrade.PostRuleAssign, "variant"))
	if held == nil {
		return
	}
	held.Description = "updated by the client"
	up, err := cl.UpdateExperiment(ctx, held)
	p.fact("client update", errText(err))
	p.fact("update keeps the rule", up != nil && up.HoldsPostRule(upgrade.PostRuleAssign, "variant"))
	excl := upgrade.Segment{Users: []string{p.user("x")}, Groups: []upgrade.GroupRef{{Type: "classId", GroupID: "c-" + p.run}}}
	p.fact("SetLists", errText(cl.SetLists(ctx, held, upgrade.Segment{}, excl)))
	_, exc, err := cl.Lists(ctx, created.ID)
	p.fact("lists read back", fmt.Sprintf("%s %d", errText(err), len(exc)))
	p.fact("SetLists again", errText(cl.SetLists(ctx, held, upgrade.Segment{}, upgrade.Segment{})))
	again, err := cl.SetPostRule(ctx, created.ID, upgrade.PostRuleContinue, "")
	p.fact("back to continue", errText(err))
	p.fact("continue held", again != nil && again.HoldsPostRule(upgrade.PostRuleContinue, ""))
	page, err := cl.ExperimentsPage(ctx, upgrade.PageRequest{Take: 5, SearchParams: &upgrade.SearchParams{Key: "name", String: p.run + " client"}})
	p.fact("client page", errText(err))
	if page != nil {
		p.fact("client page total", page.Total)
	}
	_, err = cl.DeleteExperiment(ctx, created.ID)
	p.fact("client delete", errText(err))
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return string(upgrade.CategoryOf(err))
}

// scenarioLists changes lists through the list routes, which is the only
// way on 6.5 (a PUT of the experiment leaves them alone).
func scenarioLists(p *party) {
	c := p.create("create", p.exp("ls"))
	id := c.str("id")
	out := p.user("out")
	listBody := func(segID string, users []string) map[string]any {
		l := map[string]any{"name": "probe list", "context": diffContext, "type": "private",
			"userIds": users, "groups": []any{map[string]any{"groupId": "c-" + p.run, "type": "classId"}}, "subSegmentIds": []any{}}
		if segID != "" {
			l["id"] = segID
		}
		return map[string]any{"experimentId": id, "list": l}
	}
	g := p.call("GET single", "GET", "/experiments/single/"+id, nil)
	p.call("PUT with an exclusion list", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
		m["experimentSegmentExclusion"] = segment([]string{out}, nil)
	}), values("#experimentSegmentExclusion"))
	lst := p.call("GET list", "GET", "/experiments", nil, values("#0.experimentSegmentExclusion", "#0.experimentSegmentExclusion.0.segment.individualForSegment"))
	added := p.call("add exclusion list", "POST", "/experiments/exclusionList", listBody("", []string{out}),
		values("segment.name", "segment.type", "#segment.individualForSegment", "experiment.state"))
	seg := added.str("segmentId")
	p.call("GET list after add", "GET", "/experiments", nil, values("#0.experimentSegmentExclusion"))
	p.call("replace exclusion list", "PUT", "/experiments/exclusionList/"+seg, listBody(seg, []string{out, p.user("out2")}),
		values("#segment.individualForSegment"))
	p.call("replace with mismatched id", "PUT", "/experiments/exclusionList/"+seg, listBody(p.id("other"), nil), values("name", "errorCode", "type"))
	p.call("replace unknown list", "PUT", "/experiments/exclusionList/"+p.id("other"), listBody(p.id("other"), nil), values("name", "errorCode"))
	p.call("add to unknown experiment", "POST", "/experiments/exclusionList", map[string]any{"experimentId": p.id("nobody"),
		"list": map[string]any{"name": "x", "context": diffContext, "type": "private", "userIds": []any{}, "groups": []any{}, "subSegmentIds": []any{}}},
		values("name", "errorCode", "type"))
	p.state("start", id, "enrolling")
	p.initUser("init out", out, nil)
	p.initUser("init other", p.user("oth"), nil)
	p.assignCodes("assign excluded", out)
	p.assignCodes("assign other", p.user("oth"))
	p.call("delete exclusion list", "DELETE", "/experiments/exclusionList/"+seg, nil, values("name", "type"))
	p.call("delete it again", "DELETE", "/experiments/exclusionList/"+seg, nil, values("name", "errorCode"))
	first := lst.str("0.experimentSegmentInclusion.0.segmentId")
	p.fact("created lists have segment ids", first != "")
	p.call("delete created inclusion list", "DELETE", "/experiments/inclusionList/"+first, nil, values("type"))
	p.call("GET list at the end", "GET", "/experiments", nil, values("#0.experimentSegmentInclusion", "#0.experimentSegmentExclusion"))
	p.assignCodes("assign excluded after delete", out)
}
