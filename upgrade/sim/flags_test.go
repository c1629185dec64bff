package sim

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// flagSim is a simulator with the agent's client pointed at it.
func flagSim(t *testing.T) (*testServer, *upgrade.Client, context.Context) {
	t.Helper()
	ts := startSim(t, Options{})
	c, err := upgrade.New(upgrade.Config{BaseURL: ts.base, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return ts, c, t.Context()
}

func newFlag(key string, ctx ...string) *upgrade.FeatureFlag {
	if len(ctx) == 0 {
		ctx = []string{"assign-prog"}
	}
	return &upgrade.FeatureFlag{Name: "Flag " + strings.ReplaceAll(key, "_", " "), Key: key, Context: ctx, Status: upgrade.FlagEnabled,
		FilterMode: upgrade.FilterExcludeAll, Tags: []string{}}
}

func mustFlag(t *testing.T, c *upgrade.Client, f *upgrade.FeatureFlag) *upgrade.FeatureFlag {
	t.Helper()
	out, err := c.CreateFlag(t.Context(), f)
	if err != nil {
		t.Fatalf("create flag %s: %v", f.Key, err)
	}
	return out
}

func addList(t *testing.T, c *upgrade.Client, kind upgrade.ListKind, flagID string, on bool, in upgrade.SegmentInput) *upgrade.FlagList {
	t.Helper()
	if in.Context == "" {
		in.Context = "assign-prog"
	}
	if in.Name == "" {
		in.Name = "list"
	}
	l, err := c.AddFlagList(t.Context(), kind, upgrade.FlagListInput{FlagID: flagID, Enabled: on, ListType: "Individual", Segment: in})
	if err != nil {
		t.Fatalf("add list: %v", err)
	}
	return l
}

func mustSegment(t *testing.T, c *upgrade.Client, in upgrade.SegmentInput) *upgrade.SegmentRecord {
	t.Helper()
	if in.Context == "" {
		in.Context = "assign-prog"
	}
	if in.Type == "" {
		in.Type = upgrade.SegmentPublic
	}
	sg, err := c.UpsertSegment(t.Context(), in)
	if err != nil {
		t.Fatalf("segment %s: %v", in.Name, err)
	}
	return sg
}

func TestFlagQuirks(t *testing.T) {
	ts, c, ctx := flagSim(t)
	f := mustFlag(t, c, newFlag("MATH_HINTS"))
	if f.Inclusion != nil || strings.Contains(string(ts.must("GET", "/flags", nil).body), "featureFlagSegmentInclusion") {
		t.Errorf("create answer and GET /flags must carry no list keys")
	}
	// [create dup key, same ctx] / [create same key, other ctx]
	if _, err := c.CreateFlag(ctx, newFlag("MATH_HINTS")); upgrade.CategoryOf(err) != upgrade.CategoryValidation || !strings.Contains(err.Error(), "409") {
		t.Errorf("dup key same context: %v", err)
	}
	mustFlag(t, c, newFlag("MATH_HINTS", "mathstream"))
	// [create w/o description]
	body := map[string]any{"name": "n", "key": "K2", "status": "enabled", "filterMode": "includeAll", "context": []string{"assign-prog"}, "tags": []string{}}
	if r := ts.do("POST", "/flags", body); r.status != 500 {
		t.Errorf("create without description: %d %s", r.status, r.body)
	}
	// [create: only context[0] checked] and unknown context
	body["description"], body["context"] = "", []string{"nope"}
	if r := ts.do("POST", "/flags", body); r.status != 400 || !strings.Contains(string(r.body), "CONTEXT_METADATA") {
		t.Errorf("unknown context: %d %s", r.status, r.body)
	}
	body["context"] = []string{"assign-prog", "nope"}
	if r := ts.do("POST", "/flags", body); r.status != 200 {
		t.Errorf("second context unchecked: %d %s", r.status, r.body)
	}
	// [GET /flags/:id unknown]
	unknown := upgrade.IDFrom("no such flag")
	if r := ts.do("GET", "/flags/"+unknown, nil); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Errorf("GET unknown flag: %d %q", r.status, r.body)
	}
	if _, err := c.Flag(ctx, unknown); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("client GET unknown: %v", err)
	}
	// [PUT unknown id] [status unknown flag]
	if r := ts.do("PUT", "/flags/"+unknown, body); r.status != 500 || strings.Contains(string(r.body), `"type"`) {
		t.Errorf("PUT unknown: %d %s", r.status, r.body)
	}
	if _, err := c.SetFlagStatus(ctx, unknown, upgrade.FlagDisabled); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("status of unknown flag: %v", err)
	}
	// [status: any -> any]
	for _, st := range []string{upgrade.FlagArchived, upgrade.FlagEnabled, upgrade.FlagDisabled} {
		got, err := c.SetFlagStatus(ctx, f.ID, st)
		if err != nil || got.Status != st {
			t.Errorf("status -> %s: %+v %v", st, got, err)
		}
	}
	got, err := c.SetFlagFilterMode(ctx, f.ID, upgrade.FilterIncludeAll)
	if err != nil || got.FilterMode != upgrade.FilterIncludeAll {
		t.Errorf("filterMode: %+v %v", got, err)
	}

	// [list: type 'public' forced private]
	l := addList(t, c, upgrade.ListInclusion, f.ID, true, upgrade.SegmentInput{Type: upgrade.SegmentPublic, UserIDs: []string{"u1"}})
	if l.Segment == nil || l.Segment.Type != upgrade.SegmentPrivate || l.FeatureFlag == nil || l.FeatureFlag.Name != f.Name {
		t.Errorf("list add answer: %+v", l)
	}
	if r := ts.do("GET", "/segments/"+l.ID(), nil); r.status != 404 || !strings.Contains(string(r.body), "Segment not found.") {
		t.Errorf("GET of a private list: %d %s", r.status, r.body)
	}
	full, err := c.Flag(ctx, f.ID)
	if err != nil || len(full.Inclusion) != 1 || full.Inclusion[0].Segment.UserIDs()[0] != "u1" || full.Exclusion == nil {
		t.Fatalf("GET flag with lists: %+v %v", full, err)
	}
	// list PUT: path id must match, kind must match
	in := upgrade.FlagListInput{FlagID: f.ID, Enabled: false, ListType: "Individual",
		Segment: upgrade.SegmentInput{ID: l.ID(), Name: "list", Context: "assign-prog", Type: upgrade.SegmentPrivate,
			UserIDs: []string{"u2"}, Groups: []upgrade.GroupRef{}, SubSegmentIDs: []string{}}}
	if _, err := c.UpdateFlagList(ctx, upgrade.ListExclusion, in); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("PUT as the other kind: %v", err)
	}
	if r := ts.do("PUT", "/flags/inclusionList/"+unknown, in); r.status != 500 || !strings.Contains(string(r.body), "does not match") {
		t.Errorf("PUT with another id: %d %s", r.status, r.body)
	}
	put, err := c.UpdateFlagList(ctx, upgrade.ListInclusion, in)
	if err != nil || put.Enabled || put.Segment.UserIDs()[0] != "u2" {
		t.Errorf("list PUT: %+v %v", put, err)
	}
	// [paginated: list rows w/o segment]
	pg, err := c.FlagsPage(ctx, upgrade.PageRequest{Take: 10, SearchParams: &upgrade.SearchParams{Key: "name", String: "Flag MATH"}})
	if err != nil || pg.Total != 2 || pg.Nodes[0].Exposures == nil {
		t.Fatalf("flags page: %+v %v", pg, err)
	}
	for _, n := range pg.Nodes {
		if n.ID == f.ID && (len(n.Inclusion) != 1 || n.Inclusion[0].Segment != nil) {
			t.Errorf("paginated inclusion rows: %+v", n.Inclusion)
		}
	}
	// [paginated: search key='key']: "key" searches the name (and status,
	// context, tags), where '_' is a LIKE wildcard: "MATH_HINTS" finds the
	// two flags named "Flag MATH HINTS"; "HINTS-" finds nothing.
	if pg, _ := c.FlagsPage(ctx, upgrade.PageRequest{Take: 10, SearchParams: &upgrade.SearchParams{Key: "key", String: "MATH_HINTS"}}); pg.Total != 2 {
		t.Errorf("search key 'key' found %d", pg.Total)
	}
	if pg, _ := c.FlagsPage(ctx, upgrade.PageRequest{Take: 10, SearchParams: &upgrade.SearchParams{Key: "all", String: "HINTS-"}}); pg.Total != 0 {
		t.Errorf("search 'HINTS-' found %d", pg.Total)
	}
	// [PUT other ctx drops lists]
	upd := *full
	upd.Context = []string{"mathstream"}
	upd.Key = "OTHER"
	after, err := c.UpdateFlag(ctx, &upd)
	if err != nil || len(after.Inclusion) != 0 {
		t.Errorf("PUT to another context kept lists: %+v %v", after, err)
	}
	// [PUT dup key]
	upd.Key, upd.Context = "MATH_HINTS", []string{"mathstream"}
	if _, err := c.UpdateFlag(ctx, &upd); upgrade.CategoryOf(err) != upgrade.CategoryValidation {
		t.Errorf("PUT dup key: %v", err)
	}
	// DELETE: an array, then 404 [DELETE again]
	if r := ts.must("DELETE", "/flags/"+f.ID, nil); !strings.HasPrefix(string(r.body), "[") {
		t.Errorf("DELETE answer %s", r.body)
	}
	if _, err := c.DeleteFlag(ctx, f.ID); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("DELETE again: %v", err)
	}
}

