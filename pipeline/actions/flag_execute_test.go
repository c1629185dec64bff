package actions

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// execFlag validates, plans and executes p on f with a confirmation key,
// then reconciles: an executed action must reconcile as done.
func execFlag(t *testing.T, f *fakeAPI, p Params) json.RawMessage {
	t.Helper()
	ctx := context.Background()
	started := time.Date(2025, 4, 1, 9, 0, 0, 0, time.UTC)
	b := mustBound(p)
	if probs, err := b.Validate(ctx, Env{API: f}); err != nil || len(probs) > 0 {
		t.Fatalf("%s: problems %v, err %v", p.Action(), probs, err)
	}
	if _, err := b.Plan(ctx, Env{API: f}); err != nil {
		t.Fatalf("%s: plan: %v", p.Action(), err)
	}
	rec, err := b.Reconcile(ctx, Env{API: f}, "key-1", started)
	if err != nil || rec.Outcome == OutcomeDone {
		t.Fatalf("%s: before executing, reconcile = %+v, %v; want not done", p.Action(), rec, err)
	}
	out, err := b.Execute(ctx, Env{API: f}, "key-1")
	if err != nil {
		t.Fatalf("%s: execute: %v", p.Action(), err)
	}
	rec, err = b.Reconcile(ctx, Env{API: f}, "key-1", started)
	if err != nil || rec.Outcome != OutcomeDone {
		t.Fatalf("%s: after executing, reconcile = %+v, %v; want done", p.Action(), rec, err)
	}
	if r, ok := b.Action().(Reporter); ok && r.Report(out.Result) == "" {
		t.Errorf("%s: no words for the result %s", p.Action(), out.Result)
	}
	return out.Result
}

