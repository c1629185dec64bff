package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestExperimentDescribeSegments: lists naming public segments show by
// name, sorted, after the users and groups.
func TestExperimentDescribeSegments(t *testing.T) {
	e := sampleExperiment()
	e.Inclusion = upgrade.Segment{Users: []string{"u1"},
		Segments: []upgrade.SegmentRef{{ID: "s2", Name: "rural"}, {ID: "s1", Name: "pilot schools"}}}
	e.Exclusion = upgrade.Segment{Segments: []upgrade.SegmentRef{{ID: "s3"}}}
	var out bytes.Buffer
	if err := NewReadView("text", &IOStreams{Out: &out}).Experiment(e); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Included:    users u1; segments pilot schools, rural\n",
		"Excluded:    segment s3\n", // no name given: the id
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}
