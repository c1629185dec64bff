package sim

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// The factorial, within-subjects and archive sequences of the designs
// differential (upgrade-results-designs.md sections 7, 8 and 11; labels in
// brackets are its rows).

func factorialScenarios() []scenario {
	return []scenario{
		{"factorial", scenarioFactorial},
		{"within", scenarioWithinSubjects},
		{"archive", scenarioArchive},
	}
}

// factorial makes a 2x2 body: Color (Red with a payload, Blue) x Shape
// (Circle, Square), stored codes c1..c4 (not the assign form), weights
// 100/0/0/0 so the draw is known.
func factorial(name string) expOpt {
	return func(p *party, m map[string]any) {
		lv := func(f, l string, order int, payload any) map[string]any {
			out := map[string]any{"id": p.id(name + "/" + f + "/" + l), "name": l, "order": order}
			if payload != nil {
				out["payload"] = payload
			}
			return out
		}
		m["type"] = "Factorial"
		m["factors"] = []any{
			map[string]any{"name": "Color", "order": 1, "levels": []any{
				lv("Color", "Red", 1, map[string]any{"type": "string", "value": "red-ui"}), lv("Color", "Blue", 2, nil)}},
			map[string]any{"name": "Shape", "order": 2, "levels": []any{lv("Shape", "Circle", 1, nil), lv("Shape", "Square", 2, nil)}},
		}
		var conds []any
		i := 0
		for _, color := range []string{"Red", "Blue"} {
			for _, shape := range []string{"Circle", "Square"} {
				i++
				w := 0
				if i == 1 {
					w = 100
				}
				conds = append(conds, map[string]any{"id": p.id(fmt.Sprintf("%s/c%d", name, i)), "conditionCode": fmt.Sprintf("c%d", i),
					"assignmentWeight": w, "order": i, "levelCombinationElements": []any{
						map[string]any{"id": p.id(fmt.Sprintf("%s/e%d/1", name, i)), "level": map[string]any{"id": p.id(name + "/Color/" + color), "name": color}},
						map[string]any{"id": p.id(fmt.Sprintf("%s/e%d/2", name, i)), "level": map[string]any{"id": p.id(name + "/Shape/" + shape), "name": shape}},
					}})
			}
		}
		m["conditions"] = conds
	}
}

func withinSubjects(order string, codes ...string) expOpt {
	return func(p *party, m map[string]any) {
		m["assignmentUnit"] = "within-subjects"
		m["conditionOrder"] = order
		var conds []any
		for i, c := range codes {
			conds = append(conds, map[string]any{"id": p.id(fmt.Sprintf("ws/%s/%d", order, i)), "conditionCode": c,
				"assignmentWeight": 100 / float64(len(codes)), "order": i + 1})
		}
		m["conditions"] = conds
	}
}

// assignEntry is the answer of assign at this scenario's target t.
func (p *party) assignEntry(a answer, t string) any {
	for _, el := range asArray(a.body) {
		if lookup(el, "target") == p.target(t) {
			return el
		}
	}
	return nil
}

