package actions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Execute runs p against UpGrade and returns a compact JSON result. Call it
// only with params that were validated and confirmed (their canonical
// form). Errors of a single UpGrade call are returned as they are, so
// upgrade.CategoryOf still tells their category; errors of a step inside a
// multi-step action are wrapped with the step's name.
//
// test_condition_balance runs here inline (not resumable); the job runner
// calls RunBalance and SummarizeBalance itself instead.
func Execute(ctx context.Context, api API, p Params) (json.RawMessage, error) {
	p, err := canonicalParams(p)
	if err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	var res any
	switch v := p.(type) {
	case CreateExperimentParams:
		res, err = execCreate(ctx, api, v)
	case UpdateExperimentParams:
		res, err = execUpdate(ctx, api, v)
	case UpdateExperimentStatusParams:
		res, err = execStatus(ctx, api, v)
	case DeleteExperimentParams:
		res, err = execDelete(ctx, api, v)
	case InitExperimentUserParams:
		res, err = execInit(ctx, api, v)
	case GetDecisionPointAssignmentsParams:
		res, err = execAssign(ctx, api, v)
	case MarkDecisionPointParams:
		res, err = execMark(ctx, api, v)
	case VisitDecisionPointParams:
		res, err = execVisit(ctx, api, v)
	case BalanceParams:
		res, err = execBalance(ctx, api, v)
	default:
		return nil, fmt.Errorf("execute: %w: %T", ErrUnknownAction, p)
	}
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("execute %s: encoding the result: %w", p.Action(), err)
	}
	return out, nil
}

// ExperimentResult is the compact form of an experiment in action results.
type ExperimentResult struct {
	ID                 string                `json:"id"`
	Name               string                `json:"name"`
	Context            string                `json:"context"`
	State              upgrade.State         `json:"state"`
	Conditions         []ConditionResult     `json:"conditions"`
	DecisionPoints     []DecisionPointResult `json:"decision_points"`
	PostExperimentRule string                `json:"post_experiment_rule,omitempty"`
}

// ConditionResult is one condition in an ExperimentResult.
type ConditionResult struct {
	ID     string  `json:"id"`
	Code   string  `json:"code"`
	Weight float64 `json:"weight"`
}

// DecisionPointResult is one decision point in an ExperimentResult.
type DecisionPointResult struct {
	ID               string `json:"id"`
	Site             string `json:"site"`
	Target           string `json:"target"`
	ExcludeIfReached bool   `json:"exclude_if_reached"`
}

// SummarizeExperiment is the compact form of e used in results.
func SummarizeExperiment(e *upgrade.Experiment) ExperimentResult {
	r := ExperimentResult{ID: e.ID, Name: e.Name, Context: e.ContextName(), State: e.State,
		Conditions: []ConditionResult{}, DecisionPoints: []DecisionPointResult{}}
	for _, c := range sortedConditions(e.Conditions) {
		r.Conditions = append(r.Conditions, ConditionResult{ID: c.ID, Code: c.ConditionCode, Weight: c.AssignmentWeight})
	}
	for _, p := range sortedPartitions(e.Partitions) {
		r.DecisionPoints = append(r.DecisionPoints, DecisionPointResult{ID: p.ID, Site: p.Site, Target: p.Target, ExcludeIfReached: p.ExcludeIfReached})
	}
	r.PostExperimentRule = fmtPostRule(designOf(e).PostExperimentRule)
	return r
}

func execCreate(ctx context.Context, api API, p CreateExperimentParams) (any, error) {
	d := withDefaults(p)
	out, err := api.CreateExperiment(ctx, buildExperiment(nil, d))
	if err != nil {
		return nil, err
	}
	out, err = fixRevertTo(ctx, api, out, revertCode(d))
	if err != nil {
		return nil, fmt.Errorf("experiment %q was created (id %s) but its post-experiment rule could not be set: %w", out.Name, out.ID, err)
	}
	return SummarizeExperiment(out), nil
}

// fixRevertTo makes the assign post rule point at the condition named code.
// The server replaces condition ids on write, so a revertTo sent with our
// ids may point at nothing afterwards; then one more write sets the real id.
func fixRevertTo(ctx context.Context, api API, e *upgrade.Experiment, code string) (*upgrade.Experiment, error) {
	if code == "" {
		return e, nil
	}
	c := e.ConditionByCode(code)
	if c == nil || (e.RevertTo != nil && *e.RevertTo == c.ID) {
		return e, nil
	}
	fixed := *e
	id := c.ID
	fixed.RevertTo = &id
	out, err := api.UpdateExperiment(ctx, &fixed)
	if err != nil {
		return e, err
	}
	return out, nil
}

