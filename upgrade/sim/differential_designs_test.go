package sim

// The designs sequences of the differential test (labels in brackets are
// the rows of upgrade-results-designs.md sections 7-12, and the issue-30
// differences left from the last round).

func designScenarios() []scenario {
	return []scenario{
		{"mooclets", scenarioMooclets},
	}
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
	p.call("[POST /v6/reward]", "POST", "/v6/reward", map[string]any{"experimentId": id, "rewardValue": "SUCCESS"}, as(p.user("r")), noShape())
	p.call("[GET mooclet-rewards]", "GET", "/experiments/mooclet-rewards/"+id, nil, noShape())
}
