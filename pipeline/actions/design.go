package actions

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// A design is the user-level description of an experiment: the fields of
// create_experiment. Create validates and builds one from params; update
// reads one from the server, applies the changed fields and validates the
// result with the very same rules, so the two can never disagree.

// withDefaults fills the documented defaults of create_experiment.
func withDefaults(d CreateExperimentParams) CreateExperimentParams {
	if d.AssignmentUnit == "" {
		d.AssignmentUnit = upgrade.UnitIndividual
	}
	if d.ConsistencyRule == "" {
		d.ConsistencyRule = upgrade.ConsistencyIndividual
	}
	switch r := d.PostExperimentRule; {
	case r == nil:
		d.PostExperimentRule = &PostRuleParam{Rule: upgrade.PostRuleContinue}
	case r.Rule == "" && r.ConditionCode != "":
		// A condition everyone gets after enrollment is the assign rule.
		d.PostExperimentRule = &PostRuleParam{Rule: upgrade.PostRuleAssign, ConditionCode: r.ConditionCode}
	case r.Rule == "":
		d.PostExperimentRule = &PostRuleParam{Rule: upgrade.PostRuleContinue}
	}
	if d.FilterMode == "" {
		d.FilterMode = upgrade.FilterIncludeAll
	}
	return d
}

// designOf reads the design of an experiment from the server's object.
// Conditions and decision points come in their configured order.
func designOf(e *upgrade.Experiment) CreateExperimentParams {
	d := CreateExperimentParams{
		Name:            e.Name,
		Context:         e.ContextName(),
		Description:     e.Description,
		Tags:            nonEmpty(e.Tags),
		AssignmentUnit:  e.AssignmentUnit,
		GroupType:       e.Group,
		ConsistencyRule: e.ConsistencyRule,
		FilterMode:      e.FilterMode,
		ConditionOrder:  e.ConditionOrder,

		AssignmentAlgorithm: algorithmValue(e.AssignmentAlgorithm),
	}
	if e.StratificationFactor != nil {
		d.StratificationFactor = e.StratificationFactor.Name
	}
	if e.Type == upgrade.TypeFactorial {
		d.Design, d.Factors = DesignFactorial, factorsOf(e)
	}
	if d.ConsistencyRule == "" && e.AssignmentUnit == upgrade.UnitWithinSubjects {
		// Optional for within-subjects (the web UI leaves it out): the
		// agent's default, which the server takes.
		d.ConsistencyRule = upgrade.ConsistencyIndividual
	}
	for _, c := range sortedConditions(e.Conditions) {
		w := c.AssignmentWeight
		d.Conditions = append(d.Conditions, ConditionParam{Code: c.ConditionCode, Weight: &w})
	}
	for _, p := range sortedPartitions(e.Partitions) {
		d.DecisionPoints = append(d.DecisionPoints, DecisionPointParam{Site: p.Site, Target: p.Target, ExcludeIfReached: p.ExcludeIfReached})
	}
	rule := &PostRuleParam{Rule: e.PostExperimentRule}
	if e.RevertTo != nil {
		if c := e.ConditionByID(*e.RevertTo); c != nil {
			rule.ConditionCode = c.ConditionCode
		}
	}
	d.PostExperimentRule = rule
	// Under includeAll the inclusion lists have no effect (the server
	// skips them); reading them as empty keeps updates from tripping over
	// leftovers of an earlier excludeAll.
	if e.FilterMode == upgrade.FilterExcludeAll {
		d.InclusionUsers = nonEmpty(e.Inclusion.Users)
		d.InclusionGroups = groupParams(e.Inclusion.Groups)
	}
	d.ExclusionUsers = nonEmpty(e.Exclusion.Users)
	d.ExclusionGroups = groupParams(e.Exclusion.Groups)
	return d
}

