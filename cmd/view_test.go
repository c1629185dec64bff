package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

func sampleExperiment() *upgrade.Experiment {
	return &upgrade.Experiment{
		ID:                 "3f2a1b2c-aaaa-4000-8000-000000000001",
		Name:               "Math Hints",
		Context:            []string{"assign-prog"},
		State:              upgrade.StateEnrolling,
		ConsistencyRule:    "individual",
		AssignmentUnit:     "individual",
		PostExperimentRule: "continue",
		FilterMode:         "includeAll",
		Type:               "Simple",
		Conditions: []upgrade.Condition{
			{ID: "c2", ConditionCode: "variant", AssignmentWeight: 33.5, Order: 2},
			{ID: "c1", ConditionCode: "control", AssignmentWeight: 66.5, Order: 1},
		},
		Partitions: []upgrade.DecisionPoint{
			{ID: "p1", Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1},
			{ID: "p2", Site: "SelectSection", Order: 2},
		},
		UpdatedAt: "2025-03-04T05:06:07.890Z",
	}
}

func TestSummarize(t *testing.T) {
	want := ExperimentSummary{
		ID: "3f2a1b2c-aaaa-4000-8000-000000000001", Name: "Math Hints", Context: "assign-prog",
		Status: upgrade.StateEnrolling, Unit: "individual", Consistency: "individual", PostRule: "continue",
		Conditions:     []ConditionWeight{{Code: "control", Weight: 66.5}, {Code: "variant", Weight: 33.5}},
		DecisionPoints: []DecisionPointRef{{Site: "SelectSection", Target: "absolute_value_plot_equality"}, {Site: "SelectSection"}},
		UpdatedAt:      "2025-03-04T05:06:07.890Z",
	}
	if diff := cmp.Diff(want, readmodel.Summarize(sampleExperiment())); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestExperimentsTable(t *testing.T) {
	var out, errOut bytes.Buffer
	v := NewReadView("text", &IOStreams{Out: &out, ErrOut: &errOut})
	second := readmodel.ExperimentOf(sampleExperiment())
	second.Name, second.ID, second.Status, second.UpdatedAt = "Zeta", "ffff", upgrade.StateInactive, "not a time"
	list := []ExperimentInfo{readmodel.ExperimentOf(sampleExperiment()), second}
	if err := v.Experiments(list, false); err != nil {
		t.Fatal(err)
	}
	want := `NAME        ID        CONTEXT      STATUS     CONDITIONS
Math Hints  3f2a1b2c  assign-prog  enrolling  control:66.5 variant:33.5
Zeta        ffff      assign-prog  inactive   control:66.5 variant:33.5
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr = %q, want nothing", errOut.String())
	}

	// -o wide: every column, whatever the width.
	out.Reset()
	if err := NewReadView("wide", &IOStreams{Out: &out, ErrOut: &errOut, Width: 60}).Experiments(list, false); err != nil {
		t.Fatal(err)
	}
	wantWide := `NAME        ID        CONTEXT      STATUS     UNIT        CONSISTENCY  CONDITIONS                 DECISION POINTS                                           UPDATED
Math Hints  3f2a1b2c  assign-prog  enrolling  individual  individual   control:66.5 variant:33.5  SelectSection/absolute_value_plot_equality SelectSection  2025-03-04 05:06
Zeta        ffff      assign-prog  inactive   individual  individual   control:66.5 variant:33.5  SelectSection/absolute_value_plot_equality SelectSection  not a time
`
	if diff := cmp.Diff(wantWide, out.String()); diff != "" {
		t.Errorf("wide table (-want +got):\n%s", diff)
	}

	// A narrow terminal: long cells are cut; names, ids and states are not.
	out.Reset()
	if err := NewReadView("text", &IOStreams{Out: &out, ErrOut: &errOut, Width: 54}).Experiments(list, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if n := len([]rune(line)); n > 54 {
			t.Errorf("line of %d columns, want at most 54: %q", n, line)
		}
	}
	if !strings.Contains(out.String(), "Math Hints  3f2a1b2c") || !strings.Contains(out.String(), "enrolling") || !strings.Contains(out.String(), "…") {
		t.Errorf("narrow table lost a name, an id or a state, or cut nothing:\n%s", out.String())
	}

	out.Reset()
	if err := v.Experiments(nil, true); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || errOut.String() != "no experiments match the filters\n" {
		t.Errorf("empty filtered list: stdout %q, stderr %q", out.String(), errOut.String())
	}
}

func TestWriteDataFormats(t *testing.T) {
	s := readmodel.Summarize(sampleExperiment())
	s.Conditions = s.Conditions[:1]
	s.DecisionPoints = s.DecisionPoints[1:]
	var j, y bytes.Buffer
	if err := WriteData(&j, "json", []ExperimentSummary{s}); err != nil {
		t.Fatal(err)
	}
	if err := WriteData(&y, "yaml", []ExperimentSummary{s}); err != nil {
		t.Fatal(err)
	}
	wantJSON := `[
  {
    "id": "3f2a1b2c-aaaa-4000-8000-000000000001",
    "name": "Math Hints",
    "context": "assign-prog",
    "status": "enrolling",
    "unit": "individual",
    "consistency": "individual",
    "post_rule": "continue",
    "conditions": [
      {
        "code": "control",
        "weight": 66.5
      }
    ],
    "decision_points": [
      {
        "site": "SelectSection"
      }
    ],
    "updated_at": "2025-03-04T05:06:07.890Z"
  }
]
`
	wantYAML := `- id: 3f2a1b2c-aaaa-4000-8000-000000000001
  name: Math Hints
  context: assign-prog
  status: enrolling
  unit: individual
  consistency: individual
  post_rule: continue
  conditions:
    - code: control
      weight: 66.5
  decision_points:
    - site: SelectSection
  updated_at: "2025-03-04T05:06:07.890Z"
`
	if diff := cmp.Diff(wantJSON, j.String()); diff != "" {
		t.Errorf("json (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantYAML, y.String()); diff != "" {
		t.Errorf("yaml (-want +got):\n%s", diff)
	}
}

func TestWriteDataKeepsStringsStrings(t *testing.T) {
	var y bytes.Buffer
	in := map[string]string{"a": "yes", "b": "123", "c": "null", "d": "off", "e": "plain"}
	if err := WriteData(&y, "yaml", in); err != nil {
		t.Fatal(err)
	}
	want := "a: \"yes\"\nb: \"123\"\nc: \"null\"\nd: \"off\"\ne: plain\n"
	if diff := cmp.Diff(want, y.String()); diff != "" {
		t.Errorf("yaml (-want +got):\n%s", diff)
	}
}

func TestEnrollmentReport(t *testing.T) {
	e := sampleExperiment()
	st := &upgrade.EnrollmentStats{
		ID: e.ID, Users: 10, Groups: 0, UsersExcluded: 2, GroupsExcluded: 1,
		Conditions: []upgrade.ConditionStats{
			{ID: "c2", Users: 3},
			{ID: "c1", Users: 6},
			{ID: "gone", Users: 1},
		},
	}
	got := readmodel.EnrollmentOf(e, st)
	want := StatsReport{
		ExperimentID: e.ID, ExperimentName: "Math Hints", Status: upgrade.StateEnrolling, Users: 10, UsersExcluded: 2, GroupsExcluded: 1,
		Conditions: []ConditionEnrollment{
			{Condition: "control", ConditionID: "c1", Weight: 66.5, Users: 6, Share: 0.6},
			{Condition: "variant", ConditionID: "c2", Weight: 33.5, Users: 3, Share: 0.3},
			{Condition: "gone", ConditionID: "gone", Users: 1, Share: 0.1},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}

	var out bytes.Buffer
	if err := NewReadView("text", &IOStreams{Out: &out}).Stats(got, nil); err != nil {
		t.Fatal(err)
	}
	wantText := `CONDITION  USERS  GROUPS  SHARE
control    6      0       60.0%
variant    3      0       30.0%
gone       1      0       10.0%
TOTAL      10     0       100.0%

Excluded: 2 users, 1 groups
`
	if diff := cmp.Diff(wantText, out.String()); diff != "" {
		t.Errorf("stats table (-want +got):\n%s", diff)
	}

	empty := readmodel.EnrollmentOf(e, &upgrade.EnrollmentStats{})
	for _, c := range empty.Conditions {
		if c.Share != 0 || c.Users != 0 {
			t.Errorf("no enrollment: %+v", c)
		}
	}
	if len(empty.Conditions) != 2 {
		t.Errorf("no enrollment: want both conditions listed, got %+v", empty.Conditions)
	}
}

func TestExperimentDescribe(t *testing.T) {
	e := sampleExperiment()
	e.PostExperimentRule = upgrade.PostRuleAssign
	rev := "c2"
	e.RevertTo = &rev
	e.Inclusion = upgrade.Segment{Users: []string{"u1", "u2"}, Groups: []upgrade.GroupRef{{Type: "schoolId", GroupID: "s1"}}}
	var out bytes.Buffer
	if err := NewReadView("text", &IOStreams{Out: &out}).Experiment(e); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Name:        Math Hints\n",
		"Status:      enrolling\n",
		"Revert to:   variant\n",
		"Included:    users u1, u2; groups schoolId:s1\n",
		"Excluded:    -\n",
		// The read model's order: by the conditions' order field.
		"CONDITION  WEIGHT  ID\ncontrol    66.5    c1\nvariant    33.5    c2\n",
		"SITE           TARGET                        EXCLUDE IF REACHED\nSelectSection  absolute_value_plot_equality  no\nSelectSection                                no\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

func TestSafeText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Math Hints", "Math Hints"},
		{"line one\nline\ttwo", "line one\nline\ttwo"},
		{"Evil\x1b[2K\rName", `Evil\x1b[2K\rName`},
		{"nul\x00here", `nul\x00here`},
		{"del\x7f", `del\x7f`},
		{"c1\u009bcsi", `c1\u009bcsi`},
		{"abc\u202edef", `abc\u202edef`},
		{"bad \xff byte", `bad \xff byte`},
		{"Ünïcödé ✓", "Ünïcödé ✓"},
	}
	for _, tt := range tests {
		if got := string(safeText([]byte(tt.in))); got != tt.want {
			t.Errorf("safeText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var buf bytes.Buffer
	w := terminalSafe(terminalSafe(&buf))
	if n, err := w.Write([]byte("a\x1bb")); err != nil || n != 3 {
		t.Fatalf("Write = %d, %v; want 3, nil (the bytes given, not the bytes written)", n, err)
	}
	if buf.String() != `a\x1bb` || rawWriter(w) != &buf {
		t.Errorf("wrapped twice or lost the writer: %q", buf.String())
	}
}
