package actions

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// TestResultsEqualServerAnalyse plays a dataset like the results-interval
// scenario's (metrics made with create_metric, queries with
// add_experiment_query, 60 students who are assigned, marked and log a
// score and a pass/fail) and checks that the numbers of the results
// (readmodel.ResultsOf, what `experiments results` and
// get_experiment_results show) are the server's own POST /query/analyse
// answer, parsed: per query and condition, N = participantsLogged and the
// value = result. It always runs against the simulator; with
// UPGRADE_REAL_URL set (a disposable UpGrade 6.5) it runs there too, and the
// same dataset on a fresh simulator gives the same numbers, since both draw
// conditions from the experiment and user ids. Then a rename and a post
// rule (update_experiment) and the start (update_experiment_status) keep
// every query, as a PUT without them would delete them. It makes only
// things named realresults-test-<run> and deletes them at the end.
func TestResultsEqualServerAnalyse(t *testing.T) {
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	runID := hex.EncodeToString(rb[:])
	t.Run("simulator", func(t *testing.T) {
		resultsDataset(t, startSimURL(t), runID)
	})
	t.Run("real", func(t *testing.T) {
		u := strings.TrimRight(os.Getenv("UPGRADE_REAL_URL"), "/")
		if u == "" {
			t.Skip("UPGRADE_REAL_URL not set: no real UpGrade server (see docs/simulator.md)")
		}
		real := resultsDataset(t, u, runID)
		again := resultsDataset(t, startSimURL(t), runID)
		if fmt.Sprint(real) != fmt.Sprint(again) {
			t.Errorf("the same dataset gives other numbers:\nreal      %v\nsimulator %v", real, again)
		}
	})
}

