package scenario

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestParseEnrolledErrors: expect.backend.enrolled (scenarios) and
// expect.enrolled (eval cases) name the file, line and key of a mistake.
func TestParseEnrolledErrors(t *testing.T) {
	step := func(v string) string {
		return "name: x\nsteps:\n  - say: hi\n    expect: {backend: {enrolled: [" + v + "]}}\n"
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"no experiment", step("{users: 3}"), "f.yaml:4:35: step 1.expect.backend.enrolled[0]: experiment is required"},
		{"nothing to check", step("{experiment: A}"), "step 1.expect.backend.enrolled[0]: give users or conditions"},
		{"negative users", step("{experiment: A, users: -1}"), "step 1.expect.backend.enrolled[0].users: want 0 or more, got -1"},
		{"users as text", step("{experiment: A, users: many}"), "step 1.expect.backend.enrolled[0].users: want a whole number"},
		{"conditions a list", step("{experiment: A, conditions: [control]}"), "enrolled[0].conditions: want a mapping of condition codes to counts"},
		{"condition count", step("{experiment: A, conditions: {control: x}}"), "enrolled[0].conditions.control: want a whole number"},
		{"typo", step("{experiment: A, user: 3}"), `unknown key "user" in step 1.expect.backend.enrolled[0]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "f.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error = %v\nwant an ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	_, err := ParseCase([]byte("name: x\nturns: [{say: hi}]\nexpect:\n  enrolled: [{users: 2}]\n"), "c.yaml")
	if err == nil || !strings.Contains(err.Error(), "c.yaml:4:14: expect.enrolled[0]: experiment is required") {
		t.Fatalf("case error = %v", err)
	}
	c, err := ParseCase([]byte("name: x\nturns: [{say: hi}]\nexpect:\n  enrolled: [{experiment: A, users: 2, conditions: {control: 1}}]\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Expect.Backend.Enrolled; len(got) != 1 || got[0].Experiment != "A" || *got[0].Users != 2 || got[0].Conditions["control"] != 1 {
		t.Fatalf("enrolled = %+v", got)
	}
}

// TestCheckEnrolled: counts in all and per condition code, read from the
// enrollment statistics by experiment id.
func TestCheckEnrolled(t *testing.T) {
	two, five := 2, 5
	exp := upgrade.Experiment{ID: "e1", Name: "A", Conditions: []upgrade.Condition{{ID: "c1", ConditionCode: "control"}, {ID: "c2", ConditionCode: "variant"}}}
	byName := map[string][]upgrade.Experiment{"A": {exp}}
	read := func(id string) (*upgrade.EnrollmentStats, error) {
		if id != "e1" {
			return nil, errors.New("no such experiment")
		}
		return &upgrade.EnrollmentStats{ID: id, Users: 5, Conditions: []upgrade.ConditionStats{{ID: "c1", Users: 3}, {ID: "c2", Users: 2}}}, nil
	}
	if out := checkEnrolled([]ExpectEnrolled{{Experiment: "A", Users: &five, Conditions: map[string]int{"control": 3, "variant": 2}}}, byName, read); len(out) != 0 {
		t.Fatalf("right counts: %v", out)
	}
	out := checkEnrolled([]ExpectEnrolled{
		{Experiment: "A", Users: &two, Conditions: map[string]int{"variant": 3, "other": 0}},
		{Experiment: "B", Users: &two},
	}, byName, read)
	want := []string{
		"backend.enrolled[0] (A).users: expected 2, got 5",
		"backend.enrolled[0] (A).conditions.other: the experiment has no condition with that code",
		"backend.enrolled[0] (A).conditions.variant: expected 3, got 2",
		"backend.enrolled[1] (B): 0 experiments have that name",
	}
	if !slices.Equal(out, want) {
		t.Fatalf("got  %q\nwant %q", out, want)
	}
	if out := checkEnrolled([]ExpectEnrolled{{Experiment: "A", Users: &two}}, byName, nil); len(out) != 1 || !strings.Contains(out[0], "cannot be read") {
		t.Fatalf("no reader: %v", out)
	}
}

// TestQueryAbsent: query_absent names an experiment and a query, and
// fails while the experiment still has that query.
func TestQueryAbsent(t *testing.T) {
	step := func(v string) string {
		return "name: x\nsteps:\n  - say: hi\n    expect: {backend: {query_absent: [" + v + "]}}\n"
	}
	for _, v := range []string{"{name: q}", "{experiment: A, name: q, operation: avg}"} {
		if _, err := Parse([]byte(step(v)), "f.yaml"); err == nil || !strings.Contains(err.Error(), "step 1.expect.backend.query_absent[0]: give experiment and name only") {
			t.Errorf("%s: error = %v", v, err)
		}
	}
	if _, err := Parse([]byte(step("{experiment: A}")), "f.yaml"); err == nil || !strings.Contains(err.Error(), "name is required") {
		t.Errorf("no name: error = %v", err)
	}
	c, err := ParseCase([]byte("name: x\nturns: [{say: hi}]\nexpect:\n  query_absent: [{experiment: A, name: q}]\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := upgrade.Experiment{Name: "A"}
	if out := checkQueryAbsent(c.Expect.Backend.QueryAbsent, map[string][]upgrade.Experiment{"A": {e}}); len(out) != 0 {
		t.Errorf("no queries: %v", out)
	}
}
