package actions

import (
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Spellings are folded to UpGrade's: enumerations to its case, state
// display names to internal ones, surrounding blanks off identifiers.
// Values that match nothing are kept (trimmed) so that validation can name
// them.

var (
	units         = []string{upgrade.UnitIndividual, upgrade.UnitGroup, upgrade.UnitWithinSubjects}
	consistencies = []string{upgrade.ConsistencyIndividual, upgrade.ConsistencyGroup, upgrade.ConsistencyExperiment}
	postRules     = []string{upgrade.PostRuleContinue, upgrade.PostRuleAssign, upgrade.PostRuleRevert}
	markStatuses  = []string{upgrade.MarkConditionApplied, upgrade.MarkConditionNotApplied, upgrade.MarkNoConditionAssigned}
	algorithms    = []string{upgrade.AlgorithmRandom, upgrade.AlgorithmStratified, upgrade.AlgorithmMooclet}
)

// algorithmValue folds an assignment algorithm to UpGrade's spelling, with
// the names people use for it ("Thompson sampling", "stratified"), and the
// default random to "" so that naming it changes nothing.
func algorithmValue(s string) string {
	switch foldKey(strings.TrimSpace(s)) {
	case foldKey("thompson sampling"), foldKey("thompson"), foldKey("ts"):
		return upgrade.AlgorithmMooclet
	case foldKey("stratified"), foldKey("stratified sampling"):
		return upgrade.AlgorithmStratified
	}
	if v := enumValue(s, algorithms); v != upgrade.AlgorithmRandom {
		return v
	}
	return ""
}

// enumValue returns the allowed spelling that s matches ignoring case,
// blanks, and _/- differences; otherwise s trimmed.
func enumValue(s string, allowed []string) string {
	t := strings.TrimSpace(s)
	key := foldKey(t)
	for _, a := range allowed {
		if foldKey(a) == key {
			return a
		}
	}
	return t
}

func enumPtr(s *string, allowed []string) *string {
	if s == nil {
		return nil
	}
	v := enumValue(*s, allowed)
	return &v
}

// idValue is an experiment id trimmed, a UUID in lower case: UpGrade
// stores and answers ids in lower case, and a model may write one in upper
// case (the same id, so the same params).
func idValue(s string) string {
	s = strings.TrimSpace(s)
	if upgrade.IsUUID(s) {
		return strings.ToLower(s)
	}
	return s
}

func trimPtr(s *string) *string {
	if s == nil {
		return nil
	}
	v := strings.TrimSpace(*s)
	return &v
}

// trimList trims every entry and drops the empty ones; an empty result is
// nil, the same as not given.
func trimList(list []string) []string {
	var out []string
	for _, s := range list {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func normDecisionPoints(dps []DecisionPointParam) []DecisionPointParam {
	if dps == nil {
		return nil
	}
	out := make([]DecisionPointParam, len(dps))
	for i, dp := range dps {
		out[i] = DecisionPointParam{Site: strings.TrimSpace(dp.Site), Target: strings.TrimSpace(dp.Target), ExcludeIfReached: dp.ExcludeIfReached}
	}
	return out
}

func normConditions(cs []ConditionParam) []ConditionParam {
	if cs == nil {
		return nil
	}
	out := make([]ConditionParam, len(cs))
	for i, c := range cs {
		out[i] = ConditionParam{Code: strings.TrimSpace(c.Code), Weight: c.Weight}
		if c.Weight != nil {
			w := *c.Weight
			out[i].Weight = &w
		}
	}
	return out
}

func normGroups(gs []GroupParam) []GroupParam {
	var out []GroupParam
	for _, g := range gs {
		g = GroupParam{Type: strings.TrimSpace(g.Type), GroupID: strings.TrimSpace(g.GroupID)}
		if g.Type != "" || g.GroupID != "" {
			out = append(out, g)
		}
	}
	return out
}

func normPostRule(r *PostRuleParam) *PostRuleParam {
	if r == nil {
		return nil
	}
	n := PostRuleParam{Rule: enumValue(r.Rule, postRules), ConditionCode: strings.TrimSpace(r.ConditionCode)}
	// "default" is how people name the no-condition fallback; the API
	// spells it as no code (revertTo null).
	if strings.EqualFold(n.ConditionCode, "default") {
		n.ConditionCode = ""
	}
	return &n
}

// normGroupMap trims group types and ids and drops empty entries; an empty
// map is nil (not given).
func normGroupMap(m map[string][]string) map[string][]string {
	var out map[string][]string
	for typ, ids := range m {
		typ = strings.TrimSpace(typ)
		ids = trimList(ids)
		if typ == "" && len(ids) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]string{}
		}
		out[typ] = append(out[typ], ids...)
	}
	return out
}

func normWorkingGroup(m map[string]string) map[string]string {
	var out map[string]string
	for typ, id := range m {
		typ, id = strings.TrimSpace(typ), strings.TrimSpace(id)
		if typ == "" && id == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[typ] = id
	}
	return out
}
