package cmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRenderTable: columns are padded to their widest cell plus two
// spaces, measured in terminal cells (a CJK character is two), lines carry
// no trailing blanks, a short row leaves its last cells empty, and a table
// without rows is its header.
func TestRenderTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string
		rows   [][]string
		want   string
	}{
		{"plain", []string{"NAME", "ID", "STATE"}, [][]string{{"Math Hints", "1234abcd", "enrolling"}, {"x", "", "inactive"}},
			"NAME        ID        STATE\nMath Hints  1234abcd  enrolling\nx                     inactive\n"},
		{"wide characters", []string{"NAME", "ID"}, [][]string{{"数学", "a"}, {"abcde", "b"}},
			"NAME   ID\n数学   a\nabcde  b\n"},
		{"short row", []string{"A", "B", "C"}, [][]string{{"1"}},
			"A  B  C\n1\n"},
		{"no rows", []string{"KEY", "NAME"}, nil, "KEY  NAME\n"},
		{"line breaks and tabs in a cell", []string{"A", "B"}, [][]string{{"x\ny", "1"}, {"a\tb", "2"}},
			"A    B\nx y  1\na b  2\n"},
		{"empty last column", []string{"A", "B"}, [][]string{{"x", ""}}, "A  B\nx\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := RenderTable(&b, tc.header, tc.rows); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}