func scenarioFactorial(p *party) {
	c := p.create("[factorial: level ids kept]", p.exp("f", factorial("f")),
		"type", "factors.0.levels.0.id", "factors.1.levels.1.id", "conditions.0.levelCombinationElements.0.level.id")
	id := c.str("id")
	g := p.call("[factorial: factors as stored]", "GET", "/experiments/single/"+id, nil,
		values("factors.0.name", "factors.0.levels.0.payload.value", "factors.0.levels.1.payload.type", "factors.0.levels.1.payload.value",
			"#conditions.0.levelCombinationElements", "conditions.0.conditionCode"))
	p.call("[GET single -> PUT as is]", "PUT", "/experiments/"+id, g.body, values("errorCode"))
	p.state("start", id, "enrolling")
	u := p.user("u1")
	p.initUser("init u1", u, nil)
	a := p.call("[factorial assign: code, factors]", "POST", "/v6/assign", map[string]any{"context": diffContext}, as(u), noShape())
	el := p.assignEntry(a, "t1")
	p.fact("[factorial assign: code, factors] code", lookup(el, "assignedCondition.0.conditionCode"))
	p.fact("[factorial assign: code, factors] factors", render(lookup(el, "assignedFactor")))
	code, _ := lookup(el, "assignedCondition.0.conditionCode").(string)
	p.mark("[mark with the assign code]", u, p.markData("t1", code, id), "condition applied", "type")
	p.mark("[mark with a stored code]", u, p.markData("t1", "c3", id), "condition applied", "condition")
	p.stats("stats after the stored-code mark", id)

	p.create("[factorial: server errors (500)] no factors", p.exp("nf", factorial("nf"), set("factors", []any{})))
	p.create("[factorial: validation (400)] factor w/o order", p.exp("no", factorial("no"), func(_ *party, m map[string]any) {
		delete(m["factors"].([]any)[0].(map[string]any), "order")
	}), "errorCode")
	p.create("[factorial: validation (400)] payload value null", p.exp("pn", factorial("pn"), func(_ *party, m map[string]any) {
		m["factors"].([]any)[0].(map[string]any)["levels"].([]any)[1].(map[string]any)["payload"] = map[string]any{"type": "string", "value": nil}
	}), "errorCode")
	p.create("[Simple with factors]", p.exp("sf", factorial("sf"), set("type", "Simple")), "#factors")

	one := p.create("create 1 factor", p.exp("one", onTarget("t2"), func(p *party, m map[string]any) {
		m["type"] = "Factorial"
		m["factors"] = []any{map[string]any{"name": "Hint", "order": 1, "levels": []any{
			map[string]any{"id": p.id("one/on"), "name": "On", "order": 1, "payload": map[string]any{"type": "string", "value": "hint-on"}},
			map[string]any{"id": p.id("one/off"), "name": "Off", "order": 2}}}}
		m["conditions"] = []any{
			map[string]any{"id": p.id("one/c1"), "conditionCode": "on", "assignmentWeight": 100, "order": 1, "levelCombinationElements": []any{
				map[string]any{"id": p.id("one/e1"), "level": map[string]any{"id": p.id("one/on"), "name": "On"}}}},
			map[string]any{"id": p.id("one/c2"), "conditionCode": "off", "assignmentWeight": 0, "order": 2, "levelCombinationElements": []any{
				map[string]any{"id": p.id("one/e2"), "level": map[string]any{"id": p.id("one/off"), "name": "Off"}}}},
		}
	}))
	p.state("start one", one.str("id"), "enrolling")
	a = p.call("[1-factor assign: code]", "POST", "/v6/assign", map[string]any{"context": diffContext}, as(u), noShape())
	p.fact("[1-factor assign: code] code", render(lookup(p.assignEntry(a, "t2"), "assignedCondition.0.conditionCode")))

	// Analysis per level and per condition: three users marked with
	// stored codes; the mark enrols the server's draw (c1: Red, Circle).
	score := p.metricKey("score")
	defer p.dropMetrics(score)
	p.saveMetrics("save", leaf(score, "continuous"))
	q := p.create("create with a query", p.exp("q", factorial("q"), onTarget("t3"),
		withQueries(query("mean score", score, "MEAN", map[string]any{"operationType": "avg"}))))
	qid := q.str("id")
	p.state("start q", qid, "enrolling")
	for i, v := range []int{10, 20, 30} {
		uu := p.user(fmt.Sprintf("q%d", i))
		p.initUser(fmt.Sprintf("init q%d", i), uu, nil)
		p.mark(fmt.Sprintf("mark q%d", i), uu, p.markData("t3", "c1", qid), "condition applied", "condition")
		p.logValues(fmt.Sprintf("log q%d", i), uu, "2026-02-01T00:00:00Z", map[string]any{score: v})
	}
	gq := p.call("GET queries", "GET", "/experiments/single/"+qid, nil, values("#queries"))
	an := p.call("[factorial main effect by level] [factorial interaction by cond.]", "POST", "/query/analyse",
		map[string]any{"queryIds": []any{gq.str("queries.0.id")}},
		values("#0.mainEffect", "0.mainEffect.0.levelId", "0.mainEffect.0.result", "0.mainEffect.0.participantsLogged",
			"0.mainEffect.1.levelId", "0.mainEffect.1.result", "#0.interactionEffect",
			"0.interactionEffect.0.result", "0.interactionEffect.1.participantsLogged"))
	// The condition ids are the server's own: compare the code of the
	// condition whose interaction row holds data.
	for _, row := range asArray(lookup(an.body, "0.interactionEffect")) {
		if fmt.Sprint(lookup(row, "participantsLogged")) == "0" {
			continue
		}
		for _, c := range asArray(lookup(gq.body, "conditions")) {
			if lookup(c, "id") == lookup(row, "conditionId") {
				p.fact("[factorial interaction: condition with data]", lookup(c, "conditionCode"))
			}
		}
	}
}

