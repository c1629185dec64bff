package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// TestConditionBalance simulates many users and compares the conditions with the weights.
const TestConditionBalance Name = "test_condition_balance"

// BalanceParams are the params of test_condition_balance.
type BalanceParams struct {
	NumUsers     int                 `json:"num_users" jsonschema:"number of synthetic users, 1..10000"`
	Context      string              `json:"context"`
	Site         string              `json:"site"`
	Target       string              `json:"target"`
	ExperimentID string              `json:"experiment_id,omitempty" jsonschema:"count only this experiment's assignments" ref:"experiment"`
	Group        map[string][]string `json:"group,omitempty" jsonschema:"groups given to every synthetic user"`
	WorkingGroup map[string]string   `json:"working_group,omitempty" jsonschema:"working groups given to every synthetic user"`
}

// Action implements Params.
func (BalanceParams) Action() Name { return TestConditionBalance }

// MaxBalanceUsers bounds num_users of test_condition_balance.
const MaxBalanceUsers = 10000

func (p BalanceParams) canonical() BalanceParams {
	return BalanceParams{NumUsers: p.NumUsers, Context: strings.TrimSpace(p.Context), Site: strings.TrimSpace(p.Site),
		Target: strings.TrimSpace(p.Target), ExperimentID: idValue(p.ExperimentID),
		Group: normGroupMap(p.Group), WorkingGroup: normWorkingGroup(p.WorkingGroup)}
}

// declareBalance declares this file's action in r.
func declareBalance(r *Registry) {
	Add(r, Def[BalanceParams]{
		Name: TestConditionBalance, Order: 90, Destructive: true, Invalidates: []Cache{CacheEnrollment},
		Object:      ObjectExperiment,
		Description: "Simulate many synthetic users at a decision point and compare the condition counts with the weights (chi-square).",
		Note:        "simulates many synthetic users as a background job",
		Canonical:   BalanceParams.canonical,
		Validate:    validateBalance,
		Plan:        planBalance,
		Total:       func(p BalanceParams) int { return p.NumUsers },
		Run:         runBalanceJob,
		Report:      ReportAs(reportBalance),
	})
}

