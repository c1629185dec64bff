package readmodel

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/stats"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// What the numbers of a results read mean, in the words the CLI and the
// agent print under them.
const (
	MeaningWhoCounts  = "N counts the users enrolled by a mark and not excluded who logged a value; their logs from any time count, also from before they enrolled."
	MeaningOneValue   = "A simple metric keeps one value per user (the latest by the server's clock); grouped metrics are combined per user by the query's repeated measure."
	MeaningPercentage = "UpGrade's percentage is count / values x 100."
	MeaningIntervals  = "Intervals are 95%: Wilson for a proportion, Newcombe for a difference of proportions, Welch for a difference of means."
	SRMWarning        = "the split does not match the weights: check exclusions and assignment before trusting any result"
)

// Kinds of query result.
const (
	KindProportion = "proportion"
	KindMean       = "mean"
	KindValue      = "value"
)

// Interval is a 95% confidence interval.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Difference is a condition's value minus the first condition's; for
// proportions (kind "proportion") in percentage points.
type Difference struct {
	Value    float64   `json:"value"`
	Interval *Interval `json:"interval,omitempty"`
}

// ConditionValue is one condition's result of a query. Value is a
// percentage (0-100) for a percentage query, as UpGrade gives it; the
// intervals of proportions are on the same scale.
type ConditionValue struct {
	Code         string      `json:"code"`
	ConditionID  string      `json:"condition_id"`
	N            int         `json:"n"`
	Value        *float64    `json:"value"`
	Interval     *Interval   `json:"interval,omitempty"`
	VsFirst      *Difference `json:"vs_first,omitempty"`
	TooLittle    bool        `json:"too_little_data"`
	Successes    *int        `json:"successes,omitempty"`
	StdDev       *float64    `json:"stddev,omitempty"`
	StatusReason string      `json:"note,omitempty"`
}

// QueryResults is one query analysed.
type QueryResults struct {
	QueryID         string           `json:"query_id"`
	Name            string           `json:"name"`
	MetricKey       string           `json:"metric_key"`
	Operation       string           `json:"operation"`
	Compare         string           `json:"compare,omitempty"`
	RepeatedMeasure string           `json:"repeated_measure"`
	Kind            string           `json:"kind"`
	Percent         bool             `json:"percent"`
	Rejected        bool             `json:"rejected"`
	Conditions      []ConditionValue `json:"conditions"`
	// Levels are a factorial's main effects, per level; its Conditions
	// are then the interaction effect, per condition.
	Levels []LevelValue `json:"levels,omitempty"`
	Notes  []string     `json:"notes,omitempty"`
}

// SampleRatio is the sample-ratio check of the enrollment: a chi-square
// goodness-of-fit test of the users per condition against the weights.
type SampleRatio struct {
	Tested    bool    `json:"tested"`
	ChiSquare float64 `json:"chi_square"`
	DF        int     `json:"df"`
	P         float64 `json:"p_value"`
	Mismatch  bool    `json:"mismatch"`
	Line      string  `json:"summary"`
}

// Results is `experiments results` and the agent's get_experiment_results.
type Results struct {
	ExperimentID   string         `json:"experiment_id"`
	ExperimentName string         `json:"experiment_name"`
	Status         upgrade.State  `json:"status"`
	Queries        []QueryResults `json:"queries"`
	Enrollment     Enrollment     `json:"enrollment"`
	SampleRatio    SampleRatio    `json:"sample_ratio"`
	Meaning        []string       `json:"meaning"`
}

