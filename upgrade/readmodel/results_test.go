package readmodel

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func qraw(id, name, key, typ, op, fn, val, measure string) json.RawMessage {
	q := map[string]any{"operationType": op}
	if fn != "" {
		q["compareFn"], q["compareValue"] = fn, val
	}
	var metric any
	if key != "" {
		metric = map[string]any{"key": key, "type": typ}
	}
	b, _ := json.Marshal(map[string]any{"id": id, "name": name, "query": q, "metric": metric, "repeatedMeasure": measure})
	return b
}

func cr(cond string, v float64, n int) upgrade.ConditionResult {
	return upgrade.ConditionResult{ConditionID: cond, Value: &v, Participants: n}
}

func twoArm(queries ...json.RawMessage) *upgrade.Experiment {
	return &upgrade.Experiment{ID: "e", Name: "Hints", State: upgrade.StateEnrolling,
		Conditions: []upgrade.Condition{{ID: "c1", ConditionCode: "control", AssignmentWeight: 50, Order: 1},
			{ID: "c2", ConditionCode: "variant", AssignmentWeight: 50, Order: 2}},
		Queries: queries}
}

func statsOf(a, b int) *upgrade.EnrollmentStats {
	return &upgrade.EnrollmentStats{ID: "e", Users: a + b, Conditions: []upgrade.ConditionStats{{ID: "c1", Users: a}, {ID: "c2", Users: b}}}
}

func TestResultsProportionsAndMeans(t *testing.T) {
	e := twoArm(
		qraw("q1", "Pass rate", "outcome", "categorical", "percentage", "=", "pass", "EARLIEST"),
		qraw("q2", "Passes", "outcome", "categorical", "count", "=", "pass", "EARLIEST"),
		qraw("q3", "Mean", "score", "continuous", "avg", "", "", "MEAN"),
		qraw("q4", "Spread", "score", "continuous", "stddev", "", "", "MEAN"),
		qraw("q5", "Mean recent", "score", "continuous", "avg", "", "", "MOST RECENT"),
	)
	an := []upgrade.QueryResult{
		{QueryID: "q1", Found: true, MainEffect: []upgrade.ConditionResult{cr("c1", 40, 50), cr("c2", 60, 50)}},
		{QueryID: "q2", Found: true, MainEffect: []upgrade.ConditionResult{cr("c1", 20, 50), cr("c2", 30, 50)}},
		{QueryID: "q3", Found: true, MainEffect: []upgrade.ConditionResult{cr("c1", 10, 40), cr("c2", 12, 40)}},
		{QueryID: "q4", Found: true, MainEffect: []upgrade.ConditionResult{cr("c1", 2, 40), cr("c2", 3, 40)}},
		{QueryID: "q5", Found: true, MainEffect: []upgrade.ConditionResult{cr("c1", 10, 40), cr("c2", 12, 40)}},
	}
	r, err := ResultsOf(e, an, statsOf(50, 50), false)
	if err != nil {
		t.Fatal(err)
	}
	pct, cnt, mean, recent := r.Queries[0], r.Queries[1], r.Queries[2], r.Queries[4]
	if pct.Kind != KindProportion || cnt.Kind != KindProportion || mean.Kind != KindMean {
		t.Fatalf("kinds: %s %s %s", pct.Kind, cnt.Kind, mean.Kind)
	}
	// 20/50 against 30/50 as a percentage and as a count: the same
	// difference in percentage points, each interval on its value's scale.
	p, c := pct.Conditions[1], cnt.Conditions[1]
	if *p.Successes != 30 || *c.Successes != 30 || p.VsFirst == nil || c.VsFirst == nil {
		t.Fatalf("proportion: %+v / %+v", p, c)
	}
	if p.VsFirst.Value != c.VsFirst.Value || *p.VsFirst.Interval != *c.VsFirst.Interval {
		t.Errorf("percentage and count differences differ: %+v vs %+v", p.VsFirst.Interval, c.VsFirst.Interval)
	}
	if d := p.Interval.Low/100*50 - c.Interval.Low; d > 1e-6 || d < -1e-6 {
		t.Errorf("count interval %+v is not the percentage's %+v of 50", c.Interval, p.Interval)
	}
	if p.VsFirst.Value != 20 || p.Interval.Low < 45 || p.Interval.High > 75 {
		t.Errorf("60%% of 50: %+v %+v", p.Interval, p.VsFirst)
	}
	if m := mean.Conditions[1]; m.VsFirst == nil || m.VsFirst.Value != 2 || m.VsFirst.Interval.Low >= 2 || *m.StdDev != 3 {
		t.Errorf("Welch difference: %+v", m)
	}
	// No stddev query with the same repeated measure: the value alone, and
	// the note says which query to add.
	if recent.Conditions[1].VsFirst != nil || len(recent.Notes) != 1 || !strings.Contains(recent.Notes[0], "add a stddev query on score (repeated measure MOST RECENT)") {
		t.Errorf("mean without stddev: %+v", recent)
	}
	if !r.SampleRatio.Tested || r.SampleRatio.Mismatch || r.SampleRatio.P != 1 {
		t.Errorf("sample ratio: %+v", r.SampleRatio)
	}
}

