package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The portability sequences of the differential test: stratification
// factors and experiment export, validation and import (labels in brackets
// are rows of upgrade-results-designs.md sections 9 and 12).

func portabilityScenarios() []scenario {
	return []scenario{
		{"stratification", scenarioStratification},
		{"import", scenarioImport},
		{"stratassign", scenarioStratifiedAssign},
	}
}

func scenarioStratification(p *party) {
	f := fmt.Sprintf("dt_%s_prior", p.run)
	u := func(n string) string { return p.user(n) }
	csv := fmt.Sprintf("uuid,%s\n%s,low\n%s,high\n%s,low\n", f, u("1"), u("2"), u("3"))
	p.call("[upload: rows]", "POST", "/stratification", map[string]any{"files": []any{map[string]any{"file": csv}}}, noShape())
	list := p.call("[GET /stratification: counts]", "GET", "/stratification", nil, noShape())
	for _, row := range asArray(list.body) {
		if lookup(row, "factor") == f {
			p.fact("[GET /stratification: counts] values", fmt.Sprint(lookup(row, "factorValue")))
		}
	}
	p.call("[download CSV]", "GET", "/stratification/download/"+url.PathEscape(f), nil, noShape())
	p.call("[download unknown factor]", "GET", "/stratification/download/"+url.PathEscape(f+"_none"), nil, noShape())
	c := p.create("[srs create: stratificationFactor]", p.exp("srs", set("assignmentAlgorithm", "stratified random sampling"),
		set("stratificationFactor", map[string]any{"stratificationFactorName": f})), "assignmentAlgorithm")
	p.create("[srs, unknown factor]", p.exp("srs2", set("assignmentAlgorithm", "stratified random sampling"),
		set("stratificationFactor", map[string]any{"stratificationFactorName": f + "_none"})))
	p.call("[DELETE a used factor]", "DELETE", "/stratification/"+url.PathEscape(f), nil, noShape())
	if id := c.str("id"); id != "" {
		// Back to random: a PUT without the factor key, then one with
		// an explicit null; the reads show what each keeps.
		g := p.call("GET srs", "GET", "/experiments/single/"+id, nil, noShape())
		p.call("[srs -> random, factor left out]", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
			m["assignmentAlgorithm"] = "random"
			delete(m, "stratificationFactor")
		}), noShape(), values("assignmentAlgorithm", "stratificationFactor.stratificationFactorName"))
		p.call("[srs -> random, factor left out: read]", "GET", "/experiments/single/"+id, nil, noShape(), values("assignmentAlgorithm", "stratificationFactor.stratificationFactorName"))
		g = p.call("GET srs again", "GET", "/experiments/single/"+id, nil, noShape())
		p.call("[srs -> random, factor null]", "PUT", "/experiments/"+id, edit(g, func(m map[string]any) {
			m["assignmentAlgorithm"] = "random"
			m["stratificationFactor"] = nil
		}), noShape(), values("assignmentAlgorithm", "stratificationFactor.stratificationFactorName"))
		p.call("[srs -> random, factor null: read]", "GET", "/experiments/single/"+id, nil, noShape(), values("assignmentAlgorithm", "stratificationFactor.stratificationFactorName"))
		p.call("[DELETE a factor no longer used]", "DELETE", "/stratification/"+url.PathEscape(f), nil, noShape())
		p.call("upload again", "POST", "/stratification", map[string]any{"files": []any{map[string]any{"file": csv}}}, noShape())
		p.call("delete the srs experiment", "DELETE", "/experiments/"+id, nil, noShape())
	}
	p.call("[DELETE /stratification/:factor]", "DELETE", "/stratification/"+url.PathEscape(f), nil, values("stratificationFactorName"))
	p.call("[DELETE /stratification/:factor] again", "DELETE", "/stratification/"+url.PathEscape(f), nil, noShape())
}

