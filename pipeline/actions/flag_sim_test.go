package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
)

// TestSimulatorFlags runs every flag and segment action against the
// embedded simulator, through validation, the plan, execution with a
// confirmation key and reconciliation, and checks what the server holds.
func TestSimulatorFlags(t *testing.T) {
	ctx := context.Background()
	c := startSim(t, "6.5.0")
	step := 0
	do := func(p Params) []byte {
		t.Helper()
		step++
		b := mustBound(p)
		env := Env{API: c}
		if probs, err := b.Validate(ctx, env); err != nil || len(probs) > 0 {
			t.Fatalf("%s: problems %v, err %v", p.Action(), probs, err)
		}
		plan, err := b.Plan(ctx, env)
		if err != nil {
			t.Fatalf("%s: plan: %v", p.Action(), err)
		}
		if stale, err := IsStale(ctx, c, plan); err != nil || stale {
			t.Fatalf("%s: stale=%v err=%v right after planning", p.Action(), stale, err)
		}
		key := fmt.Sprintf("sim-flags-%d", step)
		started := time.Now().Add(-time.Second)
		out, err := b.Execute(ctx, env, key)
		if err != nil {
			t.Fatalf("%s: execute: %v", p.Action(), err)
		}
		rec, err := b.Reconcile(ctx, env, key, started)
		if err != nil || rec.Outcome != OutcomeDone {
			t.Fatalf("%s: after executing, reconcile = %+v, %v; want done", p.Action(), rec, err)
		}
		return out.Result
	}
	seg := decode[SegmentResult](t, do(CreateSegmentParams{Name: "pilot", Context: "assign-prog", Users: []string{"u1", "u2"}}))
	outer := decode[SegmentResult](t, do(CreateSegmentParams{Name: "district", Context: "assign-prog", SegmentIDs: []string{seg.ID}}))
	fl := decode[FlagResult](t, do(CreateFeatureFlagParams{Name: "Math hints", Key: "MATH_HINTS", Context: "assign-prog",
		IncludeLists: []FlagListParam{{SegmentIDs: []string{outer.ID}}}, ExcludeLists: []FlagListParam{{Users: []string{"u2"}}}}))
	if fl.Status != FlagDisabled || fl.FilterMode != FlagExcludeAll || len(fl.IncludeLists) != 1 || len(fl.ExcludeLists) != 1 {
		t.Fatalf("created %+v", fl)
	}
	added := decode[listActionResult](t, do(AddFeatureFlagListParams{FlagID: fl.ID, Kind: "include", Groups: []GroupParam{{Type: "classId", GroupID: "c7"}}}))
	do(UpdateFeatureFlagStatusParams{FlagID: fl.ID, Status: "enabled"})

	// Go's answer agrees with the client API's (which records exposures:
	// only the test asks it).
	serves := func(user string, groups map[string][]string) (bool, bool) {
		snap, err := c.FlagSnapshot(ctx, fl.ID)
		if err != nil {
			t.Fatal(err)
		}
		var refs []upgrade.GroupRef
		for typ, ids := range groups {
			for _, id := range ids {
				refs = append(refs, upgrade.GroupRef{Type: typ, GroupID: id})
			}
		}
		res := flageval.Evaluate(flageval.FromSnapshot(snap, "", flageval.UserWithGroups(user, refs)))
		f := false
		session := groups
		if len(session) == 0 {
			session = map[string][]string{"schoolId": {"none"}} // the route wants session groups, or an initialised user
		}
		keys, err := c.FeatureFlagKeys(ctx, user, upgrade.FeatureFlagRequest{Context: "assign-prog", GroupsForSession: session, IncludeStoredUserGroups: &f})
		if err != nil {
			t.Fatal(err)
		}
		return res.Served, slices.Contains(keys, "MATH_HINTS")
	}
	for _, tc := range []struct {
		user   string
		groups map[string][]string
		want   bool
	}{
		{"u1", map[string][]string{}, true},                   // in a nested segment
		{"u2", map[string][]string{}, false},                  // excluded by id
		{"u5", map[string][]string{"classId": {"c7"}}, true},  // group list
		{"u6", map[string][]string{"classId": {"c8"}}, false}, // nothing matches: excludeAll
		{"u2", map[string][]string{"classId": {"c7"}}, false}, // exclusion wins
	} {
		goSays, server := serves(tc.user, tc.groups)
		if goSays != tc.want || server != tc.want {
			t.Errorf("%s %v: Go says %v, the server %v, want %v", tc.user, tc.groups, goSays, server, tc.want)
		}
	}

	do(UpdateFeatureFlagListParams{FlagID: fl.ID, Kind: "include", ListID: added.List.ID, Groups: &[]GroupParam{{Type: "classId", GroupID: "c8"}}})
	do(UpdateSegmentParams{SegmentID: seg.ID, AddUsers: []string{"u3"}, RemoveUsers: []string{"u1"}})
	if got, _ := serves("u3", map[string][]string{}); !got {
		t.Error("u3, added to the nested segment, is not served")
	}
	do(UpdateFeatureFlagParams{FlagID: fl.ID, Name: ptr("Math hints v2"), FilterMode: ptr("includeAll")})
	// The used segment's plan names the flag that uses it.
	plan, err := BuildPlan(ctx, c, DeleteSegmentParams{SegmentID: seg.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.Message, `flag "Math hints v2"`) || len(plan.Warnings) == 0 {
		t.Errorf("the delete plan of a used segment:\n%s", plan.Message)
	}
	do(DeleteSegmentParams{SegmentID: seg.ID})
	do(RemoveFeatureFlagListParams{FlagID: fl.ID, Kind: "exclude", ListID: fl.ExcludeLists[0].ID})
	do(DeleteFeatureFlagParams{FlagID: fl.ID})
	if _, err := c.Flag(ctx, fl.ID); upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		t.Errorf("the flag is still there: %v", err)
	}
}
