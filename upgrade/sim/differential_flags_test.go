package sim

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The differential sequences of feature flags, segments, flag evaluation,
// experiment history and the audit log (spec upgrade-flags-segments.md;
// a probe label in brackets names the spec row it checks).

const diffContext2 = "mathstream"

func flagScenarios() []scenario {
	return []scenario{
		{"flags", scenarioFlags},
		{"flaglists", scenarioFlagLists},
		{"segs", scenarioSegmentRoutes},
		{"segstatus", scenarioSegmentStatus},
		{"eval", scenarioFlagEvaluation},
		{"evalchange", scenarioFlagEvaluationChanges},
		{"expseg", scenarioExperimentPublicSegment},
		{"history", scenarioHistory},
		{"audit", scenarioAudit},
		{"explists", scenarioExperimentListReads},
		{"flagclient", scenarioFlagClient},
	}
}

// name is a flag, segment or experiment name of this run and scenario.
func (p *party) named(n string) string { return diffPrefix + " " + p.run + " " + p.scen + " " + n }

// key is a flag key of this run and scenario.
func (p *party) key(n string) string { return fmt.Sprintf("%s_%s_%s_%s", diffPrefix, p.run, p.scen, n) }

// mentions says whether a JSON value names something of this scenario.
func (p *party) mentions(v any) bool {
	s := render(v)
	for _, sep := range []string{" ", "_", "-"} {
		if strings.Contains(s, p.run+sep+p.scen+sep) {
			return true
		}
	}
	return false
}

// own compares only the elements of this scenario: of the answer if it is
// an array, else of each array of the answer object (a real server holds
// other runs' rows too).
func (p *party) own() callOpt {
	return func(o *observation, _ *http.Request) {
		o.keep = func(v any) any {
			switch t := v.(type) {
			case []any:
				return p.ownElems(t)
			case map[string]any:
				out := map[string]any{}
				for k, x := range t {
					if arr, ok := x.([]any); ok {
						out[k] = p.ownElems(arr)
					} else {
						out[k] = x
					}
				}
				return out
			}
			return v
		}
	}
}

func (p *party) ownElems(a []any) []any {
	out := []any{}
	for _, el := range a {
		if p.mentions(el) {
			out = append(out, el)
		}
	}
	return out
}

type flagOpt func(m map[string]any)

func (p *party) flag(n string, opts ...flagOpt) map[string]any {
	m := map[string]any{"name": p.named(n), "key": p.key(n), "description": "", "context": []any{diffContext},
		"tags": []any{}, "status": "enabled", "filterMode": "includeAll"}
	for _, f := range opts {
		f(m)
	}
	return m
}

func fset(k string, v any) flagOpt { return func(m map[string]any) { m[k] = v } }

func (p *party) newFlag(label, n string, opts ...flagOpt) string {
	return p.call(label, "POST", "/flags", p.flag(n, opts...), values("status", "filterMode")).str("id")
}

// seg is a segment input (POST /segments, a list's segment).
func (p *party) seg(id, name, typ string, users []string, groups [][2]string, subs []string) map[string]any {
	us := []any{}
	for _, u := range users {
		us = append(us, u)
	}
	gs := []any{}
	for _, g := range groups {
		gs = append(gs, map[string]any{"type": g[0], "groupId": g[1]})
	}
	ss := []any{}
	for _, s := range subs {
		ss = append(ss, s)
	}
	m := map[string]any{"name": name, "description": "", "context": diffContext, "type": typ,
		"userIds": us, "groups": gs, "subSegmentIds": ss}
	if id != "" {
		m["id"] = id
	}
	return m
}

// flagList is a flag list body; the list's segment id is derived from its
// label so that both sides use the same one.
func (p *party) flagList(flagID, label, listType string, enabled bool, users []string, groups [][2]string, subs []string) map[string]any {
	return map[string]any{"id": flagID, "enabled": enabled, "listType": listType,
		"segment": p.seg(p.id("list/"+label), p.named("list "+label), "private", users, groups, subs)}
}

func (p *party) addFlagList(label, kind string, body map[string]any) answer {
	return p.call(label, "POST", "/flags/"+kind+"List", body,
		values("enabled", "listType", "segment.type", "#segment.individualForSegment", "#segment.groupForSegment", "#segment.subSegments"))
}

// evalKeys evaluates the flags for a user and records which of this
// scenario's keys came back (sorted, prefix removed).
func (p *party) evalKeys(label, user string, body map[string]any) answer {
	if body == nil {
		body = map[string]any{"context": diffContext}
	}
	a := p.call(label, "POST", "/v6/featureflag", body, as(user), noShape(), values("name", "type", "errorCode"))
	var keys []string
	if list, ok := a.body.([]any); ok {
		for _, k := range list {
			if s, _ := k.(string); strings.HasPrefix(s, p.key("")) {
				keys = append(keys, strings.TrimPrefix(s, p.key("")))
			}
		}
	}
	sort.Strings(keys)
	p.fact(label+": flags", keys)
	return a
}

