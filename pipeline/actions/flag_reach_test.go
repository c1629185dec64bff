package actions

import "testing"

// TestReachSkipsEmptyLists: on the real server, deleting the only segment
// of an enabled list leaves the list with no members (UpGrade drops the
// segment from it silently). Such a list matches nobody, so the reach
// sentence leaves it out instead of saying "except (no members)".
func TestReachSkipsEmptyLists(t *testing.T) {
	empty := flagList{ID: "l0", Enabled: true}
	s1 := flagList{ID: "l1", Enabled: true, Members: memberSet{Groups: []GroupParam{{Type: "schoolId", GroupID: "s1"}}}}
	u1 := flagList{ID: "l2", Enabled: true, Members: memberSet{Users: []string{"u1"}}}
	tests := []struct {
		name string
		f    flagState
		want string
	}{
		{"includeAll, an empty exclude list", flagState{Context: "assign-prog", FilterMode: FlagIncludeAll, Exclude: []flagList{empty, s1}},
			`everyone in context assign-prog, except 1 group schoolId "s1"`},
		{"includeAll, only an empty exclude list", flagState{Context: "assign-prog", FilterMode: FlagIncludeAll, Exclude: []flagList{empty}},
			`everyone in context assign-prog`},
		{"excludeAll, an empty include list", flagState{Context: "assign-prog", FilterMode: FlagExcludeAll, Include: []flagList{empty, u1}},
			`only 1 user "u1" in context assign-prog`},
		{"excludeAll, only an empty include list", flagState{Context: "assign-prog", FilterMode: FlagExcludeAll, Include: []flagList{empty}},
			`nobody (filter mode excludeAll and its enabled include lists have no members)`},
		{"excludeAll, no include list", flagState{Context: "assign-prog", FilterMode: FlagExcludeAll},
			`nobody (filter mode excludeAll and no enabled include list)`},
	}
	for _, tt := range tests {
		if got := reachWhenEnabled(tt.f, &segDir{}); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}