func scenarioImport(p *party) {
	c := p.create("create the source", p.exp("source"))
	id := c.str("id")
	p.call("[export: ids forms] unknown", "GET", "/experiments/export?ids="+p.id("none"), nil, values("#"))
	p.call("[export: bad ids]", "GET", "/experiments/export?ids=xyz", nil, noShape())
	ex := p.call("[export: ids forms] ids[]", "GET", "/experiments/export?ids[]="+id, nil, values("#"), noShape())
	items := asArray(ex.body)
	if len(items) == 0 {
		return
	}
	content, _ := json.Marshal(items[0])
	files := []any{
		map[string]any{"fileName": "ok.json", "fileContent": string(content)},
		map[string]any{"fileName": "bad.json", "fileContent": "{"},
		map[string]any{"fileName": "old.json", "fileContent": `{"name": "x"}`},
	}
	p.call("[validation results]", "POST", "/experiments/validation", files,
		values("0.compatibilityType", "1.compatibilityType", "1.error", "2.compatibilityType", "2.error"))
	bad := badImportFiles(items[0])
	paths := []string{}
	for i := range bad {
		paths = append(paths, fmt.Sprintf("%d.error", i), fmt.Sprintf("%d.compatibilityType", i))
	}
	p.call("[validation error texts]", "POST", "/experiments/validation", bad, values(paths...))
	p.call("[import error text]", "POST", "/experiments/import", bad[:1], values("0.error", "0.compatibilityType"))
	p.call("[import answer]", "POST", "/experiments/import", files[:1], values("0.compatibilityType"))
	p.call("[import: same id -> new twins]", "POST", "/experiments/import", files[:1], values("0.compatibilityType"))
	var all []any
	if a := p.call("list after import", "GET", "/experiments", nil, noShape()); a.status == http.StatusOK {
		all = asArray(a.body)
	}
	twins := 0
	for _, e := range all {
		if lookup(e, "name") == lookup(items[0], "name") {
			if lookup(e, "id") != id {
				twins++
				if s, _ := lookup(e, "id").(string); s != "" {
					p.made = append(p.made, s)
				}
			}
		}
	}
	p.fact("[import: twin state, new ids] twins", twins)
	// A file without queries, with null queries or with a condition
	// without levelCombinationElements: refused with an empty error.
	var walk []any
	for i, cut := range []func(m map[string]any){
		func(m map[string]any) { delete(m, "queries") },
		func(m map[string]any) { m["queries"] = nil },
		func(m map[string]any) {
			for _, c := range m["conditions"].([]any) {
				delete(c.(map[string]any), "levelCombinationElements")
			}
		},
	} {
		var m map[string]any
		_ = json.Unmarshal(content, &m)
		if _, ok := m["conditions"].([]any); !ok {
			continue
		}
		cut(m)
		b, _ := json.Marshal(m)
		walk = append(walk, map[string]any{"fileName": fmt.Sprintf("walk%d.json", i), "fileContent": string(b)})
	}
	p.call("[validation: no queries, no levelCombinationElements]", "POST", "/experiments/validation", walk,
		values("0.compatibilityType", "0.error", "1.compatibilityType", "1.error", "2.compatibilityType", "2.error"))
	// A running experiment exports its stored state names, where the
	// single read shows 6.5's display names.
	p.call("start the source", "POST", "/experiments/state", map[string]any{"experimentId": id, "state": "enrolling"}, noShape())
	p.call("[export: running] single read", "GET", "/experiments/single/"+id, nil, noShape(), values("state"))
	p.call("[export: running] export", "GET", "/experiments/export?ids="+id, nil, noShape(), values("0.state", "0.stateTimeLogs.0.fromState", "0.stateTimeLogs.0.toState"))
}

// badImportFiles are copies of an exported experiment, each broken in one
// way whose class-validator text the import routes answer: a factorial
// level's null payload value, a missing name, an unknown enum value, a
// string weight, a number among the tags and three faults at once.
func badImportFiles(src any) []any {
	mut := map[string]func(m map[string]any){
		"a-null-payload": func(m map[string]any) {
			m["type"] = "Factorial"
			m["factors"] = []any{
				map[string]any{"name": "F1", "order": 1, "levels": []any{
					map[string]any{"id": "l1", "name": "A", "payload": map[string]any{"type": "string", "value": "a"}},
					map[string]any{"id": "l2", "name": "B", "payload": map[string]any{"type": "string", "value": nil}}}},
				map[string]any{"name": "F2", "order": 2, "levels": []any{
					map[string]any{"id": "l3", "name": "C", "payload": map[string]any{"type": "string", "value": nil}}}},
			}
		},
		"b-no-name":  func(m map[string]any) { delete(m, "name") },
		"c-bad-enum": func(m map[string]any) { m["consistencyRule"] = "sometimes" },
		"d-string-weight": func(m map[string]any) {
			m["conditions"].([]any)[0].(map[string]any)["assignmentWeight"] = "50"
		},
		"e-number-tag": func(m map[string]any) { m["tags"] = []any{1} },
		"f-two-faults": func(m map[string]any) {
			m["name"] = nil
			m["filterMode"] = "x"
			m["conditions"].([]any)[0].(map[string]any)["order"] = nil
		},
	}
	out := []any{}
	for name, f := range byName(mut) {
		var m map[string]any
		b, _ := json.Marshal(src)
		_ = json.Unmarshal(b, &m)
		f(m)
		content, _ := json.Marshal(m)
		out = append(out, map[string]any{"fileName": name + ".json", "fileContent": string(content)})
	}
	return out
}

