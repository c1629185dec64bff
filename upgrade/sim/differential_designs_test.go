package sim

import (
	"fmt"
	"net/http"
	"testing"
)

// The designs sequences of the differential test (labels in brackets are
// the rows of upgrade-results-designs.md sections 7-12, and the issue-30
// differences left from the last round).

func designScenarios() []scenario {
	return []scenario{
		{"mooclets", scenarioMooclets},
		{"leftovers", scenarioLeftovers},
	}
}

// allDesignScenarios are the designs sequences the real-server
// differential runs.
func allDesignScenarios() []scenario {
	return append(append(designScenarios(), factorialScenarios()...), switchScenarios()...)
}

func moocletParams() map[string]any {
	return map[string]any{"assignmentAlgorithm": "ts_configurable", "prior": map[string]any{"success": 1, "failure": 1}, "batch_size": 1}
}

func scenarioMooclets(p *party) {
	p.create("[ts_configurable w/o params]", p.exp("ts", set("assignmentAlgorithm", "ts_configurable")))
	p.create("[ts_configurable with params]", p.exp("tsp", set("assignmentAlgorithm", "ts_configurable"), set("moocletPolicyParameters", moocletParams())),
		"message")
	p.create("[other mooclet refusals] random with params", p.exp("rp", set("moocletPolicyParameters", moocletParams())), "message")
	c := p.create("create plain", p.exp("plain"))
	id := c.str("id")
	p.call("[other mooclet refusals] PUT with params", "PUT", "/experiments/"+id, edit(c, func(m map[string]any) {
		m["moocletPolicyParameters"] = moocletParams()
	}), values("message"))
	// The user check comes first: 404 for an unknown user, then the
	// mooclet refusal for a known one.
	p.call("[POST /v6/reward]", "POST", "/v6/reward", map[string]any{"experimentId": id, "rewardValue": "SUCCESS"}, as(p.user("r")), noShape())
	p.initUser("init r", p.user("r"), nil)
	p.call("[POST /v6/reward] known user", "POST", "/v6/reward", map[string]any{"experimentId": id, "rewardValue": "SUCCESS"}, as(p.user("r")), noShape(), values("message"))
	p.call("[GET mooclet-rewards]", "GET", "/experiments/mooclet-rewards/"+id, nil, noShape())
}

// scenarioLeftovers probes the four differences issue 30 reports from the
// last round: the lists of GET /experiments and of the paginated rows, a
// segment's missing description, and an experiment's own audit log.
func scenarioLeftovers(p *party) {
	in := p.user("in")
	c := p.create("create with lists", p.exp("lists", set("filterMode", "excludeAll"),
		set("experimentSegmentInclusion", segment([]string{in}, nil)),
		set("experimentSegmentExclusion", segment([]string{p.user("out")}, nil))))
	id := c.str("id")
	var mine any
	for _, e := range asArray(p.call("[GET /experiments: lists]", "GET", "/experiments", nil, noShape()).body) {
		if lookup(e, "id") == id {
			mine = e
		}
	}
	p.fact("[GET /experiments: lists] inclusion, exclusion rows",
		fmt.Sprint(lookup(mine, "#experimentSegmentInclusion"), " ", lookup(mine, "#experimentSegmentExclusion")))
	p.call("[paginated: lists]", "POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 5,
		"searchParams": map[string]any{"key": "name", "string": p.run + " leftovers"},
		"sortParams":   map[string]any{"key": "name", "sortAs": "ASC"}},
		values("total", "#nodes.0.experimentSegmentInclusion", "#nodes.0.experimentSegmentExclusion"))

	body := p.seg(p.id("S"), p.named("S"), "public", []string{in}, nil, nil)
	delete(body, "description")
	p.call("[segment w/o description: create]", "POST", "/segments", body, values("description"))
	p.call("[segment w/o description: read]", "GET", "/segments/"+p.id("S"), nil, values("description"))

	p.state("start", id, "enrolling")
	p.state("pause", id, "enrollmentComplete")
	a := p.call("[experiment audit: only state changes]", "POST", "/audit", map[string]any{"skip": 0, "take": 10, "experimentId": id},
		values("total", "#nodes"), noShape())
	types := map[string]int{}
	for _, n := range asArray(lookup(a.body, "nodes")) {
		t, _ := lookup(n, "type").(string)
		types[t]++
	}
	p.fact("[experiment audit: only state changes] entries by type", types)
}

// TestDesignProbesOnSimulator runs the designs sequences on the simulator
// alone (CI has no real server): the mooclet refusals answer 400 with the
// server's message, and the leftover probes show what the simulator does.
func TestDesignProbesOnSimulator(t *testing.T) {
	srv, err := Start(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	obs := map[string]observation{}
	for _, sc := range designScenarios() {
		p := &party{name: "sim", base: srv.URL(), hc: &http.Client{}, run: "ci", scen: sc.name, tb: t}
		sc.run(p)
		p.cleanup()
		for _, o := range p.obs {
			if o.status >= 500 {
				t.Errorf("%s / %s: status %d", sc.name, o.label, o.status)
			}
			obs[o.label] = o
		}
	}
	for label, want := range map[string]int{
		"[ts_configurable w/o params]": 400, "[ts_configurable with params]": 400,
		"[other mooclet refusals] random with params": 400, "[other mooclet refusals] PUT with params": 400,
		"[POST /v6/reward]": 404, "[POST /v6/reward] known user": 400, "[GET mooclet-rewards]": 400,
		"[segment w/o description: read]": 200,
	} {
		if got := obs[label].status; got != want {
			t.Errorf("%s: status %d, want %d", label, got, want)
		}
	}
	if d := lookup(obs["[segment w/o description: read]"].body, "description"); d != nil {
		t.Errorf("segment without description reads back %v, want null", d)
	}
	if m := lookup(obs["[ts_configurable with params]"].body, "message"); m != "Failed to create Experiment: moocletPolicyParameters was provided but mooclets are not enabled on backend." {
		t.Errorf("ts_configurable with params: message %v", m)
	}
}
