package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Factorial and within-subjects experiments as UpGrade 6.5 runs them
// (upgrade-results-designs.md sections 7 and 8).

var conditionOrders = []string{upgrade.OrderRandom, upgrade.OrderRandomRoundRobin, upgrade.OrderOrderedRoundRobin}

// validateDesign adds the validator's rules for factors, level combination
// elements and the condition order (400s).
func (c *checker) validateDesign(m map[string]any) {
	for i, f := range c.objects(m, "", "factors", false) {
		base := fmt.Sprintf("factors[%d]", i)
		c.str(f, base, "name", true)
		c.number(f, base, "order", true, true)
		for j, l := range c.objects(f, base, "levels", true) {
			lb := fmt.Sprintf("%s.levels[%d]", base, j)
			c.str(l, lb, "id", true)
			c.str(l, lb, "name", true)
			c.number(l, lb, "order", true, false)
			if v, ok := l["payload"]; !absent(v, ok) {
				if p := c.object(l, lb, "payload", false); p != nil {
					c.enum(p, join(lb, "payload"), "type", payloadTypes, true)
					if _, isStr := p["value"].(string); !isStr {
						c.failf(join(lb, "payload.value"), "must be a string")
					}
				}
			}
		}
	}
	for i, o := range c.objects(m, "", "conditions", false) {
		for j, el := range c.objects(o, fmt.Sprintf("conditions[%d]", i), "levelCombinationElements", false) {
			eb := fmt.Sprintf("conditions[%d].levelCombinationElements[%d]", i, j)
			c.str(el, eb, "id", true)
			if lv := c.object(el, eb, "level", true); lv != nil {
				c.str(lv, join(eb, "level"), "name", true)
			}
		}
	}
	if s, _ := m["assignmentUnit"].(string); s == upgrade.UnitWithinSubjects {
		c.enum(m, "", "conditionOrder", conditionOrders, true)
	}
}

// factorialError is the server's 500 for a factorial it cannot store: no
// factors, a condition without level combination elements, a level id used
// twice or one that names no level. Nothing is stored.
func factorialError(e *upgrade.Experiment) *apiError {
	fail := func(msg string) *apiError {
		return &apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed, Message: msg}
	}
	if len(e.Factors) == 0 {
		return fail("Cannot read properties of undefined (reading 'map'): a factorial experiment needs factors")
	}
	levels := map[string]bool{}
	for _, f := range e.Factors {
		for _, l := range f.Levels {
			if levels[l.ID] {
				return fail(fmt.Sprintf("duplicate key value violates unique constraint \"PK_level\": Key (id)=(%s) already exists.", l.ID))
			}
			levels[l.ID] = true
		}
	}
	for _, c := range e.Conditions {
		if len(c.LevelCombinationElements) == 0 {
			return fail("Cannot read properties of undefined (reading 'map'): a factorial condition needs levelCombinationElements")
		}
		for _, el := range c.LevelCombinationElements {
			if !levels[el.Level.ID] {
				return fail(fmt.Sprintf("insert or update on table \"level_combination_element\" violates foreign key constraint: Key (levelId)=(%s) is not present in table \"level\".", el.Level.ID))
			}
		}
	}
	return nil
}

// shapeStored keeps what the server stores of a design: a Simple
// experiment ignores factors and level combinations, a factorial keeps
// them (level ids as sent), and only a within-subjects unit has a
// condition order.
func shapeStored(e *upgrade.Experiment) {
	if e.Type != upgrade.TypeFactorial {
		e.Factors = nil
		for i := range e.Conditions {
			e.Conditions[i].LevelCombinationElements = nil
		}
	}
	if e.AssignmentUnit != upgrade.UnitWithinSubjects {
		e.ConditionOrder = ""
	}
}

// levelOf finds a level by id.
func levelOf(e *upgrade.Experiment, id string) (*upgrade.Factor, *upgrade.Level) {
	for i := range e.Factors {
		for j := range e.Factors[i].Levels {
			if e.Factors[i].Levels[j].ID == id {
				return &e.Factors[i], &e.Factors[i].Levels[j]
			}
		}
	}
	return nil, nil
}

func sortedFactors(e *upgrade.Experiment) []upgrade.Factor {
	fs := slices.Clone(e.Factors)
	slices.SortStableFunc(fs, func(a, b upgrade.Factor) int { return a.Order - b.Order })
	return fs
}