// TestPortabilityProbesOnSimulator runs the portability sequences on the
// simulator alone: the statuses and facts 6.5 shows (section 9 and 12).
func TestPortabilityProbesOnSimulator(t *testing.T) {
	srv, err := Start(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	obs := map[string]observation{}
	for _, sc := range portabilityScenarios() {
		p := &party{name: "sim", base: srv.URL(), hc: &http.Client{}, run: "ci", scen: sc.name, tb: t}
		sc.run(p)
		p.cleanup()
		for _, o := range p.obs {
			obs[o.label] = o
		}
	}
	for label, want := range map[string]int{
		"[upload: rows]": 200, "[GET /stratification: counts]": 200, "[download CSV]": 200, "[download unknown factor]": 404,
		"[srs create: stratificationFactor]": 200, "[srs, unknown factor]": 500, "[DELETE a used factor]": 500,
		"[DELETE /stratification/:factor]": 200, "[DELETE /stratification/:factor] again": 404,
		"[export: ids forms] unknown": 200, "[export: bad ids]": 400, "[export: ids forms] ids[]": 200,
		"[validation results]": 200, "[import answer]": 200, "[import: same id -> new twins]": 200,
	} {
		if got := obs[label].status; got != want {
			t.Errorf("%s: status %d, want %d", label, got, want)
		}
	}
	if got := obs["[GET /stratification: counts] values"].body; got != "map[high:1 low:2]" {
		t.Errorf("counts: %v", got)
	}
	for i := range 3 {
		w := obs["[validation: no queries, no levelCombinationElements]"].body
		if lookup(w, fmt.Sprintf("%d.compatibilityType", i)) != "incompatible" || lookup(w, fmt.Sprintf("%d.error", i)) != "" {
			t.Errorf("walk%d: %v, want incompatible with an empty error", i, w)
		}
	}
	if got := lookup(obs["[export: running] export"].body, "0.state"); got != "enrolling" {
		t.Errorf("export of a running experiment: state %v, want enrolling (6.5 exports stored state names)", got)
	}
	if got := lookup(obs["[export: running] single read"].body, "state"); got != "running" {
		t.Errorf("single read of a running experiment: state %v, want running", got)
	}
	if got := obs["[import: twin state, new ids] twins"].body; got != 2 {
		t.Errorf("twins: %v", got)
	}
	// The draw after 8 control marks sends some users to control: the
	// probe can tell a plain draw from the balancing of 6.5's source.
	if got := fmt.Sprint(obs["[srs assign: after 8 control marks]"].body); !strings.Contains(got, "=control") || !strings.Contains(got, "=variant") {
		t.Errorf("stratified draws after the marks: %s, want both conditions", got)
	}
	// The texts a real 6.5.0 answered for these files (docs/upgrade-real.md).
	texts := obs["[validation error texts]"].body
	for path, want := range map[string]string{
		"0.error": "property factors[0].levels[1].payload.value has failed the following constraints: isString \n - property factors[1].levels[0].payload.value has failed the following constraints: isString \n",
		"1.error": "property name has failed the following constraints: isNotEmpty, isString \n",
		"2.error": "property consistencyRule has failed the following constraints: isEnum \n",
		"3.error": "property conditions[0].assignmentWeight has failed the following constraints: isNumber \n",
		"4.error": "property tags has failed the following constraints: isString \n",
		"5.error": "property name has failed the following constraints: isNotEmpty, isString \n, property filterMode has failed the following constraints: isEnum \n, property conditions[0].order has failed the following constraints: isInt, isNotEmpty \n",
	} {
		if got := lookup(texts, path); got != want {
			t.Errorf("validation text %s: %q, want %q", path, got, want)
		}
	}
	if got := lookup(obs["[import error text]"].body, "0.error"); got != lookup(texts, "0.error") {
		t.Errorf("import text: %q", got)
	}
	v := obs["[validation results]"].body
	if lookup(v, "0.compatibilityType") != "compatible" || lookup(v, "1.error") != "Invalid JSON" || render(lookup(v, "2")) != "{}" {
		t.Errorf("validation: %v", v)
	}
}
