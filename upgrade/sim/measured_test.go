package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Behaviour measured on the real 6.5 backend by the differential test
// (docs/simulator.md, "Checked against the real server"), kept here so that
// it stays true without a real server.

// The single read shows the lists whose kind the server can infer, with
// listType set; GET /experiments shows every list as stored.
func TestSingleReadListsMeasured(t *testing.T) {
	ts := startSim(t, Options{})
	cases := []struct {
		name       string
		inc, exc   []any
		wantIncExc [2]int
		wantType   string // listType of the one list shown
	}{
		{"individual exclusion only", segment(nil, nil), segment([]string{"x"}, nil), [2]int{0, 1}, "individual"},
		{"groups of one type", segment(nil, [][2]string{{"classId", "c1"}, {"classId", "c2"}}), segment(nil, nil), [2]int{1, 0}, "classId"},
		{"groups of two types", segment(nil, [][2]string{{"classId", "c1"}, {"schoolId", "s1"}}), segment(nil, nil), [2]int{0, 0}, ""},
		{"users and groups", segment([]string{"x"}, [][2]string{{"classId", "c1"}}), segment(nil, nil), [2]int{0, 0}, ""},
	}
	for i, tc := range cases {
		e := ts.create(expBody(fmt.Sprintf("lists %d", i), func(m map[string]any) {
			m["experimentSegmentInclusion"], m["experimentSegmentExclusion"] = tc.inc, tc.exc
		}))
		got := ts.must("GET", "/experiments/single/"+e.ID, nil).object(t)
		inc, _ := got["experimentSegmentInclusion"].([]any)
		exc, _ := got["experimentSegmentExclusion"].([]any)
		if len(inc) != tc.wantIncExc[0] || len(exc) != tc.wantIncExc[1] {
			t.Errorf("%s: %d inclusion, %d exclusion lists shown, want %v", tc.name, len(inc), len(exc), tc.wantIncExc)
			continue
		}
		if shown := append(inc, exc...); len(shown) == 1 {
			if lt := lookup(shown[0], "segment.listType"); lt != tc.wantType {
				t.Errorf("%s: listType %v, want %s", tc.name, lt, tc.wantType)
			}
		}
	}
	// A body whose lists are [] makes none: every read shows none.
	bare := ts.create(expBody("no lists"))
	var all []map[string]any
	ts.must("GET", "/experiments", nil).decode(t, &all)
	for _, e := range all {
		inc, _ := e["experimentSegmentInclusion"].([]any)
		exc, _ := e["experimentSegmentExclusion"].([]any)
		if e["id"] == bare.ID {
			if len(inc) != 0 || len(exc) != 0 {
				t.Errorf("GET /experiments, created without lists: %v %v", inc, exc)
			}
			continue
		}
		if len(inc) != 1 || len(exc) != 1 || lookup(inc[0], "segment.listType") != nil {
			t.Errorf("GET /experiments %v: lists %v %v", e["name"], inc, exc)
		}
	}
	got := ts.must("GET", "/experiments/single/"+bare.ID, nil).object(t)
	if lookup(got, "#experimentSegmentInclusion") != 0 || lookup(got, "#experimentSegmentExclusion") != 0 {
		t.Errorf("single read, created without lists: %v", got)
	}
	r := ts.do("GET", "/experiments/single/xyz", nil)
	if r.status != 400 || !strings.Contains(string(r.body), "Invalid params, check 'errors' property") {
		t.Errorf("non-UUID id: %d %s", r.status, r.body)
	}
}