// applyUpdate returns cur with the fields present in u replaced.
func applyUpdate(cur CreateExperimentParams, u UpdateExperimentParams) CreateExperimentParams {
	d := cur
	if u.Name != nil {
		d.Name = *u.Name
	}
	if u.Context != nil {
		d.Context = *u.Context
	}
	if u.DecisionPoints != nil {
		d.DecisionPoints = append([]DecisionPointParam(nil), (*u.DecisionPoints)...)
	}
	if u.Conditions != nil {
		d.Conditions = append([]ConditionParam(nil), (*u.Conditions)...)
	}
	if isDesignSwitch(cur, u) {
		// A switch to simple drops the factors (the given conditions
		// replace the combinations); one to factorial takes u's factors.
		d.Design, d.Factors = *u.Design, nil
	}
	if u.Factors != nil {
		d.Factors = slices.Clone(*u.Factors)
	}
	if d.Design == DesignFactorial && (u.Factors != nil || u.Conditions != nil) {
		var given []ConditionParam
		if u.Conditions != nil {
			given = *u.Conditions
		}
		d.Conditions = factorialConditions(d.Factors, given)
	}
	if u.ConditionOrder != nil {
		d.ConditionOrder = *u.ConditionOrder
	}
	if u.AssignmentAlgorithm != nil {
		d.AssignmentAlgorithm = algorithmValue(*u.AssignmentAlgorithm)
		// A factor is meaningless without stratified sampling; drop it
		// unless the same update names one.
		if d.AssignmentAlgorithm != upgrade.AlgorithmStratified && u.StratificationFactor == nil {
			d.StratificationFactor = ""
		}
	}
	if u.StratificationFactor != nil {
		d.StratificationFactor = *u.StratificationFactor
	}
	if u.Description != nil {
		d.Description = *u.Description
	}
	if u.Tags != nil {
		d.Tags = nonEmpty(*u.Tags)
	}
	if u.AssignmentUnit != nil {
		d.AssignmentUnit = *u.AssignmentUnit
		// A group type is meaningless without a group unit; drop it
		// unless the same update names one.
		if d.AssignmentUnit != upgrade.UnitGroup && u.GroupType == nil {
			d.GroupType = ""
		}
		// Likewise a condition order without a within-subjects unit.
		if d.AssignmentUnit != upgrade.UnitWithinSubjects && u.ConditionOrder == nil {
			d.ConditionOrder = ""
		}
	}
	if u.GroupType != nil {
		d.GroupType = *u.GroupType
	}
	if u.ConsistencyRule != nil {
		d.ConsistencyRule = *u.ConsistencyRule
	}
	if u.PostExperimentRule != nil {
		r := *u.PostExperimentRule
		d.PostExperimentRule = &r
	}
	if u.FilterMode != nil {
		d.FilterMode = *u.FilterMode
	}
	if u.InclusionUsers != nil {
		d.InclusionUsers = nonEmpty(*u.InclusionUsers)
	}
	if u.InclusionGroups != nil {
		d.InclusionGroups = nonEmptyGroups(*u.InclusionGroups)
	}
	if u.ExclusionUsers != nil {
		d.ExclusionUsers = nonEmpty(*u.ExclusionUsers)
	}
	if u.ExclusionGroups != nil {
		d.ExclusionGroups = nonEmptyGroups(*u.ExclusionGroups)
	}
	// Switching to includeAll rebuilds the inclusion segment as empty:
	// under includeAll it would have no effect and only confuse a later
	// switch back.
	if u.FilterMode != nil && d.FilterMode == upgrade.FilterIncludeAll && u.InclusionUsers == nil && u.InclusionGroups == nil {
		d.InclusionUsers, d.InclusionGroups = nil, nil
	}
	return d
}

