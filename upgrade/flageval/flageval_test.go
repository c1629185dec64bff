package flageval

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

const ctx = "assign-prog"

func seg(id, name string, users []string, groups []upgrade.GroupRef, subs ...string) upgrade.SegmentRecord {
	s := upgrade.SegmentRecord{ID: id, Name: name, Context: ctx, Type: upgrade.SegmentPublic}
	for _, u := range users {
		s.Users = append(s.Users, upgrade.SegmentUser{SegmentID: id, UserID: u})
	}
	for _, g := range groups {
		s.Groups = append(s.Groups, upgrade.SegmentGroup{SegmentID: id, Type: g.Type, GroupID: g.GroupID})
	}
	for _, sub := range subs {
		s.SubSegments = append(s.SubSegments, upgrade.SegmentRecord{ID: sub, Name: "embedded " + sub})
	}
	return s
}

func list(id string, on bool, users []string, groups []upgrade.GroupRef, subs ...string) upgrade.FlagList {
	s := seg(id, "list "+id, users, groups, subs...)
	s.Type = upgrade.SegmentPrivate
	return upgrade.FlagList{SegmentID: id, Enabled: on, ListType: "Individual", Segment: &s}
}

func flag(mode string, inc, exc []upgrade.FlagList, mods ...func(*upgrade.FeatureFlag)) *upgrade.FeatureFlag {
	f := &upgrade.FeatureFlag{ID: "f1", Key: "MATH_HINTS", Name: "Math hints", Context: []string{ctx},
		Status: upgrade.FlagEnabled, FilterMode: mode, Inclusion: inc, Exclusion: exc}
	for _, m := range mods {
		m(f)
	}
	return f
}

func grp(t, id string) upgrade.GroupRef { return upgrade.GroupRef{Type: t, GroupID: id} }

var (
	class7  = []upgrade.GroupRef{grp("classId", "c7")}
	u1      = []string{"u1"}
	student = User{ID: "u1", Groups: map[string][]string{"classId": {"c7", "c8"}, "schoolId": {"s1"}},
		WorkingGroup: map[string]string{"classId": "c8", "schoolId": "s1"}}
	other = User{ID: "u9", Groups: map[string][]string{"classId": {"c9"}}, WorkingGroup: map[string]string{"classId": "c9"}}
)