func startSimURL(t *testing.T) string {
	t.Helper()
	srv, err := sim.Start(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.URL()
}

// resultsDataset plays the dataset on base and returns its numbers as
// "query/condition: n value" lines, sorted.
func resultsDataset(t *testing.T, base, runID string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := upgrade.New(upgrade.Config{BaseURL: base, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	md, err := c.ContextMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appContext, info := "assign-prog", md["assign-prog"]
	if len(info.Conditions) < 2 || len(info.ExpPoints) == 0 || len(info.ExpIDs) == 0 {
		names := make([]string, 0, len(md))
		for n := range md {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if i := md[n]; len(i.Conditions) >= 2 && len(i.ExpPoints) > 0 && len(i.ExpIDs) > 0 {
				appContext, info = n, i
				break
			}
		}
	}
	if len(info.Conditions) < 2 {
		t.Skip("the server has no context with two conditions, a site and a target")
	}
	name := "realresults-test-" + runID
	score, passed := "realresults_"+runID+"_score", "realresults_"+runID+"_passed"
	runKeyed(t, c, CreateMetricParams{Context: []string{appContext}, Key: score, Type: "continuous"}, name+"/score")
	runKeyed(t, c, CreateMetricParams{Context: []string{appContext}, Key: passed, Type: "categorical", AllowedValues: []string{"yes", "no"}}, name+"/passed")
	t.Cleanup(func() {
		_, _ = c.DeleteMetric(ctx, score)
		_, _ = c.DeleteMetric(ctx, passed)
	})
	control, variant := info.Conditions[0], info.Conditions[1]
	_, raw := runKeyed(t, c, CreateExperimentParams{Name: name, Context: appContext,
		DecisionPoints: []DecisionPointParam{{Site: info.ExpPoints[0], Target: info.ExpIDs[0]}},
		Conditions:     []ConditionParam{{Code: control, Weight: ptr(50.0)}, {Code: variant, Weight: ptr(50.0)}}}, name)
	id := decode[ExperimentResult](t, raw).ID
	t.Cleanup(func() { _, _ = c.DeleteExperiment(ctx, id) })
	for _, q := range []AddExperimentQueryParams{
		{Name: "Mean score", MetricKey: score, Operation: "avg"},
		{Name: "SD score", MetricKey: score, Operation: "stddev"},
		{Name: "Median score", MetricKey: score, Operation: "median"},
		{Name: "Pass rate", MetricKey: passed, Operation: "percentage", Compare: &CompareParam{Fn: "=", Value: "yes"}},
		{Name: "Fails", MetricKey: passed, Operation: "count", Compare: &CompareParam{Fn: "<>", Value: "yes"}},
	} {
		q.ExperimentID = id
		runKeyed(t, c, q, name+"/"+q.Name)
	}
	queryIDs := func(step string) string {
		t.Helper()
		e, err := c.Experiment(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		qs, err := e.QueryList()
		if err != nil || len(qs) != 5 {
			t.Fatalf("after %s: %d queries (%v), want the 5 added", step, len(qs), err)
		}
		ids := make([]string, len(qs))
		for i, q := range qs {
			ids[i] = q.ID + " " + q.MetricKey
		}
		return strings.Join(ids, ", ")
	}
	added := queryIDs("adding the queries")
	runKeyed(t, c, UpdateExperimentStatusParams{ExperimentID: id, Status: "enrolling"}, name+"/start")
	if got := queryIDs("the start"); got != added {
		t.Errorf("the start changed the queries: %s, were %s", got, added)
	}

	// The scenario's values: each condition's students take them in turn.
	values := map[string][2][]any{
		control: {{55, 60, 62, 68, 70, 74, 80}, {"yes", "no", "no"}},
		variant: {{64, 70, 72, 77, 80, 84, 91}, {"yes", "yes", "no"}},
	}
	seen := map[string]int{}
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	for i := 1; i <= 60; i++ {
		user := fmt.Sprintf("%s-%03d", name, i)
		if _, err := c.Init(ctx, user, upgrade.InitRequest{}); err != nil {
			t.Fatal(err)
		}
		as, err := c.Assign(ctx, user, appContext)
		if err != nil {
			t.Fatal(err)
		}
		var got *upgrade.AssignedCondition
		for _, a := range as {
			for j := range a.AssignedCondition {
				if a.Site == info.ExpPoints[0] && a.Target == info.ExpIDs[0] && a.AssignedCondition[j].ExperimentID == id {
					got = &a.AssignedCondition[j]
				}
			}
		}
		if got == nil {
			t.Fatalf("%s: no condition of %s", user, name)
		}
		if _, err := c.Mark(ctx, user, upgrade.MarkRequest{Data: upgrade.MarkData{Site: info.ExpPoints[0], Target: info.ExpIDs[0],
			AssignedCondition: &upgrade.MarkCondition{ID: got.ID, ConditionCode: got.ConditionCode, ExperimentID: id}}}); err != nil {
			t.Fatal(err)
		}
		k := seen[got.ConditionCode]
		seen[got.ConditionCode]++
		v := values[got.ConditionCode]
		if _, err := c.Log(ctx, user, []upgrade.LogEntry{{Timestamp: ts, Attributes: map[string]any{score: v[0][k%len(v[0])], passed: v[1][k%len(v[1])]}}}); err != nil {
			t.Fatal(err)
		}
	}

	in, err := c.ReadResults(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := readmodel.ResultsOf(in.Experiment, in.Analyses, in.Stats, readmodel.EditedWhileEnrolling(in.Experiment, in.Audit))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res.Queries))
	for i, q := range res.Queries {
		ids[i] = q.QueryID
	}
	answer := rawAnalyse(t, base, ids)
	var out []string
	for i, q := range res.Queries {
		byCond := answer[i]
		for _, cv := range q.Conditions {
			want, ok := byCond[cv.ConditionID]
			switch {
			case !ok:
				t.Errorf("%s/%s: not in the server's answer", q.Name, cv.Code)
			case cv.N != want.n:
				t.Errorf("%s/%s: N %d, the server's participantsLogged %d", q.Name, cv.Code, cv.N, want.n)
			case cv.Value == nil || math.Abs(*cv.Value-want.value) > 1e-9*math.Max(1, math.Abs(want.value)):
				t.Errorf("%s/%s: value %v, the server's result %v", q.Name, cv.Code, cv.Value, want.value)
			}
			if cv.Value != nil {
				out = append(out, fmt.Sprintf("%s/%s: %d %.9g", q.Name, cv.Code, cv.N, *cv.Value))
			}
		}
	}
	if len(out) != 2*len(ids) {
		t.Errorf("%d numbers for %d queries of two conditions: %v", len(out), len(ids), out)
	}
	sort.Strings(out)

	// A PUT without queries deletes them all on 6.5: the rename and the
	// post rule of update_experiment send them back, ids and metrics kept.
	runKeyed(t, c, UpdateExperimentParams{ExperimentID: id, Name: ptr(name + " renamed")}, name+"/rename")
	if got := queryIDs("a rename"); got != added {
		t.Errorf("the rename changed the queries: %s, were %s", got, added)
	}
	runKeyed(t, c, UpdateExperimentParams{ExperimentID: id, PostExperimentRule: &PostRuleParam{Rule: "assign", ConditionCode: variant}}, name+"/post")
	if got := queryIDs("a post rule"); got != added {
		t.Errorf("the post rule changed the queries: %s, were %s", got, added)
	}
	return out
}

type analysed struct {
	n     int
	value float64
}

// rawAnalyse asks POST /query/analyse itself and parses the numeric
// texts: per query, in order, the main effect by condition id.
func rawAnalyse(t *testing.T, base string, ids []string) []map[string]analysed {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"queryIds": ids})
	resp, err := http.Post(base+"/query/analyse", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer []struct {
		MainEffect []struct {
			ConditionID string          `json:"conditionId"`
			Result      json.RawMessage `json:"result"`
			Logged      json.RawMessage `json:"participantsLogged"`
		} `json:"mainEffect"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || len(answer) != len(ids) {
		t.Fatalf("POST /query/analyse: %d answers for %d queries (%v)", len(answer), len(ids), err)
	}
	num := func(raw json.RawMessage) float64 {
		s := strings.Trim(string(raw), `"`)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("analyse: %s is not a number", raw)
		}
		return f
	}
	out := make([]map[string]analysed, len(answer))
	for i, a := range answer {
		out[i] = map[string]analysed{}
		for _, m := range a.MainEffect {
			out[i][m.ConditionID] = analysed{n: int(num(m.Logged)), value: num(m.Result)}
		}
	}
	return out
}
