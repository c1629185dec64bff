package sim

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The variants of the four differences issue 30 reports (the `leftovers`
// sequence of differential_designs_test.go probes the reported cases): how
// GET /experiments and the paginated rows show lists of every kind, an
// experiment created without lists, a segment's description sent as "",
// null or left out (also on an upsert), an experiment's description left
// out, null or "" on a PUT, and the audit log of an experiment that was
// created without lists, edited by a PUT and moved between states. Run against
// UpGrade 6.5.0 (docs/upgrade-real.md), all agree but the segment upsert
// without a description (the server keeps the old one).

func leftoverScenarios() []scenario {
	return []scenario{{"leftoverkinds", scenarioLeftoverKinds}}
}

// byName walks a map in the order of its keys, so that both sides of the
// differential send the same requests under the same labels.
func byName[V any](m map[string]V) iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// listCounts names, for each experiment of this scenario in an answer, its
// numbers of inclusion and exclusion rows and of members shown.
func (p *party) listCounts(rows []any) []string {
	var out []string
	for _, e := range p.ownElems(rows) {
		name, _ := lookup(e, "name").(string)
		line := strings.TrimPrefix(name, diffPrefix+" "+p.run+" "+p.scen+" ")
		for _, kind := range []string{"experimentSegmentInclusion", "experimentSegmentExclusion"} {
			members := 0
			for _, r := range asArray(lookup(e, kind)) {
				members += len(asArray(lookup(r, "segment.individualForSegment"))) + len(asArray(lookup(r, "segment.groupForSegment")))
			}
			n := fmt.Sprint(lookup(e, "#"+kind))
			if lookup(e, kind) == nil {
				n = "absent"
			}
			line += fmt.Sprintf(" %s/%d", n, members)
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

func scenarioLeftoverKinds(p *party) {
	none := p.exp("none")
	delete(none, "experimentSegmentInclusion")
	delete(none, "experimentSegmentExclusion")
	c := p.create("[create w/o lists]", none, "#experimentSegmentInclusion", "#experimentSegmentExclusion")
	plain := c.str("id")
	p.create("[create with group and user lists]", p.exp("groups", set("filterMode", "excludeAll"),
		set("experimentSegmentInclusion", segment(nil, [][2]string{{"classId", "c-" + p.run}, {"schoolId", "s-" + p.run}})),
		set("experimentSegmentExclusion", segment([]string{p.user("x"), p.user("y")}, nil))))
	all := p.call("[GET /experiments: every kind of list]", "GET", "/experiments", nil, p.own())
	p.fact("[GET /experiments: every kind of list] rows/members", p.listCounts(asArray(all.body)))
	pg := p.call("[paginated: every kind of list]", "POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "name", "string": p.run + " " + p.scen}}, p.own(), values("total"))
	p.fact("[paginated: every kind of list] rows/members", p.listCounts(asArray(lookup(pg.body, "nodes"))))

	for name, desc := range byName(map[string]any{"empty": "", "null": nil, "text": "a description"}) {
		body := p.seg(p.id("D/"+name), p.named("D "+name), "public", nil, nil, nil)
		body["description"] = desc
		p.call("[segment description "+name+": create]", "POST", "/segments", body, values("description"))
		p.call("[segment description "+name+": read]", "GET", "/segments/"+p.id("D/"+name), nil, values("description"))
	}
	up := p.seg(p.id("D/text"), p.named("D text"), "public", nil, nil, nil)
	delete(up, "description")
	p.call("[segment description left out on upsert]", "POST", "/segments", up, values("description"))
	p.call("[segment description left out on upsert: read]", "GET", "/segments/"+p.id("D/text"), nil, values("description"))

	d := p.create("[experiment description: create]", p.exp("desc"), "description").str("id")
	dg := p.call("GET desc", "GET", "/experiments/single/"+d, nil)
	p.call("[experiment description: PUT without it]", "PUT", "/experiments/"+d, edit(dg, func(m map[string]any) { delete(m, "description") }),
		values("description"))
	p.call("[experiment description: kept]", "GET", "/experiments/single/"+d, nil, values("description"))
	p.call("[experiment description: PUT null]", "PUT", "/experiments/"+d, edit(dg, func(m map[string]any) { m["description"] = nil }),
		values("name", "message", "errorCode"))
	p.call("[experiment description: PUT \"\"]", "PUT", "/experiments/"+d, edit(dg, func(m map[string]any) { m["description"] = "" }),
		values("description"))
	p.call("[experiment description: cleared]", "GET", "/experiments/single/"+d, nil, values("description"))

	g := p.call("GET single", "GET", "/experiments/single/"+plain, nil)
	p.call("[PUT as read]", "PUT", "/experiments/"+plain, edit(g, func(m map[string]any) { m["description"] = "edited" }),
		values("description"), noShape())
	p.state("start", plain, "enrolling")
	p.state("pause", plain, "enrollmentComplete")
	a := p.call("[audit: created, edited, started, paused]", "POST", "/audit", map[string]any{"skip": 0, "take": 20, "experimentId": plain},
		values("total", "#nodes"), noShape())
	var entries []string
	for _, n := range asArray(lookup(a.body, "nodes")) {
		e := fmt.Sprint(lookup(n, "type"))
		if op := lookup(n, "data.list.operation"); op != nil {
			e += fmt.Sprintf(" %v %v", lookup(n, "data.list.filterType"), op)
		}
		if st := lookup(n, "data.newState"); st != nil {
			e += fmt.Sprintf(" %v", st)
		}
		entries = append(entries, e)
	}
	sort.Strings(entries)
	p.fact("[audit: created, edited, started, paused] entries", entries)
}

// TestLeftoverProbesOnSimulator runs the leftover variants on the simulator
// alone and checks the answers UpGrade 6.5.0 gave (docs/upgrade-real.md):
// GET /experiments shows every list row with its members, the paginated
// rows carry the inclusion rows only (without members), an experiment
// created without lists has none and its audit log holds only its create,
// the PUT's entry and its state changes; a description sent as null reads
// back null, "" reads back "".
func TestLeftoverProbesOnSimulator(t *testing.T) {
	ts := startSim(t, Options{Seed: 1})
	p := &party{name: "sim", base: ts.base, hc: ts.client, run: "ci", scen: "leftoverkinds", tb: t}
	scenarioLeftoverKinds(p)
	got := map[string]observation{}
	for _, o := range p.obs {
		if o.status >= 500 && o.label != "[experiment description: PUT null]" {
			t.Errorf("%s: status %d", o.label, o.status)
		}
		got[o.label] = o
	}
	// The description column is NOT NULL: a PUT of null fails, one
	// without the key keeps the description, "" clears it.
	if o := got["[experiment description: PUT null]"]; o.status != 500 {
		t.Errorf("PUT with a null description: %d, want 500", o.status)
	}
	if d := lookup(got["[experiment description: PUT without it]"].body, "description"); d != nil {
		t.Errorf("the answer of a PUT without a description shows %v", d)
	}
	if d := lookup(got["[experiment description: kept]"].body, "description"); d != "differential probe" {
		t.Errorf("description after a PUT without it: %v", d)
	}
	if d := lookup(got["[experiment description: cleared]"].body, "description"); d != "" {
		t.Errorf("description after a PUT of \"\": %v", d)
	}
	for label, want := range map[string]string{
		"[GET /experiments: every kind of list] rows/members": `["groups 1/2 1/2","none 0/0 0/0"]`,
		"[paginated: every kind of list] rows/members":        `["groups 1/0 absent/0","none 0/0 absent/0"]`,
		"[audit: created, edited, started, paused] entries": `["experimentCreated","experimentStateChanged paused",` +
			`"experimentStateChanged running","experimentUpdated"]`,
	} {
		if s := render(got[label].body); s != want {
			t.Errorf("%s: %s, want %s", label, s, want)
		}
	}
	for label, want := range map[string]any{
		"[segment description empty: read]": "", "[segment description null: read]": nil,
		"[segment description text: read]": "a description",
		// 6.5.0 keeps the old description when an upsert leaves it out;
		// the simulator still clears it (segments.go, docs/upgrade-real.md).
	} {
		if d := lookup(got[label].body, "description"); d != want {
			t.Errorf("%s: description %v, want %v", label, d, want)
		}
	}
}
