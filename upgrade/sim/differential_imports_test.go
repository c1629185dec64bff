package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
)

// The flag and segment import sequences of the differential test (labels
// in brackets are rows of upgrade-results-designs.md section 12).

func importScenarios() []scenario {
	return []scenario{
		{"flagimport", scenarioFlagImport},
		{"segimport", scenarioSegmentImport},
		{"exports", scenarioExports},
	}
}

// jsonWith is v (an exported object) as JSON text, with fields replaced.
func jsonWith(v any, set map[string]any) string {
	m, _ := v.(map[string]any)
	cp := map[string]any{}
	for k, x := range m {
		cp[k] = x
	}
	for k, x := range set {
		cp[k] = x
	}
	b, _ := json.Marshal(cp)
	return string(b)
}

func importFileOf(name, content string) map[string]any {
	return map[string]any{"fileName": name, "fileContent": content}
}

func scenarioFlagImport(p *party) {
	segID := p.id("seg/s")
	p.call("create the segment", "POST", "/segments", p.seg(segID, p.named("s"), "public", []string{p.user("1")}, nil, nil), noShape())
	id := p.newFlag("create the flag", "src")
	p.addFlagList("include the segment", "inclusion", p.flagList(id, "inc", "Segment", true, nil, nil, []string{segID}))
	p.addFlagList("exclude a user", "exclusion", p.flagList(id, "exc", "Individual", true, []string{p.user("9")}, nil, nil))
	ex := p.call("[flag import] export", "GET", "/flags/export/"+id, nil, noShape())
	if ex.status != http.StatusOK {
		return
	}
	inc, _ := lookup(ex.body, "featureFlagSegmentInclusion").([]any)
	ghostList := []any{}
	for _, l := range inc {
		lm := map[string]any{}
		for k, v := range l.(map[string]any) {
			lm[k] = v
		}
		sg := map[string]any{}
		for k, v := range lm["segment"].(map[string]any) {
			sg[k] = v
		}
		sg["subSegments"] = []any{map[string]any{"id": p.id("none"), "name": "gone", "context": diffContext, "type": "public"}}
		lm["segment"] = sg
		ghostList = append(ghostList, lm)
	}
	files := []any{
		importFileOf("ok.json", jsonWith(ex.body, map[string]any{"key": p.key("imp")})),
		importFileOf("twin.json", jsonWith(ex.body, nil)),
		importFileOf("warn.json", jsonWith(ex.body, map[string]any{"key": p.key("warn"), "featureFlagSegmentInclusion": ghostList})),
		importFileOf("bad.json", "{"),
		importFileOf("old.json", `{"name": "x"}`),
		importFileOf("again.json", jsonWith(ex.body, map[string]any{"key": p.key("imp")})),
	}
	p.call("[flag import] validation", "POST", "/flags/import/validation", map[string]any{"files": files},
		values("#", "0.compatibilityType", "1.compatibilityType", "2.compatibilityType", "3.compatibilityType", "4.compatibilityType", "5.compatibilityType"))
	p.call("[flag import] answer", "POST", "/flags/import", map[string]any{"files": files[:3]}, values("#", "0.error", "1.error", "2.error"))
	nodesc := map[string]any{"name": p.named("nodesc"), "key": p.key("nodesc"), "context": []any{diffContext}, "tags": []any{},
		"status": "enabled", "filterMode": "includeAll"}
	b, _ := json.Marshal(nodesc)
	// Without the two list arrays the server's check throws: the file is
	// incompatible, its validation verdict an empty object.
	p.call("[flag import] no lists: validation", "POST", "/flags/import/validation", map[string]any{"files": []any{importFileOf("nodesc.json", string(b))}})
	p.call("[flag import] no lists", "POST", "/flags/import", map[string]any{"files": []any{importFileOf("nodesc.json", string(b))}},
		values("0.error"))
	nodesc["featureFlagSegmentInclusion"], nodesc["featureFlagSegmentExclusion"] = []any{}, []any{}
	b, _ = json.Marshal(nodesc)
	p.call("[flag import] no description", "POST", "/flags/import", map[string]any{"files": []any{importFileOf("nodesc.json", string(b))}},
		values("name", "type"))
	// Each file is made in its own transaction: the files before the one
	// without description are made, then the import fails.
	p.call("[flag import] made before the failing file", "POST", "/flags/import", map[string]any{"files": []any{
		importFileOf("first.json", jsonWith(ex.body, map[string]any{"key": p.key("first")})), importFileOf("nodesc.json", string(b))}},
		values("name", "type"))
	all := p.call("list after import", "GET", "/flags", nil, noShape())
	for _, f := range asArray(all.body) {
		key, _ := lookup(f, "key").(string)
		fid, _ := lookup(f, "id").(string)
		if key == p.key("nodesc") || key == p.key("first") {
			p.madeFlags = append(p.madeFlags, fid)
			p.fact("[flag import] made: "+key[len(key)-5:], true)
		}
		if key != p.key("imp") && key != p.key("warn") {
			continue
		}
		p.madeFlags = append(p.madeFlags, fid)
		p.call("[imported flag] "+key[len(key)-4:], "GET", "/flags/"+fid, nil, noShape(), values("status", "filterMode",
			"#featureFlagSegmentInclusion", "featureFlagSegmentInclusion.0.enabled", "#featureFlagSegmentInclusion.0.segment.subSegments",
			"#featureFlagSegmentExclusion", "featureFlagSegmentExclusion.0.enabled", "#featureFlagSegmentExclusion.0.segment.individualForSegment"))
	}
}

