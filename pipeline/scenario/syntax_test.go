package scenario

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A YAML syntax error names the line a person must fix, counted from 1.
func TestSyntaxErrorLine(t *testing.T) {
	tests := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"unclosed brace on line 5", "name: x\nsteps:\n  - say: hello\n    llm:\n      - call: {analyze_user_request: {intent_type: direct_answer\n    expect: {status: completed}\n", 5, "did not find expected ',' or '}'"},
		{"mis-indented expect on line 6", "name: x\nsteps:\n  - say: hello\n    llm:\n      - reply: hi\n   expect:\n      status: completed\n", 6, "did not find expected '-' indicator"},
		{"unclosed quote at the end", "name: x\nsteps:\n  - say: \"abc", 3, "found unexpected end of stream"},
		{"after a flow list over lines", "name: x\nsteps: [\n  a,\n  b\n]\nfoo: : bar\n", 6, "mapping values are not allowed"},
		{"tab indentation on line 4", "name: x\nsteps:\n  - say: hi\n\t  expect: {}\n", 4, "found a tab character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseOptions{}.Parse([]byte(tt.src), "f.yaml")
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a ParseError", err)
			}
			if pe.Line != tt.line || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("got %s, want line %d with %q", err, tt.line, tt.msg)
			}
		})
	}
}

// The suite's time is the run's wall time, not the sum of its cases.
func TestJUnitWallTime(t *testing.T) {
	reports := []*Report{{Name: "a", Duration: 2 * time.Second}, {Name: "b", Duration: 2 * time.Second}}
	var b strings.Builder
	if err := WriteJUnit(&b, reports, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, `<testsuites tests="2" failures="0" time="2.500">`) ||
		!strings.Contains(out, `<testsuite name="upgrade-agent scenarios" tests="2" failures="0" time="2.500">`) ||
		strings.Count(out, `time="2.000"`) != 2 {
		t.Errorf("times:\n%s", out)
	}
}