// An experiment created without lists (as 6.5.0 keeps a body with []
// lists) gets them through the list routes: SetLists adds the row, which
// assignment then follows (docs/upgrade-real.md).
func TestListsOfExperimentCreatedWithout(t *testing.T) {
	ts, c, ctx := flagSim(t)
	e := ts.create(expBody("bare"))
	if inc, exc, err := c.Lists(ctx, e.ID); err != nil || len(inc) != 0 || len(exc) != 0 {
		t.Fatalf("lists of a bare experiment: %v %v %v", inc, exc, err)
	}
	if err := c.SetLists(ctx, &e, upgrade.Segment{}, upgrade.Segment{Users: []string{"x1"}}); err != nil {
		t.Fatal(err)
	}
	inc, exc, err := c.Lists(ctx, e.ID)
	if err != nil || len(inc) != 0 || len(exc) != 1 || !slices.Equal(exc[0].Segment.Users, []string{"x1"}) {
		t.Fatalf("after SetLists: %+v %+v %v", inc, exc, err)
	}
	ts.setState(e.ID, "enrolling")
	ts.initUser("x1", nil, nil)
	if code := codeAt(t, ts.assign("x1", "assign-prog"), "SelectSection", "absolute_value_plot_equality"); code != "" {
		t.Errorf("excluded user got %s", code)
	}
}

// [exp incl via public segment] through the create body, [exp list segment
// as stored]: a create body's list may name public segments; their members
// count, the single read calls the list "segment", and deleting the segment
// empties it.
func TestCreateBodySubSegmentsMeasured(t *testing.T) {
	ts, c, _ := flagSim(t)
	pub := mustSegment(t, c, upgrade.SegmentInput{Name: "pilot", UserIDs: []string{"in"}})
	e := ts.create(expBody("via segment", func(m map[string]any) {
		m["filterMode"] = "excludeAll"
		m["experimentSegmentInclusion"] = []any{map[string]any{"segment": map[string]any{"type": "private",
			"individualForSegment": []any{}, "groupForSegment": []any{},
			"subSegments": []any{map[string]any{"id": pub.ID}, map[string]any{"id": upgrade.IDFrom("ghost")}}}}}
	}))
	got := ts.must("GET", "/experiments/single/"+e.ID, nil).object(t)
	if lookup(got, "experimentSegmentInclusion.0.segment.listType") != "segment" || lookup(got, "#experimentSegmentInclusion.0.segment.subSegments") != 1 {
		t.Errorf("single read: %v", got["experimentSegmentInclusion"])
	}
	ts.setState(e.ID, "enrolling")
	ts.initUser("in", nil, nil)
	ts.initUser("out", nil, nil)
	if codeAt(t, ts.assign("in", "assign-prog"), "SelectSection", "absolute_value_plot_equality") == "" {
		t.Errorf("member of the public segment got nothing")
	}
	if code := codeAt(t, ts.assign("out", "assign-prog"), "SelectSection", "absolute_value_plot_equality"); code != "" {
		t.Errorf("non-member got %s", code)
	}
	// GET /experiments shows the list as stored: no listType, named "<id> Segment"
	var all []map[string]any
	ts.must("GET", "/experiments", nil).decode(t, &all)
	if seg, _ := lookup(all[0]["experimentSegmentInclusion"], "0.segment").(map[string]any); seg == nil || seg["listType"] != nil ||
		seg["name"] != fmt.Sprint(seg["id"])+" Segment" || lookup(seg, "#subSegments") != 1 {
		t.Errorf("stored list: %v", seg)
	}
	if st, err := c.SegmentStatus(t.Context(), pub.ID); err != nil || st.Segment.Status != upgrade.SegmentUsed || len(st.ExperimentInclusion) != 1 {
		t.Errorf("status: %+v %v", st, err)
	}
	ts.must("DELETE", "/segments/"+pub.ID, nil)
	got = ts.must("GET", "/experiments/single/"+e.ID, nil).object(t)
	if lookup(got, "#experimentSegmentInclusion") != 0 {
		t.Errorf("list still shown after its segment went: %v", got["experimentSegmentInclusion"])
	}
}