func TestSegmentQuirks(t *testing.T) {
	ts, c, ctx := flagSim(t)
	child := mustSegment(t, c, upgrade.SegmentInput{Name: "child", UserIDs: []string{"u1"}})
	// [create: own id kept] [create: unknown subSegment dropped]
	own := upgrade.IDFrom("own id")
	parent := mustSegment(t, c, upgrade.SegmentInput{ID: own, Name: "parent", SubSegmentIDs: []string{child.ID}})
	if parent.ID != own || !slices.Equal(parent.SubSegmentIDs(), []string{child.ID}) {
		t.Errorf("parent: id %s subs %v", parent.ID, parent.SubSegmentIDs())
	}
	if g := mustSegment(t, c, upgrade.SegmentInput{Name: "ghosts", SubSegmentIDs: []string{upgrade.IDFrom("ghost")}}); len(g.SubSegments) != 0 {
		t.Errorf("unknown sub-segment kept: %v", g.SubSegmentIDs())
	}
	// a known and an unknown sub-segment: the server fails on the unknown one
	if _, err := c.UpsertSegment(ctx, upgrade.SegmentInput{Name: "mixed", Context: "assign-prog", Type: upgrade.SegmentPublic,
		SubSegmentIDs: []string{child.ID, upgrade.IDFrom("ghost")}}); err == nil || !strings.Contains(err.Error(), "reading 'type'") {
		t.Errorf("known + unknown sub-segment: %v", err)
	}
	// [create dup name, same ctx]: 400 without a name key; other context fine
	r := ts.do("POST", "/segments", map[string]any{"name": "child", "context": "assign-prog", "type": "public", "userIds": []string{}, "groups": []any{}, "subSegmentIds": []string{}})
	if r.status != 400 || r.object(t)["name"] != nil || !strings.Contains(string(r.body), "already exists in context assign-prog") {
		t.Errorf("dup name: %d %s", r.status, r.body)
	}
	mustSegment(t, c, upgrade.SegmentInput{Name: "child", Context: "mathstream"})
	// [upsert by id replaces]
	up := parent.Input()
	up.UserIDs, up.SubSegmentIDs = []string{"u7"}, []string{}
	again, err := c.UpsertSegment(ctx, up)
	if err != nil || again.ID != parent.ID || len(again.SubSegments) != 0 || again.UserIDs()[0] != "u7" {
		t.Errorf("upsert: %+v %v", again, err)
	}
	up.SubSegmentIDs = []string{child.ID}
	if _, err := c.UpsertSegment(ctx, up); err != nil {
		t.Fatal(err)
	}
	// status: a flag list holding parent makes parent used; child is a
	// descendant: used in GET /segments and in a page that holds its
	// parent, unused in GET /segments/status/{id} (which shows only it).
	f := mustFlag(t, c, newFlag("F"))
	addList(t, c, upgrade.ListInclusion, f.ID, false, upgrade.SegmentInput{SubSegmentIDs: []string{parent.ID}})
	all, err := c.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, sg := range all.Segments {
		status[sg.Name+"/"+sg.Context] = sg.Status
	}
	if status["parent/assign-prog"] != upgrade.SegmentUsed || status["child/assign-prog"] != upgrade.SegmentUsed || status["child/mathstream"] != upgrade.SegmentUnused {
		t.Errorf("GET /segments status: %v", status)
	}
	if len(all.FlagInclusion) != 1 || all.FlagInclusion[0].FeatureFlag.Name != f.Name || all.FlagInclusion[0].Segment.SubSegments[0].ID != parent.ID {
		t.Errorf("usage rows: %+v", all.FlagInclusion)
	}
	st, err := c.SegmentStatus(ctx, child.ID)
	if err != nil || st.Segment.Status != upgrade.SegmentUnused || len(st.FlagInclusion) != 1 {
		t.Errorf("status of a descendant: %+v %v", st, err)
	}
	pg, err := c.SegmentsPage(ctx, upgrade.PageRequest{Take: 10, SortParams: &upgrade.SortParams{Key: "name", SortAs: "ASC"}})
	if err != nil || pg.Total != 4 || pg.Nodes.Segments[0].Name != "child" || pg.Nodes.Segments[0].Status != upgrade.SegmentUsed {
		t.Errorf("segments page: %+v %v", pg, err)
	}
	// global segments: one per context, status excluded
	gl, err := c.GlobalSegments(ctx)
	if err != nil || len(gl) != 3 || gl[0].Status != upgrade.SegmentExcluded {
		t.Errorf("global: %+v %v", gl, err)
	}
	// segment lists
	sl, err := c.AddSegmentList(ctx, upgrade.SegmentInput{Name: "pl", Context: "assign-prog", ParentSegmentID: child.ID, Groups: []upgrade.GroupRef{{Type: "classId", GroupID: "c7"}}})
	if err != nil || sl.Type != upgrade.SegmentPrivate {
		t.Fatalf("segment list: %+v %v", sl, err)
	}
	if r := ts.do("DELETE", "/segments/list/"+sl.ID, map[string]any{}); r.status != 400 {
		t.Errorf("list delete without parent: %d", r.status)
	}
	if _, err := c.DeleteSegmentList(ctx, sl.ID, child.ID); err != nil {
		t.Errorf("list delete: %v", err)
	}
	// [DELETE a used segment]: allowed, it vanishes from its parent
	if _, err := c.DeleteSegment(ctx, child.ID); err != nil {
		t.Fatal(err)
	}
	p2, err := c.Segment(ctx, parent.ID)
	if err != nil || len(p2.SubSegments) != 0 {
		t.Errorf("parent after child deleted: %+v %v", p2, err)
	}
	if _, err := c.DeleteSegment(ctx, child.ID); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("delete again: %v", err)
	}
}