func scenarioWithinSubjects(p *party) {
	p.create("[ws: validation] no conditionOrder", p.exp("nco", withinSubjects("random", "control", "variant"), func(_ *party, m map[string]any) {
		delete(m, "conditionOrder")
	}), "errorCode")
	p.create("[ws: validation] with a group", p.exp("grp", withinSubjects("random", "control", "variant"), set("group", "schoolId")), "errorCode")
	p.create("[ws: consistencyRule optional]", p.exp("nocr", withinSubjects("random", "control", "variant"), func(_ *party, m map[string]any) {
		delete(m, "consistencyRule")
	}), "assignmentUnit", "conditionOrder")

	u := p.user("u1")
	p.initUser("init u1", u, nil)
	codes := func(label, t string) []string {
		a := p.call(label, "POST", "/v6/assign", map[string]any{"context": diffContext}, as(u), noShape())
		var out []string
		for _, c := range asArray(lookup(p.assignEntry(a, t), "assignedCondition")) {
			s, _ := lookup(c, "conditionCode").(string)
			out = append(out, s)
		}
		return out
	}
	ord := p.running(p.exp("ord", withinSubjects("ordered round robin", "control", "variant"), onTarget("t1")))
	first := codes("assign ordered", "t1")
	p.fact("[ws ordered round robin] codes", first)
	if len(first) > 0 {
		p.call("[ws mark answer echoes the code]", "POST", "/v6/mark", map[string]any{"data": p.markData("t1", first[0], ord),
			"status": "condition applied", "uniquifier": "1"}, as(u), values("condition"))
	}
	p.fact("[ws ordered round robin] after one mark", codes("assign ordered again", "t1"))
	p.stats("[ws stats detail]", ord)

	p.running(p.exp("rnd", withinSubjects("random", "control", "variant"), onTarget("t2")))
	p.fact("[ws random: 100 draws] count", len(codes("assign random", "t2")))
	p.running(p.exp("rr", withinSubjects("random round robin", "control", "variant", "variant"), onTarget("t3")))
	rr := codes("assign random round robin", "t3")
	p.fact("[ws random round robin] count", len(rr))
}

func scenarioArchive(p *party) {
	score := p.metricKey("score")
	defer p.dropMetrics(score)
	p.saveMetrics("save", leaf(score, "continuous"))
	id := p.running(p.exp("a", withQueries(query("mean score", score, "MEAN", map[string]any{"operationType": "avg"}))))
	u := p.user("u1")
	p.initUser("init u1", u, nil)
	p.mark("mark u1", u, p.markData("t1", "control", id), "condition applied", "condition")
	p.logValues("log u1", u, "2026-02-01T00:00:00Z", map[string]any{score: 10})
	qid := p.call("GET queries", "GET", "/experiments/single/"+id, nil).str("queries.0.id")
	analyse := func(label string, ids ...any) answer {
		return p.call(label, "POST", "/query/analyse", map[string]any{"queryIds": ids}, values("#", "0.mainEffect.0.result", "0.mainEffect.0.participantsLogged"))
	}
	p.state("archive", id, "archived")
	p.logValues("[log after archive dropped]", u, "2026-03-01T00:00:00Z", map[string]any{score: 50})
	analyse("[analyse archived = snapshot]", qid)
	analyse("[analyse unknown+archived ids]", p.id("nobody"), qid)
	u2 := p.user("u2")
	p.initUser("init u2", u2, nil)
	p.assignCodes("[assign after archive]", u2)
	p.mark("[mark after archive]", u2, p.markData("t1", "control", id), "condition applied", "condition")
	g := p.call("GET archived", "GET", "/experiments/single/"+id, nil)
	p.call("[PUT while archived]", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) { m["description"] = "edited while archived" }), values("state", "description"))
	p.state("[unarchive: live again]", id, "enrolling")
	p.logValues("log u1 while live", u, "2026-04-01T00:00:00Z", map[string]any{score: 30})
	p.state("[re-archive keeps 1st snapshot] archive again", id, "archived")
	analyse("[re-archive keeps 1st snapshot]", qid)
}