func scenarioFlags(p *party) {
	body := p.flag("f1", fset("id", p.id("sent")), fset("tags", []any{"t1"}))
	c := p.call("create", "POST", "/flags", body, values("name", "key", "status", "filterMode", "context", "tags", "description"))
	id := c.str("id")
	p.fact("[create: sent id replaced]", id != "" && id != p.id("sent"))
	p.call("[create w/o description]", "POST", "/flags", p.flag("nodesc", func(m map[string]any) { delete(m, "description") }),
		values("name", "type", "message", "errorCode"))
	p.call("[create: only context[0] checked]", "POST", "/flags", p.flag("ctx2", fset("context", []any{diffContext, "no-such-context"})),
		values("context"))
	p.call("create unknown context", "POST", "/flags", p.flag("noctx", fset("context", []any{"no-such-context"})),
		values("name", "message", "errorCode"))
	p.call("create without key", "POST", "/flags", p.flag("nokey", func(m map[string]any) { delete(m, "key") }),
		values("name", "message", "type", "errorCode"))
	p.call("create bad status", "POST", "/flags", p.flag("badst", fset("status", "on")), values("name", "message", "errorCode"))
	p.call("create empty context", "POST", "/flags", p.flag("emptyctx", fset("context", []any{})), values("name", "errorCode"))
	p.call("[GET /flags: no list keys]", "GET", "/flags", nil, p.own(), values("#"))
	p.call("GET /flags/:id", "GET", "/flags/"+id, nil, values("key", "#featureFlagSegmentInclusion", "#featureFlagSegmentExclusion"))
	p.call("[GET /flags/:id unknown]", "GET", "/flags/"+p.id("nobody"), nil)
	p.call("GET /flags/:id non-UUID", "GET", "/flags/xyz", nil, values("name", "message", "type", "errorCode"))
	p.call("paginated", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "name", "string": p.run + " flags"},
		"sortParams":   map[string]any{"key": "name", "sortAs": "ASC"}}, values("total", "#nodes", "skip", "take", "nodes.0.featureFlagExposures"))
	p.call("[paginated: search key='key']", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "key", "string": p.key("f1")}}, values("total", "#nodes"))
	p.call("paginated search all", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "all", "string": p.key("f1")}}, values("total"))
	// '_' is a LIKE wildcard: the key above found the flag by its name
	p.newFlag("create a flag with a key unlike its name", "kq", fset("key", p.key("kq")+"xkeyx"))
	for _, k := range []string{"key", "all", "name"} {
		p.call("paginated search "+k+" for a key-only word", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 10,
			"searchParams": map[string]any{"key": k, "string": p.run + "xkeyx"}}, values("total"))
	}
	p.call("paginated search a literal %", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "name", "string": p.run + " fl%gs"}}, values("total"))
	p.call("paginated search status", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "status", "string": "nabl"}}, values("skip"), noShape())
	p.call("paginated search id", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "id", "string": id}}, values("total", "nodes.0.key"))
	p.call("paginated search non-UUID id", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 1,
		"searchParams": map[string]any{"key": "id", "string": "xyz"}}, values("#nodes"), noShape())
	p.call("paginated bad search key", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 1,
		"searchParams": map[string]any{"key": "colour", "string": "x"}}, values("name", "errorCode"))
	p.call("paginated sort by key", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "name", "string": p.run + " flags"},
		"sortParams":   map[string]any{"key": "key", "sortAs": "DESC"}}, values("total", "nodes.0.key", "nodes.1.key"))
	p.call("paginated without take", "POST", "/flags/paginated", map[string]any{"skip": 0}, values("name", "errorCode"))
	p.call("[create dup key, same ctx]", "POST", "/flags", p.flag("f1", fset("name", p.named("f1 again"))),
		values("name", "type", "message", "errorCode"))
	other := p.call("[create same key, other ctx]", "POST", "/flags", p.flag("f1", fset("name", p.named("f1 ctx2")),
		fset("context", []any{diffContext2})), values("context"))
	p.call("[same key, context [CTX2] only]", "POST", "/flags", p.flag("f1", fset("name", p.named("f1 ctx2 again")),
		fset("context", []any{diffContext2})), values("errorCode", "type"))
	p.call("[create dup key via existing id]", "POST", "/flags", p.flag("f1", fset("id", id), fset("name", p.named("f1 by id"))),
		values("name", "type", "message", "errorCode"))
	f2 := p.newFlag("create f2", "f2")
	put := p.flag("f1", fset("description", "changed"), fset("id", p.id("body id wins not")))
	p.call("PUT", "PUT", "/flags/"+id, put, values("description", "key", "#featureFlagSegmentInclusion", "#featureFlagSegmentExclusion"))
	p.fact("PUT: URL id wins", p.obs[len(p.obs)-1].status == 200 && lookup(p.obs[len(p.obs)-1].body, "id") == id)
	p.call("[PUT dup key]", "PUT", "/flags/"+f2, p.flag("f1", fset("name", p.named("f2"))), values("name", "type", "message", "errorCode"))
	p.call("[PUT unknown id]", "PUT", "/flags/"+p.id("nobody"), p.flag("ghost"), values("name", "type", "message", "errorCode"))
	p.call("PUT bad body", "PUT", "/flags/"+id, p.flag("f1", fset("filterMode", "sometimes")), values("name", "errorCode"))
	for _, st := range []string{"archived", "disabled", "enabled", "archived", "enabled"} {
		p.call("[status: any -> any] "+st, "PATCH", "/flags/status", map[string]any{"flagId": id, "status": st}, values("status", "key"))
	}
	p.call("status bad value", "PATCH", "/flags/status", map[string]any{"flagId": id, "status": "on"}, values("name", "errorCode"))
	p.call("[status unknown flag]", "PATCH", "/flags/status", map[string]any{"flagId": p.id("nobody"), "status": "enabled"},
		values("name", "type", "message", "errorCode"))
	p.call("filterMode", "PATCH", "/flags/filterMode", map[string]any{"flagId": id, "filterMode": "excludeAll"}, values("filterMode"))
	p.call("filterMode bad value", "PATCH", "/flags/filterMode", map[string]any{"flagId": id, "filterMode": "none"}, values("name", "errorCode"))
	p.call("filterMode unknown flag", "PATCH", "/flags/filterMode", map[string]any{"flagId": p.id("nobody"), "filterMode": "includeAll"},
		values("name", "type", "message", "errorCode"))
	p.call("DELETE", "DELETE", "/flags/"+id, nil, values("#", "0.key", "0.status"))
	p.call("[DELETE again]", "DELETE", "/flags/"+id, nil, values("name", "type", "message", "errorCode"))
	p.call("DELETE non-UUID", "DELETE", "/flags/xyz", nil, values("name", "type", "errorCode"))
	p.call("GET deleted", "GET", "/flags/"+id, nil)
	p.call("DELETE other context", "DELETE", "/flags/"+other.str("id"), nil, values("#"))
}

func scenarioFlagLists(p *party) {
	id := p.newFlag("create", "fl")
	u1, u2 := p.user("u1"), p.user("u2")
	p.addFlagList("add include list", "inclusion", p.flagList(id, "inc", "Individual", true, []string{u1}, nil, nil))
	pub := p.flagList(id, "pub", "Individual", true, []string{u2}, nil, nil)
	pub["segment"].(map[string]any)["type"] = "public"
	p.addFlagList("[list: type 'public' forced private]", "inclusion", pub)
	p.addFlagList("add exclude group list", "exclusion", p.flagList(id, "exc", "classId", true, nil, [][2]string{{"classId", "c-" + p.run}}, nil))
	p.call("GET flag with lists", "GET", "/flags/"+id, nil, values("#featureFlagSegmentInclusion", "#featureFlagSegmentExclusion",
		"featureFlagSegmentExclusion.0.listType", "featureFlagSegmentExclusion.0.segment.type"))
	p.call("[paginated: list rows w/o segment]", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 5,
		"searchParams": map[string]any{"key": "name", "string": p.run + " flaglists"}},
		values("total", "#nodes.0.featureFlagSegmentInclusion", "#nodes.0.featureFlagSegmentExclusion"))
	p.call("GET /flags with lists", "GET", "/flags", nil, p.own())
	upd := p.flagList(id, "inc", "Individual", true, []string{u1, u2}, nil, nil)
	p.call("PUT include list", "PUT", "/flags/inclusionList/"+p.id("list/inc"), upd,
		values("#segment.individualForSegment", "enabled", "segment.type"))
	pubPut := p.flagList(id, "pub", "Individual", true, []string{u2}, nil, nil)
	pubPut["segment"].(map[string]any)["type"] = "public"
	p.call("[list PUT type 'public' kept]", "PUT", "/flags/inclusionList/"+p.id("list/pub"), pubPut, values("segment.type"))
	p.call("GET /segments after public list", "GET", "/segments", nil, p.own(), values("#segmentsData"))
	p.call("list PUT mismatched id", "PUT", "/flags/inclusionList/"+p.id("other"), upd, values("name", "message", "type", "errorCode"))
	ghost := p.flagList(id, "ghost", "Individual", true, nil, nil, nil)
	p.flagMessage(id, p.call("list PUT unknown", "PUT", "/flags/inclusionList/"+p.id("list/ghost"), ghost, values("name", "type", "errorCode")))
	p.flagMessage(id, p.call("list PUT other kind", "PUT", "/flags/exclusionList/"+p.id("list/inc"), upd, values("name", "type", "errorCode")))
	p.call("list DELETE other kind", "DELETE", "/flags/exclusionList/"+p.id("list/inc"), nil, values("name", "message", "type", "errorCode"))
	p.call("list add unknown flag", "POST", "/flags/inclusionList", p.flagList(p.id("nobody"), "nf", "Individual", true, nil, nil, nil),
		values("name", "type", "message", "errorCode"))
	noSeg := p.flagList(id, "noseg", "Individual", true, nil, nil, nil)
	delete(noSeg, "segment")
	p.call("list add without segment", "POST", "/flags/inclusionList", noSeg, values("name", "type", "message", "errorCode"))
	noEn := p.flagList(id, "noen", "Individual", true, nil, nil, nil)
	delete(noEn, "enabled")
	p.call("list add without enabled", "POST", "/flags/inclusionList", noEn, values("name", "type", "message", "errorCode"))
	noLT := p.flagList(id, "nolt", "Individual", true, nil, nil, nil)
	delete(noLT, "listType")
	p.call("list add without listType", "POST", "/flags/inclusionList", noLT, values("name", "message", "errorCode"))
	p.call("list add with listType ''", "POST", "/flags/inclusionList", p.flagList(id, "emptylt", "", true, nil, nil, nil),
		values("name", "message", "errorCode"))
	noUsers := p.flagList(id, "nousers", "Individual", true, nil, nil, nil)
	delete(noUsers["segment"].(map[string]any), "userIds")
	p.call("list add without userIds", "POST", "/flags/inclusionList", noUsers, values("name", "errorCode"))
	p.call("list DELETE", "DELETE", "/flags/inclusionList/"+p.id("list/pub"), nil, values("name", "type", "#individualForSegment"))
	p.call("list DELETE again", "DELETE", "/flags/inclusionList/"+p.id("list/pub"), nil, values("name", "message", "type", "errorCode"))
	p.call("list DELETE non-UUID", "DELETE", "/flags/inclusionList/xyz", nil, values("name", "message", "errorCode"))
	p.call("PUT same context keeps lists", "PUT", "/flags/"+id, p.flag("fl", fset("description", "d")),
		values("#featureFlagSegmentInclusion", "#featureFlagSegmentExclusion"))
	p.call("[PUT other ctx drops lists]", "PUT", "/flags/"+id, p.flag("fl", fset("context", []any{diffContext2})),
		values("#featureFlagSegmentInclusion", "#featureFlagSegmentExclusion", "context"))
	p.call("GET after context change", "GET", "/flags/"+id, nil, values("#featureFlagSegmentInclusion", "#featureFlagSegmentExclusion"))
	other := p.newFlag("create another", "fl2")
	p.addFlagList("another's list", "exclusion", p.flagList(other, "fl2", "Individual", true, []string{u1}, nil, nil))
	p.call("usage before the flag's delete", "GET", "/segments", nil, p.own(), values("#featureFlagSegmentExclusionData"))
	p.call("DELETE the flag with a list", "DELETE", "/flags/"+other, nil, values("#"))
	p.call("its lists went with it", "GET", "/segments", nil, p.own(), values("#featureFlagSegmentExclusionData"))
	p.call("its list segment is gone", "DELETE", "/flags/exclusionList/"+p.id("list/fl2"), nil, values("name", "message", "errorCode"))
}

