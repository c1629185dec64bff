package actions

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Factorial and within-subjects designs (docs/designs.md). A factorial
// experiment's conditions are every combination of its factors' levels;
// Go makes their codes, in the form UpGrade's assign answers with
// ("Color=Red; Shape=Circle"), so that a client marking the code it was
// given marks a stored code.

// DesignFactorial is the design param's value for a factorial experiment
// (the default, simple, is held as "").
const DesignFactorial = "factorial"

var conditionOrders = []string{upgrade.OrderRandom, upgrade.OrderRandomRoundRobin, upgrade.OrderOrderedRoundRobin}

// FactorParam is one factor of a factorial experiment.
type FactorParam struct {
	Name   string       `json:"name" jsonschema:"factor name, such as Color"`
	Levels []LevelParam `json:"levels" jsonschema:"at least 2 levels"`
}

// LevelParam is one level of a factor. A plain string is read as the
// level's name.
type LevelParam struct {
	Name    string `json:"name" jsonschema:"level name, such as Red"`
	Payload string `json:"payload,omitempty" jsonschema:"optional text the client gets with this level"`
}

// designValue folds the design param: simple (and its other names) to "",
// factorial and the "2x2" way of saying it to factorial.
func designValue(s string) string {
	t := foldKey(strings.TrimSpace(s))
	switch {
	case t == "", t == "simple", t == "betweensubjects", t == "simpledesign":
		return ""
	case strings.Contains(t, "factorial"), isGridName(t):
		return DesignFactorial
	}
	return strings.TrimSpace(s)
}

// designName is a design value as a person reads it.
func designName(d string) string {
	if d == "" {
		return "simple"
	}
	return d
}