func TestResultsTooLittleDataAndFailures(t *testing.T) {
	e := twoArm(
		qraw("q1", "Pass rate", "outcome", "categorical", "percentage", "=", "pass", "EARLIEST"),
		qraw("q2", "Orphan", "", "", "avg", "", "", "MEAN"),
		qraw("q3", "Bad", "score", "continuous", "percentage", "", "", "MEAN"),
		qraw("q4", "Unknown to the server", "score", "continuous", "avg", "", "", "MEAN"),
	)
	an := []upgrade.QueryResult{
		{QueryID: "q1", Found: true, MainEffect: []upgrade.ConditionResult{cr("c1", 50, 40), cr("c2", 50, 29)}},
		{QueryID: "q2", Found: true, Rejected: true, MainEffect: []upgrade.ConditionResult{cr("c1", 0, 0), cr("c2", 0, 0)}},
		{QueryID: "q3", Found: true, Rejected: true, MainEffect: []upgrade.ConditionResult{cr("c1", 0, 0), cr("c2", 0, 0)}},
	}
	r, err := ResultsOf(e, an, statsOf(40, 29), false)
	if err != nil {
		t.Fatal(err)
	}
	v := r.Queries[0].Conditions[1]
	if !v.TooLittle || v.Interval != nil || v.VsFirst != nil || !strings.Contains(v.StatusReason, "too little data (29 < 30)") {
		t.Errorf("29 users: %+v", v)
	}
	if r.Queries[0].Conditions[0].Interval == nil {
		t.Error("40 users get an interval")
	}
	for _, i := range []int{1, 2} {
		q := r.Queries[i]
		if !q.Rejected || q.Conditions[0].Value != nil || len(q.Notes) == 0 {
			t.Errorf("%s: %+v", q.Name, q)
		}
	}
	if q := r.Queries[3]; q.Rejected || q.Conditions[0].StatusReason != "no data" || !strings.Contains(q.Notes[0], "no analysis") {
		t.Errorf("query the server does not know: %+v", q)
	}
}

func TestSampleRatioOf(t *testing.T) {
	en := Enrollment{Conditions: []ConditionEnrollment{{Weight: 50, Users: 400}, {Weight: 50, Users: 600}}}
	sr := SampleRatioOf(en, false)
	if !sr.Mismatch || !strings.Contains(sr.Line, SRMWarning) || !strings.Contains(sr.Line, "p < 0.0001") {
		t.Errorf("400/600: %+v", sr)
	}
	if sr := SampleRatioOf(en, true); sr.Tested || !strings.Contains(sr.Line, "edited while enrolling") {
		t.Errorf("edited: %+v", sr)
	}
	empty := Enrollment{Conditions: []ConditionEnrollment{{Weight: 50}, {Weight: 50}}}
	if sr := SampleRatioOf(empty, false); sr.Tested || !strings.Contains(sr.Line, "not tested") {
		t.Errorf("no users: %+v", sr)
	}
}