// flagMessage records an error message with the flag id (which differs
// between the sides) written as <flag>.
func (p *party) flagMessage(flagID string, a answer) {
	p.fact(p.obs[len(p.obs)-1].label+": message", strings.ReplaceAll(a.str("message"), flagID, "<flag>"))
}

func scenarioSegmentRoutes(p *party) {
	u1, u2 := p.user("u1"), p.user("u2")
	a := p.call("[create: own id kept]", "POST", "/segments",
		p.seg(p.id("A"), p.named("A"), "public", []string{u1}, [][2]string{{"classId", "c-" + p.run}}, nil),
		values("name", "type", "context", "#individualForSegment", "#groupForSegment", "#subSegments", "listType", "tags"))
	p.fact("segment id kept", a.str("id") == p.id("A"))
	noID := p.call("create without id", "POST", "/segments", p.seg("", p.named("N"), "public", nil, nil, nil), values("name"))
	p.fact("segment without id gets one", noID.str("id") != "")
	p.call("[create: unknown subSegment dropped]", "POST", "/segments",
		p.seg(p.id("G"), p.named("G"), "public", nil, nil, []string{p.id("ghost")}), values("#subSegments"))
	p.call("create with a known and an unknown subSegment", "POST", "/segments",
		p.seg(p.id("H"), p.named("H"), "public", nil, nil, []string{p.id("A"), p.id("ghost")}), values("name", "message", "type", "errorCode"))
	p.call("create B with A", "POST", "/segments", p.seg(p.id("B"), p.named("B"), "public", nil, nil, []string{p.id("A")}),
		values("#subSegments", "subSegments.0.name", "#subSegments.0.individualForSegment"))
	p.call("[create dup name, same ctx]", "POST", "/segments", p.seg("", p.named("A"), "public", nil, nil, nil),
		values("name", "message", "type", "errorCode"))
	dup := p.seg("", p.named("A"), "public", nil, nil, nil)
	dup["context"] = diffContext2
	p.call("create same name, other context", "POST", "/segments", dup, values("name", "context"))
	p.call("create private with a used name", "POST", "/segments", p.seg("", p.named("A"), "private", nil, nil, nil), values("name", "type"))
	p.call("create unknown context", "POST", "/segments", func() map[string]any {
		m := p.seg("", p.named("X"), "public", nil, nil, nil)
		m["context"] = "no-such-context"
		return m
	}(), values("name", "message", "errorCode"))
	p.call("create bad type", "POST", "/segments", p.seg("", p.named("Y"), "secret", nil, nil, nil), values("name", "message", "errorCode"))
	p.call("create without groups", "POST", "/segments", func() map[string]any {
		m := p.seg("", p.named("Z"), "public", nil, nil, nil)
		delete(m, "groups")
		return m
	}(), values("name", "message", "errorCode"))
	p.call("[upsert by id replaces]", "POST", "/segments", p.seg(p.id("A"), p.named("A"), "public", []string{u2, p.user("u3")}, nil, nil),
		values("#individualForSegment", "#groupForSegment"))
	p.call("GET A", "GET", "/segments/"+p.id("A"), nil, values("name", "#individualForSegment", "#groupForSegment",
		"experimentSegmentInclusion", "experimentSegmentExclusion"))
	p.call("GET B", "GET", "/segments/"+p.id("B"), nil, values("#subSegments", "subSegments.0.name", "#subSegments.0.individualForSegment"))
	p.call("GET unknown", "GET", "/segments/"+p.id("nobody"), nil, values("name", "message", "type", "errorCode"))
	p.call("GET non-UUID", "GET", "/segments/xyz", nil, values("name", "message", "type", "errorCode"))
	p.call("GET /segments", "GET", "/segments", nil, p.own(), values("#segmentsData"))
	p.call("GET /segments/status/A", "GET", "/segments/status/"+p.id("A"), nil, p.own(), values("segment.status", "segment.name"))
	p.call("GET /segments/status unknown", "GET", "/segments/status/"+p.id("nobody"), nil, values("name", "message", "type", "errorCode"))
	p.call("GET /segments/global", "GET", "/segments/global", nil, values("#"), noShape())
	glob := p.seg(p.id("GX"), p.named("GX"), "global_exclude", nil, nil, nil)
	p.call("create a second global segment", "POST", "/segments", glob, values("type", "name"))
	p.call("GET /segments/global with it", "GET", "/segments/global", nil, p.own(), values("#", "0.status", "0.type"))
	p.call("GET the global segment", "GET", "/segments/"+p.id("GX"), nil, values("type"))
	p.call("global segments are not in GET /segments", "GET", "/segments", nil, p.own(), values("#segmentsData"))
	p.call("DELETE the second global segment", "DELETE", "/segments/"+p.id("GX"), nil, values("type"))
	p.call("paginated", "POST", "/segments/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "name", "string": p.run + " segs"},
		"sortParams":   map[string]any{"key": "name", "sortAs": "ASC"}}, p.own(), values("total", "#nodes.segmentsData", "skip", "take"))
	p.call("paginated without skip", "POST", "/segments/paginated", map[string]any{"take": 10}, values("name", "errorCode"))
	for _, dir := range []string{"ASC", "DESC"} {
		pg := p.call("paginated sorted by name "+dir, "POST", "/segments/paginated", map[string]any{"skip": 0, "take": 20,
			"searchParams": map[string]any{"key": "name", "string": p.run + " segs"},
			"sortParams":   map[string]any{"key": "name", "sortAs": dir}}, p.own(), values("total"))
		var names []string
		for _, r := range asArray(lookup(pg.body, "nodes.segmentsData")) {
			n, _ := lookup(r, "name").(string)
			names = append(names, strings.TrimPrefix(n, p.named(""))) // equal names: either order
		}
		p.fact("page order "+dir, names)
	}
	p.call("paginated search context", "POST", "/segments/paginated", map[string]any{"skip": 0, "take": 20,
		"searchParams": map[string]any{"key": "context", "string": p.run + " segs"}}, p.own(), values("total"))
	lst := p.seg(p.id("L"), p.named("L"), "private", []string{u1}, nil, nil)
	lst["parentSegmentId"] = p.id("B")
	p.call("POST /segments/list", "POST", "/segments/list", lst, values("name", "type", "#individualForSegment"))
	p.call("GET B with list", "GET", "/segments/"+p.id("B"), nil, values("#subSegments"))
	p.call("DELETE /segments/list without parent", "DELETE", "/segments/list/"+p.id("L"), nil, values("name", "message", "errorCode"))
	p.call("DELETE /segments/list", "DELETE", "/segments/list/"+p.id("L"), map[string]any{"parentSegmentId": p.id("B")},
		values("name", "type"))
	p.call("DELETE unknown", "DELETE", "/segments/"+p.id("nobody"), nil, values("name", "message", "type", "errorCode"))
	p.call("DELETE non-UUID", "DELETE", "/segments/xyz", nil, values("name", "message", "errorCode"))
	p.call("DELETE B", "DELETE", "/segments/"+p.id("B"), nil, values("name", "type", "#subSegments"))
	p.call("GET B deleted", "GET", "/segments/"+p.id("B"), nil, values("name", "message", "errorCode"))
}

