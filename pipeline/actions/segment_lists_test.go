package actions

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// TestUpdateKeepsSegmentList: on the simulator (as on a real 6.5), an
// experiment whose inclusion has a list naming a public segment (the web
// UI's "segment" list) keeps it when update_experiment sets
// inclusion_users, and every plan names it.
func TestUpdateKeepsSegmentList(t *testing.T) {
	ctx := context.Background()
	srv, err := sim.Start(sim.Options{Seed: 42, Version: "6.5.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := upgrade.New(upgrade.Config{BaseURL: srv.URL(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	seg, err := c.UpsertSegment(ctx, upgrade.SegmentInput{Name: "pilot schools", Context: "assign-prog", Type: "public",
		UserIDs: []string{"s1"}, Groups: []upgrade.GroupRef{}, SubSegmentIDs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	_, raw := run(t, c, CreateExperimentParams{
		Name: "Segment lists", Context: "assign-prog", FilterMode: "excludeAll", InclusionUsers: []string{"in1"},
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}},
	})
	id := decode[ExperimentResult](t, raw).ID
	body, _ := json.Marshal(map[string]any{"experimentId": id, "list": map[string]any{"name": "pilot", "context": "assign-prog",
		"type": "private", "userIds": []string{}, "groups": []any{}, "subSegmentIds": []string{seg.ID}}})
	resp, err := http.Post(srv.URL()+"/experiments/inclusionList", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("adding the segment list: %s", resp.Status)
	}

	plan, _ := run(t, c, UpdateExperimentParams{ExperimentID: id, InclusionUsers: &[]string{"in2", "in3"}})
	for _, want := range []string{`inclusion_users: "in1" -> "in2", "in3"`, `Included: segment "pilot schools" (a list of its own, kept as it is)`} {
		if !strings.Contains(plan.Message, want) {
			t.Errorf("update plan lacks %q:\n%s", want, plan.Message)
		}
	}
	e, err := upgrade.ExperimentWithLists(ctx, c, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Inclusion.SegmentNames(), []string{"pilot schools"}) || !slices.Equal(slices.Sorted(slices.Values(e.Inclusion.Users)), []string{"in2", "in3"}) {
		t.Fatalf("after setting inclusion_users the inclusion is %+v", e.Inclusion)
	}
	inc, _, err := c.Lists(ctx, id)
	if err != nil || len(inc) != 2 {
		t.Fatalf("inclusion rows %+v (%v); want the users list and the segment list", inc, err)
	}

	// Emptying the users leaves the segment list, and with it somebody to
	// enrol: no "nobody would be enrolled" warning.
	plan, _ = run(t, c, UpdateExperimentParams{ExperimentID: id, InclusionUsers: &[]string{}})
	if len(plan.Warnings) > 0 {
		t.Errorf("warnings %v with a segment list left", plan.Warnings)
	}
	if e, err = upgrade.ExperimentWithLists(ctx, c, id); err != nil || len(e.Inclusion.Users) != 0 || len(e.Inclusion.Segments) != 1 {
		t.Fatalf("after emptying inclusion_users: %+v (%v)", e.Inclusion, err)
	}

	// A switch to includeAll keeps it too, and says it has no effect there.
	plan, _ = run(t, c, UpdateExperimentParams{ExperimentID: id, FilterMode: ptr("includeAll")})
	if !strings.Contains(plan.Message, "under includeAll an inclusion list has no effect") {
		t.Errorf("filter change plan:\n%s", plan.Message)
	}
	if e, err = upgrade.ExperimentWithLists(ctx, c, id); err != nil || len(e.Inclusion.Segments) != 1 {
		t.Fatalf("after includeAll: %+v (%v)", e.Inclusion, err)
	}

	// delete_segment and update_segment still count the experiment among
	// the segment's users.
	for _, p := range []Params{DeleteSegmentParams{SegmentID: seg.ID}, UpdateSegmentParams{SegmentID: seg.ID, Name: ptr("pilot schools 2")}} {
		plan, err := BuildPlan(ctx, c, p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan.Message, `experiment "Segment lists" (inactive), include list`) {
			t.Errorf("%s plan does not count the experiment:\n%s", p.Action(), plan.Message)
		}
	}

	// The status and delete plans name it.
	for _, p := range []Params{UpdateExperimentStatusParams{ExperimentID: id, Status: "enrolling"}, DeleteExperimentParams{ExperimentID: id}} {
		plan, err := BuildPlan(ctx, c, p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan.Message, `Included: segment "pilot schools"`) {
			t.Errorf("%s plan does not name the segment list:\n%s", p.Action(), plan.Message)
		}
	}
}

// TestKeptSegmentLists reports a segment list that went missing.
func TestKeptSegmentLists(t *testing.T) {
	was := &upgrade.Experiment{Inclusion: upgrade.Segment{Segments: []upgrade.SegmentRef{{ID: "s1", Name: "pilot schools"}}}}
	if err := keptSegmentLists(was, was); err != nil {
		t.Fatal(err)
	}
	err := keptSegmentLists(was, &upgrade.Experiment{})
	if err == nil || !strings.Contains(err.Error(), `inclusion lists naming segments changed: they were segment "pilot schools", they are (none)`) {
		t.Fatalf("got %v", err)
	}
}

// rowOrderAPI answers list members in reverse order, as a real 6.5 may
// (database row order).
type rowOrderAPI struct{ *upgrade.Client }

func (a rowOrderAPI) Lists(ctx context.Context, id string) (inc, exc []upgrade.ExperimentList, err error) {
	inc, exc, err = a.Client.Lists(ctx, id)
	for _, rows := range [][]upgrade.ExperimentList{inc, exc} {
		for _, r := range rows {
			slices.Reverse(r.Segment.Users)
			slices.Reverse(r.Segment.Groups)
		}
	}
	return inc, exc, err
}

// TestUpdateHoldsListsInAnyOrder: users read back in another order than
// sent are what was approved (seen on the real 6.5).
func TestUpdateHoldsListsInAnyOrder(t *testing.T) {
	ctx := context.Background()
	api := rowOrderAPI{startSim(t, "6.5.0")}
	_, raw := run(t, api, CreateExperimentParams{
		Name: "Order", Context: "assign-prog", ExclusionUsers: []string{"x1"},
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}},
	})
	id := decode[ExperimentResult](t, raw).ID
	p := UpdateExperimentParams{ExperimentID: id, ExclusionUsers: &[]string{"u1", "u2"},
		ExclusionGroups: &[]GroupParam{{Type: "classId", GroupID: "c1"}, {Type: "classId", GroupID: "c2"}}}
	run(t, api, p)
	rec, err := mustBound(p).Reconcile(ctx, Env{API: api}, "order", time.Now())
	if err != nil || rec.Outcome != OutcomeDone {
		t.Fatalf("reconcile = %+v, %v; want done", rec, err)
	}
}