// isGridName reports whether s is "2x2", "2x3x2" and the like.
func isGridName(s string) bool {
	parts := strings.Split(strings.ReplaceAll(s, "×", "x"), "x")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// conditionOrderValue folds a within-subjects condition order.
func conditionOrderValue(s string) string {
	switch foldKey(strings.TrimSpace(s)) {
	case "ordered", "orderedroundrobin", "roundrobinordered", "inorder":
		return upgrade.OrderOrderedRoundRobin
	case "randomroundrobin", "roundrobinrandom", "shuffledroundrobin":
		return upgrade.OrderRandomRoundRobin
	}
	return enumValue(s, conditionOrders)
}

func normFactors(fs []FactorParam) []FactorParam {
	if len(fs) == 0 {
		return nil
	}
	out := make([]FactorParam, len(fs))
	for i, f := range fs {
		out[i] = FactorParam{Name: strings.TrimSpace(f.Name)}
		for _, l := range f.Levels {
			out[i].Levels = append(out[i].Levels, LevelParam{Name: strings.TrimSpace(l.Name), Payload: strings.TrimSpace(l.Payload)})
		}
	}
	return out
}

// combination is one condition of a factorial design: a level of each
// factor, in factor order.
type combination struct {
	code   string
	levels []string
}

func combinations(fs []FactorParam) []combination {
	if len(fs) == 0 {
		return nil
	}
	out := []combination{{}}
	for _, f := range fs {
		var next []combination
		for _, c := range out {
			for _, l := range f.Levels {
				next = append(next, combination{levels: append(slices.Clone(c.levels), l.Name)})
			}
		}
		out = next
	}
	for i := range out {
		parts := make([]string, len(fs))
		for j, f := range fs {
			parts[j] = f.Name + "=" + out[i].levels[j]
		}
		out[i].code = strings.Join(parts, "; ")
	}
	return out
}

// squash is s in lower case without anything but letters and digits, for
// matching a combination written another way ("red_circle", "Red / Circle").
func squash(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}

// factorialConditions are the conditions of a factorial design: every
// combination in order, with the weight given for it in given (matched by
// its code written any usual way), else an even split when given names
// none. Given conditions that match no combination are kept at the end so
// that validation names them.
func factorialConditions(fs []FactorParam, given []ConditionParam) []ConditionParam {
	combos := combinations(fs)
	used := make([]bool, len(given))
	out := make([]ConditionParam, 0, len(combos))
	for _, c := range combos {
		cp := ConditionParam{Code: c.code}
		for i, g := range given {
			if used[i] {
				continue
			}
			if k := squash(g.Code); k == squash(c.code) || k == squash(strings.Join(c.levels, "")) {
				used[i] = true
				if g.Weight != nil {
					w := *g.Weight
					cp.Weight = &w
				}
				break
			}
		}
		out = append(out, cp)
	}
	if len(given) == 0 && len(combos) > 0 {
		for i := range out {
			w := 100 / float64(len(combos))
			out[i].Weight = &w
		}
	}
	for i, g := range given {
		if !used[i] {
			out = append(out, g)
		}
	}
	return out
}

// shapeDesign completes a design's factorial part: a factorial's
// conditions are its combinations.
func shapeDesign(d CreateExperimentParams) CreateExperimentParams {
	// Factors without a design mean factorial, unless conditions that are
	// not their combinations say the design is simple (validation then
	// names the factors).
	if d.Design == "" && len(d.Factors) > 0 && len(factorialConditions(d.Factors, d.Conditions)) == len(combinations(d.Factors)) {
		d.Design = DesignFactorial
	}
	if d.Design == DesignFactorial && len(d.Factors) > 0 {
		d.Conditions = factorialConditions(d.Factors, d.Conditions)
	}
	return d
}

// checkDesignKind checks the factorial and within-subjects rules of
// upgrade-results-designs.md sections 7 and 8, before UpGrade answers
// them with a 500 or a bare 400.
func (c *Checker) checkDesignKind(d CreateExperimentParams) {
	switch d.Design {
	case "":
		if len(d.Factors) > 0 {
			c.Add("factors", "factors need design factorial (a simple experiment has conditions only)")
		}
	case DesignFactorial:
		c.checkFactors(d)
	default:
		c.AddValue("design", d.Design, "unknown design; use simple or factorial")
	}
	if d.AssignmentUnit == upgrade.UnitWithinSubjects {
		switch {
		case d.ConditionOrder == "":
			c.Missing("condition_order", "condition_order is required with assignment_unit within-subjects: random, random round robin or ordered round robin")
		case !slices.Contains(conditionOrders, d.ConditionOrder):
			c.AddValue("condition_order", d.ConditionOrder, "unknown condition order; use random, random round robin or ordered round robin")
		}
		if d.GroupType != "" {
			c.Add("group_type", "a within-subjects experiment has no group type (every user sees every condition in turn)")
		}
		if d.Design == DesignFactorial {
			c.Add("design", "a factorial experiment cannot be within-subjects in the agent; use assignment_unit individual or group")
		}
	} else if d.ConditionOrder != "" {
		c.Add("condition_order", "condition_order applies only with assignment_unit within-subjects (the unit is %s)", d.AssignmentUnit)
	}
}

func (c *Checker) checkFactors(d CreateExperimentParams) {
	switch len(d.Factors) {
	case 0:
		c.Missing("factors", "a factorial design needs at least 2 factors, each with at least 2 levels")
	case 1:
		c.Add("factors", "a factorial design needs at least 2 factors, each with at least 2 levels; with one factor, use a simple experiment whose conditions are its levels")
	}
	seenF := map[string]int{}
	for i, f := range d.Factors {
		fp := fmt.Sprintf("factors[%d]", i)
		if f.Name == "" {
			c.Missing(fp+".name", "factor name is required")
		} else if strings.ContainsAny(f.Name, "=;") {
			c.AddValue(fp+".name", f.Name, "a factor name may not contain = or ; (they separate the parts of a condition code)")
		}
		if j, dup := seenF[strings.ToLower(f.Name)]; dup && f.Name != "" {
			c.Add(fp+".name", "factor %q is listed twice (also factors[%d])", f.Name, j)
		} else {
			seenF[strings.ToLower(f.Name)] = i
		}
		switch len(f.Levels) {
		case 0:
			c.Missing(fp+".levels", "factor %s needs at least 2 levels", quoteOrNone(f.Name))
		case 1:
			c.Add(fp+".levels", "factor %s has one level; a factor needs at least 2 levels", quoteOrNone(f.Name))
		}
		seenL := map[string]int{}
		for k, l := range f.Levels {
			lp := fmt.Sprintf("%s.levels[%d]", fp, k)
			if l.Name == "" {
				c.Missing(lp+".name", "level name is required")
			} else if strings.ContainsAny(l.Name, "=;") {
				c.AddValue(lp+".name", l.Name, "a level name may not contain = or ; (they separate the parts of a condition code)")
			}
			if j, dup := seenL[strings.ToLower(l.Name)]; dup && l.Name != "" {
				c.Add(lp+".name", "level %q is listed twice in factor %s (also levels[%d])", l.Name, quoteOrNone(f.Name), j)
			} else {
				seenL[strings.ToLower(l.Name)] = k
			}
		}
	}
	combos := map[string]bool{}
	var codes []string
	for _, cb := range combinations(d.Factors) {
		combos[cb.code] = true
		codes = append(codes, cb.code)
	}
	// Conditions that match no combination follow the combinations
	// (factorialConditions); an experiment made in the web UI, whose codes
	// are its own, has exactly one condition per combination.
	for i, cond := range d.Conditions {
		if len(d.Conditions) > len(codes) && !combos[cond.Code] && cond.Code != "" {
			c.AddValue(fmt.Sprintf("conditions[%d].code", i), cond.Code,
				"not a combination of the factors' levels; a factorial's conditions are made from its factors (leave conditions out for an even split, or give a weight to each of: %s)", strings.Join(codes, ", "))
		}
	}
}

// buildFactors are the factors to send for design d: the levels of base
// (matched by factor and level name) keep their ids, new ones get fresh
// UUIDs. A level without payload is sent without one: a 6.5 server refuses
// the {type: string, value: null} it reads back for it.
func buildFactors(base []upgrade.Factor, fs []FactorParam) []upgrade.Factor {
	old := map[[2]string]upgrade.Level{}
	for _, f := range base {
		for _, l := range f.Levels {
			old[[2]string{strings.ToLower(f.Name), strings.ToLower(l.Name)}] = l
		}
	}
	out := make([]upgrade.Factor, len(fs))
	for i, f := range fs {
		out[i] = upgrade.Factor{Name: f.Name, Order: i + 1, Levels: make([]upgrade.Level, len(f.Levels))}
		for k, l := range f.Levels {
			id := upgrade.NewID()
			if o, ok := old[[2]string{strings.ToLower(f.Name), strings.ToLower(l.Name)}]; ok {
				id = o.ID
			}
			lv := upgrade.Level{ID: id, Name: l.Name, Order: k + 1}
			if l.Payload != "" {
				v := l.Payload
				lv.Payload = &upgrade.LevelPayload{Type: "string", Value: &v}
			}
			out[i].Levels[k] = lv
		}
	}
	return out
}

// levelElements are the level combination elements of the condition with
// the given code: the levels named in it, by id. Old elements of the same
// level keep their ids.
func levelElements(factors []upgrade.Factor, code string, old []upgrade.LevelCombinationElement) []upgrade.LevelCombinationElement {
	byLevel := map[string]string{}
	for _, el := range old {
		byLevel[el.Level.ID] = el.ID
	}
	var out []upgrade.LevelCombinationElement
	for _, part := range strings.Split(code, "; ") {
		fname, lname, ok := strings.Cut(part, "=")
		if !ok {
			return nil
		}
		for _, f := range factors {
			if f.Name != fname {
				continue
			}
			for _, l := range f.Levels {
				if l.Name == lname {
					id := byLevel[l.ID]
					if id == "" {
						id = upgrade.NewID()
					}
					out = append(out, upgrade.LevelCombinationElement{ID: id, Level: upgrade.LevelRef{ID: l.ID, Name: l.Name}})
				}
			}
		}
	}
	return out
}

// factorsOf reads an experiment's factors as params, in their order.
func factorsOf(e *upgrade.Experiment) []FactorParam {
	if len(e.Factors) == 0 {
		return nil
	}
	fs := slices.Clone(e.Factors)
	slices.SortStableFunc(fs, func(a, b upgrade.Factor) int { return a.Order - b.Order })
	out := make([]FactorParam, len(fs))
	for i, f := range fs {
		ls := slices.Clone(f.Levels)
		slices.SortStableFunc(ls, func(a, b upgrade.Level) int { return a.Order - b.Order })
		out[i] = FactorParam{Name: f.Name}
		for _, l := range ls {
			out[i].Levels = append(out[i].Levels, LevelParam{Name: l.Name, Payload: l.PayloadText()})
		}
	}
	return out
}

// fmtFactors is "Color (Red, Blue); Shape (Circle, Square)".
func fmtFactors(fs []FactorParam) string {
	if len(fs) == 0 {
		return "(none)"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		ls := make([]string, len(f.Levels))
		for k, l := range f.Levels {
			ls[k] = l.Name
			if l.Payload != "" {
				ls[k] += " [payload " + quote(l.Payload) + "]"
			}
		}
		parts[i] = f.Name + " (" + strings.Join(ls, ", ") + ")"
	}
	return strings.Join(parts, "; ")
}

// levelShorthand reads a level written as its name alone.
func levelShorthand(v any) any {
	if s, ok := v.(string); ok {
		return map[string]any{"name": s}
	}
	return v
}