func scenarioSegmentStatus(p *party) {
	u := p.user("u1")
	p.call("create child C", "POST", "/segments", p.seg(p.id("C"), p.named("C"), "public", []string{u}, nil, nil), values("name"))
	p.call("create S with C", "POST", "/segments", p.seg(p.id("S"), p.named("S"), "public", nil, nil, []string{p.id("C")}), values("#subSegments"))
	p.call("create parent P with S", "POST", "/segments", p.seg(p.id("P"), p.named("P"), "public", nil, nil, []string{p.id("S")}), values("#subSegments"))
	p.call("create E for an experiment", "POST", "/segments", p.seg(p.id("E"), p.named("E"), "public", []string{u}, nil, nil), values("name"))
	status := func(label, id string) {
		p.call(label, "GET", "/segments/status/"+id, nil, p.own(), values("segment.status"))
	}
	listStatus := func(label string) {
		a := p.call(label, "GET", "/segments", nil, p.own())
		var st []string
		if rows, ok := lookup(a.body, "segmentsData").([]any); ok {
			for _, r := range rows {
				n, _ := lookup(r, "name").(string)
				if p.mentions(r) {
					s, _ := lookup(r, "status").(string)
					st = append(st, strings.TrimPrefix(n, p.named(""))+"="+s)
				}
			}
		}
		sort.Strings(st)
		p.fact(label+": statuses", st)
	}
	status("S unused", p.id("S"))
	flag := p.newFlag("create flag", "sf", fset("status", "disabled"))
	p.addFlagList("flag list of S", "inclusion", p.flagList(flag, "segS", "Segment", true, nil, nil, []string{p.id("S")}))
	status("[status: usage row names flag]", p.id("S"))
	p.fact("usage row names the flag", func() bool {
		rows, _ := lookup(p.obs[len(p.obs)-1].body, "featureFlagSegmentInclusionData").([]any)
		for _, r := range rows {
			if lookup(r, "featureFlag.name") == p.named("sf") {
				return true
			}
		}
		return false
	}())
	status("[status: parent of a used seg]", p.id("P"))
	status("[status: child of a used seg]", p.id("C"))
	listStatus("[status: child of a used seg] GET /segments")
	p.call("paginated statuses", "POST", "/segments/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "name", "string": p.run + " segstatus"},
		"sortParams":   map[string]any{"key": "name", "sortAs": "ASC"}}, p.own(), values("total"))
	rows, _ := lookup(p.obs[len(p.obs)-1].body, "nodes.segmentsData").([]any)
	var pst []string
	for _, r := range rows {
		n, _ := lookup(r, "name").(string)
		s, _ := lookup(r, "status").(string)
		pst = append(pst, strings.TrimPrefix(n, p.named(""))+"="+s)
	}
	sort.Strings(pst)
	p.fact("paginated: statuses", pst)

	body := p.exp("st", set("filterMode", "excludeAll"), set("experimentSegmentInclusion", []any{map[string]any{"segment": map[string]any{
		"type": "private", "individualForSegment": []any{}, "groupForSegment": []any{}, "subSegments": []any{map[string]any{"id": p.id("E")}}}}}))
	id := p.create("create experiment using E", body).str("id")
	status("[status: exp usage row]", p.id("E"))
	p.fact("usage row names the experiment", func() bool {
		rows, _ := lookup(p.obs[len(p.obs)-1].body, "experimentSegmentInclusionData").([]any)
		for _, r := range rows {
			if lookup(r, "experiment.name") == p.named("st") {
				return true
			}
		}
		return false
	}())
	p.state("archive", id, "archived")
	status("[status: only archived exps]", p.id("E"))
	listStatus("GET /segments with an archived experiment")
	p.call("[DELETE a used segment]", "DELETE", "/segments/"+p.id("S"), nil, values("name", "type"))
	p.call("[flag's Segment list after]", "GET", "/flags/"+flag, nil, values("#featureFlagSegmentInclusion",
		"#featureFlagSegmentInclusion.0.segment.subSegments"))
	p.call("parent after its child went", "GET", "/segments/"+p.id("P"), nil, values("#subSegments"))
	p.call("DELETE segment used by an experiment", "DELETE", "/segments/"+p.id("E"), nil, values("name"))
	p.call("experiment list after", "GET", "/experiments/single/"+id, nil, values("#experimentSegmentInclusion",
		"#experimentSegmentInclusion.0.segment.subSegments"))
}

// evalUsers initialises the users of the evaluation scenarios.
func (p *party) evalUsers() map[string]string {
	c1, s1 := "c1-"+p.run, "s1-"+p.run
	us := map[string]string{}
	for _, n := range []string{"u1", "u2", "u3", "u4", "u5", "u6"} {
		var body map[string]any
		switch n {
		case "u2":
			body = map[string]any{"group": map[string]any{"classId": []any{c1}, "schoolId": []any{"s2-" + p.run}}, "workingGroup": map[string]any{"schoolId": "s2-" + p.run}}
		case "u6":
			body = map[string]any{"group": map[string]any{"schoolId": []any{s1}, "classId": []any{c1}}, "workingGroup": map[string]any{"schoolId": s1}}
		}
		us[n] = p.user(n)
		p.initUser("init "+n, us[n], body)
	}
	return us
}

// evalAll evaluates every user of the scenario.
func (p *party) evalAll(label string, us map[string]string) {
	for _, n := range []string{"u1", "u2", "u3", "u4", "u5", "u6"} {
		p.evalKeys(label+" "+n, us[n], nil)
	}
}