// updateTouches reports whether u names any field besides the id.
func updateTouches(u UpdateExperimentParams) bool {
	return u.Name != nil || u.Context != nil || u.DecisionPoints != nil || u.Conditions != nil ||
		u.Description != nil || u.Tags != nil || u.AssignmentUnit != nil || u.GroupType != nil ||
		u.ConsistencyRule != nil || u.PostExperimentRule != nil || u.FilterMode != nil ||
		u.InclusionUsers != nil || u.InclusionGroups != nil || u.ExclusionUsers != nil || u.ExclusionGroups != nil ||
		u.Factors != nil || u.ConditionOrder != nil || u.Design != nil ||
		u.AssignmentAlgorithm != nil || u.StratificationFactor != nil
}

// write makes the server hold design d for experiment e (as read by
// current): the experiment with a PUT (with the server's ids, so a revertTo
// names its condition), the lists through their own routes when they
// differ.
func write(ctx context.Context, api ExperimentAPI, e *upgrade.Experiment, d CreateExperimentParams) error {
	next := buildExperiment(e, d)
	if _, err := api.UpdateExperiment(ctx, next); err != nil {
		return err
	}
	cur := designOf(e)
	w := effective(d)
	if fmtUsers(effective(cur).InclusionUsers) != fmtUsers(w.InclusionUsers) || fmtGroups(effective(cur).InclusionGroups) != fmtGroups(w.InclusionGroups) ||
		fmtUsers(effective(cur).ExclusionUsers) != fmtUsers(w.ExclusionUsers) || fmtGroups(effective(cur).ExclusionGroups) != fmtGroups(w.ExclusionGroups) {
		if err := api.SetLists(ctx, next, next.Inclusion, next.Exclusion); err != nil {
			return err
		}
	}
	return nil
}

// hold makes the server hold the approved design d of experiment id, after
// a write: it reads the experiment back and compares. Where UpGrade did not
// keep what was sent (6.5 stores the post rule continue on create, and a
// revertTo must name the condition ids it chose), one more write with the
// server's ids, part of the same approved action, repairs it. A difference
// left after that is an error that names it, never a success.
func hold(ctx context.Context, api ExperimentAPI, id string, d CreateExperimentParams) (*upgrade.Experiment, error) {
	want := effective(d)
	for attempt := 0; ; attempt++ {
		e, err := upgrade.ExperimentWithLists(ctx, api, id)
		if err != nil {
			return nil, fmt.Errorf("reading it back failed: %w", err)
		}
		got := effective(designOf(e))
		diffs := slices.Concat(switchChange(want, got), designChanges(listsAsSets(want), listsAsSets(got)), algorithmChanges(want, got))
		if len(diffs) == 0 {
			return e, nil
		}
		if attempt > 0 {
			return e, fmt.Errorf("the server does not hold what was approved (%s)", strings.Join(diffs, "; "))
		}
		if err := write(ctx, api, e, d); err != nil {
			return e, fmt.Errorf("the server does not hold what was approved (%s), and the write that sets it failed: %w", strings.Join(diffs, "; "), err)
		}
	}
}

// effective is a design as the server can hold it: a group type only with
// a group unit, no empty lists.
func effective(d CreateExperimentParams) CreateExperimentParams {
	d = withDefaults(d)
	if d.AssignmentUnit != upgrade.UnitGroup {
		d.GroupType = ""
	}
	if d.FilterMode != upgrade.FilterExcludeAll {
		d.InclusionUsers, d.InclusionGroups = nil, nil
	}
	d.Tags = nonEmpty(d.Tags)
	d.InclusionUsers, d.ExclusionUsers = nonEmpty(d.InclusionUsers), nonEmpty(d.ExclusionUsers)
	d.InclusionGroups, d.ExclusionGroups = nonEmptyGroups(d.InclusionGroups), nonEmptyGroups(d.ExclusionGroups)
	return d
}

