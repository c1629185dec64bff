package upgrade

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// seedFiles adds every testdata file as a seed, so the fuzzers start from
// real answers of both server versions.
func seedFiles(f *testing.F, add func([]byte)) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			add(b)
		}
	}
}

// FuzzExperimentJSON: any answer body either fails to decode with an error
// or decodes into an experiment that both wire shapes can write back and
// read again; it never panics.
func FuzzExperimentJSON(f *testing.F) {
	seedFiles(f, func(b []byte) { f.Add(b) })
	f.Add([]byte(`{"experimentSegmentInclusion":{"segment":null},"experimentSegmentExclusion":[{"segment":null}]}`))
	f.Add([]byte(`{"state":"paused","stateTimeLogs":[{"fromState":"running","toState":"completed"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Experiment
		if err := json.Unmarshal(data, &e); err != nil {
			return
		}
		for _, shape := range []SegmentShape{SegmentsArray, SegmentsObject} {
			out, err := e.MarshalFor(shape)
			if err != nil {
				t.Fatalf("MarshalFor(%v) after a successful decode: %v", shape, err)
			}
			var back Experiment
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("re-decoding own output: %v\n%s", err, out)
			}
			if back.State != e.State || len(back.Inclusion.Users) != len(e.Inclusion.Users) ||
				len(back.Exclusion.Groups) != len(e.Exclusion.Groups) {
				t.Fatalf("round trip changed the experiment:\n%s", out)
			}
		}
	})
}

// FuzzErrorMessage: any error answer yields a short, valid UTF-8 message
// (when the body was UTF-8) without panicking.
func FuzzErrorMessage(f *testing.F) {
	seedFiles(f, func(b []byte) { f.Add(404, "text/html", b) })
	f.Add(400, "application/json", []byte(`{"message":"Invalid body, check 'errors' property","errors":[{"property":"x","constraints":{"a":"b"}}]}`))
	f.Add(500, "", []byte("<pre>"))
	f.Fuzz(func(t *testing.T, status int, contentType string, body []byte) {
		msg := errorMessage(status, contentType, body)
		if len(msg) > maxMessageLen+len("...")+len(" (unknown route: check that the base URL ends in /api)") {
			t.Fatalf("message too long (%d bytes)", len(msg))
		}
		if utf8.Valid(body) && !utf8.ValidString(msg) {
			t.Fatalf("message %q is not valid UTF-8", msg)
		}
	})
}
