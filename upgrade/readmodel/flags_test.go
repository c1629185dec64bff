package readmodel

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func TestReach(t *testing.T) {
	on := upgrade.FlagList{Enabled: true}
	off := upgrade.FlagList{}
	tests := []struct {
		name string
		f    upgrade.FeatureFlag
		want string
	}{
		{"disabled", upgrade.FeatureFlag{Status: upgrade.FlagDisabled}, "nobody: the flag is disabled"},
		{"excludeAll without enabled include list", upgrade.FeatureFlag{Status: upgrade.FlagEnabled, FilterMode: upgrade.FilterExcludeAll,
			Inclusion: []upgrade.FlagList{off}}, "nobody: filter mode excludeAll and no enabled include list"},
		{"includeAll", upgrade.FeatureFlag{Status: upgrade.FlagEnabled, FilterMode: upgrade.FilterIncludeAll, Context: []string{"a"}}, "everyone in a"},
		{"includeAll with exclusions", upgrade.FeatureFlag{Status: upgrade.FlagEnabled, FilterMode: upgrade.FilterIncludeAll, Context: []string{"a"},
			Exclusion: []upgrade.FlagList{on, off}}, "everyone in a except the members of 1 enabled exclude list"},
		{"excludeAll with lists", upgrade.FeatureFlag{Status: upgrade.FlagEnabled, FilterMode: upgrade.FilterExcludeAll, Context: []string{"a", "b"},
			Inclusion: []upgrade.FlagList{on, on}}, "the members of 2 enabled include lists in a, b"},
	}
	for _, tt := range tests {
		if got := Reach(&tt.f); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestUsesOfFollowsNesting(t *testing.T) {
	child := upgrade.SegmentRecord{ID: "child", Name: "child"}
	parent := upgrade.SegmentRecord{ID: "parent", Name: "parent", SubSegments: []upgrade.SegmentRecord{{ID: "child"}}}
	u := upgrade.SegmentUsage{
		FlagInclusion: []upgrade.FlagList{{SegmentID: "l1", FeatureFlagID: "f1", Enabled: true,
			FeatureFlag: &upgrade.FlagUsageOwner{Name: "Hints", Status: "enabled"},
			Segment:     &upgrade.SegmentRecord{ID: "l1", SubSegments: []upgrade.SegmentRecord{{ID: "parent"}}}}},
		ExperimentExclusion: []upgrade.ExperimentUsageRow{{SegmentID: "l2", ExperimentID: "e1",
			Experiment: &upgrade.UsageOwner{Name: "Exp", State: upgrade.StateEnrolling},
			Segment:    &upgrade.SegmentRecord{ID: "l2", SubSegments: []upgrade.SegmentRecord{{ID: "child"}}}}},
	}
	got := UsesOf("child", u, []upgrade.SegmentRecord{child, parent})
	want := []Use{
		{Kind: "flag", ID: "f1", Name: "Hints", List: "include", ListID: "l1", State: "enabled", On: true, Via: []string{"parent"}},
		{Kind: "experiment", ID: "e1", Name: "Exp", List: "exclude", ListID: "l2", State: "enrolling", On: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uses (-want +got):\n%s", diff)
	}
	if got := UsesOf("parent", u, []upgrade.SegmentRecord{child, parent}); len(got) != 1 {
		t.Errorf("parent uses: %+v", got)
	}
	counts := CountLists(u)
	if c := counts["f1"]; c == nil || *c != [4]int{1, 1, 0, 0} {
		t.Errorf("counts %v", c)
	}
}
