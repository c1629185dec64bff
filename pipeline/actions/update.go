package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// UpdateExperiment changes fields of an experiment.
const UpdateExperiment Name = "update_experiment"

// UpdateExperimentParams are the params of update_experiment. Every field
// but ExperimentID is a pointer: nil means "leave as it is", so an explicit
// empty list (say, "tags": []) can still clear a field.
type UpdateExperimentParams struct {
	ExperimentID       string                `json:"experiment_id" jsonschema:"id (UUID) of the experiment to change" ref:"experiment"`
	Name               *string               `json:"name,omitempty"`
	Context            *string               `json:"context,omitempty"`
	DecisionPoints     *[]DecisionPointParam `json:"decision_points,omitempty" jsonschema:"the complete new list; existing ones are matched by site+target"`
	Conditions         *[]ConditionParam     `json:"conditions,omitempty" jsonschema:"the complete new list; existing ones are matched by code" keyed:"code,weight"`
	Description        *string               `json:"description,omitempty"`
	Tags               *[]string             `json:"tags,omitempty"`
	AssignmentUnit     *string               `json:"assignment_unit,omitempty"`
	GroupType          *string               `json:"group_type,omitempty"`
	ConsistencyRule    *string               `json:"consistency_rule,omitempty"`
	PostExperimentRule *PostRuleParam        `json:"post_experiment_rule,omitempty"`
	FilterMode         *string               `json:"filter_mode,omitempty"`
	InclusionUsers     *[]string             `json:"inclusion_users,omitempty"`
	InclusionGroups    *[]GroupParam         `json:"inclusion_groups,omitempty"`
	ExclusionUsers     *[]string             `json:"exclusion_users,omitempty"`
	ExclusionGroups    *[]GroupParam         `json:"exclusion_groups,omitempty"`
	Design             *string               `json:"design,omitempty" jsonschema:"simple or factorial, to switch an inactive experiment (factorial needs factors; simple needs conditions)"`
	Factors            *[]FactorParam        `json:"factors,omitempty" jsonschema:"a factorial's complete new factors; levels are matched by name, the conditions remade (even split unless conditions give weights)" keyed:"name,levels"`
	ConditionOrder     *string               `json:"condition_order,omitempty" jsonschema:"within-subjects: random, random round robin or ordered round robin"`
	// AssignmentAlgorithm and StratificationFactor switch between random
	// and stratified random sampling; blank means "leave as it is".
	AssignmentAlgorithm  *string `json:"assignment_algorithm,omitempty" jsonschema:"random or stratified random sampling (needs stratification_factor)"`
	StratificationFactor *string `json:"stratification_factor,omitempty" jsonschema:"an existing factor (get_stratification_factors)"`
}

// Action implements Params.
func (UpdateExperimentParams) Action() Name { return UpdateExperiment }

func (p UpdateExperimentParams) canonical() UpdateExperimentParams {
	c := UpdateExperimentParams{
		ExperimentID:       idValue(p.ExperimentID),
		Name:               trimPtr(p.Name),
		Context:            trimPtr(p.Context),
		Description:        trimPtr(p.Description),
		AssignmentUnit:     enumPtr(p.AssignmentUnit, units),
		GroupType:          trimPtr(p.GroupType),
		ConsistencyRule:    enumPtr(p.ConsistencyRule, consistencies),
		PostExperimentRule: normPostRule(p.PostExperimentRule),
		FilterMode:         enumPtr(p.FilterMode, upgrade.FilterModes()),
	}
	if p.DecisionPoints != nil {
		dps := normDecisionPoints(*p.DecisionPoints)
		c.DecisionPoints = &dps
	}
	if p.Conditions != nil {
		cs := normConditions(*p.Conditions)
		c.Conditions = &cs
	}
	if p.Design != nil {
		v := designValue(*p.Design)
		c.Design = &v
	}
	if p.Factors != nil && len(*p.Factors) > 0 {
		// An empty list is "not given" (a switch to simple drops the
		// factors anyway; a factorial without factors is no design).
		fs := normFactors(*p.Factors)
		c.Factors = &fs
	}
	if p.ConditionOrder != nil {
		v := conditionOrderValue(*p.ConditionOrder)
		c.ConditionOrder = &v
	}
	c.AssignmentAlgorithm = algorithmPtr(p.AssignmentAlgorithm)
	c.StratificationFactor = blankNil(p.StratificationFactor)
	if r := c.PostExperimentRule; r != nil && r.Rule == "" && r.ConditionCode != "" {
		r.Rule = upgrade.PostRuleAssign // a condition to give everyone means assign
	}
	// An explicit empty list clears the field: it stays an empty list,
	// unlike a list that is not given.
	c.Tags = keepList(p.Tags)
	c.InclusionUsers = keepList(p.InclusionUsers)
	c.ExclusionUsers = keepList(p.ExclusionUsers)
	c.InclusionGroups = keepGroups(p.InclusionGroups)
	c.ExclusionGroups = keepGroups(p.ExclusionGroups)
	return c
}