// levelPayloadView is a level's payload as read: {type: string, value:
// null} when none was sent.
func levelPayloadView(l upgrade.Level) obj {
	if l.Payload == nil {
		return obj{"type": "string", "value": nil}
	}
	return obj{"type": l.Payload.Type, "value": l.Payload.Value}
}

// factorsView shows the factors with their row ids (the server's own; here
// derived from the experiment and the factor's name) and the levels' row
// metadata.
func (s *Sim) factorsView(e *upgrade.Experiment) []any {
	out := []any{}
	for _, f := range sortedFactors(e) {
		levels := []any{}
		for _, l := range f.Levels {
			levels = append(levels, s.rowMeta(e, obj{"id": l.ID, "name": l.Name, "description": nullIfEmpty(l.Description),
				"order": levelOrder(l), "payload": levelPayloadView(l)}))
		}
		out = append(out, obj{"id": upgrade.IDFrom(e.ID + "/factor/" + f.Name), "name": f.Name,
			"description": nullIfEmpty(f.Description), "order": f.Order, "levels": levels})
	}
	return out
}

func levelOrder(l upgrade.Level) any {
	if l.Order == 0 {
		return nil
	}
	return l.Order
}

// elementsView is a condition's levelCombinationElements: for a factorial
// experiment the stored rows, each with its level row (payload as
// payloadType and payloadValue); otherwise the short form.
func (s *Sim) elementsView(e *upgrade.Experiment, c upgrade.Condition) []any {
	out := []any{}
	for _, el := range c.LevelCombinationElements {
		if e.Type != upgrade.TypeFactorial {
			out = append(out, obj{"id": el.ID, "level": obj{"id": el.Level.ID, "name": el.Level.Name}})
			continue
		}
		level := obj{"id": el.Level.ID, "name": el.Level.Name, "description": nil, "order": nil,
			"payloadType": "string", "payloadValue": nil}
		if _, l := levelOf(e, el.Level.ID); l != nil {
			p := levelPayloadView(*l)
			level["name"], level["description"], level["order"] = l.Name, nullIfEmpty(l.Description), levelOrder(*l)
			level["payloadType"], level["payloadValue"] = p["type"], p["value"]
		}
		out = append(out, s.rowMeta(e, obj{"id": el.ID, "level": s.rowMeta(e, level)}))
	}
	return out
}

// factorialAssignment is what assign answers for a factorial condition: the
// code made of the level names ("Color=Red; Shape=Circle"), whatever the
// stored code, or with one factor the level's payload object; and
// assignedFactor, each factor's level and payload.
func factorialAssignment(e *upgrade.Experiment, cond *upgrade.Condition) (any, []any) {
	type pick struct {
		f upgrade.Factor
		l upgrade.Level
	}
	var picks []pick
	for _, el := range cond.LevelCombinationElements {
		if f, l := levelOf(e, el.Level.ID); f != nil {
			picks = append(picks, pick{*f, *l})
		}
	}
	slices.SortStableFunc(picks, func(a, b pick) int { return a.f.Order - b.f.Order })
	factor := obj{}
	parts := make([]string, len(picks))
	for i, p := range picks {
		var payload any
		if p.l.Payload != nil && p.l.Payload.Value != nil {
			payload = obj{"type": p.l.Payload.Type, "value": *p.l.Payload.Value}
		}
		factor[p.f.Name] = obj{"level": p.l.Name, "payload": payload}
		parts[i] = p.f.Name + "=" + p.l.Name
	}
	var code any = strings.Join(parts, "; ")
	if len(picks) == 1 {
		code = levelPayloadView(picks[0].l)
	}
	return code, []any{factor}
}

// wsMark is one within-subjects mark: the condition the client marked and
// its uniquifier.
type wsMark struct {
	At          string `json:"at"`
	ConditionID string `json:"conditionId"`
	Partition   string `json:"partition"`
	Uniquifier  string `json:"uniquifier,omitempty"`
}

