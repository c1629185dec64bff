package readmodel

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// factorial2x2 is Color (Red, Blue) x Shape (Circle, Square).
func factorial2x2() *upgrade.Experiment {
	lv := func(id, name string, order int) upgrade.Level { return upgrade.Level{ID: id, Name: name, Order: order} }
	el := func(id, name string) upgrade.LevelCombinationElement {
		return upgrade.LevelCombinationElement{ID: "e-" + id, Level: upgrade.LevelRef{ID: id, Name: name}}
	}
	e := &upgrade.Experiment{ID: "e", Name: "Hint Look", Type: upgrade.TypeFactorial, State: upgrade.StateEnrolling,
		Factors: []upgrade.Factor{
			{Name: "Shape", Order: 2, Levels: []upgrade.Level{lv("ci", "Circle", 1), lv("sq", "Square", 2)}},
			{Name: "Color", Order: 1, Levels: []upgrade.Level{lv("re", "Red", 1), lv("bl", "Blue", 2)}},
		}}
	i := 0
	for _, c := range [][2]string{{"re", "Red"}, {"bl", "Blue"}} {
		for _, s := range [][2]string{{"ci", "Circle"}, {"sq", "Square"}} {
			i++
			e.Conditions = append(e.Conditions, upgrade.Condition{ID: "c" + string(rune('0'+i)), ConditionCode: "Color=" + c[1] + "; Shape=" + s[1],
				AssignmentWeight: 25, Order: i, LevelCombinationElements: []upgrade.LevelCombinationElement{el(s[0], s[1]), el(c[0], c[1])}})
		}
	}
	return e
}

func TestFactorialDetailsAndEnrollment(t *testing.T) {
	e := factorial2x2()
	d := DetailsOf(e)
	if d.Design != "factorial" || len(d.Factors) != 2 || d.Factors[0].Name != "Color" {
		t.Fatalf("details: %+v", d)
	}
	if diff := cmp.Diff([]string{"Color=Red", "Shape=Circle"}, d.Conditions[0].Levels); diff != "" {
		t.Errorf("levels of the first condition (-want +got):\n%s", diff)
	}
	st := &upgrade.EnrollmentStats{ID: "e", Users: 10, Conditions: []upgrade.ConditionStats{{ID: "c1", Users: 1}, {ID: "c2", Users: 2}, {ID: "c3", Users: 3}, {ID: "c4", Users: 4}}}
	en := EnrollmentOf(e, st)
	var got []string
	for _, l := range en.Levels {
		got = append(got, l.Factor+"="+l.Level+":"+string(rune('0'+l.Users)))
	}
	if diff := cmp.Diff([]string{"Color=Red:3", "Color=Blue:7", "Shape=Circle:4", "Shape=Square:6"}, got); diff != "" {
		t.Errorf("users per level (-want +got):\n%s", diff)
	}
}

func TestFactorialResultsPerLevel(t *testing.T) {
	e := factorial2x2()
	e.Queries = append(e.Queries, qraw("q1", "Mean", "score", "continuous", "avg", "", "", "MEAN"))
	lr := func(level string, v float64, n int) upgrade.ConditionResult {
		return upgrade.ConditionResult{LevelID: level, Value: &v, Participants: n}
	}
	an := []upgrade.QueryResult{{QueryID: "q1", Found: true,
		MainEffect:  []upgrade.ConditionResult{lr("re", 10, 3), lr("bl", 20, 7), lr("ci", 12, 4), lr("sq", 18, 6)},
		Interaction: []upgrade.ConditionResult{cr("c1", 5, 1), cr("c2", 11, 2), cr("c3", 15, 3), cr("c4", 25, 4)}}}
	r, err := ResultsOf(e, an, &upgrade.EnrollmentStats{ID: "e"}, false)
	if err != nil {
		t.Fatal(err)
	}
	q := r.Queries[0]
	var levels, conds []string
	for _, l := range q.Levels {
		levels = append(levels, l.Factor+"="+l.Level+" "+FormatNumber(*l.Value, false))
	}
	for _, c := range q.Conditions {
		conds = append(conds, c.Code+" "+FormatNumber(*c.Value, false))
	}
	if diff := cmp.Diff([]string{"Color=Red 10", "Color=Blue 20", "Shape=Circle 12", "Shape=Square 18"}, levels); diff != "" {
		t.Errorf("main effect (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(conds[3], "Color=Blue; Shape=Square 25") {
		t.Errorf("interaction: %v", conds)
	}
}