// runBalanceJob is the job body: RunBalance from the committed tally,
// committing after every batch, then SummarizeBalance.
func runBalanceJob(ctx context.Context, run JobRun, p BalanceParams) (json.RawMessage, error) {
	var start BalanceTally
	if err := run.StartTally(&start); err != nil {
		return nil, err
	}
	opts := BalanceOptions{Concurrency: run.Concurrency, BatchSize: run.BatchSize, UserPrefix: run.Key + "-",
		Commit: func(t BalanceTally) error { return run.CommitTally(t.Done, t) }}
	tally, err := RunBalance(ctx, run.API, p, start, opts)
	if err != nil {
		return nil, err
	}
	res, err := SummarizeBalance(ctx, run.API, p, tally)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func validateBalance(c *Checker, p BalanceParams) error {
	switch {
	case p.NumUsers == 0:
		c.Missing("num_users", "num_users is required (1..%d)", MaxBalanceUsers)
	case p.NumUsers < 1 || p.NumUsers > MaxBalanceUsers:
		c.AddValue("num_users", p.NumUsers, "num_users must be between 1 and %d", MaxBalanceUsers)
	}
	if err := c.siteTarget(p.Context, p.Site, p.Target); err != nil {
		return err
	}
	c.groups(p.Group, p.WorkingGroup)
	if p.ExperimentID == "" {
		return nil
	}
	e, err := c.Experiment("experiment_id", p.ExperimentID)
	if err != nil || e == nil {
		return err
	}
	if p.Context != "" && !contains(e.Context, p.Context) {
		c.Add("experiment_id", "experiment %q runs in context %s, not %s", e.Name, listOrNone(e.Context), p.Context)
	} else if p.Site != "" && p.Target != "" && !hasPartition(e, p.Site, p.Target) {
		c.Add("experiment_id", "experiment %q has no decision point %s; its decision points: %s",
			e.Name, siteTarget(p.Site, p.Target), listOrNone(partitionNames(e)))
	}
	return nil
}

func planBalance(b *Planner, p BalanceParams) error {
	dp := ident(siteTarget(p.Site, p.Target))
	b.Line("simulate %s visiting decision point %s in context %s and count their conditions.",
		plural(p.NumUsers, "synthetic user", "synthetic users"), dp, ident(p.Context))
	var e *upgrade.Experiment
	if p.ExperimentID != "" {
		var err error
		if e, err = b.Experiment(p.ExperimentID); err != nil {
			return err
		}
		b.Pin(e)
		parts := make([]string, 0, len(e.Conditions))
		for _, c := range sortedConditions(e.Conditions) {
			parts = append(parts, fmt.Sprintf("%s %s%%", ident(c.ConditionCode), fmtNum(c.AssignmentWeight)))
		}
		b.Line("  Counted: only assignments of experiment %s (id %s, state %s); weights %s.",
			quote(e.Name), e.ID, e.State, joinOrNone(parts))
	} else {
		es, err := experimentsAt(b.ctx, b.api, p.Context, p.Site, p.Target)
		if err != nil {
			return err
		}
		b.Line("  Counted: every condition assigned there; experiments at this decision point: %s.", fmtExperiments(es))
		if len(es) == 1 {
			e = &es[0]
		}
	}
	if len(p.Group) > 0 || len(p.WorkingGroup) > 0 {
		b.Line("  Every user gets groups: %s; working groups: %s.", fmtGroupMap(p.Group), fmtWorkingGroups(p.WorkingGroup))
	} else {
		b.Line("  The users belong to no group.")
	}
	b.Line("Each user is initialised, assigned and marked: this writes %s and their enrollment records into UpGrade, where they stay.",
		plural(p.NumUsers, "synthetic user", "synthetic users"))
	b.Line("It runs as a background job; the result compares the counts with the weights (chi-square test).")
	if e != nil {
		if e.State != upgrade.StateEnrolling {
			b.Warn("experiment %s is not enrolling (state %s): every user would get the default condition", quote(e.Name), e.State)
		}
		if e.ConsistencyRule == upgrade.ConsistencyGroup {
			b.Warn("experiment %s uses group consistency and every synthetic user shares the same working group: they all get one condition", quote(e.Name))
		}
		if e.FilterMode == upgrade.FilterExcludeAll {
			b.Warn("experiment %s only enrolls its inclusion lists (excludeAll): synthetic users outside them get the default condition", quote(e.Name))
		}
		switch {
		case e.AssignmentUnit == upgrade.UnitWithinSubjects:
			b.Warn("experiment %s is within-subjects (condition order %s): each synthetic user visits once and is marked with the first condition of their order (uniquifier 1), so the counts show first conditions, not the weights", quote(e.Name), identOrNone(e.ConditionOrder))
		case e.Type == upgrade.TypeFactorial:
			b.Line("Experiment %s is factorial (%s): each user is marked with the stored condition whose levels UpGrade assigned (its assign code is not a stored code).", quote(e.Name), fmtFactors(factorsOf(e)))
		}
	}
	return nil
}

// reportBalance is the balance table: counts and shares per condition
// against the weights, the unassigned users, and the chi-square test.
func reportBalance(r BalanceResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Simulated %s", plural(r.Users, "user", "users"))
	if r.ExperimentName != "" {
		fmt.Fprintf(&b, " against experiment %q (%s)", r.ExperimentName, r.ExperimentState)
	}
	fmt.Fprintf(&b, ": %d assigned a condition, %d unassigned", r.Assigned, r.Unassigned)
	if r.Errors > 0 {
		fmt.Fprintf(&b, ", %d failed", r.Errors)
	}
	b.WriteString(".\n\n| condition | users | share | expected share |\n|---|---|---|---|\n")
	for _, c := range r.Conditions {
		fmt.Fprintf(&b, "| %s | %d | %s%% | %s%% |\n", c.Code, c.Count, fmtNum(100*c.Share), fmtNum(100*c.ExpectedShare))
	}
	switch {
	case r.DF == 0:
		b.WriteString("\nNo chi-square test was possible.")
	case r.PValue < Significance:
		fmt.Fprintf(&b, "\nChi-square %s (df %d), p = %.4g: the counts differ from the weights more than chance explains.", fmtNum(r.ChiSquare), r.DF, r.PValue)
	default:
		fmt.Fprintf(&b, "\nChi-square %s (df %d), p = %.4g: the counts are consistent with the weights.", fmtNum(r.ChiSquare), r.DF, r.PValue)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "\nWarning: %s.", strings.TrimSuffix(w, "."))
	}
	return b.String()
}