// SampleRatioOf tests an enrollment against its weights. edited says the
// experiment was updated while enrolling, when the weights may have
// changed: the test is then skipped, and the line says why.
func SampleRatioOf(en Enrollment, edited bool) SampleRatio {
	if edited {
		return SampleRatio{Line: "Sample ratio: not tested: the experiment was edited while enrolling, so the weights may have changed."}
	}
	obs := make([]int, 0, len(en.Conditions))
	ws := make([]float64, 0, len(en.Conditions))
	for _, c := range en.Conditions {
		obs = append(obs, c.Users)
		ws = append(ws, c.Weight)
	}
	g, err := stats.SampleRatio(obs, ws)
	if err != nil {
		return SampleRatio{Line: "Sample ratio: not tested: no enrolled users, or fewer than two conditions with weight."}
	}
	sr := SampleRatio{Tested: true, ChiSquare: g.ChiSquare, DF: g.DF, P: g.P, Mismatch: g.P < stats.SRMAlpha}
	if sr.Mismatch {
		sr.Line = fmt.Sprintf("Sample ratio: chi-square %.2f (df %d), p %s: %s.", g.ChiSquare, g.DF, fmtP(g.P), SRMWarning)
	} else {
		sr.Line = fmt.Sprintf("Sample ratio: chi-square %.2f (df %d), p %s: the split matches the weights.", g.ChiSquare, g.DF, fmtP(g.P))
	}
	return sr
}

// fmtP is "= 0.0123", or "< 0.0001" for the smallest values.
func fmtP(p float64) string {
	if p < 0.0001 {
		return "< 0.0001"
	}
	return fmt.Sprintf("= %.4f", p)
}

// EditedWhileEnrolling reads an experiment's audit entries: true when a
// PUT (an update with a diff, not a list change) that may have changed the
// weights came after the experiment first started enrolling. A diff text
// that names neither the conditions nor a weight (a rename, an added
// query) leaves the weights as they were.
func EditedWhileEnrolling(e *upgrade.Experiment, audit []upgrade.AuditEntry) bool {
	start := ""
	for _, l := range upgrade.SortedHistory(e.StateTimeLogs) {
		if l.ToState == upgrade.StateEnrolling {
			start = l.TimeLog
			break
		}
	}
	if start == "" {
		return false
	}
	for _, a := range audit {
		if a.Type != upgrade.AuditExperimentUpdated || a.CreatedAt <= start {
			continue
		}
		var d map[string]json.RawMessage
		if json.Unmarshal(a.Data, &d) == nil {
			raw, ok := d["diff"]
			var text string
			if ok && (json.Unmarshal(raw, &text) != nil || strings.Contains(text, "conditions") || strings.Contains(text, "assignmentWeight")) {
				return true
			}
		}
	}
	return false
}

// ResultsOf combines an experiment, the analysis of its queries and its
// enrollment into results with intervals. edited is EditedWhileEnrolling.
func ResultsOf(e *upgrade.Experiment, analyses []upgrade.QueryResult, st *upgrade.EnrollmentStats, edited bool) (Results, error) {
	qs, err := e.QueryList()
	if err != nil {
		return Results{}, err
	}
	en := EnrollmentOf(e, st)
	r := Results{ExperimentID: e.ID, ExperimentName: e.Name, Status: e.State, Queries: []QueryResults{},
		Enrollment: en, SampleRatio: SampleRatioOf(en, edited),
		Meaning: []string{MeaningWhoCounts, MeaningOneValue, MeaningPercentage, MeaningIntervals}}
	byID := map[string]upgrade.QueryResult{}
	for _, a := range analyses {
		byID[a.QueryID] = a
	}
	for _, q := range qs {
		r.Queries = append(r.Queries, queryResults(e, q, qs, byID))
	}
	return r, nil
}

func isProportion(q upgrade.Query) bool {
	if q.MetricType != upgrade.MetricCategorical {
		return false
	}
	return q.Query.OperationType == "percentage" || (q.Query.OperationType == "count" && q.Query.CompareFn != "")
}

// matchingStddev is the stddev query on the same metric and repeated
// measure that gives a mean its spread.
func matchingStddev(q upgrade.Query, all []upgrade.Query) *upgrade.Query {
	for i := range all {
		o := all[i]
		if o.Query.OperationType == "stddev" && o.MetricKey == q.MetricKey && o.RepeatedMeasure == q.RepeatedMeasure {
			return &all[i]
		}
	}
	return nil
}

// valuesByCondition are a query's values per condition: its main effect,
// or a factorial's interaction effect (its main effect is per level).
func valuesByCondition(a upgrade.QueryResult) map[string]upgrade.ConditionResult {
	out := map[string]upgrade.ConditionResult{}
	list := a.MainEffect
	if isPerLevel(a) {
		list = a.Interaction
	}
	for _, c := range list {
		out[c.ConditionID] = c
	}
	return out
}