func execUpdate(ctx context.Context, api API, p UpdateExperimentParams) (any, error) {
	cur, err := api.Experiment(ctx, p.ExperimentID)
	if err != nil {
		return nil, err
	}
	d := applyUpdate(designOf(cur), p)
	out, err := api.UpdateExperiment(ctx, buildExperiment(cur, d))
	if err != nil {
		return nil, err
	}
	out, err = fixRevertTo(ctx, api, out, revertCode(d))
	if err != nil {
		return nil, fmt.Errorf("experiment %q was updated but its post-experiment rule could not be set: %w", out.Name, err)
	}
	return SummarizeExperiment(out), nil
}

type statusResult struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	PreviousState upgrade.State `json:"previous_state"`
	State         upgrade.State `json:"state"`
}

func execStatus(ctx context.Context, api API, p UpdateExperimentStatusParams) (any, error) {
	cur, err := api.Experiment(ctx, p.ExperimentID)
	if err != nil {
		return nil, err
	}
	out, err := api.SetState(ctx, p.ExperimentID, upgrade.State(p.Status))
	if err != nil {
		return nil, err
	}
	return statusResult{ID: out.ID, Name: out.Name, PreviousState: cur.State, State: out.State}, nil
}

type deleteResult struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

func execDelete(ctx context.Context, api API, p DeleteExperimentParams) (any, error) {
	out, err := api.DeleteExperiment(ctx, p.ExperimentID)
	if err != nil {
		return nil, err
	}
	id := out.ID
	if id == "" {
		id = p.ExperimentID
	}
	return deleteResult{ID: id, Name: out.Name, Deleted: true}, nil
}

type initResult struct {
	UserID       string              `json:"user_id"`
	Group        map[string][]string `json:"group"`
	WorkingGroup map[string]string   `json:"working_group"`
}

func execInit(ctx context.Context, api API, p InitExperimentUserParams) (any, error) {
	out, err := api.Init(ctx, p.UserID, upgrade.InitRequest{Group: p.Group, WorkingGroup: p.WorkingGroup})
	if err != nil {
		return nil, err
	}
	return initResult{UserID: p.UserID, Group: nonNilGroup(out.Group), WorkingGroup: nonNilWorking(out.WorkingGroup)}, nil
}

// AssignmentResult is one condition a user gets at a decision point.
type AssignmentResult struct {
	Site          string           `json:"site"`
	Target        string           `json:"target"`
	ExperimentID  string           `json:"experiment_id"`
	ConditionCode string           `json:"condition_code"`
	ConditionID   string           `json:"condition_id,omitempty"`
	Payload       *upgrade.Payload `json:"payload,omitempty"`
}

type assignResult struct {
	UserID      string             `json:"user_id"`
	Context     string             `json:"context"`
	Assignments []AssignmentResult `json:"assignments"`
}

func execAssign(ctx context.Context, api API, p GetDecisionPointAssignmentsParams) (any, error) {
	as, err := api.Assign(ctx, p.UserID, p.Context)
	if err != nil {
		return nil, err
	}
	res := assignResult{UserID: p.UserID, Context: p.Context, Assignments: []AssignmentResult{}}
	for _, a := range as {
		for _, c := range a.AssignedCondition {
			res.Assignments = append(res.Assignments, AssignmentResult{Site: a.Site, Target: a.Target,
				ExperimentID: c.ExperimentID, ConditionCode: c.ConditionCode, ConditionID: c.ID, Payload: c.Payload})
		}
	}
	return res, nil
}

type markResult struct {
	UserID       string `json:"user_id"`
	Site         string `json:"site"`
	Target       string `json:"target"`
	ExperimentID string `json:"experiment_id,omitempty"`
	Condition    string `json:"condition,omitempty"`
	Status       string `json:"status"`
	MarkID       string `json:"mark_id,omitempty"`
}

