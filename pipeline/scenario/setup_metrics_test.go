package scenario

import (
	"errors"
	"strings"
	"testing"
)

// TestParseResultsSetupErrors: the results keys of setup and
// expect.backend name the file, line and key of a mistake.
func TestParseResultsSetupErrors(t *testing.T) {
	const steps = "steps:\n  - say: hi\n"
	for _, tt := range []struct{ name, yaml, want string }{
		{"metric typo", "name: x\nsetup:\n  metrics:\n    - {key: s, typ: continuous, context: [c]}\n" + steps,
			`f.yaml:4:16: unknown key "typ" in setup.metrics[0]; did you mean "type"?`},
		{"metric without key", "name: x\nsetup:\n  metrics:\n    - {type: continuous, context: [c]}\n" + steps, "setup.metrics[0]: key is required"},
		{"query of another action", "name: x\nsetup:\n  queries:\n    - {name: q, metric_key: s, operation: avg, experiment_id: A, compare: 3}\n" + steps, "setup.queries[0] (q): compare"},
		{"students without count", "name: x\nsetup:\n  students:\n    - {experiment: A}\n" + steps, "f.yaml:4:7: setup.students[0]: count is required"},
		{"students share", "name: x\nsetup:\n  students:\n    - {experiment: A, count: 3, unmarked: {variant: 2}}\n" + steps,
			`f.yaml:4:53: setup.students[0].unmarked.variant: want a share from 0 to 1, got "2"`},
		{"students empty value", "name: x\nsetup:\n  students:\n    - {experiment: A, count: 3, log: {control: {score: [1, \"\"]}}}\n" + steps,
			"setup.students[0].log.control.score: a value is empty text"},
		{"backend query without experiment", "name: x\nsteps:\n  - say: hi\n    expect: {backend: {queries: [{name: q}]}}\n", "step 1.expect.backend.queries[0]: experiment is required"},
		{"backend metric typo", "name: x\nsteps:\n  - say: hi\n    expect: {backend: {metrics: [{key: s, kind: x}]}}\n", `unknown key "kind" in step 1.expect.backend.metrics[0]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "f.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error = %v\nwant an ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}
