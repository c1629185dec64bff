package cmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// --working-group as people type it: none in any case and spacing, TYPE=ID
// or TYPE:ID with stray spaces, the same group twice; two ids of one type,
// none with a group, and empty parts are exit 2.
func TestParseWorkingGroups(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want map[string]string
		bad  bool
	}{
		{in: nil, want: nil},
		{in: []string{"none"}, want: map[string]string{}},
		{in: []string{" NONE "}, want: map[string]string{}},
		{in: []string{"classId=c7"}, want: map[string]string{"classId": "c7"}},
		{in: []string{" classId : c7 ", "schoolId=s1"}, want: map[string]string{"classId": "c7", "schoolId": "s1"}},
		{in: []string{"classId=c7", "classId=c7"}, want: map[string]string{"classId": "c7"}},
		{in: []string{"classId=c7", "classId=c8"}, bad: true},
		{in: []string{"none", "classId=c7"}, bad: true},
		{in: []string{""}, bad: true},
		{in: []string{"=c7"}, bad: true},
		{in: []string{"classId="}, bad: true},
	} {
		got, err := parseWorkingGroups(tc.in)
		if tc.bad {
			if err == nil || ExitCode(err) != 2 {
				t.Errorf("%q: %v, want exit 2", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" || (tc.want == nil) != (got == nil) {
			t.Errorf("%q (-want +got):\n%s", tc.in, d)
		}
	}
}