// algorithmPtr folds an update's assignment algorithm; blank is "not
// given" and random is kept as UpGrade spells it (applyUpdate folds it to
// the design's "").
func algorithmPtr(s *string) *string {
	s = blankNil(s)
	if s == nil {
		return nil
	}
	v := algorithmValue(*s)
	if v == "" {
		v = upgrade.AlgorithmRandom
	}
	return &v
}

// blankNil is s trimmed, nil when it is blank: an optional field sent
// empty changes nothing.
func blankNil(s *string) *string {
	if s == nil || strings.TrimSpace(*s) == "" {
		return nil
	}
	v := strings.TrimSpace(*s)
	return &v
}

func keepList(l *[]string) *[]string {
	if l == nil {
		return nil
	}
	out := trimList(*l)
	if out == nil {
		out = []string{}
	}
	return &out
}

func keepGroups(l *[]GroupParam) *[]GroupParam {
	if l == nil {
		return nil
	}
	out := normGroups(*l)
	if out == nil {
		out = []GroupParam{}
	}
	return &out
}

// declareUpdate declares this file's action in r.
func declareUpdate(r *Registry) {
	Add(r, Def[UpdateExperimentParams]{
		Name: UpdateExperiment, Order: 20, Invalidates: []Cache{CacheExperiments},
		Object:      ObjectExperiment,
		Description: "Change fields of an existing experiment; only the fields given change. Condition and decision point ids are kept.",
		Canonical:   UpdateExperimentParams.canonical,
		Validate:    validateUpdate,
		Plan:        planUpdate,
		Execute:     executeUpdate,
		Reconcile:   reconcileUpdate,
		Report: ReportAs(func(r updateResult) string {
			s := fmt.Sprintf("Updated experiment %q (id %s, context %s, state %s). It now has:\n%s", r.Name, r.ID, r.Context, r.State,
				strings.TrimRight(designSummary(r.ExperimentResult), "\n"))
			if r.AssignmentAlgorithm != "" {
				s += "\nAssignment algorithm: " + r.AssignmentAlgorithm
				if r.StratificationFactor != "" {
					s += fmt.Sprintf(" by factor %q", r.StratificationFactor)
				}
			}
			return s
		}),
	})
}