func TestFeatureFlagEvaluationAndExposures(t *testing.T) {
	ts, c, ctx := flagSim(t)
	f := mustFlag(t, c, newFlag("HINTS"))
	addList(t, c, upgrade.ListInclusion, f.ID, true, upgrade.SegmentInput{Groups: []upgrade.GroupRef{{Type: "classId", GroupID: "c7"}}})
	ts.initUser("u1", map[string][]string{"classId": {"c7", "c8"}}, map[string]string{"classId": "c8"})
	ts.initUser("u2", map[string][]string{"classId": {"c9"}}, map[string]string{"classId": "c9"})
	keys := func(user string, req upgrade.FeatureFlagRequest) []string {
		t.Helper()
		out, err := c.FeatureFlagKeys(ctx, user, req)
		if err != nil {
			t.Fatalf("featureflag %s: %v", user, err)
		}
		return out
	}
	// [eval: group not working grp]
	if got := keys("u1", upgrade.FeatureFlagRequest{Context: "assign-prog"}); !slices.Equal(got, []string{"HINTS"}) {
		t.Errorf("u1: %v", got)
	}
	if got := keys("u2", upgrade.FeatureFlagRequest{Context: "assign-prog"}); len(got) != 0 {
		t.Errorf("u2: %v", got)
	}
	// [eval: ephemeral session groups]: no init needed, nothing kept
	no, yes := false, true
	if got := keys("u3", upgrade.FeatureFlagRequest{Context: "assign-prog", GroupsForSession: map[string][]string{"classId": {"c7"}}, IncludeStoredUserGroups: &no}); len(got) != 1 {
		t.Errorf("ephemeral: %v", got)
	}
	if _, known := ts.srv.Sim().User("u3"); known {
		t.Errorf("session groups stored a user")
	}
	// [eval: merged session groups]
	if got := keys("u2", upgrade.FeatureFlagRequest{Context: "assign-prog", GroupsForSession: map[string][]string{"classId": {"c7"}}, IncludeStoredUserGroups: &yes}); len(got) != 1 {
		t.Errorf("merged: %v", got)
	}
	if got := keys("u2", upgrade.FeatureFlagRequest{Context: "assign-prog"}); len(got) != 0 {
		t.Errorf("[eval: session groups not kept]: %v", got)
	}
	// errors: uninitialised user, unknown context, half the session fields
	if _, err := c.FeatureFlagKeys(ctx, "u9", upgrade.FeatureFlagRequest{Context: "assign-prog"}); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("uninitialised: %v", err)
	}
	if r := ts.do("POST", "/v6/featureflag", map[string]any{"context": "nope"}, "User-Id", "u1"); r.status != 400 || !strings.Contains(string(r.body), "Invalid app context: nope") {
		t.Errorf("unknown context: %d %s", r.status, r.body)
	}
	if r := ts.do("POST", "/v6/featureflag", map[string]any{"context": "assign-prog", "includeStoredUserGroups": true}, "User-Id", "u1"); r.status != 400 {
		t.Errorf("half session: %d %s", r.status, r.body)
	}
	// [exposures: distinct users]: u1 twice, u3 and u2 once each
	keys("u1", upgrade.FeatureFlagRequest{Context: "assign-prog"})
	pg, err := c.FlagsPage(ctx, upgrade.PageRequest{Take: 10})
	if err != nil || *pg.Nodes[0].Exposures != 3 {
		t.Errorf("exposures: %+v %v", pg, err)
	}
	// [eval: disable, enable again]
	if _, err := c.SetFlagStatus(ctx, f.ID, upgrade.FlagDisabled); err != nil {
		t.Fatal(err)
	}
	if got := keys("u1", upgrade.FeatureFlagRequest{Context: "assign-prog"}); len(got) != 0 {
		t.Errorf("disabled flag served: %v", got)
	}
}

