package upgrade_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// addSegmentList adds an inclusion list naming public segment segID (and
// user extra, when given) the way the web UI does: a list row of its own.
func addSegmentList(t *testing.T, base, expID, segID string, users ...string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"experimentId": expID, "list": map[string]any{
		"name": "pilot list", "context": "assign-prog", "type": "private",
		"userIds": append([]string{}, users...), "groups": []any{}, "subSegmentIds": []string{segID}}})
	resp, err := http.Post(base+"/experiments/inclusionList", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("adding the segment list: %s", resp.Status)
	}
}

// TestSetListsKeepsSegmentLists: a list naming a public segment is read
// with the segment's name, and SetLists, which sets users and groups,
// never deletes it; members the target lacks leave it, its segment stays.
func TestSetListsKeepsSegmentLists(t *testing.T) {
	ctx := context.Background()
	srv, c := simClient(t)
	seg, err := c.UpsertSegment(ctx, upgrade.SegmentInput{Name: "pilot schools", Context: "assign-prog", Type: "public",
		UserIDs: []string{"s1"}, Groups: []upgrade.GroupRef{}, SubSegmentIDs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	e := postRuleExperiment()
	e.FilterMode = upgrade.FilterExcludeAll
	e.Inclusion = upgrade.Segment{Users: []string{"in1"}}
	created, err := c.CreateExperiment(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	addSegmentList(t, srv.URL(), created.ID, seg.ID, "m1")

	got, err := upgrade.ExperimentWithLists(ctx, c, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []upgrade.SegmentRef{{ID: seg.ID, Name: "pilot schools"}}; !slices.Equal(got.Inclusion.Segments, want) {
		t.Fatalf("inclusion segments %+v, want %+v", got.Inclusion.Segments, want)
	}
	if users := slices.Sorted(slices.Values(got.Inclusion.Users)); !slices.Equal(users, []string{"in1", "m1"}) {
		t.Fatalf("inclusion users %v", users)
	}
	if got.Inclusion.Empty() || !slices.Equal(got.Inclusion.SegmentNames(), []string{"pilot schools"}) {
		t.Errorf("segment names %v", got.Inclusion.SegmentNames())
	}

	// Setting the users: the plain list gets in2, the segment list loses m1
	// (not wanted) but keeps its segment.
	if err := c.SetLists(ctx, created, upgrade.Segment{Users: []string{"in2"}}, upgrade.Segment{}); err != nil {
		t.Fatal(err)
	}
	inc, _, err := c.Lists(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	var segRows, plainRows []upgrade.ExperimentList
	for _, r := range inc {
		if r.NamesSegments() {
			segRows = append(segRows, r)
		} else {
			plainRows = append(plainRows, r)
		}
	}
	if len(segRows) != 1 || segRows[0].Segment.Segments[0].ID != seg.ID || len(segRows[0].Segment.Users) != 0 {
		t.Fatalf("segment list after setting users: %+v", segRows)
	}
	if len(plainRows) != 1 || !slices.Equal(plainRows[0].Segment.Users, []string{"in2"}) {
		t.Fatalf("user list after setting users: %+v", plainRows)
	}
	// The single read shows a list of segments only (6.5 leaves out the
	// mixed one it cannot name).
	single, err := c.Experiment(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(single.Inclusion.Segments) != 1 || single.Inclusion.Segments[0].ID != seg.ID {
		t.Errorf("the single read's inclusion segments: %+v", single.Inclusion.Segments)
	}
	// Clearing users and groups deletes the plain list only.
	if err := c.SetLists(ctx, created, upgrade.Segment{}, upgrade.Segment{}); err != nil {
		t.Fatal(err)
	}
	inc, _, err = c.Lists(ctx, created.ID)
	if err != nil || len(inc) != 1 || !inc[0].NamesSegments() {
		t.Fatalf("lists after clearing users: %+v (%v)", inc, err)
	}
	// Users kept in a segment list cost no write.
	addSegmentList(t, srv.URL(), created.ID, seg.ID, "m2")
	before := srv.Sim().Requests()
	if err := c.SetLists(ctx, created, upgrade.Segment{Users: []string{"m2"}}, upgrade.Segment{}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Sim().Requests() - before; n != 2 {
		t.Errorf("members already held cost %d requests, want 2 reads", n)
	}
}

// TestSegmentRefsOnTheWire: the single read's subSegments decode into
// Segments, and the experiment's JSON (experiments show -o json) writes
// them back named.
func TestSegmentRefsOnTheWire(t *testing.T) {
	var e upgrade.Experiment
	raw := `{"id":"e1","experimentSegmentInclusion":[{"segment":{"individualForSegment":[],"groupForSegment":[],
		"subSegments":[{"id":"s9","name":"pilot schools","type":"public"}],"type":"private","listType":"segment"}}],
		"experimentSegmentExclusion":[]}`
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Inclusion.Segments) != 1 || e.Inclusion.Segments[0] != (upgrade.SegmentRef{ID: "s9", Name: "pilot schools"}) {
		t.Fatalf("segments %+v", e.Inclusion.Segments)
	}
	out, err := e.MarshalFor(upgrade.SegmentsObject)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"subSegments":[{"id":"s9","name":"pilot schools"}]`)) {
		t.Errorf("written: %s", out)
	}
}