// evalFlags makes the flags of the evaluation scenarios; it returns their ids.
func (p *party) evalFlags(us map[string]string) map[string]string {
	c1, s1 := "c1-"+p.run, "s1-"+p.run
	ids := map[string]string{}
	mk := func(n, mode string, opts ...flagOpt) string {
		ids[n] = p.newFlag("create "+n, n, append([]flagOpt{fset("filterMode", mode)}, opts...)...)
		return ids[n]
	}
	mk("all", "includeAll")
	p.addFlagList("B include u1", "inclusion", p.flagList(mk("b", "excludeAll"), "b-inc", "Individual", true, []string{us["u1"]}, nil, nil))
	p.addFlagList("B exclude class", "exclusion", p.flagList(ids["b"], "b-exc", "classId", true, nil, [][2]string{{"classId", "cx-" + p.run}}, nil))
	// [eval: group not working grp]: u2's class is not their working group
	p.addFlagList("C include class c1", "inclusion", p.flagList(mk("c", "excludeAll"), "c-inc", "classId", true, nil, [][2]string{{"classId", c1}}, nil))
	// [eval: in nested segment]: u3 is in S2, a sub-segment of S1
	p.call("create S2", "POST", "/segments", p.seg(p.id("S2"), p.named("S2"), "public", []string{us["u3"]}, nil, nil), values("name"))
	p.call("create S1", "POST", "/segments", p.seg(p.id("S1"), p.named("S1"), "public", nil, nil, []string{p.id("S2")}), values("#subSegments"))
	p.addFlagList("D include S1", "inclusion", p.flagList(mk("d", "excludeAll"), "d-inc", "Segment", true, nil, nil, []string{p.id("S1")}))
	// [eval: only in disabled lists]
	p.addFlagList("E disabled include u4", "inclusion", p.flagList(mk("e", "excludeAll"), "e-inc", "Individual", false, []string{us["u4"]}, nil, nil))
	mk("two", "includeAll", fset("context", []any{diffContext, diffContext2}))
	mk("off", "includeAll", fset("status", "disabled"))
	mk("arch", "includeAll", fset("status", "archived"))
	// [eval: user incl, group excl]: u2 included by id, excluded by class
	p.addFlagList("H exclude class c1", "exclusion", p.flagList(mk("h", "includeAll"), "h-exc", "classId", true, nil, [][2]string{{"classId", c1}}, nil))
	p.addFlagList("H include u2", "inclusion", p.flagList(ids["h"], "h-inc", "Individual", true, []string{us["u2"]}, nil, nil))
	// [eval: in include+exclude]
	p.addFlagList("I include u5", "inclusion", p.flagList(mk("i", "excludeAll"), "i-inc", "Individual", true, []string{us["u5"]}, nil, nil))
	p.addFlagList("I exclude u5", "exclusion", p.flagList(ids["i"], "i-exc", "Individual", true, []string{us["u5"]}, nil, nil))
	// [eval: groups incl+excl]: u6 in school s1 (included) and class c1 (excluded)
	p.addFlagList("J include school", "inclusion", p.flagList(mk("j", "excludeAll"), "j-inc", "schoolId", true, nil, [][2]string{{"schoolId", s1}}, nil))
	p.addFlagList("J exclude class", "exclusion", p.flagList(ids["j"], "j-exc", "classId", true, nil, [][2]string{{"classId", c1}}, nil))
	// [eval: group id, other type]: schoolId c1 matches nobody's class c1
	p.addFlagList("K include school c1", "inclusion", p.flagList(mk("k", "excludeAll"), "k-inc", "schoolId", true, nil, [][2]string{{"schoolId", c1}}, nil))
	// [eval: in segment's list]: u4 is in a private list of public segment T
	p.call("create T", "POST", "/segments", p.seg(p.id("T"), p.named("T"), "public", nil, nil, nil), values("name"))
	tl := p.seg(p.id("TL"), p.named("TL"), "private", []string{us["u4"]}, nil, nil)
	tl["parentSegmentId"] = p.id("T")
	p.call("T's list with u4", "POST", "/segments/list", tl, values("type"))
	p.addFlagList("L include T", "inclusion", p.flagList(mk("l", "excludeAll"), "l-inc", "Segment", true, nil, nil, []string{p.id("T")}))
	return ids
}

func scenarioFlagEvaluation(p *party) {
	us := p.evalUsers()
	p.evalFlags(us)
	p.evalAll("[eval: no lists match] ...", us)
	p.evalKeys("[eval: flag of 2 contexts]", us["u1"], map[string]any{"context": diffContext2})
	p.evalKeys("[featureflag unknown ctx]", us["u1"], map[string]any{"context": "no-such-context"})
	p.evalKeys("without context", us["u1"], map[string]any{})
	p.call("without User-Id", "POST", "/v6/featureflag", map[string]any{"context": diffContext}, values("name", "message", "type", "errorCode"))
	ghost := p.user("ghost")
	p.evalKeys("uninitialised user", ghost, nil)
	p.evalKeys("[eval: ephemeral session groups]", ghost, map[string]any{"context": diffContext,
		"groupsForSession": map[string]any{"classId": []any{"c1-" + p.run}}, "includeStoredUserGroups": false})
	p.evalKeys("session groups, stored wanted, uninitialised", p.user("ghost2"), map[string]any{"context": diffContext,
		"groupsForSession": map[string]any{"classId": []any{"c1-" + p.run}}, "includeStoredUserGroups": true})
	p.evalKeys("[eval: merged session groups]", us["u6"], map[string]any{"context": diffContext,
		"groupsForSession": map[string]any{"schoolId": []any{"s9-" + p.run}}, "includeStoredUserGroups": true})
	p.evalKeys("merged: u1 joins class c1", us["u1"], map[string]any{"context": diffContext,
		"groupsForSession": map[string]any{"classId": []any{"c1-" + p.run}}, "includeStoredUserGroups": true})
	p.evalKeys("session only: u6 without stored groups", us["u6"], map[string]any{"context": diffContext,
		"groupsForSession": map[string]any{"schoolId": []any{"s9-" + p.run}}, "includeStoredUserGroups": false})
	p.evalKeys("[eval: session groups not kept]", us["u1"], nil)
	p.evalKeys("groupsForSession alone", us["u1"], map[string]any{"context": diffContext,
		"groupsForSession": map[string]any{"classId": []any{"c1-" + p.run}}})
	p.evalKeys("includeStoredUserGroups alone", us["u1"], map[string]any{"context": diffContext, "includeStoredUserGroups": true})
	p.call("ghost still unknown", "POST", "/v6/featureflag", map[string]any{"context": diffContext}, as(ghost), values("name", "type", "errorCode"))
}