// listsAsSets is d with its inclusion and exclusion users and groups sorted,
// for comparing what a server holds with what was approved: a real 6.5
// answers a list's members in database row order, which is not the order
// sent (seen: ["u1", "u2"] read back as ["u2", "u1"]).
func listsAsSets(d CreateExperimentParams) CreateExperimentParams {
	users := func(l []string) []string {
		if l == nil {
			return nil
		}
		return slices.Sorted(slices.Values(l))
	}
	groups := func(l []GroupParam) []GroupParam {
		if l == nil {
			return nil
		}
		out := slices.Clone(l)
		slices.SortFunc(out, func(a, b GroupParam) int {
			return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.GroupID, b.GroupID))
		})
		return out
	}
	d.InclusionUsers, d.ExclusionUsers = users(d.InclusionUsers), users(d.ExclusionUsers)
	d.InclusionGroups, d.ExclusionGroups = groups(d.InclusionGroups), groups(d.ExclusionGroups)
	return d
}

// buildExperiment turns a (validated, defaulted) design into the object to
// send. With base == nil it is a new experiment; otherwise base is the
// server's current object and every id it holds for a condition (matched by
// code) or a decision point (matched by site+target) is kept, together with
// the fields the agent does not manage (payloads, queries, schedule).
func buildExperiment(base *upgrade.Experiment, d CreateExperimentParams) *upgrade.Experiment {
	var e upgrade.Experiment
	if base != nil {
		e = *base
	} else {
		e = upgrade.Experiment{State: upgrade.StateInactive, Type: upgrade.TypeSimple}
	}
	withStratification(&e, d)
	e.Name = d.Name
	e.Description = d.Description
	e.Context = []string{d.Context}
	e.Tags = append([]string{}, d.Tags...)
	e.AssignmentUnit = d.AssignmentUnit
	e.ConsistencyRule = d.ConsistencyRule
	e.FilterMode = d.FilterMode
	e.Group = ""
	if d.AssignmentUnit == upgrade.UnitGroup {
		e.Group = d.GroupType
	}
	e.ConditionOrder = ""
	if d.AssignmentUnit == upgrade.UnitWithinSubjects {
		e.ConditionOrder = d.ConditionOrder
	}
	var oldFactors []upgrade.Factor
	if base != nil {
		oldFactors = base.Factors
	}
	e.Factors = nil
	if d.Design == DesignFactorial {
		e.Type = upgrade.TypeFactorial
		e.Factors = buildFactors(oldFactors, d.Factors)
	} else if e.Type == upgrade.TypeFactorial {
		e.Type = upgrade.TypeSimple // a switch to simple (a 6.5 PUT without factors drops them)
	}

	oldConds := map[string]upgrade.Condition{}
	oldParts := map[[2]string]upgrade.DecisionPoint{}
	if base != nil {
		for _, c := range base.Conditions {
			oldConds[c.ConditionCode] = c
		}
		for _, p := range base.Partitions {
			oldParts[[2]string{p.Site, p.Target}] = p
		}
	}
	e.Conditions = make([]upgrade.Condition, 0, len(d.Conditions))
	for i, c := range d.Conditions {
		nc, ok := oldConds[c.Code]
		if !ok {
			nc = upgrade.Condition{ID: upgrade.NewID(), ConditionCode: c.Code}
		}
		if c.Weight != nil {
			nc.AssignmentWeight = *c.Weight
		}
		if e.Type == upgrade.TypeFactorial {
			// A code the agent did not make (the web UI's) keeps the
			// elements it has: its levels keep their ids.
			if els := levelElements(e.Factors, c.Code, nc.LevelCombinationElements); els != nil {
				nc.LevelCombinationElements = els
			}
		} else {
			nc.LevelCombinationElements = nil
		}
		nc.Order = i + 1
		e.Conditions = append(e.Conditions, nc)
	}
	e.Partitions = make([]upgrade.DecisionPoint, 0, len(d.DecisionPoints))
	for i, p := range d.DecisionPoints {
		np, ok := oldParts[[2]string{p.Site, p.Target}]
		if !ok {
			np = upgrade.DecisionPoint{ID: upgrade.NewID(), Site: p.Site, Target: p.Target}
		}
		np.ExcludeIfReached = p.ExcludeIfReached
		np.Order = i + 1
		e.Partitions = append(e.Partitions, np)
	}

	rule := upgrade.PostRuleContinue
	code := ""
	if d.PostExperimentRule != nil {
		rule, code = d.PostExperimentRule.Rule, d.PostExperimentRule.ConditionCode
	}
	e.PostExperimentRule = rule
	e.RevertTo = nil
	if rule == upgrade.PostRuleAssign && code != "" {
		if c := e.ConditionByCode(code); c != nil {
			id := c.ID
			e.RevertTo = &id
		}
	}

	e.Inclusion = upgrade.Segment{Users: append([]string{}, d.InclusionUsers...), Groups: groupRefs(d.InclusionGroups)}
	e.Exclusion = upgrade.Segment{Users: append([]string{}, d.ExclusionUsers...), Groups: groupRefs(d.ExclusionGroups)}
	if base != nil {
		// The lists naming public segments are not part of the design:
		// they stay as they are (a server before 6.3 takes them with the
		// PUT; later ones keep them as rows SetLists leaves alone).
		e.Inclusion.Segments = append([]upgrade.SegmentRef(nil), base.Inclusion.Segments...)
		e.Exclusion.Segments = append([]upgrade.SegmentRef(nil), base.Exclusion.Segments...)
		e.ConditionPayloads = linkedPayloads(base.ConditionPayloads, &e)
	}
	return &e
}

