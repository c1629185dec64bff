package upgrade_test

import (
	"context"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

func postRuleExperiment() *upgrade.Experiment {
	return &upgrade.Experiment{
		Name: "Rules", Context: []string{"assign-prog"}, ConsistencyRule: upgrade.ConsistencyIndividual,
		AssignmentUnit: upgrade.UnitIndividual, PostExperimentRule: upgrade.PostRuleAssign,
		FilterMode: upgrade.FilterIncludeAll, Type: upgrade.TypeSimple,
		Conditions: []upgrade.Condition{{ConditionCode: "control", AssignmentWeight: 50, Order: 1},
			{ConditionCode: "variant", AssignmentWeight: 50, Order: 2}},
		Partitions: []upgrade.DecisionPoint{{Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1}},
	}
}

// simClient is a client of a fresh simulator closed with the test.
func simClient(t *testing.T) (*sim.Server, *upgrade.Client) {
	t.Helper()
	srv, err := sim.Start(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := upgrade.New(upgrade.Config{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// TestSetPostRuleAfterCreate runs the sequence the executor needs on a 6.5
// server: create (which stores continue), SetPostRule, read back.
func TestSetPostRuleAfterCreate(t *testing.T) {
	ctx := context.Background()
	_, c := simClient(t)
	e := postRuleExperiment()
	variantID := "5d1f7a3c-0000-4000-8000-000000000002"
	e.Conditions[1].ID = variantID
	e.RevertTo = &variantID
	created, err := c.CreateExperiment(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if created.PostExperimentRule != upgrade.PostRuleContinue || created.HoldsPostRule(upgrade.PostRuleAssign, "variant") {
		t.Fatalf("create holds %s/%v; a 6.5 server stores continue", created.PostExperimentRule, created.RevertTo)
	}
	held, err := c.SetPostRule(ctx, created.ID, upgrade.PostRuleAssign, "variant")
	if err != nil {
		t.Fatal(err)
	}
	if !held.HoldsPostRule(upgrade.PostRuleAssign, "variant") || *held.RevertTo != held.ConditionByCode("variant").ID {
		t.Errorf("after SetPostRule: %s %v", held.PostExperimentRule, held.RevertTo)
	}
	// Already held: no write.
	again, err := c.SetPostRule(ctx, created.ID, upgrade.PostRuleAssign, "variant")
	if err != nil || again.VersionNumber != held.VersionNumber {
		t.Errorf("a second SetPostRule wrote: version %d -> %d (%v)", held.VersionNumber, again.VersionNumber, err)
	}
	back, err := c.SetPostRule(ctx, created.ID, upgrade.PostRuleContinue, "")
	if err != nil || back.PostExperimentRule != upgrade.PostRuleContinue || back.RevertTo != nil {
		t.Errorf("back to continue: %+v %v", back, err)
	}
	for _, tc := range []struct{ rule, code string }{{upgrade.PostRuleAssign, "nope"}, {upgrade.PostRuleContinue, "variant"}, {"sometimes", ""}} {
		if _, err := c.SetPostRule(ctx, created.ID, tc.rule, tc.code); upgrade.CategoryOf(err) != upgrade.CategoryValidation {
			t.Errorf("SetPostRule(%s, %q): %v, want a validation error", tc.rule, tc.code, err)
		}
	}
	// The update path keeps payloads: the PUT body always carries them.
	cur, err := c.Experiment(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	cur.ConditionPayloads = nil
	if _, err := c.UpdateExperiment(ctx, cur); err != nil {
		t.Errorf("update with no payloads in the model: %v", err)
	}
}

func TestHoldsPostRule(t *testing.T) {
	e := postRuleExperiment()
	e.Conditions[0].ID, e.Conditions[1].ID = "c1", "c2"
	stale, variant := "gone", "c2"
	for _, tc := range []struct {
		rule, revertTo *string
		ask, code      string
		want           bool
	}{
		{nil, &variant, upgrade.PostRuleAssign, "variant", true},
		{nil, &stale, upgrade.PostRuleAssign, "variant", false},
		{nil, nil, upgrade.PostRuleAssign, "", true},
		{nil, &variant, upgrade.PostRuleAssign, "", false},
		{ptr(upgrade.PostRuleContinue), &stale, upgrade.PostRuleContinue, "", false},
		{ptr(upgrade.PostRuleContinue), nil, upgrade.PostRuleContinue, "", true},
		{ptr(upgrade.PostRuleContinue), nil, upgrade.PostRuleAssign, "", false},
	} {
		cp := *e
		if tc.rule != nil {
			cp.PostExperimentRule = *tc.rule
		}
		cp.RevertTo = tc.revertTo
		if got := cp.HoldsPostRule(tc.ask, tc.code); got != tc.want {
			t.Errorf("%s/%v asked %s/%q: %v, want %v", cp.PostExperimentRule, tc.revertTo, tc.ask, tc.code, got, tc.want)
		}
	}
}

func ptr(s string) *string { return &s }

// TestSetLists changes an experiment's lists the way a 6.5 server needs:
// through the list routes, since a PUT of the experiment leaves them alone.
func TestSetLists(t *testing.T) {
	ctx := context.Background()
	srv, c := simClient(t)
	e := postRuleExperiment()
	e.Inclusion = upgrade.Segment{Users: []string{"in1"}}
	created, err := c.CreateExperiment(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	// A PUT with other lists changes nothing.
	changed := *created
	changed.Exclusion = upgrade.Segment{Users: []string{"x1"}}
	if _, err := c.UpdateExperiment(ctx, &changed); err != nil {
		t.Fatal(err)
	}
	if _, exc, err := c.Lists(ctx, created.ID); err != nil || len(exc) != 1 || len(exc[0].Segment.Users) != 0 {
		t.Fatalf("after a PUT the exclusion lists are %+v (%v); a 6.5 server ignores lists in a PUT", exc, err)
	}
	want := upgrade.Segment{Users: []string{"x1"}, Groups: []upgrade.GroupRef{{Type: "classId", GroupID: "c9"}}}
	if err := c.SetLists(ctx, created, upgrade.Segment{Users: []string{"in1"}}, want); err != nil {
		t.Fatal(err)
	}
	inc, exc, err := c.Lists(ctx, created.ID)
	if err != nil || len(inc) != 1 || len(exc) != 1 || exc[0].Segment.Users[0] != "x1" || exc[0].Segment.Groups[0].GroupID != "c9" {
		t.Fatalf("lists after SetLists: %+v %+v (%v)", inc, exc, err)
	}
	stored, _ := srv.Sim().Experiment(created.ID)
	if len(stored.Exclusion.Users) != 1 || len(stored.Exclusion.Groups) != 1 {
		t.Errorf("assignment sees exclusion %+v", stored.Exclusion)
	}
	before := srv.Sim().Requests()
	if err := c.SetLists(ctx, created, upgrade.Segment{Users: []string{"in1"}}, want); err != nil {
		t.Fatal(err)
	}
	if n := srv.Sim().Requests() - before; n != 2 {
		t.Errorf("unchanged lists cost %d requests, want 2 reads", n)
	}
	// Empty targets delete the lists.
	if err := c.SetLists(ctx, created, upgrade.Segment{}, upgrade.Segment{}); err != nil {
		t.Fatal(err)
	}
	if inc, exc, _ := c.Lists(ctx, created.ID); len(inc) != 0 || len(exc) != 0 {
		t.Errorf("lists after clearing: %+v %+v", inc, exc)
	}
	// And a new one is added where none is left.
	if err := c.SetLists(ctx, created, upgrade.Segment{}, upgrade.Segment{Users: []string{"x2"}}); err != nil {
		t.Fatal(err)
	}
	if _, exc, _ := c.Lists(ctx, created.ID); len(exc) != 1 || exc[0].Segment.Users[0] != "x2" {
		t.Errorf("added list: %+v", exc)
	}
}