func scenarioSegmentImport(p *party) {
	segID := p.id("seg/s")
	p.call("create the segment", "POST", "/segments", p.seg(segID, p.named("s"), "public", []string{p.user("1"), p.user("2")}, nil, nil), noShape())
	ex := p.call("[segment import] export", "GET", "/segments/export/json?ids="+segID, nil, noShape())
	items := asArray(ex.body)
	if len(items) == 0 {
		return
	}
	src := items[0]
	files := []any{
		importFileOf("dup.json", jsonWith(src, nil)),
		importFileOf("new.json", jsonWith(src, map[string]any{"name": p.named("new")})),
		importFileOf("warn.json", jsonWith(src, map[string]any{"name": p.named("warn"),
			"subSegments": []any{map[string]any{"id": p.id("none"), "name": "gone", "context": diffContext, "type": "public"}}})),
		importFileOf("bad.json", "{"),
		importFileOf("np.json", `{"name": "x"}`),
		importFileOf("skip.txt", jsonWith(src, map[string]any{"name": p.named("txt")})),
	}
	p.call("[segment import] validation", "POST", "/segments/import/validation", files, values("#",
		"0.fileName", "0.compatibilityType", "1.fileName", "1.compatibilityType", "2.fileName", "2.compatibilityType", "2.error",
		"3.fileName", "3.compatibilityType", "3.error", "4.fileName", "4.compatibilityType"))
	// class-validator's texts for files that lack or break properties,
	// and their order (a file with lists is answered last)
	bad := []any{
		importFileOf("noname.json", jsonWith(src, map[string]any{"name": nil})),
		importFileOf("lists.json", jsonWith(src, map[string]any{"name": "", "id": "nope", "description": 5,
			"subSegments": []any{map[string]any{"type": "private", "name": "L1", "context": diffContext}}})),
		importFileOf("members.json", jsonWith(src, map[string]any{"type": "weird", "tags": "t",
			"individualForSegment": []any{map[string]any{"userId": 5}}, "groupForSegment": []any{map[string]any{"type": "s"}, map[string]any{}}})),
		importFileOf("bare.json", `{"name": null, "context": 5}`),
	}
	texts := []string{"#"}
	for i := range bad {
		texts = append(texts, fmt.Sprintf("%d.fileName", i), fmt.Sprintf("%d.error", i))
	}
	p.call("[segment import] error texts", "POST", "/segments/import/validation", bad, values(texts...))
	p.call("[segment import] errors only", "POST", "/segments/validation", files, values("#", "0.fileName", "1.fileName", "2.fileName", "3.fileName"))
	p.call("[segment import: dup name imported] answer", "POST", "/segments/import", files[:2], values("#", "0.compatibilityType", "1.compatibilityType", "1.error"))
	all := p.call("list after import", "GET", "/segments", nil, noShape())
	named := 0
	segs, _ := lookup(all.body, "segmentsData").([]any)
	for _, s := range segs {
		name, _ := lookup(s, "name").(string)
		id, _ := lookup(s, "id").(string)
		switch {
		case name == p.named("s"):
			named++
			if id != segID {
				p.madeSegs = append(p.madeSegs, id)
			}
		case name == p.named("new"):
			p.madeSegs = append(p.madeSegs, id)
			p.call("[segment import] imported", "GET", "/segments/"+id, nil, noShape(), values("type", "#individualForSegment"))
		}
	}
	p.madeSegs = append([]string{segID}, p.madeSegs...)
	p.fact("[segment import: dup name imported] segments of the name", named)
}