// linkedPayloads keeps the payloads whose condition and decision point still
// exist. Ids are kept on update, so those payloads stay linked as they are;
// a payload of a removed condition would point at nothing.
func linkedPayloads(payloads []json.RawMessage, e *upgrade.Experiment) []json.RawMessage {
	if payloads == nil {
		return nil
	}
	conds := map[string]bool{}
	for _, c := range e.Conditions {
		conds[c.ID] = true
	}
	parts := map[string]bool{}
	for _, p := range e.Partitions {
		parts[p.ID] = true
	}
	out := make([]json.RawMessage, 0, len(payloads))
	for _, raw := range payloads {
		var refs struct {
			ParentCondition json.RawMessage `json:"parentCondition"`
			DecisionPoint   json.RawMessage `json:"decisionPoint"`
		}
		if json.Unmarshal(raw, &refs) != nil {
			out = append(out, raw) // a shape we do not know: leave it to the server
			continue
		}
		if id := refID(refs.ParentCondition); id != "" && !conds[id] {
			continue
		}
		if id := refID(refs.DecisionPoint); id != "" && !parts[id] {
			continue
		}
		out = append(out, raw)
	}
	return out
}

// refID reads a reference that is either an id string or an object {id}.
func refID(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.ID
	}
	return ""
}

func sortedConditions(cs []upgrade.Condition) []upgrade.Condition {
	out := append([]upgrade.Condition(nil), cs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out
}

func sortedPartitions(ps []upgrade.DecisionPoint) []upgrade.DecisionPoint {
	out := append([]upgrade.DecisionPoint(nil), ps...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out
}

func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}

func nonEmptyGroups(g []GroupParam) []GroupParam {
	if len(g) == 0 {
		return nil
	}
	return append([]GroupParam(nil), g...)
}

func groupParams(refs []upgrade.GroupRef) []GroupParam {
	if len(refs) == 0 {
		return nil
	}
	out := make([]GroupParam, len(refs))
	for i, r := range refs {
		out[i] = GroupParam{Type: r.Type, GroupID: r.GroupID}
	}
	return out
}

func groupRefs(gs []GroupParam) []upgrade.GroupRef {
	out := make([]upgrade.GroupRef, len(gs))
	for i, g := range gs {
		out[i] = upgrade.GroupRef{Type: g.Type, GroupID: g.GroupID}
	}
	return out
}