func execMark(ctx context.Context, api API, p MarkDecisionPointParams) (any, error) {
	req := upgrade.MarkRequest{Data: upgrade.MarkData{Site: p.DecisionPoint.Site, Target: p.DecisionPoint.Target}, Status: p.Status}
	if ac := p.AssignedCondition; ac != nil {
		mc := &upgrade.MarkCondition{ConditionCode: ac.ConditionCode, ExperimentID: ac.ExperimentID}
		// The condition id makes the mark unambiguous; a failed lookup
		// is not worth failing the mark for, the code is enough.
		if e, err := api.Experiment(ctx, ac.ExperimentID); err == nil {
			if c := e.ConditionByCode(ac.ConditionCode); c != nil {
				mc.ID = c.ID
			}
		}
		req.Data.AssignedCondition = mc
		if req.Status == "" {
			req.Status = upgrade.MarkConditionApplied
		}
	} else if req.Status == "" {
		req.Status = upgrade.MarkNoConditionAssigned
	}
	out, err := api.Mark(ctx, p.UserID, req)
	if err != nil {
		return nil, err
	}
	res := markResult{UserID: p.UserID, Site: req.Data.Site, Target: req.Data.Target, Status: req.Status, MarkID: out.ID,
		ExperimentID: out.ExperimentID, Condition: out.Condition}
	if res.ExperimentID == "" && req.Data.AssignedCondition != nil {
		res.ExperimentID = req.Data.AssignedCondition.ExperimentID
	}
	if res.Condition == "" && req.Data.AssignedCondition != nil {
		res.Condition = req.Data.AssignedCondition.ConditionCode
	}
	return res, nil
}

// AssignedRef names the condition a visit got.
type AssignedRef struct {
	ExperimentID  string `json:"experiment_id"`
	ConditionCode string `json:"condition_code"`
}

type visitResult struct {
	UserID   string       `json:"user_id"`
	Context  string       `json:"context"`
	Site     string       `json:"site"`
	Target   string       `json:"target"`
	Assigned *AssignedRef `json:"assigned"`
	Status   string       `json:"status"`
}

func execVisit(ctx context.Context, api API, p VisitDecisionPointParams) (any, error) {
	ac, err := visit(ctx, api, p.UserID, p.Context, p.Site, p.Target, p.Group, p.WorkingGroup)
	if err != nil {
		return nil, err
	}
	res := visitResult{UserID: p.UserID, Context: p.Context, Site: p.Site, Target: p.Target, Status: upgrade.MarkNoConditionAssigned}
	if ac != nil {
		res.Assigned = &AssignedRef{ExperimentID: ac.ExperimentID, ConditionCode: ac.ConditionCode}
		res.Status = upgrade.MarkConditionApplied
	}
	return res, nil
}

// visit is one simulated user at a decision point: init, assign, mark what
// was assigned there. It returns the condition marked (nil: none). The
// balance job runs it for every synthetic user.
func visit(ctx context.Context, api UserAPI, userID, appContext, site, target string,
	group map[string][]string, working map[string]string) (*upgrade.AssignedCondition, error) {
	if _, err := api.Init(ctx, userID, upgrade.InitRequest{Group: group, WorkingGroup: working}); err != nil {
		return nil, fmt.Errorf("init user %s: %w", userID, err)
	}
	as, err := api.Assign(ctx, userID, appContext)
	if err != nil {
		return nil, fmt.Errorf("assign user %s: %w", userID, err)
	}
	ac := pickAssignment(as, site, target)
	req := upgrade.MarkRequest{Data: upgrade.MarkData{Site: site, Target: target}, Status: upgrade.MarkNoConditionAssigned}
	if ac != nil {
		req.Status = upgrade.MarkConditionApplied
		req.Data.AssignedCondition = &upgrade.MarkCondition{ID: ac.ID, ConditionCode: ac.ConditionCode, ExperimentID: ac.ExperimentID}
	}
	if _, err := api.Mark(ctx, userID, req); err != nil {
		return nil, fmt.Errorf("mark user %s: %w", userID, err)
	}
	return ac, nil
}

// pickAssignment finds the condition assigned at site/target. UpGrade
// gives a user one experiment per decision point, so the first condition of
// the matching entry is the one a client would apply. The default
// condition counts as none.
func pickAssignment(as []upgrade.Assignment, site, target string) *upgrade.AssignedCondition {
	for _, a := range as {
		if a.Site != site || a.Target != target {
			continue
		}
		for i := range a.AssignedCondition {
			c := a.AssignedCondition[i]
			if c.ConditionCode != "" && c.ConditionCode != "default" {
				return &c
			}
		}
	}
	return nil
}

func execBalance(ctx context.Context, api API, p BalanceParams) (any, error) {
	opts := BalanceOptions{UserPrefix: "balance-" + upgrade.NewID()[:8] + "-"}
	t, err := RunBalance(ctx, api, p, BalanceTally{}, opts)
	if err != nil {
		return nil, err
	}
	return SummarizeBalance(ctx, api, p, t)
}

func nonNilGroup(m map[string][]string) map[string][]string {
	if m == nil {
		return map[string][]string{}
	}
	return m
}

func nonNilWorking(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