func validateUpdate(c *Checker, u UpdateExperimentParams) error {
	e, err := c.Experiment("experiment_id", u.ExperimentID)
	if err != nil || e == nil {
		return err
	}
	if e, err = upgrade.ExperimentWithLists(c.ctx, c.api, e.ID); err != nil {
		return err
	}
	if !updateTouches(u) {
		c.Missing("fields", "name at least one field to change (status changes use update_experiment_status)")
		return nil
	}
	if e.Type != "" && e.Type != upgrade.TypeSimple && e.Type != upgrade.TypeFactorial {
		c.Add("experiment_id", "experiment %q is a %s experiment; the agent only edits Simple and Factorial experiments", e.Name, e.Type)
		return nil
	}
	switching := isDesignSwitch(designOf(e), u)
	if switching && e.State != upgrade.StateInactive {
		c.AddValue("design", *u.Design, "experiment %q is %s and %s; its design changes only while it is inactive (a switch replaces the conditions enrolled users have): set it inactive first or create a new experiment", e.Name, designName(designOf(e).Design), e.State)
		return nil
	}
	if switching && *u.Design == "" && u.Conditions == nil {
		c.Missing("conditions", "a switch to design simple needs conditions (code and weight): the factorial's combinations and factors are dropped")
		return nil
	}
	if switching && *u.Design == DesignFactorial && u.Factors == nil {
		c.Missing("factors", "a switch to design factorial needs factors: at least 2, each with at least 2 levels (the conditions become their combinations)")
		return nil
	}
	if u.Factors != nil && e.Type != upgrade.TypeFactorial && !switching {
		c.Add("factors", "experiment %q is a simple experiment; factors need design factorial: give design factorial with the factors to switch it (its conditions become the combinations)", e.Name)
		return nil
	}
	n := len(c.problems)
	d := applyUpdate(designOf(e), u)
	if u.AssignmentAlgorithm == nil && u.StratificationFactor == nil {
		// The algorithm the experiment has is not the update's business
		// (a mooclet experiment of a server that runs them keeps it).
		d.AssignmentAlgorithm, d.StratificationFactor = "", ""
	}
	if err := c.design(d, e.ID, u.Name != nil); err != nil {
		return err
	}
	if u.Factors == nil && !switching {
		// Factors made elsewhere (a web-UI factorial of one factor) are
		// not the update's business: only factors it sets are checked.
		added := slices.DeleteFunc(slices.Clone(c.problems[n:]), func(p Problem) bool { return strings.HasPrefix(p.Field, "factors") })
		c.problems = append(c.problems[:n], added...)
	}
	return nil
}

// isDesignSwitch reports whether u changes the design of cur between
// simple and factorial (an unknown design is validation's to name).
func isDesignSwitch(cur CreateExperimentParams, u UpdateExperimentParams) bool {
	return u.Design != nil && *u.Design != cur.Design && (*u.Design == "" || *u.Design == DesignFactorial)
}

func planUpdate(b *Planner, p UpdateExperimentParams) error {
	e, err := upgrade.ExperimentWithLists(b.ctx, b.api, p.ExperimentID)
	if err != nil {
		return fmt.Errorf("reading experiment %s: %w", p.ExperimentID, err)
	}
	b.Pin(e)
	cur := designOf(e)
	next := applyUpdate(cur, p)
	b.Line("Update experiment %s (id %s, context %s, state %s):", quote(e.Name), e.ID, identOrNone(e.ContextName()), e.State)
	changes := slices.Concat(switchChange(cur, next), designChanges(cur, next), algorithmChanges(cur, next))
	for _, c := range changes {
		b.Line("  %s", c)
	}
	if len(changes) == 0 {
		b.Line("  (no change: every value given equals the current one)")
		b.Warn("nothing would change")
	}
	b.segmentListLines(e, "  ", updateSegmentNote(e, p))
	if len(switchChange(cur, next)) > 0 {
		// A switch replaces the conditions: only a code both designs have
		// keeps its id, which the line for other updates would overstate.
		b.Line("The conditions are replaced by the new design's (new ids; a code both designs have keeps its id); decision point ids are kept (matched by site/target).")
	} else {
		b.Line("Existing condition and decision point ids are kept (matched by code and by site/target).")
	}
	if len(changes) > 0 && e.State == upgrade.StateEnrolling {
		b.Warn("the experiment is enrolling: the change applies to users assigned from now on")
	}
	for _, code := range removedCodes(cur, next) {
		b.Warn("condition %s is removed; users who had it lose it", ident(code))
	}
	b.designWarnings(next, e.Inclusion)
	if next.AssignmentAlgorithm == upgrade.AlgorithmStratified && len(algorithmChanges(cur, next)) > 0 {
		b.Warn("UpGrade 6.5 draws stratified experiments like random ones: no balancing across the factor's values was observed")
	}
	return nil
}