// withinSubjectsCodes is a within-subjects assignment at one decision
// point: random, 100 draws; random round robin, shuffled blocks of every
// condition (ceil(100/n) of them); ordered round robin, the conditions in
// order. The list is rotated left by the user's marks there, so a client
// taking the first one moves on at each mark.
func (s *Sim) withinSubjectsCodes(e *upgrade.Experiment, uid string, dp *upgrade.DecisionPoint) []*upgrade.Condition {
	conds := make([]*upgrade.Condition, len(e.Conditions))
	for i := range e.Conditions {
		conds[i] = &e.Conditions[i]
	}
	slices.SortStableFunc(conds, func(a, b *upgrade.Condition) int { return a.Order - b.Order })
	n := len(conds)
	if n == 0 {
		return nil
	}
	var list []*upgrade.Condition
	switch e.ConditionOrder {
	case upgrade.OrderRandomRoundRobin:
		blocks := int(math.Ceil(100 / float64(n)))
		for b := 0; b < blocks; b++ {
			block := slices.Clone(conds)
			for i := n - 1; i > 0; i-- {
				j := int(seedRandom(fmt.Sprintf("%s%s%d_%d", e.ID, uid, b, i)) * float64(i+1))
				block[i], block[j] = block[j], block[i]
			}
			list = append(list, block...)
		}
	case upgrade.OrderOrderedRoundRobin:
		list = conds
	default:
		for i := 0; i < 100; i++ {
			list = append(list, conds[int(seedRandom(fmt.Sprintf("%s%s%d", e.ID, uid, i))*float64(n))])
		}
	}
	marks := 0
	if rt := s.st.Runtime[e.ID]; rt != nil {
		for _, m := range rt.WSMarks[uid] {
			if m.Partition == dp.ID {
				marks++
			}
		}
	}
	k := marks % len(list)
	return append(slices.Clone(list[k:]), list[:k]...)
}

// withinSubjectsMarkLocked records a within-subjects mark: the client's
// condition and uniquifier, one row per mark.
func (s *Sim) withinSubjectsMarkLocked(e *upgrade.Experiment, uid string, u *user, dp *upgrade.DecisionPoint, mb markBody) {
	rt := s.runtimeOf(e.ID)
	if mb.status == upgrade.MarkConditionNotApplied {
		setReason(&rt.ExcludedUsers, uid, reasonNotApplied)
		return
	}
	if !segmentAllows(s.withSubSegments(e), uid, u) {
		setReason(&rt.ExcludedUsers, uid, reasonSegment)
		return
	}
	cond := e.ConditionByCode(mb.condCode)
	if cond == nil || rt.ExcludedUsers[uid] != "" || e.State != upgrade.StateEnrolling {
		return
	}
	if rt.WSMarks == nil {
		rt.WSMarks = map[string][]wsMark{}
	}
	rt.WSMarks[uid] = append(rt.WSMarks[uid], wsMark{At: s.timestamp(), ConditionID: cond.ID, Partition: dp.ID, Uniquifier: mb.uniquifier})
	if rt.Enrolled == nil {
		rt.Enrolled = map[string]*enrollment{}
	}
	if rt.Enrolled[uid] == nil {
		rt.Enrolled[uid] = &enrollment{At: s.timestamp(), ConditionID: cond.ID, Partitions: []string{}}
	}
	if en := rt.Enrolled[uid]; !slices.Contains(en.Partitions, dp.ID) {
		en.Partitions = append(en.Partitions, dp.ID)
	}
}

// wsConditionsOf are the conditions a within-subjects user marked, each
// once.
func wsConditionsOf(rt *runtime, uid string) []string {
	var out []string
	for _, m := range rt.WSMarks[uid] {
		if !slices.Contains(out, m.ConditionID) {
			out = append(out, m.ConditionID)
		}
	}
	return out
}

// wsStats counts a within-subjects user in every condition (and decision
// point) they marked.
func (s *Sim) wsStats(e *upgrade.Experiment, rt *runtime, out upgrade.EnrollmentStats) upgrade.EnrollmentStats {
	count := func(keep func(wsMark) bool) int {
		n := 0
		for _, marks := range rt.WSMarks {
			if slices.ContainsFunc(marks, keep) {
				n++
			}
		}
		return n
	}
	for _, cond := range e.Conditions {
		cs := upgrade.ConditionStats{ID: cond.ID, Partitions: []upgrade.PartitionStats{}}
		cs.Users = count(func(m wsMark) bool { return m.ConditionID == cond.ID })
		for _, p := range e.Partitions {
			cs.Partitions = append(cs.Partitions, upgrade.PartitionStats{ID: p.ID,
				Users: count(func(m wsMark) bool { return m.ConditionID == cond.ID && m.Partition == p.ID })})
		}
		out.Conditions = append(out.Conditions, cs)
	}
	return out
}
