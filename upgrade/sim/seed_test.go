package sim

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// seedResults seeds a fresh simulator (twice) and returns the results of
// Math Hints and the reports of both seeds.
func seedResults(t *testing.T) (readmodel.Results, *SeedReport, *SeedReport) {
	t.Helper()
	ts := startSim(t, Options{})
	ctx := context.Background()
	c, err := upgrade.New(upgrade.Config{BaseURL: ts.base})
	if err != nil {
		t.Fatal(err)
	}
	first, err := Seed(ctx, c, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Seed(ctx, c, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	es, err := c.Experiments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(es, func(e upgrade.Experiment) bool { return e.Name == "Math Hints" })
	if i < 0 {
		t.Fatal("no Math Hints after the seed")
	}
	in, err := c.ReadResults(ctx, es[i].ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := readmodel.ResultsOf(in.Experiment, in.Analyses, in.Stats, readmodel.EditedWhileEnrolling(in.Experiment, in.Audit))
	if err != nil {
		t.Fatal(err)
	}
	return res, first, again
}

// The seed gives Math Hints results with numbers: three queries, every
// condition with 30 or more users and, for the mean and the percentage,
// an interval and a comparison; a second seed creates nothing and finds
// the metrics; a seed of another fresh simulator gives the same figures.
func TestSeedResults(t *testing.T) {
	res, first, again := seedResults(t)
	for _, m := range []string{"metric time_on_task", "metric completion"} {
		if !slices.Contains(first.Created, m) || !slices.Contains(again.Present, m) {
			t.Errorf("%s: created %v on the first seed, present %v on the second", m, first.Created, again.Present)
		}
	}
	if len(again.Created) != 0 {
		t.Errorf("a second seed created %v", again.Created)
	}
	names := []string{}
	total := 0
	for _, q := range res.Queries {
		names = append(names, q.Name)
		if q.Rejected {
			t.Errorf("query %s rejected: %v", q.Name, q.Notes)
		}
		for j, cv := range q.Conditions {
			if cv.N < 30 || cv.Value == nil || cv.TooLittle {
				t.Errorf("query %s, %s: n %d, value %v, too little %v", q.Name, cv.Code, cv.N, cv.Value, cv.TooLittle)
			}
			if q.Kind != "value" && (cv.Interval == nil || (j > 0 && (cv.VsFirst == nil || cv.VsFirst.Interval == nil))) {
				t.Errorf("query %s, %s: no interval or comparison: %+v", q.Name, cv.Code, cv)
			}
			if q.Name == "Mean time on task" {
				total += cv.N
			}
		}
	}
	if diff := cmp.Diff([]string{"Mean time on task", "Time on task spread", "Completion rate"}, names); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
	if total != 80 {
		t.Errorf("users with a time on task: %d, want the 80 enrolled", total)
	}
	other, _, _ := seedResults(t)
	values := func(r readmodel.Results) [][]any {
		var out [][]any
		for _, q := range r.Queries {
			for _, cv := range q.Conditions {
				out = append(out, []any{q.Name, cv.Code, cv.N, *cv.Value})
			}
		}
		return out
	}
	if diff := cmp.Diff(values(res), values(other)); diff != "" {
		t.Errorf("two seeds differ (-first +second):\n%s", diff)
	}
}

// The logged values depend on the user id and the condition only.
func TestSampleLogIsDerivedFromTheUser(t *testing.T) {
	a, b := sampleLog("lincoln-student-7", "control"), sampleLog("lincoln-student-7", "control")
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same user, same condition, other values:\n%s", diff)
	}
	v := sampleLog("lincoln-student-7", "variant")
	if v[metricTimeOnTask].(int) != a[metricTimeOnTask].(int)-30 {
		t.Errorf("variant time %v, control %v: want 30 s less", v[metricTimeOnTask], a[metricTimeOnTask])
	}
	for _, user := range []string{"lincoln-student-1", "lincoln-student-2", "x"} {
		got := sampleLog(user, "control")
		if s := got[metricTimeOnTask].(int); s < 240 || s >= 360 {
			t.Errorf("%s: time on task %d, want 240 to 359", user, s)
		}
		if c := got[metricCompletion].(string); !slices.Contains([]string{"completed", "partial", "abandoned"}, c) {
			t.Errorf("%s: completion %q is not an allowed value", user, c)
		}
	}
}