// The paginated searches are SQL ILIKE: '_' matches any character, '%' is
// literal; a non-UUID id search has no condition.
func TestSearchIsLikeMeasured(t *testing.T) {
	ts, c, ctx := flagSim(t)
	mustFlag(t, c, &upgrade.FeatureFlag{Name: "math hints", Key: "KEYONLY", Context: []string{"assign-prog"}, Status: upgrade.FlagEnabled,
		FilterMode: upgrade.FilterIncludeAll, Tags: []string{}})
	mustFlag(t, c, newFlag("OTHER"))
	for _, tc := range []struct {
		key, str string
		want     int
	}{{"key", "math_hints", 1}, {"key", "KEYONLY", 0}, {"all", "KEYONLY", 0}, {"name", "math%", 0}, {"name", "MATH", 1},
		{"status", "nabl", 2}, {"id", "xyz", 2}, {"id", upgrade.IDFrom("nobody"), 0}} {
		pg, err := c.FlagsPage(ctx, upgrade.PageRequest{Take: 10, SearchParams: &upgrade.SearchParams{Key: tc.key, String: tc.str}})
		if err != nil || pg.Total != tc.want {
			t.Errorf("search %s %q: %+v %v, want %d", tc.key, tc.str, pg, err, tc.want)
		}
	}
	mustSegment(t, c, upgrade.SegmentInput{Name: "pilot_a"})
	mustSegment(t, c, upgrade.SegmentInput{Name: "pilot b", Context: "mathstream"})
	for _, tc := range []struct {
		key, str string
		want     int
	}{{"name", "pilot_", 2}, {"name", "mathstream", 0}, {"context", "mathstream", 1}, {"status", "pilot", 2}} {
		pg, err := c.SegmentsPage(ctx, upgrade.PageRequest{Take: 10, SearchParams: &upgrade.SearchParams{Key: tc.key, String: tc.str}})
		if err != nil || pg.Total != tc.want {
			t.Errorf("segment search %s %q: %+v %v, want %d", tc.key, tc.str, pg, err, tc.want)
		}
	}
	_ = ts
}