// TestEvaluate has one case per [label] of the spec's evaluation section
// (upgrade-flags-segments.md, "Client evaluation").
func TestEvaluate(t *testing.T) {
	nested := NewSegments(
		seg("s-outer", "pilot schools", nil, nil, "s-inner"),
		seg("s-inner", "pilot class", []string{"u1"}, nil),
	)
	withList := NewSegments(seg("s-pub", "pilot", nil, nil, "s-list"), seg("s-list", "pilot's list", nil, class7))
	tests := []struct {
		label  string
		in     Input
		served bool
		rule   Rule
		match  *Match
	}{
		{label: "eval: flag of 2 contexts", served: true, rule: RuleIncludeAll,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil, func(f *upgrade.FeatureFlag) { f.Context = []string{"mathstream", ctx} }),
				Context: ctx, User: other}},
		{label: "eval: flag of 2 contexts, context not listed", served: false, rule: RuleOtherContext,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil), Context: "mathstream", User: other}},
		{label: "eval: disable, enable again (disabled)", served: false, rule: RuleNotEnabled,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil, func(f *upgrade.FeatureFlag) { f.Status = upgrade.FlagDisabled }), User: student}},
		{label: "status: archived serves like disabled", served: false, rule: RuleNotEnabled,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil, func(f *upgrade.FeatureFlag) { f.Status = upgrade.FlagArchived }), User: student}},
		{label: "eval: only in disabled lists", served: false, rule: RuleExcludeAll,
			in: Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", false, u1, nil)}, nil), User: student}},
		{label: "eval: include list disabled", served: true, rule: RuleIncludeAll,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, []upgrade.FlagList{list("l1", false, u1, nil)}), User: student}},
		{label: "eval: in nested segment", served: true, rule: RuleUserIncluded,
			in:    Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, nil, nil, "s-outer")}, nil), User: student, Segments: nested},
			match: &Match{Kind: upgrade.ListInclusion, ListID: "l1", ListName: "list l1", ListType: "Individual", Enabled: true, Path: []string{"pilot schools", "pilot class"}, User: "u1"}},
		{label: "eval: in segment's list", served: true, rule: RuleGroupIncluded,
			in:    Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, nil, nil, "s-pub")}, nil), User: student, Segments: withList},
			match: &Match{Kind: upgrade.ListInclusion, ListID: "l1", ListName: "list l1", ListType: "Individual", Enabled: true, Path: []string{"pilot", "pilot's list"}, Group: &upgrade.GroupRef{Type: "classId", GroupID: "c7"}}},
		{label: "eval: group not working grp", served: true, rule: RuleGroupIncluded,
			in:    Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, nil, class7)}, nil), User: student},
			match: &Match{Kind: upgrade.ListInclusion, ListID: "l1", ListName: "list l1", ListType: "Individual", Enabled: true, Group: &upgrade.GroupRef{Type: "classId", GroupID: "c7"}}},
		{label: "eval: group id, other type", served: false, rule: RuleExcludeAll,
			in: Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, nil, []upgrade.GroupRef{grp("schoolId", "c7")})}, nil), User: student}},
		{label: "eval: no lists match", served: true, rule: RuleIncludeAll,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, []upgrade.FlagList{list("l1", true, []string{"u5"}, nil)}, []upgrade.FlagList{list("l2", true, []string{"u6"}, nil)}), User: student}},
		{label: "eval: user incl, group excl", served: true, rule: RuleUserIncluded,
			in:    Input{Flag: flag(upgrade.FilterIncludeAll, []upgrade.FlagList{list("l1", true, u1, nil)}, []upgrade.FlagList{list("l2", true, nil, class7)}), User: student},
			match: &Match{Kind: upgrade.ListInclusion, ListID: "l1", ListName: "list l1", ListType: "Individual", Enabled: true, User: "u1"}},
		{label: "includeAll: group excluded", served: false, rule: RuleGroupExcluded,
			in:    Input{Flag: flag(upgrade.FilterIncludeAll, nil, []upgrade.FlagList{list("l2", true, nil, class7)}), User: student},
			match: &Match{Kind: upgrade.ListExclusion, ListID: "l2", ListName: "list l2", ListType: "Individual", Enabled: true, Group: &upgrade.GroupRef{Type: "classId", GroupID: "c7"}}},
		{label: "eval: in include+exclude", served: false, rule: RuleUserExcluded,
			in:    Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, u1, nil)}, []upgrade.FlagList{list("l2", true, u1, nil)}), User: student},
			match: &Match{Kind: upgrade.ListExclusion, ListID: "l2", ListName: "list l2", ListType: "Individual", Enabled: true, User: "u1"}},
		{label: "eval: groups incl+excl", served: false, rule: RuleGroupExcluded,
			in: Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, nil, class7)},
				[]upgrade.FlagList{list("l2", true, nil, []upgrade.GroupRef{grp("schoolId", "s1")})}), User: student}},
		{label: "eval: group included", served: true, rule: RuleGroupIncluded,
			in: Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, nil, class7)}, nil), User: student}},
		{label: "eval: excludeAll -> includeAll (excludeAll, no lists)", served: false, rule: RuleExcludeAll,
			in: Input{Flag: flag(upgrade.FilterExcludeAll, nil, nil), User: student}},
		{label: "eval: excludeAll -> includeAll (includeAll, no lists)", served: true, rule: RuleIncludeAll,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil), User: student}},
		{label: "eval: used segment deleted (sub-segment gone)", served: false, rule: RuleExcludeAll,
			in: Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, nil, nil)}, nil), User: student, Segments: nested}},
		{label: "eval: group list deleted", served: false, rule: RuleExcludeAll,
			in: Input{Flag: flag(upgrade.FilterExcludeAll, nil, nil), User: student}},
		{label: "global exclusion: user id", served: false, rule: RuleGlobalExclusion,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, []upgrade.FlagList{list("l1", true, u1, nil)}, nil), User: student,
				GlobalExclude: []upgrade.SegmentRecord{seg("g", "Global Excludes", u1, nil)}},
			match: &Match{ListID: "g", ListName: "Global Excludes", Enabled: true, User: "u1"}},
		{label: "global exclusion: other context ignored", served: true, rule: RuleIncludeAll,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil), User: student,
				GlobalExclude: []upgrade.SegmentRecord{func() upgrade.SegmentRecord { s := seg("g", "G", u1, nil); s.Context = "mathstream"; return s }()}}},
		{label: "global exclusion: working group only", served: true, rule: RuleIncludeAll,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil), User: student,
				GlobalExclude: []upgrade.SegmentRecord{seg("g", "G", nil, class7)}}},
		{label: "global exclusion: working group matches", served: false, rule: RuleGlobalExclusion,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil), User: student,
				GlobalExclude: []upgrade.SegmentRecord{seg("g", "G", nil, []upgrade.GroupRef{grp("classId", "c8")})}},
			match: &Match{ListID: "g", ListName: "G", Enabled: true, Group: &upgrade.GroupRef{Type: "classId", GroupID: "c8"}}},
		{label: "global exclusion: no working group, any group", served: false, rule: RuleGlobalExclusion,
			in: Input{Flag: flag(upgrade.FilterIncludeAll, nil, nil), User: User{ID: "u3"},
				GlobalExclude: []upgrade.SegmentRecord{seg("g", "G", nil, class7)}}},
	}
	for _, tt := range tests {
		t.Run(tt.label, func(t *testing.T) {
			got := Evaluate(tt.in)
			if got.Served != tt.served || got.Rule != tt.rule {
				t.Fatalf("served=%v rule=%s, want served=%v rule=%s (%s)", got.Served, got.Rule, tt.served, tt.rule, got.Explanation)
			}
			if tt.match != nil {
				if diff := cmp.Diff(tt.match, got.Match); diff != "" {
					t.Errorf("match (-want +got):\n%s", diff)
				}
			}
			if got.Explanation == "" || !strings.HasPrefix(got.Explanation, map[bool]string{true: "served", false: "not served"}[got.Served]) {
				t.Errorf("explanation %q", got.Explanation)
			}
		})
	}
}

