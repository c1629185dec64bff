package sim

import (
	"fmt"
	"net/url"
	"strings"
)

// scenarioStratifiedAssign compares a stratified random sampling
// experiment's draws: 20 users, 14 with a value of the factor and 6
// without, each assigned and then marked (a mark makes the enrollment the
// server counts per condition and factor value) before the next one.
func scenarioStratifiedAssign(p *party) {
	f := fmt.Sprintf("dt_%s_srsa", p.run)
	users := make([]string, 20)
	var csv strings.Builder
	csv.WriteString("uuid," + f + "\n")
	for i := range users {
		users[i] = p.user(fmt.Sprintf("u%02d", i+1))
		if i < 14 {
			v := "low"
			if i%3 == 0 {
				v = "high"
			}
			csv.WriteString(users[i] + "," + v + "\n")
		}
	}
	p.call("upload the factor", "POST", "/stratification", map[string]any{"files": []any{map[string]any{"file": csv.String()}}}, noShape())
	// The experiment's id is sent: the draw is seeded with it.
	id := p.running(p.exp("srs", weights(50, 50), set("id", p.id("srs")),
		set("assignmentAlgorithm", "stratified random sampling"),
		set("stratificationFactor", map[string]any{"stratificationFactorName": f})))
	p.made = append(p.made, id)
	var codes []string
	for i, u := range users {
		p.initUser("init", u, nil)
		a := p.call("assign", "POST", "/v6/assign", map[string]any{"context": diffContext}, as(u), noShape())
		code, _ := lookup(p.assignEntry(a, "t1"), "assignedCondition.0.conditionCode").(string)
		codes = append(codes, fmt.Sprintf("u%02d=%s", i+1, code))
		if code != "" {
			p.mark("mark", u, p.markData("t1", code, id), "condition applied")
		}
	}
	p.fact("[srs assign: condition per user]", codes)
	// Balancing, if the server did it, would show here: 8 more "low"
	// users all marked with control, then 8 "low" users drawn. With the
	// counts 6.5's stratifiedConditionsWeight would send them all to
	// variant; a plain draw sends some to control.
	var more strings.Builder
	more.WriteString("uuid," + f + "\n")
	for i := range 16 {
		more.WriteString(p.user(fmt.Sprintf("v%02d", i+1)) + ",low\n")
	}
	p.call("upload more values", "POST", "/stratification", map[string]any{"files": []any{map[string]any{"file": more.String()}}}, noShape())
	for i := range 8 {
		u := p.user(fmt.Sprintf("v%02d", i+1))
		p.initUser("init", u, nil)
		p.mark("mark control", u, p.markData("t1", "control", id), "condition applied")
	}
	codes = nil
	for i := 8; i < 16; i++ {
		u := p.user(fmt.Sprintf("v%02d", i+1))
		p.initUser("init", u, nil)
		a := p.call("assign", "POST", "/v6/assign", map[string]any{"context": diffContext}, as(u), noShape())
		code, _ := lookup(p.assignEntry(a, "t1"), "assignedCondition.0.conditionCode").(string)
		codes = append(codes, fmt.Sprintf("v%02d=%s", i+1, code))
	}
	p.fact("[srs assign: after 8 control marks]", codes)
	p.call("delete the srs experiment", "DELETE", "/experiments/"+id, nil, noShape())
	p.call("delete the factor", "DELETE", "/stratification/"+url.PathEscape(f), nil, noShape())
}
