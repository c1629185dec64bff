package actions

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// WeightTolerance is how far from 100 the weights may sum (rounding of
// thirds and the like).
const WeightTolerance = 0.01

// Checker collects the problems of one action's params while its
// Validate runs; each names the field by its path (conditions[1].code).
type Checker struct {
	ctx      context.Context
	api      API
	meta     upgrade.ContextMetadata
	segs     *segDir // the public segments, read once (flag and segment actions)
	problems []Problem
	changes  ChangeSource // recorded changes (undo_change)
}

// Context is the context of the validation.
func (c *Checker) Context() context.Context { return c.ctx }

// API is the UpGrade the params are checked against.
func (c *Checker) API() API { return c.api }

// Add records a problem with a field.
func (c *Checker) Add(field, format string, args ...any) {
	c.problems = append(c.problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

// AddValue records a problem with the value received (a string is quoted).
func (c *Checker) AddValue(field string, value any, format string, args ...any) {
	v := fmt.Sprint(value)
	if s, ok := value.(string); ok {
		v = strconv.Quote(s)
	}
	c.problems = append(c.problems, Problem{Field: field, Value: v, Message: fmt.Sprintf(format, args...)})
}

// Missing records a required field that is absent (it goes on
// missing_params).
func (c *Checker) Missing(field, format string, args ...any) {
	c.problems = append(c.problems, Problem{Field: field, Message: fmt.Sprintf(format, args...), Missing: true})
}

// NotFound records a field that names something the server does not have.
func (c *Checker) NotFound(field, format string, args ...any) {
	c.problems = append(c.problems, Problem{Field: field, Message: fmt.Sprintf(format, args...), NotFound: true})
}

func (c *Checker) metadata() (upgrade.ContextMetadata, error) {
	if c.meta != nil {
		return c.meta, nil
	}
	m, err := c.api.ContextMetadata(c.ctx)
	if err != nil {
		return nil, fmt.Errorf("reading context metadata: %w", err)
	}
	if m == nil {
		m = upgrade.ContextMetadata{}
	}
	c.meta = m
	return m, nil
}

// context checks that the app context exists; ok is false when it does not
// (or is missing), so that checks depending on it are skipped rather than
// reported twice.
func (c *Checker) context(name string) (upgrade.ContextInfo, bool, error) {
	if name == "" {
		c.Missing("context", "context is required (one of the app contexts in the context metadata)")
		return upgrade.ContextInfo{}, false, nil
	}
	m, err := c.metadata()
	if err != nil {
		return upgrade.ContextInfo{}, false, err
	}
	info, ok := m[name]
	if !ok {
		c.Add("context", "unknown context %q; valid contexts: %s", name, listOrNone(contextNames(m)))
	}
	return info, ok, nil
}

func (c *Checker) userID(id string) {
	if id == "" {
		c.Missing("user_id", "user_id is required")
	}
}

// Experiment reads an experiment, turning an id the server does not know
// into a not_found problem. It returns nil (and no error) in that case.
func (c *Checker) Experiment(field, id string) (*upgrade.Experiment, error) {
	if id == "" {
		c.Missing(field, "%s is required (look the experiment up by name with find_experiment)", field)
		return nil, nil
	}
	if !upgrade.IsUUID(id) {
		c.NotFound(field, "%q is not an experiment id (a UUID); look the experiment up by name with find_experiment", id)
		return nil, nil
	}
	e, err := c.api.Experiment(c.ctx, id)
	if err != nil {
		switch upgrade.CategoryOf(err) {
		case upgrade.CategoryNotFound, upgrade.CategoryValidation:
			c.NotFound(field, "no experiment with id %s", id)
			return nil, nil
		}
		return nil, fmt.Errorf("reading experiment %s: %w", id, err)
	}
	return e, nil
}

// design checks a complete experiment design; selfID is the experiment
// being updated ("" on create), which may keep its own name. checkName is
// false for an update that leaves the name alone: an old twin must not
// block every other change.
func (c *Checker) design(d CreateExperimentParams, selfID string, checkName bool) error {
	if d.Name == "" {
		c.Missing("name", "name is required")
	} else if checkName {
		if err := c.uniqueName(d.Name, selfID); err != nil {
			return err
		}
	}

	info, ctxOK, err := c.context(d.Context)
	if err != nil {
		return err
	}

	if len(d.DecisionPoints) == 0 {
		c.Missing("decision_points", "at least one decision point (site and target) is required")
	}
	seenDP := map[[2]string]int{}
	for i, dp := range d.DecisionPoints {
		f := fmt.Sprintf("decision_points[%d]", i)
		if dp.Site == "" {
			c.Missing(f+".site", "site is required")
		} else if ctxOK && !contains(info.ExpPoints, dp.Site) {
			c.Add(f+".site", "site %q is not a site of context %s; valid sites: %s", dp.Site, d.Context, listOrNone(info.ExpPoints))
		}
		if dp.Target == "" {
			c.Missing(f+".target", "target is required")
		} else if ctxOK && !contains(info.ExpIDs, dp.Target) {
			c.Add(f+".target", "target %q is not a target of context %s; valid targets: %s", dp.Target, d.Context, listOrNone(info.ExpIDs))
		}
		key := [2]string{dp.Site, dp.Target}
		if j, dup := seenDP[key]; dup && dp.Site != "" {
			c.Add(f, "decision point %s/%s is listed twice (also decision_points[%d])", dp.Site, dp.Target, j)
		} else {
			seenDP[key] = i
		}
	}

	if len(d.Conditions) == 0 {
		c.Missing("conditions", "at least one condition (code and weight) is required")
	}
	seenCode := map[string]int{}
	sum, weightsOK := 0.0, true
	for i, cond := range d.Conditions {
		f := fmt.Sprintf("conditions[%d]", i)
		switch {
		case cond.Code == "":
			c.Missing(f+".code", "condition code is required")
		case strings.EqualFold(cond.Code, "default"):
			c.Add(f+".code", "%q is reserved for UpGrade's default condition; choose another code", cond.Code)
		case ctxOK && d.Design == "" && !contains(info.Conditions, cond.Code):
			c.Add(f+".code", "condition %q is not a condition of context %s; valid conditions: %s", cond.Code, d.Context, listOrNone(info.Conditions))
		}
		if j, dup := seenCode[cond.Code]; dup && cond.Code != "" {
			c.Add(f+".code", "condition code %q is used twice (also conditions[%d]); codes must be unique", cond.Code, j)
		} else {
			seenCode[cond.Code] = i
		}
		switch {
		case cond.Weight == nil:
			c.Missing(f+".weight", "weight is required (percent; all weights sum to 100)")
			weightsOK = false
		case *cond.Weight < 0 || math.IsNaN(*cond.Weight):
			c.Add(f+".weight", "weight %s is negative; weights are percentages from 0 to 100", fmtNum(*cond.Weight))
			weightsOK = false
		default:
			sum += *cond.Weight
		}
	}
	// The extra 1e-9 absorbs float error: 3 x 33.33 must pass.
	if weightsOK && len(d.Conditions) > 0 && math.Abs(sum-100) > WeightTolerance+1e-9 {
		c.Add("conditions", "the weights sum to %s; they must sum to 100", fmtNum(sum))
	}

	switch d.AssignmentUnit {
	case upgrade.UnitIndividual, upgrade.UnitGroup, upgrade.UnitWithinSubjects:
	default:
		c.Add("assignment_unit", "unknown assignment unit %q; use individual, group or within-subjects", d.AssignmentUnit)
	}
	c.checkDesignKind(d)
	switch d.AssignmentAlgorithm {
	case "", upgrade.AlgorithmRandom:
	case upgrade.AlgorithmMooclet:
		c.Add("assignment_algorithm", "ts_configurable (Thompson sampling) cannot be used: UpGrade 6.5 refuses it with \"moocletPolicyParameters was provided but mooclets are not enabled on backend\"; an administrator would have to enable mooclets on the UpGrade backend (and run its mooclet service) first. Use random")
	case upgrade.AlgorithmStratified:
		if err := c.stratification(d.StratificationFactor); err != nil {
			return err
		}
	default:
		c.Add("assignment_algorithm", "unknown assignment algorithm %q; use random", d.AssignmentAlgorithm)
	}
	if d.StratificationFactor != "" && d.AssignmentAlgorithm != upgrade.AlgorithmStratified {
		c.Add("stratification_factor", "stratification_factor applies only with assignment_algorithm stratified random sampling")
	}
	if d.AssignmentUnit == upgrade.UnitGroup {
		if d.GroupType == "" {
			c.Missing("group_type", "group_type is required with assignment_unit group; valid group types: %s", listOrNone(info.GroupTypes))
		} else if ctxOK && !contains(info.GroupTypes, d.GroupType) {
			c.Add("group_type", "group type %q is not a group type of context %s; valid group types: %s", d.GroupType, d.Context, listOrNone(info.GroupTypes))
		}
	}

	switch d.ConsistencyRule {
	case upgrade.ConsistencyIndividual, upgrade.ConsistencyExperiment:
	case upgrade.ConsistencyGroup:
		if d.AssignmentUnit != upgrade.UnitGroup {
			c.Add("consistency_rule", "group consistency needs assignment_unit group (with a group_type)")
		}
	default:
		c.Add("consistency_rule", "unknown consistency rule %q; use individual, group or experiment", d.ConsistencyRule)
	}

	if r := d.PostExperimentRule; r != nil {
		switch r.Rule {
		case upgrade.PostRuleContinue, upgrade.PostRuleRevert:
			if r.ConditionCode != "" {
				c.Add("post_experiment_rule.condition_code", "condition_code applies only with rule assign (rule is %s)", r.Rule)
			}
		case upgrade.PostRuleAssign:
			if r.ConditionCode != "" {
				if _, ok := seenCode[r.ConditionCode]; !ok {
					c.Add("post_experiment_rule.condition_code", "condition %q is not one of the experiment's conditions (%s); leave it empty for the default condition",
						r.ConditionCode, listOrNone(conditionCodes(d.Conditions)))
				}
			}
		default:
			c.Add("post_experiment_rule.rule", "unknown post-experiment rule %q; use continue or assign", r.Rule)
		}
	}

	switch d.FilterMode {
	case upgrade.FilterIncludeAll:
		if len(d.InclusionUsers) > 0 {
			c.Add("inclusion_users", "inclusion lists need filter_mode excludeAll (includeAll enrolls everyone except the excluded)")
		}
		if len(d.InclusionGroups) > 0 {
			c.Add("inclusion_groups", "inclusion lists need filter_mode excludeAll (includeAll enrolls everyone except the excluded)")
		}
	case upgrade.FilterExcludeAll:
	default:
		c.Add("filter_mode", "unknown filter mode %q; use includeAll or excludeAll", d.FilterMode)
	}
	c.userList("inclusion_users", d.InclusionUsers)
	c.userList("exclusion_users", d.ExclusionUsers)
	c.groupList("inclusion_groups", d.InclusionGroups, d.Context, info, ctxOK)
	c.groupList("exclusion_groups", d.ExclusionGroups, d.Context, info, ctxOK)
	for i, t := range d.Tags {
		if strings.TrimSpace(t) == "" {
			c.Add(fmt.Sprintf("tags[%d]", i), "tag is empty")
		}
	}
	return nil
}

func (c *Checker) uniqueName(name, selfID string) error {
	names, err := c.api.ExperimentNames(c.ctx)
	if err != nil {
		return fmt.Errorf("reading experiment names: %w", err)
	}
	for _, n := range names {
		if n.ID != selfID && strings.EqualFold(strings.TrimSpace(n.Name), name) {
			if selfID == "" {
				c.Add("name", "an experiment named %q already exists (id %s); change it with update_experiment instead, or choose another name", n.Name, n.ID)
			} else {
				c.Add("name", "another experiment is already named %q (id %s); choose another name", n.Name, n.ID)
			}
			return nil
		}
	}
	return nil
}

func (c *Checker) userList(field string, users []string) {
	for i, u := range users {
		if u == "" {
			c.Add(fmt.Sprintf("%s[%d]", field, i), "user id is empty")
		}
	}
}

func (c *Checker) groupList(field string, groups []GroupParam, ctxName string, info upgrade.ContextInfo, ctxOK bool) {
	for i, g := range groups {
		f := fmt.Sprintf("%s[%d]", field, i)
		if g.Type == "" {
			c.Missing(f+".type", "group type is required")
		} else if ctxOK && !contains(info.GroupTypes, g.Type) {
			c.Add(f+".type", "group type %q is not a group type of context %s; valid group types: %s", g.Type, ctxName, listOrNone(info.GroupTypes))
		}
		if g.GroupID == "" {
			c.Missing(f+".group_id", "group_id is required")
		}
	}
}

func (c *Checker) siteTarget(ctxName, site, target string) error {
	info, ok, err := c.context(ctxName)
	if err != nil {
		return err
	}
	if site == "" {
		c.Missing("site", "site is required")
	} else if ok && !contains(info.ExpPoints, site) {
		c.Add("site", "site %q is not a site of context %s; valid sites: %s", site, ctxName, listOrNone(info.ExpPoints))
	}
	if target == "" {
		c.Missing("target", "target is required")
	} else if ok && !contains(info.ExpIDs, target) {
		c.Add("target", "target %q is not a target of context %s; valid targets: %s", target, ctxName, listOrNone(info.ExpIDs))
	}
	return nil
}

// groups checks init-style group memberships: each working group must be
// one of the user's groups of that type, which the server insists on.
func (c *Checker) groups(group map[string][]string, working map[string]string) {
	for _, typ := range sortedMapKeys(group) {
		f := "group." + typ
		if strings.TrimSpace(typ) == "" {
			c.Add("group", "group type (key) is empty")
			continue
		}
		if len(group[typ]) == 0 {
			c.Add(f, "list at least one group id for group type %s", typ)
		}
		for i, id := range group[typ] {
			if strings.TrimSpace(id) == "" {
				c.Add(fmt.Sprintf("%s[%d]", f, i), "group id is empty")
			}
		}
	}
	for _, typ := range sortedMapKeys(working) {
		f := "working_group." + typ
		id := working[typ]
		switch {
		case strings.TrimSpace(id) == "":
			c.Add(f, "working group id is empty")
		case group == nil:
			c.Add(f, "working_group needs the user's group memberships in group as well (the working group must be one of them)")
		case !contains(group[typ], id):
			c.Add(f, "working group %q is not one of the user's %s groups (%s)", id, typ, listOrNone(group[typ]))
		}
	}
}

func hasPartition(e *upgrade.Experiment, site, target string) bool {
	for _, p := range e.Partitions {
		if p.Site == site && p.Target == target {
			return true
		}
	}
	return false
}

func partitionNames(e *upgrade.Experiment) []string {
	var out []string
	for _, p := range sortedPartitions(e.Partitions) {
		out = append(out, siteTarget(p.Site, p.Target))
	}
	return out
}

func experimentCodes(e *upgrade.Experiment) []string {
	var out []string
	for _, c := range sortedConditions(e.Conditions) {
		out = append(out, c.ConditionCode)
	}
	return out
}

func conditionCodes(cs []ConditionParam) []string {
	var out []string
	for _, c := range cs {
		if c.Code != "" {
			out = append(out, c.Code)
		}
	}
	return out
}

func siteTarget(site, target string) string {
	if target == "" {
		return site
	}
	return site + "/" + target
}

func contextNames(m upgrade.ContextMetadata) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedMapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func listOrNone(list []string) string {
	if len(list) == 0 {
		return "(none)"
	}
	return strings.Join(list, ", ")
}

func stateList() string {
	parts := make([]string, len(upgrade.AllStates))
	for i, s := range upgrade.AllStates {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// fmtNum prints a number the way a person writes it: 50, 33.33, 0.5.
// Rounding to four places hides float noise such as 99.99000000000001.
func fmtNum(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e4)/1e4, 'f', -1, 64)
}