func TestDisabledListsAreNamed(t *testing.T) {
	got := Evaluate(Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", false, u1, nil)}, nil), User: student})
	if len(got.InDisabledLists) != 1 || !strings.Contains(got.Explanation, `include list "list l1" (disabled)`) {
		t.Fatalf("disabled matches %+v, explanation %q", got.InDisabledLists, got.Explanation)
	}
}

func TestCyclicSubSegmentsTerminate(t *testing.T) {
	segs := NewSegments(seg("a", "A", nil, nil, "b"), seg("b", "B", nil, nil, "a"))
	got := Evaluate(Input{Flag: flag(upgrade.FilterExcludeAll, []upgrade.FlagList{list("l1", true, nil, nil, "a")}, nil), User: student, Segments: segs})
	if got.Served {
		t.Fatalf("served through a cycle: %+v", got)
	}
}

// The session-group modes of /v6/featureflag [eval: ephemeral session
// groups] [eval: merged session groups] [eval: session groups not kept].
func TestSessionGroups(t *testing.T) {
	stored := map[string][]string{"classId": {"c1"}}
	session := map[string][]string{"classId": {"c2"}, "schoolId": {"s1"}}
	tests := []struct {
		label         string
		sent, include bool
		want          map[string][]string
	}{
		{"no session groups: stored only", false, false, stored},
		{"eval: ephemeral session groups", true, false, map[string][]string{"classId": {"c2"}, "schoolId": {"s1"}}},
		{"eval: merged session groups", true, true, map[string][]string{"classId": {"c1", "c2"}, "schoolId": {"s1"}}},
	}
	for _, tt := range tests {
		got := SessionGroups(stored, session, tt.sent, tt.include)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.label, diff)
		}
	}
	if diff := cmp.Diff(map[string][]string{"classId": {"c1"}}, stored); diff != "" {
		t.Errorf("eval: session groups not kept: stored groups changed:\n%s", diff)
	}
}