func TestEditedWhileEnrolling(t *testing.T) {
	e := &upgrade.Experiment{StateTimeLogs: []upgrade.StateTimeLog{{FromState: upgrade.StateInactive, ToState: upgrade.StateEnrolling, TimeLog: "2026-01-02T00:00:00.000Z"}}}
	entry := func(at, data string) upgrade.AuditEntry {
		return upgrade.AuditEntry{Type: upgrade.AuditExperimentUpdated, CreatedAt: at, Data: json.RawMessage(data)}
	}
	for _, tc := range []struct {
		name  string
		audit []upgrade.AuditEntry
		want  bool
	}{
		{"before enrolling", []upgrade.AuditEntry{entry("2026-01-01T00:00:00.000Z", `{"diff":"x"}`)}, false},
		{"a list change", []upgrade.AuditEntry{entry("2026-01-03T00:00:00.000Z", `{"list":{}}`)}, false},
		{"new weights while enrolling", []upgrade.AuditEntry{entry("2026-01-03T00:00:00.000Z", `{"diff":" {\n   conditions: [\n     {\n-      assignmentWeight: 50\n+      assignmentWeight: 30\n"}`)}, true},
		{"a diff of another shape", []upgrade.AuditEntry{entry("2026-01-03T00:00:00.000Z", `{"diff":{"conditions":1}}`)}, true},
		{"a query added while enrolling", []upgrade.AuditEntry{entry("2026-01-03T00:00:00.000Z", `{"diff":" {\n-  queries: []\n+  queries: [{\"name\":\"SD\"}]\n }\n"}`)}, false},
		{"a rename while enrolling", []upgrade.AuditEntry{entry("2026-01-03T00:00:00.000Z", `{"diff":" {\n-  name: \"a\"\n+  name: \"b\"\n }\n"}`)}, false},
		{"no audit", nil, false},
	} {
		if got := EditedWhileEnrolling(e, tc.audit); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
	if EditedWhileEnrolling(&upgrade.Experiment{}, []upgrade.AuditEntry{entry("2026-01-03T00:00:00.000Z", `{"diff":"x"}`)}) {
		t.Error("never enrolled: not edited while enrolling")
	}
}

func TestMetricsOfAndQueriesUsing(t *testing.T) {
	trees := []upgrade.MetricNode{}
	_ = json.Unmarshal([]byte(`[{"key":"quiz","children":[{"key":"q1","children":[{"key":"time","children":[],"metadata":{"type":"continuous"}}],"metadata":{"type":"continuous"}}],"metadata":{"type":"continuous"},"context":["c"]},
	  {"key":"score","children":[],"metadata":{"type":"continuous"},"context":["c"]}]`), &trees)
	exps := []upgrade.Experiment{*twoArm(qraw("q1", "Time", "quiz@__@q1@__@time", "continuous", "avg", "", "", "MEAN"), qraw("q2", "Orphan", "", "", "avg", "", "", "MEAN"))}
	ms := MetricsOf(trees, exps)
	if len(ms) != 2 || ms[0].Key != "quiz@__@q1@__@time" || len(ms[0].UsedBy) != 1 || len(ms[1].UsedBy) != 0 {
		t.Fatalf("metrics: %+v", ms)
	}
	if u := QueriesUsing("quiz", ms); len(u) != 1 || u[0].QueryName != "Time" {
		t.Errorf("group delete takes: %+v", u)
	}
	if u := QueriesUsing("qu", ms); len(u) != 0 {
		t.Errorf("a prefix that is not a group part: %+v", u)
	}
}
