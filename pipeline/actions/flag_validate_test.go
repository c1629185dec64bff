package actions

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// want is one expected problem: its field, kinds and a part of its message.
type wantProblem struct {
	field    string
	contains string
	missing  bool
	notFound bool
}

func TestValidateFlags(t *testing.T) {
	grp := func(typ, id string) []GroupParam { return []GroupParam{{Type: typ, GroupID: id}} }
	tests := []struct {
		name string
		p    Params
		want []wantProblem
	}{
		// create_feature_flag
		{"create: valid", CreateFeatureFlagParams{Name: "x", Key: "X", Context: "assign-prog"}, nil},
		{"create: missing name, key, context", CreateFeatureFlagParams{}, []wantProblem{
			{field: "name", contains: "required", missing: true}, {field: "key", contains: "required", missing: true},
			{field: "context", contains: "required", missing: true}}},
		{"create: unknown context", CreateFeatureFlagParams{Name: "x", Key: "X", Context: "nope"}, []wantProblem{{field: "context", contains: `unknown context "nope"`}}},
		{"create: key taken in the context", CreateFeatureFlagParams{Name: "x", Key: "MATH_HINTS", Context: "assign-prog"},
			[]wantProblem{{field: "key", contains: `"Math hints" (id ` + mathFlagID + `) already has key MATH_HINTS in context assign-prog`}}},
		{"create: same key in another context", CreateFeatureFlagParams{Name: "x", Key: "MATH_HINTS", Context: "mathstream"}, nil},
		{"create: bad status and mode", CreateFeatureFlagParams{Name: "x", Key: "X", Context: "assign-prog", Status: "paused", FilterMode: "some"},
			[]wantProblem{{field: "status", contains: "unknown status"}, {field: "filter_mode", contains: "unknown filter mode"}}},
		{"create: list with two kinds", CreateFeatureFlagParams{Name: "x", Key: "X", Context: "assign-prog",
			IncludeLists: []FlagListParam{{Users: []string{"u1"}, Groups: grp("classId", "c7")}}},
			[]wantProblem{{field: "include_lists[0]", contains: "exactly one kind of member"}}},
		{"create: empty list", CreateFeatureFlagParams{Name: "x", Key: "X", Context: "assign-prog", ExcludeLists: []FlagListParam{{}}},
			[]wantProblem{{field: "exclude_lists[0]", contains: "needs members", missing: true}}},
		{"create: group type not of the context", CreateFeatureFlagParams{Name: "x", Key: "X", Context: "livehint-ai",
			IncludeLists: []FlagListParam{{Groups: grp("instructorId", "i1")}}},
			[]wantProblem{{field: "include_lists[0].groups[0].type", contains: `"instructorId" is not a group type of context livehint-ai`}}},
		{"create: unknown segment", CreateFeatureFlagParams{Name: "x", Key: "X", Context: "assign-prog",
			IncludeLists: []FlagListParam{{SegmentIDs: []string{unknownID}}}},
			[]wantProblem{{field: "include_lists[0].segment_ids[0]", contains: "no public segment", notFound: true}}},
		{"create: segment of another context", CreateFeatureFlagParams{Name: "x", Key: "X", Context: "assign-prog",
			IncludeLists: []FlagListParam{{SegmentIDs: []string{streamSegID}}}},
			[]wantProblem{{field: "include_lists[0].segment_ids[0]", contains: "is in context mathstream, not assign-prog"}}},

		// update_feature_flag
		{"update: valid", UpdateFeatureFlagParams{FlagID: mathFlagID, Name: ptr("Math hints 2")}, nil},
		{"update: nothing given", UpdateFeatureFlagParams{FlagID: mathFlagID}, []wantProblem{{field: "fields", contains: "at least one field", missing: true}}},
		{"update: unknown flag", UpdateFeatureFlagParams{FlagID: unknownID, Name: ptr("x")}, []wantProblem{{field: "flag_id", contains: "no feature flag", notFound: true}}},
		{"update: not an id", UpdateFeatureFlagParams{FlagID: "MATH_HINTS", Name: ptr("x")}, []wantProblem{{field: "flag_id", contains: "find_feature_flag", notFound: true}}},
		{"update: context of a flag with lists", UpdateFeatureFlagParams{FlagID: mathFlagID, Context: ptr("mathstream")},
			[]wantProblem{{field: "context", contains: "UpGrade drops every list"}}},
		{"update: context of a flag without lists", UpdateFeatureFlagParams{FlagID: tutorFlagID, Context: ptr("assign-prog")}, nil},
		{"update: key taken", UpdateFeatureFlagParams{FlagID: tutorFlagID, Context: ptr("assign-prog"), Key: ptr("MATH_HINTS")},
			[]wantProblem{{field: "key", contains: "keys are unique per context"}}},
		{"update: own key kept", UpdateFeatureFlagParams{FlagID: mathFlagID, Key: ptr("MATH_HINTS"), Status: ptr("Enabled")}, nil},
		{"update: a status change in passing", UpdateFeatureFlagParams{FlagID: mathFlagID, Name: ptr("x"), Status: ptr("disabled")},
			[]wantProblem{{field: "status", contains: "goes through update_feature_flag_status"}}},

		// update_feature_flag_status
		{"status: valid", UpdateFeatureFlagStatusParams{FlagID: tutorFlagID, Status: "Enabled"}, nil},
		{"status: already", UpdateFeatureFlagStatusParams{FlagID: mathFlagID, Status: "enabled"}, []wantProblem{{field: "status", contains: "already enabled"}}},
		{"status: unknown", UpdateFeatureFlagStatusParams{FlagID: mathFlagID, Status: "running"}, []wantProblem{{field: "status", contains: "unknown status"}}},
		{"status: missing", UpdateFeatureFlagStatusParams{FlagID: mathFlagID}, []wantProblem{{field: "status", contains: "required", missing: true}}},

		// delete_feature_flag
		{"delete: valid", DeleteFeatureFlagParams{FlagID: mathFlagID}, nil},
		{"delete: missing", DeleteFeatureFlagParams{}, []wantProblem{{field: "flag_id", contains: "required", missing: true}}},

		// add_feature_flag_list
		{"add list: valid", AddFeatureFlagListParams{FlagID: mathFlagID, Kind: "include", Users: []string{"u5"}}, nil},
		{"add list: no kind", AddFeatureFlagListParams{FlagID: mathFlagID, Users: []string{"u5"}}, []wantProblem{{field: "kind", contains: "required", missing: true}}},
		{"add list: bad kind", AddFeatureFlagListParams{FlagID: mathFlagID, Kind: "both", Users: []string{"u5"}}, []wantProblem{{field: "kind", contains: "include or exclude"}}},
		{"add list: two kinds", AddFeatureFlagListParams{FlagID: mathFlagID, Kind: "exclude", Users: []string{"u5"}, SegmentIDs: []string{pilotSegID}},
			[]wantProblem{{field: "members", contains: "users and segment_ids"}}},
		{"add list: segment of another context", AddFeatureFlagListParams{FlagID: tutorFlagID, Kind: "include", SegmentIDs: []string{pilotSegID}},
			[]wantProblem{{field: "segment_ids[0]", contains: "is in context assign-prog, not mathstream"}}},

		// update_feature_flag_list
		{"update list: valid", UpdateFeatureFlagListParams{FlagID: mathFlagID, Kind: "exclude", ListID: excListID, Users: &[]string{"u9", "u10"}}, nil},
		{"update list: other kind", UpdateFeatureFlagListParams{FlagID: mathFlagID, Kind: "include", ListID: excListID, Enabled: ptr(false)},
			[]wantProblem{{field: "kind", contains: "is an exclude list"}}},
		{"update list: unknown list", UpdateFeatureFlagListParams{FlagID: mathFlagID, Kind: "include", ListID: unknownID, Enabled: ptr(false)},
			[]wantProblem{{field: "list_id", contains: "has no list", notFound: true}}},
		{"update list: second kind", UpdateFeatureFlagListParams{FlagID: mathFlagID, Kind: "exclude", ListID: excListID, Groups: &[]GroupParam{{Type: "classId", GroupID: "c1"}}},
			[]wantProblem{{field: "members", contains: "users and groups"}}},
		{"update list: switch kind", UpdateFeatureFlagListParams{FlagID: mathFlagID, Kind: "exclude", ListID: excListID, Users: &[]string{}, Groups: &[]GroupParam{{Type: "classId", GroupID: "c1"}}}, nil},
		{"update list: nothing", UpdateFeatureFlagListParams{FlagID: mathFlagID, Kind: "exclude", ListID: excListID}, []wantProblem{{field: "fields", contains: "name what changes", missing: true}}},

		// remove_feature_flag_list
		{"remove list: valid", RemoveFeatureFlagListParams{FlagID: mathFlagID, Kind: "include", ListID: incListID}, nil},
		{"remove list: no id", RemoveFeatureFlagListParams{FlagID: mathFlagID, Kind: "include"}, []wantProblem{{field: "list_id", contains: "required", missing: true}}},

		// create_segment
		{"segment create: valid", CreateSegmentParams{Name: "new", Context: "assign-prog", Users: []string{"a"}}, nil},
		{"segment create: name taken", CreateSegmentParams{Name: "Pilot Schools", Context: "assign-prog"}, []wantProblem{{field: "name", contains: "names are unique per context"}}},
		{"segment create: name free elsewhere", CreateSegmentParams{Name: "pilot schools", Context: "mathstream"}, nil},
		{"segment create: missing", CreateSegmentParams{}, []wantProblem{{field: "name", contains: "required", missing: true}, {field: "context", contains: "required", missing: true}}},

		// update_segment
		{"segment update: valid", UpdateSegmentParams{SegmentID: pilotSegID, AddUsers: []string{"u3"}}, nil},
		{"segment update: unknown", UpdateSegmentParams{SegmentID: unknownID, AddUsers: []string{"u3"}}, []wantProblem{{field: "segment_id", contains: "no public segment", notFound: true}}},
		{"segment update: whole and add", UpdateSegmentParams{SegmentID: pilotSegID, Users: &[]string{"a"}, AddUsers: []string{"b"}},
			[]wantProblem{{field: "users", contains: "not both"}}},
		{"segment update: remove a non-member", UpdateSegmentParams{SegmentID: pilotSegID, RemoveUsers: []string{"zz"}},
			[]wantProblem{{field: "remove_users[0]", contains: "no such user"}}},
		{"segment update: loop", UpdateSegmentParams{SegmentID: pilotSegID, AddSegmentIDs: []string{districtID}},
			[]wantProblem{{field: "segment_ids[0]", contains: "make a loop"}}},
		{"segment update: itself", UpdateSegmentParams{SegmentID: pilotSegID, AddSegmentIDs: []string{pilotSegID}},
			[]wantProblem{{field: "segment_ids[0]", contains: "cannot hold itself"}}},
		{"segment update: rename to a taken name", UpdateSegmentParams{SegmentID: pilotSegID, Name: ptr("district 9")},
			[]wantProblem{{field: "name", contains: "already has this name"}}},

		// delete_segment
		{"segment delete: valid (used)", DeleteSegmentParams{SegmentID: pilotSegID}, nil},
		{"segment delete: unknown", DeleteSegmentParams{SegmentID: unknownID}, []wantProblem{{field: "segment_id", notFound: true, contains: "no public segment"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Validate(context.Background(), flagged(), tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Field != w.field || g.Missing != w.missing || g.NotFound != w.notFound || !strings.Contains(g.Message, w.contains) {
					t.Errorf("problem %d = %+v, want field %s missing %v not_found %v containing %q", i, g, w.field, w.missing, w.notFound, w.contains)
				}
			}
		})
	}
}

// TestBindFlagHabits: what real models send binds to the canonical params.
func TestBindFlagHabits(t *testing.T) {
	tests := []struct {
		name, action, raw, want string
	}{
		{"group as one string", "add_feature_flag_list", `{"flag_id":"` + mathFlagID + `","kind":"Include","groups":["classId:c7"]}`,
			`{"flag_id":"` + mathFlagID + `","kind":"include","enabled":true,"groups":[{"type":"classId","group_id":"c7"}]}`},
		{"group as a pair", "add_feature_flag_list", `{"flag_id":"` + mathFlagID + `","kind":"exclusion","groups":{"classId":"c7"}}`,
			`{"flag_id":"` + mathFlagID + `","kind":"exclude","enabled":true,"groups":[{"type":"classId","group_id":"c7"}]}`},
		{"list as one object, nulls, display status", "create_feature_flag",
			`{"name":" Hints ","key":"HINTS","context":"assign-prog","description":null,"tags":[],"status":"Enabled","filter_mode":"exclude all","include_lists":{"users":["u1"," "],"enabled":"true"},"exclude_lists":null}`,
			`{"name":"Hints","key":"HINTS","context":"assign-prog","status":"enabled","filter_mode":"excludeAll","include_lists":[{"enabled":true,"users":["u1"]}]}`},
		{"status on", "update_feature_flag_status", `{"flagId":"` + strings.ToUpper(mathFlagID) + `","status":"ON"}`,
			`{"flag_id":"` + mathFlagID + `","status":"enabled"}`},
		{"numbers as strings", "create_segment", `{"name":"s","context":"assign-prog","users":[123, "456"]}`,
			`{"name":"s","context":"assign-prog","users":["123","456"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Bind(tt.action, json.RawMessage(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if string(b.Params) != tt.want {
				t.Errorf("canonical =\n%s\nwant\n%s", b.Params, tt.want)
			}
		})
	}
}