// switchChange is the design change between cur and next, as
// designChanges writes a field's ("design: simple -> factorial").
func switchChange(cur, next CreateExperimentParams) []string {
	if o, n := designName(cur.Design), designName(next.Design); o != n {
		return []string{fmt.Sprintf("design: %s -> %s", o, n)}
	}
	return nil
}

// algorithmChanges lists the assignment algorithm and stratification factor
// changes as designChanges does ("field: old -> new").
func algorithmChanges(cur, next CreateExperimentParams) []string {
	var out []string
	if o, n := algorithmName(cur.AssignmentAlgorithm), algorithmName(next.AssignmentAlgorithm); o != n {
		out = append(out, fmt.Sprintf("assignment_algorithm: %s -> %s", o, n))
	}
	if o, n := quoteOrNone(cur.StratificationFactor), quoteOrNone(next.StratificationFactor); o != n {
		out = append(out, fmt.Sprintf("stratification_factor: %s -> %s", o, n))
	}
	return out
}

// algorithmName is a design's algorithm as UpGrade spells it.
func algorithmName(a string) string {
	if a == "" {
		return upgrade.AlgorithmRandom
	}
	return a
}

func removedCodes(cur, next CreateExperimentParams) []string {
	keep := map[string]bool{}
	for _, c := range next.Conditions {
		keep[c.Code] = true
	}
	var out []string
	for _, c := range cur.Conditions {
		if !keep[c.Code] {
			out = append(out, c.Code)
		}
	}
	return out
}

func executeUpdate(ctx context.Context, env Env, p UpdateExperimentParams, _ string) (Outcome, error) {
	cur, err := upgrade.ExperimentWithLists(ctx, env.API, p.ExperimentID)
	if err != nil {
		return Outcome{}, err
	}
	d := applyUpdate(designOf(cur), p)
	if err := write(ctx, env.API, cur, d); err != nil {
		return Outcome{}, err
	}
	held, err := hold(ctx, env.API, cur.ID, d)
	if err == nil {
		err = keptSegmentLists(cur, held)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("experiment %q was updated, but %w", d.Name, err)
	}
	r := updateResult{ExperimentResult: SummarizeExperiment(held)}
	if got := designOf(held); p.AssignmentAlgorithm != nil || p.StratificationFactor != nil || got.AssignmentAlgorithm != "" {
		r.AssignmentAlgorithm, r.StratificationFactor = algorithmName(got.AssignmentAlgorithm), got.StratificationFactor
	}
	return Result(r)
}

// updateResult is update_experiment's result: the experiment, with its
// assignment algorithm when the update named it or it is not random.
type updateResult struct {
	ExperimentResult
	AssignmentAlgorithm  string `json:"assignment_algorithm,omitempty"`
	StratificationFactor string `json:"stratification_factor,omitempty"`
}

func reconcileUpdate(ctx context.Context, env Env, p UpdateExperimentParams, _ string, _ time.Time) (Reconciliation, error) {
	e, err := upgrade.ExperimentWithLists(ctx, env.API, p.ExperimentID)
	if err != nil {
		if upgrade.CategoryOf(err) == upgrade.CategoryNotFound {
			return Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("experiment %s no longer exists", p.ExperimentID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile update: reading experiment %s: %w", p.ExperimentID, err)
	}
	cur := designOf(e)
	next := applyUpdate(cur, p)
	if changes := slices.Concat(switchChange(cur, next), designChanges(listsAsSets(cur), listsAsSets(next)), algorithmChanges(cur, next)); len(changes) > 0 {
		return Reconciliation{Outcome: OutcomeNotDone,
			Note: fmt.Sprintf("experiment %q does not have the new values yet (%s): the update did not happen", e.Name, strings.Join(changes, "; "))}, nil
	}
	return Reconciliation{Outcome: OutcomeDone, Result: resultOf(e),
		Note: fmt.Sprintf("experiment %q already has every value of the update", e.Name)}, nil
}