func scenarioFlagEvaluationChanges(p *party) {
	us := p.evalUsers()
	ids := p.evalFlags(us)
	p.evalAll("before", us)
	p.call("E to includeAll", "PATCH", "/flags/filterMode", map[string]any{"flagId": ids["e"], "filterMode": "includeAll"}, values("filterMode"))
	p.evalKeys("[eval: excludeAll -> includeAll] u4", us["u4"], nil)
	p.call("B include list disabled", "PUT", "/flags/inclusionList/"+p.id("list/b-inc"),
		p.flagList(ids["b"], "b-inc", "Individual", false, []string{us["u1"]}, nil, nil), values("enabled"))
	p.evalKeys("[eval: include list disabled] u1", us["u1"], nil)
	p.call("disable all", "PATCH", "/flags/status", map[string]any{"flagId": ids["all"], "status": "disabled"}, values("status"))
	p.evalKeys("[eval: disable, enable again] off", us["u1"], nil)
	p.call("enable all", "PATCH", "/flags/status", map[string]any{"flagId": ids["all"], "status": "enabled"}, values("status"))
	p.evalKeys("[eval: disable, enable again] on", us["u1"], nil)
	p.call("delete S2", "DELETE", "/segments/"+p.id("S2"), nil, values("name"))
	p.evalKeys("[eval: used segment deleted] u3", us["u3"], nil)
	p.call("delete C's list", "DELETE", "/flags/inclusionList/"+p.id("list/c-inc"), nil, values("name"))
	p.evalKeys("[eval: group list deleted] u2", us["u2"], nil)
	p.call("delete T's list", "DELETE", "/segments/list/"+p.id("TL"), map[string]any{"parentSegmentId": p.id("T")}, values("name"))
	p.evalKeys("segment's list deleted u4", us["u4"], nil)
	p.call("[exposures: distinct users]", "POST", "/flags/paginated", map[string]any{"skip": 0, "take": 20,
		"searchParams": map[string]any{"key": "name", "string": p.run + " evalchange"},
		"sortParams":   map[string]any{"key": "name", "sortAs": "ASC"}}, values("total"))
	var exp []string
	rows, _ := lookup(p.obs[len(p.obs)-1].body, "nodes").([]any)
	for _, r := range rows {
		n, _ := lookup(r, "key").(string)
		exp = append(exp, fmt.Sprintf("%s=%v", strings.TrimPrefix(n, p.key("")), lookup(r, "featureFlagExposures")))
	}
	sort.Strings(exp)
	p.fact("exposures per flag", exp)
}

func scenarioExperimentPublicSegment(p *party) {
	in, out, other := p.user("in"), p.user("out"), p.user("other")
	school := "s-" + p.run
	p.call("create I", "POST", "/segments", p.seg(p.id("I"), p.named("I"), "public", []string{in, out}, [][2]string{{"schoolId", school}}, nil), values("name"))
	p.call("create X", "POST", "/segments", p.seg(p.id("X"), p.named("X"), "public", []string{out}, nil, nil), values("name"))
	segList := func(id string) []any {
		return []any{map[string]any{"segment": map[string]any{"type": "private", "individualForSegment": []any{},
			"groupForSegment": []any{}, "subSegments": []any{map[string]any{"id": id}}}}}
	}
	body := p.exp("ps", set("filterMode", "excludeAll"), set("experimentSegmentInclusion", segList(p.id("I"))),
		set("experimentSegmentExclusion", segList(p.id("X"))))
	c := p.create("create", body, "#experimentSegmentInclusion")
	id := c.str("id")
	g := p.call("[exp list segment as stored]", "GET", "/experiments/single/"+id, nil, values("#experimentSegmentInclusion",
		"experimentSegmentInclusion.0.segment.listType", "experimentSegmentInclusion.0.segment.type",
		"#experimentSegmentInclusion.0.segment.subSegments", "experimentSegmentInclusion.0.segment.subSegments.0.name",
		"#experimentSegmentExclusion", "experimentSegmentExclusion.0.segment.listType"))
	p.fact("list name is '<id> Segment'", g.str("experimentSegmentInclusion.0.segment.name") == id+" Segment")
	p.state("start", id, "enrolling")
	p.initUser("init in", in, nil)
	p.initUser("init out", out, nil)
	p.initUser("init school", p.user("sch"), map[string]any{"group": map[string]any{"schoolId": []any{school}}, "workingGroup": map[string]any{"schoolId": "elsewhere"}})
	p.initUser("init other", other, nil)
	p.assignCodes("[exp incl via public segment]", in)
	p.assignCodes("[exp excl via public segment]", out)
	p.assignCodes("included by a group of the segment", p.user("sch"))
	p.assignCodes("in no segment", other)
	p.call("GET list", "GET", "/experiments", nil, p.own(), values("#", "0.experimentSegmentInclusion.0.segment.listType",
		"#0.experimentSegmentInclusion.0.segment.subSegments"))
}

func scenarioHistory(p *party) {
	c := p.create("[create: stateTimeLogs]", p.exp("h"))
	id := c.str("id")
	p.fact("create answer has no stateTimeLogs", lookup(c.body, "stateTimeLogs") == nil)
	p.call("GET single, no history", "GET", "/experiments/single/"+id, nil, values("#stateTimeLogs"))
	s := p.call("[state answer: history]", "POST", "/experiments/state", map[string]any{"experimentId": id, "state": "enrolling"},
		values("state", "#stateTimeLogs"))
	p.fact("[state answer: newest log extra]", p.newestLogHasExperiment(s))
	p.state("pause", id, "enrollmentComplete")
	p.state("complete", id, "cancelled")
	g := p.call("[GET single: history]", "GET", "/experiments/single/"+id, nil, values("state", "#stateTimeLogs"))
	p.fact("history by timeLog", logSequence(g.body))
	l := p.call("GET list history", "GET", "/experiments", nil, p.own(), values("0.state", "#0.stateTimeLogs"))
	p.fact("list history by timeLog", logSequence(lookup(l.body, "0")))
	p.call("[paginated: history]", "POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 5,
		"searchParams": map[string]any{"key": "name", "string": p.run + " history"}}, values("total", "#nodes.0.stateTimeLogs", "nodes.0.state"))
	s = p.call("state answer after three changes", "POST", "/experiments/state", map[string]any{"experimentId": id, "state": "enrolling"},
		values("state", "#stateTimeLogs"))
	p.fact("state answer by timeLog", logSequence(s.body))
}

// newestLogHasExperiment says whether only the newest time log of a state
// answer carries the experiment.
func (p *party) newestLogHasExperiment(a answer) string {
	logs, _ := lookup(a.body, "stateTimeLogs").([]any)
	var out []string
	for _, l := range logs {
		out = append(out, fmt.Sprintf("%v>%v:%v", lookup(l, "fromState"), lookup(l, "toState"), lookup(l, "experiment") != nil))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// logSequence lists an experiment's state changes ordered by timeLog.
func logSequence(exp any) []string {
	logs, _ := lookup(exp, "stateTimeLogs").([]any)
	type entry struct{ at, s string }
	var es []entry
	for _, l := range logs {
		at, _ := lookup(l, "timeLog").(string)
		es = append(es, entry{at, fmt.Sprintf("%v>%v", lookup(l, "fromState"), lookup(l, "toState"))})
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].at < es[j].at })
	out := []string{}
	for _, e := range es {
		out = append(out, e.s)
	}
	return out
}