// Segment routes: context, parent and error answers as the server gives them.
func TestSegmentRoutesMeasured(t *testing.T) {
	ts, c, _ := flagSim(t)
	parent := mustSegment(t, c, upgrade.SegmentInput{Name: "parent"})
	body := map[string]any{"name": "x", "context": "nowhere", "type": "public", "userIds": []any{}, "groups": []any{}, "subSegmentIds": []any{}}
	if r := ts.do("POST", "/segments", body); r.status != 400 || r.object(t)["type"] != typeIncorrectParam ||
		!strings.Contains(string(r.body), `The app context \"nowhere\" is not defined`) {
		t.Errorf("unknown context: %d %s", r.status, r.body)
	}
	body["context"], body["parentSegmentId"] = "assign-prog", upgrade.IDFrom("nobody")
	if r := ts.do("POST", "/segments/list", body); r.status != 500 || r.object(t)["message"] != "Parent Segment not found" {
		t.Errorf("list of an unknown parent: %d %s", r.status, r.body)
	}
	body["parentSegmentId"] = parent.ID
	list := ts.must("POST", "/segments/list", body).object(t)
	if got, _ := c.Segment(t.Context(), parent.ID); got == nil || got.Tags == nil || len(got.SubSegments) != 1 {
		t.Errorf("parent after a list was added: %+v", got)
	}
	id, _ := list["id"].(string)
	if r := ts.do("DELETE", "/segments/list/"+id, map[string]any{"parentSegmentId": upgrade.IDFrom("nobody")}); r.status != 500 ||
		r.object(t)["message"] != "Parent Segment  not found" {
		t.Errorf("list delete, unknown parent: %d %s", r.status, r.body)
	}
	other := mustSegment(t, c, upgrade.SegmentInput{Name: "other"})
	if r := ts.do("DELETE", "/segments/list/"+id, map[string]any{"parentSegmentId": other.ID}); r.status != 500 ||
		!strings.Contains(string(r.body), "not found in parent segment") {
		t.Errorf("list delete, other parent: %d %s", r.status, r.body)
	}
	ts.must("DELETE", "/segments/list/"+id, map[string]any{"parentSegmentId": parent.ID})
	if r := ts.do("DELETE", "/segments/"+upgrade.IDFrom("nobody"), nil); r.status != 500 || r.object(t)["type"] != nil {
		t.Errorf("delete unknown: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/segments/status/"+id, nil); r.status != 404 {
		t.Errorf("status of a deleted list: %d", r.status)
	}
	// a segment under a "Segment" list of a parent is a parent segment's
	// grandchild: used from the start
	gc := mustSegment(t, c, upgrade.SegmentInput{Name: "grandchild"})
	lt := "Segment"
	body = map[string]any{"name": "seg list", "context": "assign-prog", "type": "private", "listType": lt, "userIds": []any{},
		"groups": []any{}, "subSegmentIds": []any{gc.ID}, "parentSegmentId": parent.ID}
	ts.must("POST", "/segments/list", body)
	all, err := c.Segments(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var parents []map[string]any
	if err := jsonInto(all.AllParentSegments, &parents); err != nil || len(parents) != 1 || parents[0]["name"] != "parent" {
		t.Errorf("allParentSegments: %s %v", all.AllParentSegments, err)
	}
	for _, sg := range all.Segments {
		if sg.Name == "grandchild" && sg.Status != upgrade.SegmentUsed {
			t.Errorf("grandchild of a parent segment: %s", sg.Status)
		}
	}
}

// The audit log: filter, echoed parameters, list entries and diffs. An
// experiment's log holds an entry per list its create body made (none for
// a body with [] lists, as 6.5.0 does: docs/upgrade-real.md).
func TestAuditMeasured(t *testing.T) {
	ts, c, ctx := flagSim(t)
	e := ts.create(expBody("audited", func(m map[string]any) {
		m["experimentSegmentInclusion"], m["experimentSegmentExclusion"] = segment(nil, nil), segment([]string{"x"}, nil)
	}))
	bare := ts.create(expBody("no lists"))
	ts.setState(bare.ID, "enrolling")
	ts.setState(bare.ID, "enrollmentComplete")
	var types []string
	for _, n := range ts.must("POST", "/audit", map[string]any{"skip": 0, "take": 10, "experimentId": bare.ID}).object(t)["nodes"].([]any) {
		types = append(types, fmt.Sprint(lookup(n, "type")))
	}
	if !slices.Equal(types, []string{upgrade.AuditExperimentStateChanged, upgrade.AuditExperimentStateChanged, upgrade.AuditExperimentCreated}) {
		t.Errorf("audit of an experiment created without lists: %v", types)
	}
	f := mustFlag(t, c, newFlag("AUD"))
	l := addList(t, c, upgrade.ListInclusion, f.ID, true, upgrade.SegmentInput{UserIDs: []string{"u1"}})
	if _, err := c.DeleteFlagList(ctx, upgrade.ListInclusion, l.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetFlagFilterMode(ctx, f.ID, upgrade.FilterIncludeAll); err != nil {
		t.Fatal(err)
	}
	r := ts.must("POST", "/audit", map[string]any{"skip": 0, "take": 10, "experimentId": e.ID}).object(t)
	if r["experimentId"] != e.ID || r["total"] != float64(3) || lookup(r, "nodes.0.data.list.filterType") != "exclusion" ||
		lookup(r, "nodes.1.data.list.filterType") != "inclusion" || lookup(r, "nodes.2.type") != upgrade.AuditExperimentCreated {
		t.Errorf("experiment audit: %v", r)
	}
	r = ts.must("POST", "/audit", map[string]any{"skip": 0, "take": 10, "flagId": f.ID, "filter": "featureFlagUpdated"}).object(t)
	var ops []string
	for _, n := range r["nodes"].([]any) {
		ops = append(ops, fmt.Sprint(lookup(n, "data.list.operation"), "/", lookup(n, "data.filterMode")))
	}
	if r["filter"] != "featureFlagUpdated" || !slices.Equal(ops, []string{"<nil>/includeAll", "deleted/<nil>", "created/<nil>"}) {
		t.Errorf("flag audit: %v %v", ops, r)
	}
	if x := ts.do("POST", "/audit", map[string]any{"skip": 0, "take": 1, "filter": "nonsense"}); x.status != 400 {
		t.Errorf("bad filter: %d", x.status)
	}
	f.Description = "changed"
	if _, err := c.UpdateFlag(ctx, f); err != nil {
		t.Fatal(err)
	}
	r = ts.must("POST", "/audit", map[string]any{"skip": 0, "take": 1, "flagId": f.ID}).object(t)
	if d, _ := lookup(r, "nodes.0.data.diff").(string); !strings.Contains(d, "description") {
		t.Errorf("update diff: %v", r)
	}
}

func jsonInto(raw []byte, v any) error { return json.Unmarshal(raw, v) }