func isPerLevel(a upgrade.QueryResult) bool {
	for _, c := range a.MainEffect {
		if c.LevelID != "" {
			return true
		}
	}
	return false
}

// LevelValue is one level's main effect in a factorial experiment: the
// query over the users of every condition with that level.
type LevelValue struct {
	Factor  string   `json:"factor"`
	Level   string   `json:"level"`
	LevelID string   `json:"level_id"`
	N       int      `json:"n"`
	Value   *float64 `json:"value"`
}

// levelValues are the main effects of a factorial query, level by level
// in factor order.
func levelValues(e *upgrade.Experiment, a upgrade.QueryResult, rejected bool) []LevelValue {
	byLevel := map[string]upgrade.ConditionResult{}
	for _, c := range a.MainEffect {
		byLevel[c.LevelID] = c
	}
	out := []LevelValue{}
	for _, f := range factorsOf(e) {
		for _, l := range f.Levels {
			cr := byLevel[l.ID]
			lv := LevelValue{Factor: f.Name, Level: l.Name, LevelID: l.ID, N: cr.Participants}
			if !rejected && cr.Participants > 0 {
				lv.Value = cr.Value
			}
			out = append(out, lv)
		}
	}
	return out
}

func queryResults(e *upgrade.Experiment, q upgrade.Query, all []upgrade.Query, byID map[string]upgrade.QueryResult) QueryResults {
	qr := QueryResults{QueryID: q.ID, Name: q.Name, MetricKey: q.MetricKey, Operation: q.Query.OperationType,
		RepeatedMeasure: q.RepeatedMeasure, Kind: KindValue, Conditions: []ConditionValue{},
		Percent: q.Query.OperationType == "percentage"}
	if q.Query.CompareFn != "" {
		qr.Compare = q.Query.CompareFn + " " + q.Query.CompareValue
	}
	a, found := byID[q.ID]
	switch {
	case q.MetricKey == "":
		qr.Rejected = true
		qr.Notes = append(qr.Notes, "the query names no metric (its metric was missing when the experiment was saved): UpGrade cannot analyse it")
	case !found || !a.Found:
		qr.Notes = append(qr.Notes, "UpGrade gave no analysis for this query")
	case a.Rejected:
		qr.Rejected = true
		qr.Notes = append(qr.Notes, "UpGrade could not compute this query (an operation the metric type does not have, or a logged value that is not a number)")
	}
	vals := valuesByCondition(a)
	for _, c := range conditions(e) {
		cr := vals[c.ID]
		cv := ConditionValue{Code: c.ConditionCode, ConditionID: c.ID, N: cr.Participants}
		if !qr.Rejected && cr.Participants > 0 {
			v := cr.Value
			cv.Value = v
		}
		switch {
		case cv.N == 0:
			cv.StatusReason = "no data"
		case cv.N < stats.MinPerCondition:
			cv.TooLittle = true
			cv.StatusReason = fmt.Sprintf("too little data (%d < %d)", cv.N, stats.MinPerCondition)
		}
		qr.Conditions = append(qr.Conditions, cv)
	}
	if e.Type == upgrade.TypeFactorial {
		qr.Levels = levelValues(e, a, qr.Rejected)
	}
	if qr.Rejected {
		return qr
	}
	switch {
	case isProportion(q):
		qr.Kind = KindProportion
		proportions(&qr)
	case q.Query.OperationType == "avg" && q.MetricType != upgrade.MetricCategorical:
		qr.Kind = KindMean
		sd := matchingStddev(q, all)
		if sd == nil {
			qr.Notes = append(qr.Notes, fmt.Sprintf("no interval: add a stddev query on %s (repeated measure %s) to get one", q.MetricKey, q.RepeatedMeasure))
			break
		}
		means(&qr, valuesByCondition(byID[sd.ID]))
	}
	return qr
}