func scenarioAudit(p *party) {
	id := p.create("create", p.exp("au")).str("id")
	p.state("start", id, "enrolling")
	p.state("pause", id, "enrollmentComplete")
	a := p.call("[audit: types newest first]", "POST", "/audit", map[string]any{"skip": 0, "take": 10, "experimentId": id},
		values("total", "#nodes", "nodes.0.type", "nodes.1.type", "nodes.0.data.previousState", "nodes.0.data.newState",
			"nodes.1.data.previousState", "nodes.1.data.newState", "skip", "take"))
	// The create's three entries are written in one transaction and may
	// share a timestamp: compare them as a set.
	var made []string
	for _, n := range asArray(lookup(a.body, "nodes")) {
		if t, _ := lookup(n, "type").(string); t != "experimentStateChanged" {
			made = append(made, fmt.Sprintf("%s %v %v", t, lookup(n, "data.list.filterType"), lookup(n, "data.list.operation")))
		}
	}
	sort.Strings(made)
	p.fact("the create's audit entries", made)
	p.fact("audit echoes the experiment id", a.str("experimentId") == id)
	p.fact("audit names the experiment", lookup(a.body, "nodes.2.data.experimentName") == p.named("au"))
	f := p.newFlag("create flag", "af")
	p.call("flag status", "PATCH", "/flags/status", map[string]any{"flagId": f, "status": "disabled"}, values("status"))
	p.call("flag update", "PUT", "/flags/"+f, p.flag("af", fset("status", "disabled"), fset("description", "x")), values("description"))
	fa := p.call("flag audit", "POST", "/audit", map[string]any{"skip": 0, "take": 10, "flagId": f},
		values("total", "#nodes", "nodes.0.type", "nodes.1.type", "nodes.2.type"))
	p.fact("audit echoes the flag id", fa.str("flagId") == f)
	p.call("flag delete", "DELETE", "/flags/"+f, nil, values("#"))
	p.call("flag audit after delete", "POST", "/audit", map[string]any{"skip": 0, "take": 10, "flagId": f}, values("total", "#nodes"))
	all := p.call("[flag audit: delete log]", "POST", "/audit", map[string]any{"skip": 0, "take": 20, "filter": "featureFlagDeleted"},
		values("nodes.0.type"))
	var del any
	if rows, ok := lookup(all.body, "nodes").([]any); ok {
		for _, r := range rows {
			if p.mentions(r) {
				del = r
				break
			}
		}
	}
	p.fact("delete log found", del != nil)
	p.fact("delete log data keys", keysOf(lookup(del, "data")))
	p.call("audit without take", "POST", "/audit", map[string]any{"skip": 0}, values("name", "errorCode"))
	p.call("audit bad filter", "POST", "/audit", map[string]any{"skip": 0, "take": 1, "filter": "nonsense"}, values("name", "errorCode"))
}

// scenarioExperimentListReads checks how each read shows an experiment's
// lists, and the wording of a non-UUID id.
func scenarioExperimentListReads(p *party) {
	x := p.user("x")
	only := p.create("create with an individual exclusion list", p.exp("ind", set("experimentSegmentExclusion", segment([]string{x}, nil))))
	p.call("GET single: individual exclusion list only", "GET", "/experiments/single/"+only.str("id"), nil,
		values("#experimentSegmentInclusion", "#experimentSegmentExclusion", "experimentSegmentExclusion.0.segment.listType",
			"#experimentSegmentExclusion.0.segment.individualForSegment"))
	grp := p.create("create with a group inclusion list", p.exp("grp", set("experimentSegmentInclusion",
		segment(nil, [][2]string{{"classId", "c-" + p.run}, {"classId", "d-" + p.run}}))))
	p.call("GET single: group inclusion list", "GET", "/experiments/single/"+grp.str("id"), nil,
		values("#experimentSegmentInclusion", "#experimentSegmentExclusion", "experimentSegmentInclusion.0.segment.listType"))
	mixed := p.create("create with a mixed list", p.exp("mix", set("experimentSegmentInclusion",
		segment([]string{x}, [][2]string{{"classId", "c-" + p.run}, {"schoolId", "s-" + p.run}}))))
	p.call("GET single: mixed list", "GET", "/experiments/single/"+mixed.str("id"), nil,
		values("#experimentSegmentInclusion", "#experimentSegmentExclusion"))
	id := grp.str("id")
	p.call("create public segment P", "POST", "/segments", p.seg(p.id("P"), p.named("P"), "public", []string{x}, nil, nil), values("name"))
	for _, l := range []struct{ kind, label, listType string }{
		{"inclusion", "ind", "individual"}, {"inclusion", "seg", "segment"}, {"exclusion", "cls", "classId"}, {"exclusion", "none", ""}} {
		list := map[string]any{"id": p.id("xl/" + l.label), "name": p.named("list " + l.label), "context": diffContext, "type": "private",
			"userIds": []any{}, "groups": []any{}, "subSegmentIds": []any{}}
		switch l.label {
		case "ind":
			list["userIds"] = []any{x}
		case "seg":
			list["subSegmentIds"] = []any{p.id("P")}
		case "cls":
			list["groups"] = []any{map[string]any{"type": "classId", "groupId": "c-" + p.run}}
		}
		if l.listType != "" {
			list["listType"] = l.listType
		}
		p.call("add "+l.kind+" list "+l.label, "POST", "/experiments/"+l.kind+"List", map[string]any{"experimentId": id, "list": list},
			values("segment.listType", "segment.name", "#segment.subSegments"))
	}
	p.call("GET single: lists added by route", "GET", "/experiments/single/"+id, nil,
		values("#experimentSegmentInclusion", "#experimentSegmentExclusion"))
	p.fact("single: list types", listTypes(p.obs[len(p.obs)-1].body))
	p.call("GET list", "GET", "/experiments", nil, p.own(), values("#"))
	for _, el := range p.ownElems(asArray(p.obs[len(p.obs)-1].body)) {
		if lookup(el, "id") == id {
			p.fact("GET /experiments: list types", listTypes(el))
		}
	}
	p.call("paginated rows", "POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 10,
		"searchParams": map[string]any{"key": "name", "string": p.run + " explists"},
		"sortParams":   map[string]any{"key": "name", "sortAs": "ASC"}}, values("total", "#nodes",
		"#nodes.0.experimentSegmentInclusion", "#nodes.0.experimentSegmentExclusion",
		"#nodes.1.experimentSegmentInclusion", "#nodes.2.experimentSegmentInclusion"))
	p.call("GET single non-UUID", "GET", "/experiments/single/xyz", nil, values("name", "message", "type", "errorCode"))
	p.call("DELETE non-UUID", "DELETE", "/experiments/xyz", nil, values("name", "message", "type", "errorCode"))
}