// TestImportProbesOnSimulator runs the import sequences on the simulator
// alone: what 6.5 shows (section 12).
func TestImportProbesOnSimulator(t *testing.T) {
	srv, err := Start(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	obs := map[string]observation{}
	for _, sc := range importScenarios() {
		p := &party{name: "sim", base: srv.URL(), hc: &http.Client{}, run: "ci", scen: sc.name, tb: t}
		sc.run(p)
		p.cleanup()
		for _, o := range p.obs {
			obs[o.label] = o
		}
	}
	check := func(label, path string, want any) {
		t.Helper()
		o, ok := obs[label]
		if !ok {
			t.Errorf("%s: no probe", label)
			return
		}
		if got := lookup(o.body, path); render(got) != render(want) {
			t.Errorf("%s %s = %s, want %s", label, path, render(got), render(want))
		}
	}
	for i, want := range []string{"compatible", "incompatible", "warning", "incompatible", "incompatible", "incompatible"} {
		check("[flag import] validation", strconv.Itoa(i)+".compatibilityType", want)
	}
	check("[flag import] answer", "0.error", nil)
	check("[flag import] answer", "1.error", "incompatible")
	check("[flag import] answer", "2.error", nil)
	check("[flag import] no lists", "0.error", "incompatible")
	check("[flag import] made: first", "", true)
	if got := obs["[flag import] no lists: validation"].body; render(got) != "[{}]" {
		t.Errorf("[flag import] no lists: validation %s, want [{}]", render(got))
	}
	if got := obs["[flag import] no description"].status; got != http.StatusInternalServerError {
		t.Errorf("[flag import] no description: status %d, want 500", got)
	}
	check("[imported flag] _imp", "status", "disabled")
	check("[imported flag] _imp", "featureFlagSegmentInclusion.0.enabled", false)
	check("[imported flag] _imp", "featureFlagSegmentExclusion.0.enabled", true)
	check("[imported flag] _imp", "featureFlagSegmentExclusion.0.segment.individualForSegment.0.userId", "dt-ci-flagimport-9")
	check("[imported flag] warn", "status", "disabled")
	if n := len(asArray(lookup(obs["[imported flag] warn"].body, "featureFlagSegmentInclusion"))); n != 0 {
		t.Errorf("the warning file kept %d include lists, want 0 (its segment is missing)", n)
	}

	v := obs["[segment import] validation"].body
	if n := len(asArray(v)); n != 5 {
		t.Errorf("segment validation answers %d files, want 5 (the .txt one is not read): %s", n, render(v))
	}
	for i, want := range [][2]string{{"bad.json", "incompatible"}, {"np.json", "incompatible"}, {"dup.json", "incompatible"}, {"new.json", "compatible"}, {"warn.json", "warning"}} {
		check("[segment import] validation", strconv.Itoa(i)+".fileName", want[0])
		check("[segment import] validation", strconv.Itoa(i)+".compatibilityType", want[1])
	}
	check("[segment import] validation", "2.error", "Invalid Segment data: Invalid Segment Name: "+diffPrefix+" ci segimport s is already used by another segment with same context. ")
	check("[segment import] errors only", "#", 4)
	check("[segment import: dup name imported] answer", "0.compatibilityType", "incompatible")
	check("[segment import: dup name imported] segments of the name", "", 2)
	check("[segment import] imported", "type", "public")
	// exports as a real 6.5.0 answered them (docs/upgrade-real.md)
	check("[flag export: enabled]", "status", "enabled")
	check("[flag export: enabled]", "featureFlagSegmentInclusion.0.segment.subSegments.0.name", diffPrefix+" ci exports parent")
	check("[segment export: sub-segments]", "0.subSegments.0.name", diffPrefix+" ci exports child")
	if m, _ := lookup(obs["[segment export: sub-segments]"].body, "1").(map[string]any); m == nil || m["experimentSegmentInclusion"] != nil || !hasKey(m, "experimentSegmentExclusion") {
		t.Errorf("segment export of several ids: %v, want null experiment list rows", m)
	}
	// the texts and order a real 6.5.0 answered (docs/upgrade-real.md)
	const inst = "An instance of SegmentInputValidator has failed the validation:\n - property "
	for i, want := range [][2]string{
		{"noname.json", inst + "name has failed the following constraints: isString, isNotEmpty \n"},
		{"members.json", inst + "type has failed the following constraints: isEnum \n, " + inst + "userIds has failed the following constraints: isString \n, " +
			inst + "tags has failed the following constraints: isArray \n, " + inst + "groups[0] has failed the following constraints: nestedValidation \n" +
			" - property groups[1] has failed the following constraints: nestedValidation \n"},
		{"bare.json", inst + "name has failed the following constraints: isString, isNotEmpty \n, " + inst + "context has failed the following constraints: isString \n, " +
			inst + "type has failed the following constraints: isEnum, isNotEmpty \n, " + inst + "userIds has failed the following constraints: isString, isArray \n, " +
			inst + "groups has failed the following constraints: isArray \n, " + inst + "subSegmentIds has failed the following constraints: isString, isArray \n"},
		{"lists.json", inst + "id has failed the following constraints: isUuid \n, " + inst + "name has failed the following constraints: isNotEmpty \n, " +
			inst + "description has failed the following constraints: isString \n in list L1 " + inst + "userIds has failed the following constraints: isString, isArray \n, " +
			inst + "groups has failed the following constraints: isArray \n, " + inst + "subSegmentIds has failed the following constraints: isString, isArray \n"},
	} {
		check("[segment import] error texts", strconv.Itoa(i)+".fileName", want[0])
		check("[segment import] error texts", strconv.Itoa(i)+".error", want[1])
	}
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}
