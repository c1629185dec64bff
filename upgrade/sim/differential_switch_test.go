package sim

// The design switch of update_experiment (issue 30): a PUT of an inactive
// Simple experiment as Factorial (factors, four conditions with
// levelCombinationElements) and back to Simple (factors [], plain
// conditions). Run with the designs differential.

func switchScenarios() []scenario {
	return []scenario{{"switch", scenarioDesignSwitch}}
}

func scenarioDesignSwitch(p *party) {
	c := p.create("[switch] create simple", p.exp("sw", onTarget("t1")), "type")
	id := c.str("id")
	g := p.call("[switch] GET simple", "GET", "/experiments/single/"+id, nil, values("type", "#conditions", "#factors"))
	toF := edit(g, func(m map[string]any) { factorial("swf")(p, m) })
	p.call("[switch: simple -> factorial] PUT", "PUT", "/experiments/"+id, toF, values("type", "#conditions", "#factors"))
	p.call("[switch: simple -> factorial] read", "GET", "/experiments/single/"+id, nil,
		values("type", "#conditions", "#factors", "factors.0.name", "factors.1.name", "#conditions.0.levelCombinationElements", "#partitions"))
	g = p.call("[switch] GET factorial", "GET", "/experiments/single/"+id, nil)
	toS := edit(g, func(m map[string]any) {
		m["type"] = "Simple"
		m["factors"] = []any{}
		m["conditions"] = []any{
			map[string]any{"id": p.id("sws/c1"), "conditionCode": "control", "assignmentWeight": 50, "order": 1},
			map[string]any{"id": p.id("sws/c2"), "conditionCode": "variant", "assignmentWeight": 50, "order": 2},
		}
	})
	p.call("[switch: factorial -> simple] PUT", "PUT", "/experiments/"+id, toS, values("type", "#conditions", "#factors"))
	p.call("[switch: factorial -> simple] read", "GET", "/experiments/single/"+id, nil,
		values("type", "#conditions", "#factors", "conditions.0.conditionCode", "#conditions.0.levelCombinationElements", "#partitions"))
	// Back to factorial, then to Simple with the factors key left out (as
	// the agent's client writes a simple experiment).
	g = p.call("[switch] GET simple again", "GET", "/experiments/single/"+id, nil)
	p.call("[switch: simple -> factorial again] PUT", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) { factorial("swg")(p, m) }), values("type", "#factors"))
	g = p.call("[switch] GET factorial again", "GET", "/experiments/single/"+id, nil)
	toS = edit(g, func(m map[string]any) {
		m["type"] = "Simple"
		delete(m, "factors")
		m["conditions"] = []any{
			map[string]any{"id": p.id("swt/c1"), "conditionCode": "control", "assignmentWeight": 50, "order": 1},
			map[string]any{"id": p.id("swt/c2"), "conditionCode": "variant", "assignmentWeight": 50, "order": 2},
		}
	})
	p.call("[switch: factorial -> simple, no factors key] PUT", "PUT", "/experiments/"+id, toS, values("type", "#conditions", "#factors"))
	p.call("[switch: factorial -> simple, no factors key] read", "GET", "/experiments/single/"+id, nil,
		values("type", "#conditions", "#factors", "conditions.0.conditionCode", "#conditions.0.levelCombinationElements"))
	// Enrolling: does the server refuse the switch of a running experiment?
	p.state("[switch] start", id, "enrolling")
	g = p.call("[switch] GET enrolling", "GET", "/experiments/single/"+id, nil)
	toF = edit(g, func(m map[string]any) { factorial("swe")(p, m) })
	p.call("[switch: enrolling simple -> factorial] PUT", "PUT", "/experiments/"+id, toF, values("type", "#conditions", "errorCode"))
	p.call("[switch: enrolling] read", "GET", "/experiments/single/"+id, nil, values("type", "#conditions", "state"))
}