// proportions adds Wilson intervals and Newcombe differences. The count of
// successes comes back from the percentage (rounded) or is the count. Each
// interval is on its value's scale (percent for a percentage, a count of
// the condition's N for a count); differences of proportions are in
// percentage points either way, since counts of different N do not
// subtract.
func proportions(qr *QueryResults) {
	var first *ConditionValue
	for i := range qr.Conditions {
		c := &qr.Conditions[i]
		if c.Value == nil || c.N == 0 {
			continue
		}
		x := int(math.Round(*c.Value))
		scale := float64(c.N)
		if qr.Percent {
			x = int(math.Round(*c.Value / 100 * float64(c.N)))
			scale = 100
		}
		c.Successes = &x
		if !c.TooLittle {
			if iv, err := stats.Wilson(x, c.N, stats.Level); err == nil {
				c.Interval = &Interval{Low: tidy(iv.Low * scale), High: tidy(iv.High * scale)}
			}
		}
		if i == 0 {
			first = c
		}
	}
	if first == nil || first.TooLittle {
		return
	}
	for i := 1; i < len(qr.Conditions); i++ {
		c := &qr.Conditions[i]
		if c.Successes == nil || c.TooLittle {
			continue
		}
		d, iv, err := stats.ProportionDiff(*first.Successes, first.N, *c.Successes, c.N, stats.Level)
		if err != nil {
			continue
		}
		c.VsFirst = &Difference{Value: tidy(d * 100), Interval: &Interval{Low: tidy(iv.Low * 100), High: tidy(iv.High * 100)}}
	}
}

// means adds a t interval per condition and Welch's interval for the
// difference against the first condition, from the stddev query's values.
func means(qr *QueryResults, sds map[string]upgrade.ConditionResult) {
	sample := func(c *ConditionValue) (stats.Sample, bool) {
		sd, ok := sds[c.ConditionID]
		if !ok || sd.Value == nil || c.Value == nil || c.TooLittle || c.N < 2 {
			return stats.Sample{}, false
		}
		v := *sd.Value
		c.StdDev = &v
		return stats.Sample{Mean: *c.Value, SD: v, N: c.N}, true
	}
	samples := make([]stats.Sample, len(qr.Conditions))
	ok := make([]bool, len(qr.Conditions))
	for i := range qr.Conditions {
		c := &qr.Conditions[i]
		samples[i], ok[i] = sample(c)
		if ok[i] {
			if iv, err := stats.Mean(samples[i], stats.Level); err == nil {
				c.Interval = &Interval{Low: iv.Low, High: iv.High}
			}
		}
	}
	if len(ok) == 0 || !ok[0] {
		return
	}
	for i := 1; i < len(qr.Conditions); i++ {
		if !ok[i] {
			continue
		}
		d, iv, _, err := stats.MeanDiff(samples[0], samples[i], stats.Level)
		if err != nil {
			continue
		}
		qr.Conditions[i].VsFirst = &Difference{Value: tidy(d), Interval: &Interval{Low: tidy(iv.Low), High: tidy(iv.High)}}
	}
}

// tidy drops the float noise of a computed figure (0.6 - 0.4 is
// 0.19999999999999996): nine decimals are more than any result shows.
func tidy(x float64) float64 { return math.Round(x*1e9) / 1e9 }

// FormatInterval is "[low, high]" with the value's precision.
func FormatInterval(iv *Interval, percent bool) string {
	if iv == nil {
		return ""
	}
	return "[" + FormatNumber(iv.Low, percent) + ", " + FormatNumber(iv.High, percent) + "]"
}

// FormatDiff writes a difference with its sign; points says it is in
// percentage points (a difference of proportions).
func FormatDiff(d *Difference, points bool) string {
	if d == nil {
		return ""
	}
	v := FormatNumber(d.Value, false)
	if !strings.HasPrefix(v, "-") {
		v = "+" + v
	}
	unit := ""
	if points {
		unit = " pts"
	}
	if d.Interval == nil {
		return v + unit
	}
	return v + unit + " [" + FormatNumber(d.Interval.Low, false) + ", " + FormatNumber(d.Interval.High, false) + "]"
}

// FormatNumber writes a result number compactly: up to four significant
// decimals, a % sign for percentages.
func FormatNumber(v float64, percent bool) string {
	s := fmt.Sprintf("%.4g", v)
	if math.Abs(v) >= 1e4 || strings.Contains(s, "e") {
		s = fmt.Sprintf("%.1f", v)
	}
	if percent {
		s += "%"
	}
	return s
}