func heldFlag(t *testing.T, f *fakeAPI, id string) flagState {
	t.Helper()
	s, err := readFlag(context.Background(), f, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExecuteFlagActions(t *testing.T) {
	ctx := context.Background()
	t.Run("create with lists, then again with the same key", func(t *testing.T) {
		f := flagged()
		p := CreateFeatureFlagParams{Name: "Class hints", Key: "CLASS_HINTS", Context: "assign-prog", Status: "enabled",
			IncludeLists: []FlagListParam{{Groups: []GroupParam{{Type: "classId", GroupID: "c7"}}}, {SegmentIDs: []string{pilotSegID}}},
			ExcludeLists: []FlagListParam{{Users: []string{"u9"}, Enabled: ptr(false)}}}
		r := decode[FlagResult](t, execFlag(t, f, p))
		got := heldFlag(t, f, r.ID)
		if got.Status != FlagEnabled || got.FilterMode != FlagExcludeAll || len(got.Include) != 2 || len(got.Exclude) != 1 || got.Exclude[0].Enabled {
			t.Fatalf("server holds %+v", got)
		}
		// A repeat with the same confirmation (a crash after the write)
		// makes no second flag and no second list.
		if _, err := mustBound(p).Execute(ctx, Env{API: f}, "key-1"); err != nil {
			t.Fatal(err)
		}
		if n := f.count("CreateFlag"); n != 1 {
			t.Errorf("CreateFlag called %d times", n)
		}
		if got := heldFlag(t, f, r.ID); len(got.Include) != 2 {
			t.Errorf("repeat added lists: %+v", got.Include)
		}
	})
	t.Run("update filter mode alone goes through its route", func(t *testing.T) {
		f := flagged()
		execFlag(t, f, UpdateFeatureFlagParams{FlagID: mathFlagID, FilterMode: ptr("includeAll")})
		if f.count("SetFlagFilterMode") != 1 || f.count("UpdateFlag") != 0 {
			t.Errorf("calls: filterMode %d, PUT %d", f.count("SetFlagFilterMode"), f.count("UpdateFlag"))
		}
		if got := heldFlag(t, f, mathFlagID); got.FilterMode != FlagIncludeAll || len(got.Include) != 1 {
			t.Errorf("server holds %+v", got)
		}
	})
	t.Run("update several fields keeps the lists", func(t *testing.T) {
		f := flagged()
		execFlag(t, f, UpdateFeatureFlagParams{FlagID: mathFlagID, Name: ptr("Math hints v2"), Tags: &[]string{"x"}})
		got := heldFlag(t, f, mathFlagID)
		if got.Name != "Math hints v2" || len(got.Include) != 1 || len(got.Exclude) != 1 {
			t.Errorf("server holds %+v", got)
		}
	})
	t.Run("status", func(t *testing.T) {
		f := flagged()
		r := decode[flagStatusResult](t, execFlag(t, f, UpdateFeatureFlagStatusParams{FlagID: tutorFlagID, Status: "enabled"}))
		if r.Status != FlagEnabled || r.PreviousStatus != FlagDisabled || !strings.Contains(r.Reach, "nobody") {
			t.Errorf("result %+v", r)
		}
	})
	t.Run("delete", func(t *testing.T) {
		f := flagged()
		execFlag(t, f, DeleteFeatureFlagParams{FlagID: mathFlagID})
		if _, err := f.Flag(ctx, mathFlagID); !isNotFound(err) {
			t.Errorf("flag still there: %v", err)
		}
	})
	t.Run("add, update, remove a list", func(t *testing.T) {
		f := flagged()
		r := decode[listActionResult](t, execFlag(t, f, AddFeatureFlagListParams{FlagID: tutorFlagID, Kind: "include", Groups: []GroupParam{{Type: "classId", GroupID: "c7"}}}))
		listID := r.List.ID
		if got := heldFlag(t, f, tutorFlagID); len(got.Include) != 1 || got.Include[0].ID != listID {
			t.Fatalf("server holds %+v, result list %s", got.Include, listID)
		}
		execFlag(t, f, UpdateFeatureFlagListParams{FlagID: tutorFlagID, Kind: "include", ListID: listID,
			Groups: &[]GroupParam{{Type: "classId", GroupID: "c7"}, {Type: "classId", GroupID: "c8"}}})
		if got := heldFlag(t, f, tutorFlagID); len(got.Include[0].Members.Groups) != 2 {
			t.Fatalf("server holds %+v", got.Include)
		}
		execFlag(t, f, RemoveFeatureFlagListParams{FlagID: tutorFlagID, Kind: "include", ListID: listID})
		if got := heldFlag(t, f, tutorFlagID); len(got.Include) != 0 {
			t.Fatalf("server holds %+v", got.Include)
		}
	})
	t.Run("segments: create, update with a diff, delete a used one", func(t *testing.T) {
		f := flagged()
		r := decode[SegmentResult](t, execFlag(t, f, CreateSegmentParams{Name: "teachers", Context: "assign-prog", Users: []string{"t1"}}))
		if r.ID != upgrade.IDFrom("key-1") {
			t.Errorf("segment id %s is not derived from the confirmation", r.ID)
		}
		execFlag(t, f, UpdateSegmentParams{SegmentID: pilotSegID, AddUsers: []string{"u3"}, RemoveUsers: []string{"u1"}})
		seg, _ := f.Segment(ctx, pilotSegID)
		if got := segInfoOf(seg).Members.Users; strings.Join(got, ",") != "u2,u3" {
			t.Errorf("users %v", got)
		}
		res := decode[segmentDeleteResult](t, execFlag(t, f, DeleteSegmentParams{SegmentID: pilotSegID}))
		if len(res.UsedBy) != 2 {
			t.Errorf("used by %v", res.UsedBy)
		}
		if got := heldFlag(t, f, mathFlagID); len(got.Include[0].Members.Segments) != 0 {
			t.Errorf("the deleted segment is still in the flag's list: %+v", got.Include[0])
		}
	})
}

// TestExecuteFlagReadBack: a server that does not keep what was sent is
// repaired once, and reported when the repair does not hold either.
func TestExecuteFlagReadBack(t *testing.T) {
	ctx := context.Background()
	f := flagged()
	f.errs["SetFlagStatus"] = &upgrade.Error{Category: upgrade.CategoryAPI, Status: 500, Message: "boom"}
	_, err := mustBound(UpdateFeatureFlagStatusParams{FlagID: tutorFlagID, Status: "enabled"}).Execute(ctx, Env{API: f}, "k")
	if err == nil {
		t.Fatal("a failed write reported success")
	}
	// A PUT that silently drops the status: the repair goes through the
	// status route, which fails: the error names the difference.
	f = flagged()
	f.errs["SetFlagStatus"] = &upgrade.Error{Category: upgrade.CategoryAPI, Status: 500, Message: "boom"}
	p := CreateFeatureFlagParams{Name: "n", Key: "K", Context: "assign-prog", Status: "enabled"}
	fakeDropStatus(f)
	_, err = mustBound(p).Execute(ctx, Env{API: f}, "k")
	if err == nil || !strings.Contains(err.Error(), "status") || !strings.Contains(err.Error(), "was created") {
		t.Fatalf("err = %v, want one naming the status and saying the flag was created", err)
	}
}

// fakeDropStatus makes the fake create every flag disabled, whatever was sent.
func fakeDropStatus(f *fakeAPI) {
	f.fl.forceStatus = FlagDisabled
}
