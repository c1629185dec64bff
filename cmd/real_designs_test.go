//go:build unix

package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// TestDesignsEndToEnd creates, visits and analyses a 2x2 factorial and a
// within-subjects experiment through the CLI (ask, then yes), and compares
// experiments show|stats|results -o json with what the server answers. It
// runs on the embedded simulator and, with UPGRADE_REAL_URL set, on that
// real UpGrade 6.5 server too (experiments named realflags-test-..., metric
// realflags_test_score, deleted before and after).
func TestDesignsEndToEnd(t *testing.T) {
	t.Run("simulator", func(t *testing.T) {
		srv, err := sim.Start(sim.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		runDesigns(t, srv.URL())
	})
	t.Run("real", func(t *testing.T) {
		u := strings.TrimRight(os.Getenv("UPGRADE_REAL_URL"), "/")
		if u == "" {
			t.Skip("UPGRADE_REAL_URL not set: no real UpGrade server (see docs/simulator.md)")
		}
		runDesigns(t, u)
	})
}

const realMetric = "realflags_test_score"

func runDesigns(t *testing.T, apiURL string) {
	api, err := upgrade.New(upgrade.Config{BaseURL: apiURL, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ls := llmtest.NewServer(nil)
	t.Cleanup(ls.Close)
	d := &flagDriver{t: t, api: api, llm: ls, env: agentEnv(t,
		"UPGRADE_AGENT_HOME="+filepath.Join(t.TempDir(), "state"), "UPGRADE_API_URL="+apiURL,
		"UPGRADE_AGENT_LLM=openai", "OPENAI_BASE_URL="+ls.URL(), "OPENAI_API_KEY=sk-realflags-test-0123456789",
		"UPGRADE_AGENT_MODEL=m")}
	d.cleanup()
	_, _ = api.DeleteMetric(d.ctx(), realMetric)
	t.Cleanup(func() { _, _ = api.DeleteMetric(d.ctx(), realMetric) })
	t.Cleanup(d.cleanup)
	if _, err := api.SaveMetrics(d.ctx(), []upgrade.MetricUnit{{Metric: realMetric, Datatype: "continuous"}}, []string{"assign-prog"}); err != nil {
		t.Fatal(err)
	}
	t.Run("factorial", func(t *testing.T) { d.t = t; designsFactorial(d) })
	t.Run("within-subjects", func(t *testing.T) { d.t = t; designsWithin(d) })
}

// withQuery adds a mean query on the test metric through the client (a
// PUT of the experiment as read: level payloads read back as null must not
// be sent back).
func (d *flagDriver) withQuery(name string) {
	t := d.t
	id := d.experimentID(name)
	e, err := d.api.Experiment(d.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddQuery("mean score", realMetric, "MEAN", upgrade.QueryOp{OperationType: "avg"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.api.UpdateExperiment(d.ctx(), e); err != nil {
		t.Fatalf("adding a query to %s: %v", name, err)
	}
}

func (d *flagDriver) experimentID(name string) string {
	d.t.Helper()
	names, err := d.api.ExperimentNames(d.ctx())
	if err != nil {
		d.t.Fatal(err)
	}
	for _, n := range names {
		if n.Name == name {
			return n.ID
		}
	}
	d.t.Fatalf("no experiment %q on the server", name)
	return ""
}

func (d *flagDriver) visit(user, target string) string {
	d.t.Helper()
	out := d.actResult("visit_decision_point", map[string]any{"user_id": user, "context": "assign-prog", "site": "SelectSection", "target": target})
	var r struct {
		Assigned *struct {
			ConditionCode string `json:"condition_code"`
		} `json:"assigned"`
	}
	if err := json.Unmarshal(out.Result, &r); err != nil || r.Assigned == nil {
		d.t.Fatalf("visit %s: no condition (%s)", user, out.Result)
	}
	return r.Assigned.ConditionCode
}

func (d *flagDriver) logScore(user string, v float64) {
	d.t.Helper()
	if _, err := d.api.Log(d.ctx(), user, []upgrade.LogEntry{{Timestamp: time.Now().UTC().Format(time.RFC3339), Attributes: map[string]any{realMetric: v}}}); err != nil {
		d.t.Fatalf("log %s: %v", user, err)
	}
}

// sameAnalysis compares the results command with the server's own
// analysis: n per level (main effect) and per condition.
func (d *flagDriver) sameAnalysis(res readmodel.Results) {
	t := d.t
	if len(res.Queries) != 1 {
		t.Fatalf("results: %d queries, want 1", len(res.Queries))
	}
	q := res.Queries[0]
	an, err := d.api.Analyse(d.ctx(), []string{q.QueryID})
	if err != nil || len(an) != 1 {
		t.Fatalf("analyse: %v %v", an, err)
	}
	server := map[string]int{}
	for _, c := range append(an[0].MainEffect, an[0].Interaction...) {
		server[c.LevelID+c.ConditionID] = c.Participants
	}
	for _, l := range q.Levels {
		if server[l.LevelID] != l.N {
			t.Errorf("level %s=%s: n %d, the server says %d", l.Factor, l.Level, l.N, server[l.LevelID])
		}
	}
	for _, c := range q.Conditions {
		if server[c.ConditionID] != c.N {
			t.Errorf("condition %s: n %d, the server says %d", c.Code, c.N, server[c.ConditionID])
		}
	}
}

func designsFactorial(d *flagDriver) {
	t := d.t
	name := realName + "factorial"
	d.act("create_experiment", map[string]any{"name": name, "context": "assign-prog", "design": "2x2",
		"decision_points": []any{map[string]any{"site": "SelectSection", "target": "absolute_value_plot_equality"}},
		"factors":         map[string]any{"Color": []any{map[string]any{"name": "Red", "payload": "red-ui"}, "Blue"}, "Shape": []any{"Circle", "Square"}}},
		"Design: factorial, 2 factors:", `Color (Red [payload "red-ui"], Blue)`, `"Color=Blue; Shape=Square": 25%`)
	id := d.experimentID(name)
	e, err := d.api.Experiment(d.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != upgrade.TypeFactorial || len(e.Factors) != 2 || len(e.Conditions) != 4 {
		t.Fatalf("server holds type %s, %d factors, %d conditions", e.Type, len(e.Factors), len(e.Conditions))
	}
	d.act("update_experiment", map[string]any{"experiment_id": name, "description": "colour and shape"}, "description")
	d.withQuery(name)
	d.act("update_experiment_status", map[string]any{"experiment_id": name, "status": "running"})
	for i, u := range []string{"f1", "f2", "f3", "f4", "f5", "f6"} {
		code := d.visit(realName+u, "absolute_value_plot_equality")
		if e.ConditionByCode(code) == nil {
			t.Errorf("visit %s marked %q, not a stored code", u, code)
		}
		d.logScore(realName+u, float64(10*(i+1)))
	}
	var shown readmodel.Experiment
	d.readJSON(&shown, "experiments", "show", name)
	if shown.Design != "factorial" || len(shown.Factors) != 2 || len(shown.Conditions[0].Levels) != 2 {
		t.Errorf("experiments show: design %q, factors %+v, levels %v", shown.Design, shown.Factors, shown.Conditions[0].Levels)
	}
	var st readmodel.Enrollment
	d.readJSON(&st, "experiments", "stats", name)
	server, err := d.api.EnrollmentStats(d.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Users != server.Users || st.Users != 6 || len(st.Levels) != 4 {
		t.Errorf("experiments stats: %d users, %d levels; the server says %d users", st.Users, len(st.Levels), server.Users)
	}
	// Each factor's levels share the users between them.
	if st.Levels[0].Users+st.Levels[1].Users != 6 || st.Levels[2].Users+st.Levels[3].Users != 6 {
		t.Errorf("users per level %+v do not add up to 6 per factor", st.Levels)
	}
	var res readmodel.Results
	d.readJSON(&res, "experiments", "results", name)
	if len(res.Queries) == 1 && len(res.Queries[0].Levels) != 4 {
		t.Errorf("results: %d levels, want 4", len(res.Queries[0].Levels))
	}
	d.sameAnalysis(res)
}

func designsWithin(d *flagDriver) {
	t := d.t
	name := realName + "within"
	d.act("create_experiment", map[string]any{"name": name, "context": "assign-prog",
		"decision_points": []any{map[string]any{"site": "SelectSection", "target": "analyzing_step_functions"}},
		"conditions":      map[string]any{"control": 50, "variant": 50},
		"assignment_unit": "within subjects", "condition_order": "ordered round robin"},
		"within-subjects (every user gets every condition in turn, condition order ordered round robin)")
	id := d.experimentID(name)
	d.withQuery(name)
	d.act("update_experiment_status", map[string]any{"experiment_id": name, "status": "running"})
	user := realName + "w1"
	first, second := d.visit(user, "analyzing_step_functions"), d.visit(user, "analyzing_step_functions")
	if first != "control" || second != "variant" {
		t.Errorf("two visits got %s, %s; want control, variant (ordered round robin rotated by marks)", first, second)
	}
	d.logScore(user, 42)
	var st readmodel.Enrollment
	d.readJSON(&st, "experiments", "stats", name)
	server, err := d.api.EnrollmentStats(d.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !st.WithinSubjects || len(st.Conditions) != 2 {
		t.Fatalf("experiments stats: %+v", st)
	}
	for i, c := range st.Conditions {
		if c.Users != server.Conditions[i].Users || c.Users != 1 {
			t.Errorf("condition %s: %d users, the server says %d (want 1: a user counts in every condition marked)", c.Condition, c.Users, server.Conditions[i].Users)
		}
	}
	var res readmodel.Results
	d.readJSON(&res, "experiments", "results", name)
	d.sameAnalysis(res)
}