// scenarioFlagClient runs the agent's own flag, segment and history client
// methods and compares what they made of the answers: results and error
// categories.
func scenarioFlagClient(p *party) {
	ctx := context.Background()
	cl, err := upgrade.New(upgrade.Config{BaseURL: p.base, MaxRetries: -1})
	if err != nil {
		p.tb.Fatal(err)
	}
	f := &upgrade.FeatureFlag{Name: p.named("cf"), Key: p.key("cf"), Context: []string{diffContext}, Tags: []string{},
		Status: upgrade.FlagEnabled, FilterMode: "excludeAll"}
	made, err := cl.CreateFlag(ctx, f)
	p.fact("CreateFlag", errText(err))
	if err != nil {
		return
	}
	p.madeFlags = append(p.madeFlags, made.ID)
	_, err = cl.CreateFlag(ctx, f)
	p.fact("CreateFlag same key", errText(err))
	got, err := cl.Flag(ctx, made.ID)
	p.fact("Flag", fmt.Sprintf("%s %s", errText(err), flagSummary(got)))
	_, err = cl.Flag(ctx, p.id("nobody"))
	p.fact("Flag unknown", errText(err))
	_, err = cl.Flag(ctx, "xyz")
	p.fact("Flag non-UUID", errText(err))
	all, err := cl.Flags(ctx)
	n := 0
	for _, x := range all {
		if x.ID == made.ID {
			n++
		}
	}
	p.fact("Flags holds it", fmt.Sprintf("%s %d", errText(err), n))
	page, err := cl.FlagsPage(ctx, upgrade.PageRequest{Take: 5, SearchParams: &upgrade.SearchParams{Key: "name", String: p.run + " flagclient"}})
	if page != nil {
		p.fact("FlagsPage", fmt.Sprintf("%s %d", errText(err), page.Total))
	} else {
		p.fact("FlagsPage", errText(err))
	}
	u := p.user("u1")
	p.initUser("init u1", u, nil)
	pilot, err := cl.UpsertSegment(ctx, upgrade.SegmentInput{Name: p.named("pilot"), Context: diffContext, Type: upgrade.SegmentPublic,
		UserIDs: []string{u}})
	p.fact("UpsertSegment", errText(err))
	if err == nil {
		p.madeSegs = append(p.madeSegs, pilot.ID)
		l, err := cl.AddFlagList(ctx, upgrade.ListInclusion, upgrade.FlagListInput{FlagID: made.ID, Enabled: true, ListType: "Segment",
			Segment: upgrade.SegmentInput{Name: p.named("cf list"), Context: diffContext, SubSegmentIDs: []string{pilot.ID}}})
		p.fact("AddFlagList", errText(err))
		keys, err := cl.FeatureFlagKeys(ctx, u, upgrade.FeatureFlagRequest{Context: diffContext})
		p.fact("FeatureFlagKeys", fmt.Sprintf("%s %v", errText(err), slices.Contains(keys, p.key("cf"))))
		if l != nil {
			in := upgrade.FlagListInput{FlagID: made.ID, Enabled: false, ListType: "Segment",
				Segment: upgrade.SegmentInput{ID: l.ID(), Name: p.named("cf list"), Context: diffContext, SubSegmentIDs: []string{pilot.ID}}}
			_, err = cl.UpdateFlagList(ctx, upgrade.ListInclusion, in)
			p.fact("UpdateFlagList", errText(err))
			_, err = cl.UpdateFlagList(ctx, upgrade.ListExclusion, in)
			p.fact("UpdateFlagList other kind", errText(err))
			st, err := cl.SegmentStatus(ctx, pilot.ID)
			if st != nil {
				named := false
				for _, r := range st.FlagInclusion {
					named = named || (r.FeatureFlag != nil && r.FeatureFlag.Name == p.named("cf"))
				}
				p.fact("SegmentStatus", fmt.Sprintf("%s %s usage row names the flag: %v", errText(err), st.Segment.Status, named))
			} else {
				p.fact("SegmentStatus", errText(err))
			}
			_, err = cl.DeleteFlagList(ctx, upgrade.ListInclusion, l.ID())
			p.fact("DeleteFlagList", errText(err))
			_, err = cl.DeleteFlagList(ctx, upgrade.ListInclusion, l.ID())
			p.fact("DeleteFlagList again", errText(err))
		}
		seg, err := cl.Segment(ctx, pilot.ID)
		p.fact("Segment", fmt.Sprintf("%s %v", errText(err), seg != nil && len(seg.Users) == 1))
		_, err = cl.Segment(ctx, p.id("nobody"))
		p.fact("Segment unknown", errText(err))
		segs, err := cl.Segments(ctx)
		p.fact("Segments", fmt.Sprintf("%s %v", errText(err), segs != nil))
		sp, err := cl.SegmentsPage(ctx, upgrade.PageRequest{Take: 5, SearchParams: &upgrade.SearchParams{Key: "name", String: p.run + " flagclient"}})
		if sp != nil {
			p.fact("SegmentsPage", fmt.Sprintf("%s %d", errText(err), sp.Total))
		} else {
			p.fact("SegmentsPage", errText(err))
		}
		_, err = cl.DeleteSegment(ctx, pilot.ID)
		p.fact("DeleteSegment", errText(err))
		_, err = cl.DeleteSegment(ctx, pilot.ID)
		p.fact("DeleteSegment again", errText(err))
	}
	glob, err := cl.GlobalSegments(ctx)
	p.fact("GlobalSegments", fmt.Sprintf("%s %d", errText(err), len(glob)))
	st, err := cl.SetFlagStatus(ctx, made.ID, upgrade.FlagDisabled)
	p.fact("SetFlagStatus", fmt.Sprintf("%s %s", errText(err), flagSummary(st)))
	_, err = cl.SetFlagStatus(ctx, p.id("nobody"), upgrade.FlagDisabled)
	p.fact("SetFlagStatus unknown", errText(err))
	fm, err := cl.SetFlagFilterMode(ctx, made.ID, "includeAll")
	p.fact("SetFlagFilterMode", fmt.Sprintf("%s %s", errText(err), flagSummary(fm)))
	made.Description = "by the client"
	up, err := cl.UpdateFlag(ctx, made)
	p.fact("UpdateFlag", fmt.Sprintf("%s %s", errText(err), flagSummary(up)))
	ghost := *made
	ghost.ID, ghost.Key = p.id("nobody"), p.key("ghost")
	_, err = cl.UpdateFlag(ctx, &ghost)
	p.fact("UpdateFlag unknown", errText(err))
	audit, err := cl.Audit(ctx, upgrade.AuditRequest{Take: 10, FlagID: made.ID})
	if audit != nil {
		var types []string
		for _, e := range audit.Nodes {
			types = append(types, e.Type)
		}
		p.fact("Audit", fmt.Sprintf("%s %v", errText(err), types))
	} else {
		p.fact("Audit", errText(err))
	}
	_, err = cl.DeleteFlag(ctx, made.ID)
	p.fact("DeleteFlag", errText(err))
	_, err = cl.DeleteFlag(ctx, made.ID)
	p.fact("DeleteFlag again", errText(err))

	e := upgrade.Experiment{Name: p.named("history"), Context: []string{diffContext}, State: upgrade.StateInactive,
		ConsistencyRule: upgrade.ConsistencyIndividual, AssignmentUnit: upgrade.UnitIndividual,
		PostExperimentRule: upgrade.PostRuleContinue, Tags: []string{}, FilterMode: upgrade.FilterIncludeAll,
		Type: upgrade.TypeSimple, AssignmentAlgorithm: upgrade.AlgorithmRandom,
		Conditions: []upgrade.Condition{{ConditionCode: "control", AssignmentWeight: 100, Order: 1}},
		Partitions: []upgrade.DecisionPoint{{Site: "SelectSection", Target: p.target("t1"), Order: 1}}}
	created, err := cl.CreateExperiment(ctx, &e)
	p.fact("CreateExperiment", errText(err))
	if err != nil {
		return
	}
	p.made = append(p.made, created.ID)
	p.state("start", created.ID, "enrolling")
	p.state("pause", created.ID, "enrollmentComplete")
	h, err := cl.StateHistory(ctx, created.ID)
	var steps []string
	for _, l := range upgrade.SortedHistory(h) {
		steps = append(steps, string(l.FromState)+">"+string(l.ToState))
	}
	p.fact("StateHistory", fmt.Sprintf("%s %v", errText(err), steps))
	_, err = cl.StateHistory(ctx, p.id("nobody"))
	p.fact("StateHistory unknown", errText(err))
}

func flagSummary(f *upgrade.FeatureFlag) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%v/%s/%s/%s in=%d ex=%d", strings.Contains(f.Key, "_flagclient_"), f.Status, f.FilterMode,
		f.Description, len(f.Inclusion), len(f.Exclusion))
}

func asArray(v any) []any {
	a, _ := v.([]any)
	return a
}

// listTypes lists an experiment's lists as kind:listType:name-or-"<id> Segment", sorted.
func listTypes(exp any) []string {
	out := []string{}
	for _, k := range []string{"experimentSegmentInclusion", "experimentSegmentExclusion"} {
		for _, r := range asArray(lookup(exp, k)) {
			name, _ := lookup(r, "segment.name").(string)
			if strings.HasSuffix(name, " Segment") {
				name = "<id> Segment"
			} else if i := strings.LastIndex(name, " "); i >= 0 {
				name = name[i+1:]
			}
			out = append(out, fmt.Sprintf("%s:%v:%s:%d", k[len(k)-9:], lookup(r, "segment.listType"), name,
				len(asArray(lookup(r, "segment.subSegments")))))
		}
	}
	sort.Strings(out)
	return out
}