// TestFactorialProbesOnSimulator runs the factorial, within-subjects and
// archive sequences on the simulator alone, and checks the facts the real
// server showed (upgrade-results-designs.md).
func TestFactorialProbesOnSimulator(t *testing.T) {
	srv, err := Start(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	obs := map[string]observation{}
	for _, sc := range factorialScenarios() {
		p := &party{name: "sim", base: srv.URL(), hc: &http.Client{}, run: "ci", scen: sc.name, tb: t}
		sc.run(p)
		p.cleanup()
		for _, o := range p.obs {
			if o.status >= 500 && !strings.Contains(o.label, "(500)") && !strings.Contains(o.label, "assign code") {
				t.Errorf("%s / %s: status %d", sc.name, o.label, o.status)
			}
			obs[o.label] = o
		}
	}
	want := map[string]any{
		"[factorial assign: code, factors] code":    "Color=Red; Shape=Circle",
		"[factorial assign: code, factors] factors": `[{"Color":{"level":"Red","payload":{"type":"string","value":"red-ui"}},"Shape":{"level":"Circle","payload":null}}]`,
		"[1-factor assign: code] code":              `{"type":"string","value":"hint-on"}`,
		"[ws random: 100 draws] count":              100,
		"[ws random round robin] count":             102,
	}
	for label, w := range want {
		if got := obs[label].body; fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s: %v, want %v", label, got, w)
		}
	}
	statuses := map[string]int{
		"[GET single -> PUT as is]": 400, "[mark with the assign code]": 500, "[mark with a stored code]": 200,
		"[factorial: server errors (500)] no factors": 500, "[factorial: validation (400)] factor w/o order": 400,
		"[factorial: validation (400)] payload value null": 400, "[ws: validation] no conditionOrder": 400,
		"[ws: validation] with a group": 400, "[ws: consistencyRule optional]": 200, "[PUT while archived]": 200,
	}
	for label, w := range statuses {
		if got := obs[label].status; got != w {
			t.Errorf("%s: status %d, want %d", label, got, w)
		}
	}
	if got := fmt.Sprint(obs["[ws ordered round robin] codes"].body, obs["[ws ordered round robin] after one mark"].body); got != "[control variant] [variant control]" {
		t.Errorf("ordered round robin rotation: %s", got)
	}
	if c := lookup(obs["[mark after archive]"].body, "condition"); c != "control" {
		t.Errorf("mark after archive names condition %v, want the one sent (control)", c)
	}
	an := obs["[factorial main effect by level] [factorial interaction by cond.]"].body
	if n, r := lookup(an, "#0.mainEffect"), lookup(an, "0.mainEffect.0.result"); fmt.Sprint(n, " ", r) != "4 20.0000000000000000" {
		t.Errorf("main effect: %v levels, first %v; want 4 levels, 20", n, r)
	}
	if n := lookup(an, "#0.interactionEffect"); fmt.Sprint(n) != "4" {
		t.Errorf("interaction effect: %v conditions, want 4", n)
	}
	for _, label := range []string{"[analyse archived = snapshot]", "[re-archive keeps 1st snapshot]"} {
		if r := lookup(obs[label].body, "0.mainEffect.0.result"); fmt.Sprint(r) != "10.0000000000000000" {
			t.Errorf("%s: result %v, want the snapshot's 10", label, r)
		}
	}
	if n := lookup(obs["[analyse unknown+archived ids]"].body, "#"); fmt.Sprint(n) != "1" {
		t.Errorf("unknown+archived ids: %v elements, want 1", n)
	}
}
