package upgrade

import (
	"bytes"
	"testing"
)

// TestRequestBodyNamesSegmentsByID: a create or update body names a list's
// public segments by id only, the shape the server's body validation takes.
func TestRequestBodyNamesSegmentsByID(t *testing.T) {
	e := Experiment{Inclusion: Segment{Segments: []SegmentRef{{ID: "s9", Name: "pilot schools"}}}}
	for _, shape := range []SegmentShape{SegmentsArray, SegmentsObject} {
		b, err := e.requestBody(shape)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"subSegments":[{"id":"s9"}]`)) {
			t.Errorf("shape %d: %s", shape, b)
		}
	}
}