func TestHistoryAndAudit(t *testing.T) {
	ts, c, ctx := flagSim(t)
	var created map[string]any
	ts.must("POST", "/experiments", expBody("Hist", func(m map[string]any) {
		// lists in the body: the create writes an audit entry per list
		m["experimentSegmentInclusion"], m["experimentSegmentExclusion"] = segment(nil, nil), segment(nil, nil)
	})).decode(t, &created)
	if _, ok := created["stateTimeLogs"]; ok {
		t.Errorf("[create: stateTimeLogs] present in the create answer")
	}
	id := created["id"].(string)
	ts.setState(id, "enrolling")
	st := ts.must("POST", "/experiments/state", map[string]any{"experimentId": id, "state": "enrollmentComplete"}).object(t)
	logs := st["stateTimeLogs"].([]any)
	if len(logs) != 2 || logs[1].(map[string]any)["experiment"] == nil {
		t.Errorf("[state answer: history]: %v", logs)
	}
	h, err := c.StateHistory(ctx, id)
	if err != nil || len(h) != 2 || h[0].ToState != upgrade.StateEnrolling || h[1].ToState != upgrade.StateEnrollmentComplete {
		t.Errorf("history: %+v %v", h, err)
	}
	var pg struct {
		Nodes []map[string]any `json:"nodes"`
	}
	ts.must("POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 10}).decode(t, &pg)
	if l := pg.Nodes[0]["stateTimeLogs"].([]any); len(l) != 0 {
		t.Errorf("[paginated: history] %v", l)
	}
	au, err := c.Audit(ctx, upgrade.AuditRequest{Take: 10, ExperimentID: id})
	// newest first: two state changes, the two lists the create made, the create
	if err != nil || au.Total != 5 || au.Nodes[0].Type != upgrade.AuditExperimentStateChanged ||
		au.Nodes[2].Type != upgrade.AuditExperimentUpdated || au.Nodes[4].Type != upgrade.AuditExperimentCreated ||
		!strings.Contains(string(au.Nodes[0].Data), `"newState":"paused"`) {
		t.Errorf("[audit: types newest first]: %+v %v", au, err)
	}
	f := mustFlag(t, c, newFlag("A"))
	if _, err := c.DeleteFlag(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	all, err := c.Audit(ctx, upgrade.AuditRequest{Take: 1})
	if err != nil || all.Nodes[0].Type != upgrade.AuditFlagDeleted || strings.Contains(string(all.Nodes[0].Data), "flagId") {
		t.Errorf("[flag audit: delete log]: %+v %v", all, err)
	}
}

// [exp incl via public segment] [status: exp usage row] [status: only archived exps]
func TestExperimentListThroughPublicSegment(t *testing.T) {
	ts, c, ctx := flagSim(t)
	pub := mustSegment(t, c, upgrade.SegmentInput{Name: "pilot", Groups: []upgrade.GroupRef{{Type: "classId", GroupID: "c7"}}})
	e := ts.create(expBody("Seg exp", func(m map[string]any) { m["filterMode"] = "excludeAll" }))
	ts.must("POST", "/experiments/inclusionList", map[string]any{"experimentId": e.ID, "list": map[string]any{
		"name": "incl", "context": "assign-prog", "type": "private", "userIds": []string{}, "groups": []any{}, "subSegmentIds": []string{pub.ID}}})
	ts.setState(e.ID, "enrolling")
	ts.initUser("in", map[string][]string{"classId": {"c7"}}, map[string]string{"classId": "c7"})
	ts.initUser("out", map[string][]string{"classId": {"c8"}}, map[string]string{"classId": "c8"})
	if code := codeAt(t, ts.assign("in", "assign-prog"), "SelectSection", "absolute_value_plot_equality"); code == "" {
		t.Errorf("member of the included public segment got no condition")
	}
	if code := codeAt(t, ts.assign("out", "assign-prog"), "SelectSection", "absolute_value_plot_equality"); code != "" {
		t.Errorf("non-member got %s", code)
	}
	st, err := c.SegmentStatus(ctx, pub.ID)
	if err != nil || st.Segment.Status != upgrade.SegmentUsed || len(st.ExperimentInclusion) == 0 {
		t.Fatalf("status: %+v %v", st, err)
	}
	var row *upgrade.ExperimentUsageRow
	for i, r := range st.ExperimentInclusion {
		if r.Segment != nil && len(r.Segment.SubSegments) == 1 {
			row = &st.ExperimentInclusion[i]
		}
	}
	if row == nil || row.Experiment.Name != "Seg exp" || row.Experiment.State != upgrade.StateEnrolling {
		t.Errorf("usage row: %+v", st.ExperimentInclusion)
	}
	ts.setState(e.ID, "archived")
	if st, _ := c.SegmentStatus(ctx, pub.ID); st.Segment.Status != upgrade.SegmentUnused {
		t.Errorf("used by an archived experiment only: %s", st.Segment.Status)
	}
}

func TestCatalogPersists(t *testing.T) {
	file := t.TempDir() + "/sim.json"
	ts := startSim(t, Options{DataFile: file})
	c, err := upgrade.New(upgrade.Config{BaseURL: ts.base, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	f := mustFlag(t, c, newFlag("KEPT"))
	addList(t, c, upgrade.ListExclusion, f.ID, true, upgrade.SegmentInput{UserIDs: []string{"u1"}})
	again, err := New(Options{DataFile: file})
	if err != nil {
		t.Fatalf("reloading: %v", err)
	}
	var n int
	_ = again.view(func() { n = len(again.cat().FlagLists) })
	if n != 1 {
		t.Errorf("lists after reload: %d", n)
	}
}
