package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Reasons recorded with an exclusion.
const (
	reasonReachedPrior = "reached prior to enrolling"
	reasonNotApplied   = "condition not applied"
)

type assignedCondOut struct {
	ID            string           `json:"id"`
	ConditionCode string           `json:"conditionCode"`
	Payload       *upgrade.Payload `json:"payload"`
	ExperimentID  string           `json:"experimentId"`
}

type assignmentOut struct {
	Site              string            `json:"site"`
	Target            *string           `json:"target"`
	ExperimentType    string            `json:"experimentType"`
	AssignedCondition []assignedCondOut `json:"assignedCondition"`
}

type markOut struct {
	ID           string  `json:"id"`
	UserID       string  `json:"userId"`
	Site         string  `json:"site"`
	Target       *string `json:"target"`
	ExperimentID *string `json:"experimentId"`
	Condition    *string `json:"condition"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func dpKey(site, target string) string { return site + "\x1f" + target }

func groupConsistent(e *upgrade.Experiment) bool {
	return e.AssignmentUnit == upgrade.UnitGroup && e.ConsistencyRule == upgrade.ConsistencyGroup
}

// requireUser reads the User-Id header the client routes demand.
func requireUser(c *call) (string, bool) {
	id := c.r.Header.Get("User-Id")
	if id == "" {
		c.fail(&apiError{Status: 400, Name: "Error", Message: "User-Id header not found.", Type: typeMissingUserID})
		return "", false
	}
	return id, true
}

func userNotDefined(id string) *apiError {
	return &apiError{Status: 404, Name: "Error", Message: "User not found: " + id, Type: typeUserNotDefined}
}

// ---- init ----

type initBody struct {
	group        map[string][]string
	groupSet     bool
	workingGroup map[string]string
	wgSet        bool
}

// parseInit applies the server's rules for /v6/init: only group and
// workingGroup, each a record of non-empty strings.
func parseInit(body []byte) (initBody, *apiError) {
	var ib initBody
	dec := json.NewDecoder(bytes.NewReader(body))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return ib, badBody("the body is not a JSON object")
	}
	ck := &checker{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "group" && k != "workingGroup" {
			ck.failf(k, "property %s should not exist", k)
		}
	}
	if raw, ok := m["group"]; ok && string(raw) != "null" {
		var g map[string][]string
		valid := json.Unmarshal(raw, &g) == nil && g != nil
		for k, vs := range g {
			if k == "" {
				valid = false
			}
			for _, v := range vs {
				if v == "" {
					valid = false
				}
			}
			if vs == nil {
				valid = false
			}
		}
		if !valid {
			ck.failf("group", "The Group is not a valid Record<string, string[]>")
		}
		ib.group, ib.groupSet = g, true
	}
	if raw, ok := m["workingGroup"]; ok && string(raw) != "null" {
		var wg map[string]string
		valid := json.Unmarshal(raw, &wg) == nil && wg != nil
		for k, v := range wg {
			if k == "" || v == "" {
				valid = false
			}
		}
		if !valid {
			ck.failf("workingGroup", "The WorkingGroup is not a valid Record<string, string>")
		}
		ib.workingGroup, ib.wgSet = wg, true
	}
	return ib, ck.err()
}

func (s *Sim) initLocked(id string, body []byte) (upgrade.InitResponse, bool, *apiError) {
	ib, aerr := parseInit(body)
	if aerr != nil {
		return upgrade.InitResponse{}, false, aerr
	}
	return s.applyInitLocked(id, ib)
}

// applyInitLocked merges an init into the stored user: fields not sent keep
// their stored values.
func (s *Sim) applyInitLocked(id string, ib initBody) (upgrade.InitResponse, bool, *apiError) {
	old := s.st.Users[id]
	next := &user{}
	if old != nil {
		next.Group, next.WorkingGroup = old.Group, old.WorkingGroup
	}
	if ib.groupSet {
		next.Group = ib.group
	}
	if ib.wgSet {
		next.WorkingGroup = ib.workingGroup
	}
	for _, k := range slices.Sorted(maps.Keys(next.WorkingGroup)) {
		if v := next.WorkingGroup[k]; !slices.Contains(next.Group[k], v) {
			return upgrade.InitResponse{}, false, &apiError{Status: 400, Name: "BadRequestError", Type: typeWorkingGroup,
				Message: fmt.Sprintf("%s: working group %s=%s is not a member of the user's group %s", typeWorkingGroup, k, v, k)}
		}
	}
	changed := old == nil ||
		!maps.EqualFunc(old.Group, next.Group, slices.Equal[[]string]) ||
		!maps.Equal(old.WorkingGroup, next.WorkingGroup) ||
		(old.Group == nil) != (next.Group == nil) ||
		(old.WorkingGroup == nil) != (next.WorkingGroup == nil)
	if changed {
		s.st.Users[id] = next
	}
	return userResponse(id, next), changed, nil
}

func (s *Sim) handleInit(c *call) {
	uid, ok := requireUser(c)
	if !ok {
		return
	}
	ib, aerr := parseInit(c.body)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	var out upgrade.InitResponse
	err := s.mutate(func() (bool, *apiError) {
		resp, changed, aerr := s.applyInitLocked(uid, ib)
		out = resp
		return changed, aerr
	})
	if err != nil {
		c.failErr(err)
		return
	}
	// The server leaves out what was never set rather than sending null.
	c.ok(struct {
		ID           string              `json:"id"`
		Group        map[string][]string `json:"group,omitempty"`
		WorkingGroup map[string]string   `json:"workingGroup,omitempty"`
	}{out.ID, out.Group, out.WorkingGroup})
}

// ---- assign ----

func (s *Sim) handleAssign(c *call) {
	uid, ok := requireUser(c)
	if !ok {
		return
	}
	var body struct {
		Context any `json:"context"`
	}
	var bodyErr *apiError
	if err := json.Unmarshal(c.body, &body); err != nil {
		bodyErr = badBody(err.Error())
	} else if ctx, isStr := body.Context.(string); !isStr || ctx == "" {
		bodyErr = badBody("context: should not be empty and must be a string")
	}
	ctx, _ := body.Context.(string)
	var out []assignmentOut
	err := s.mutate(func() (bool, *apiError) {
		u := s.st.Users[uid]
		if u == nil {
			return false, userNotDefined(uid)
		}
		if bodyErr != nil {
			return false, bodyErr
		}
		var changed bool
		out, changed = s.assignLocked(uid, u, ctx)
		return changed, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	if out == nil {
		out = []assignmentOut{}
	}
	c.ok(out)
}

// offer is what one experiment would hand the user.
type offer struct {
	e        *upgrade.Experiment
	cond     *upgrade.Condition // nil: draw one
	existing bool               // the user (or group) already holds a condition here
	gid      string             // the user's working group of the experiment's group type
}

// assignLocked decides the conditions of a user for a context; changed
// reports whether anything was recorded.
func (s *Sim) assignLocked(uid string, u *user, ctx string) ([]assignmentOut, bool) {
	changed := false
	var offers []offer
	for _, e := range s.st.Experiments {
		if !slices.Contains(e.Context, ctx) {
			continue
		}
		switch e.State {
		case upgrade.StateInactive, upgrade.StateScheduled:
			if hasExcludeIfReached(e, nil) && s.excludeReachedLocked(e, uid, u) {
				changed = true
			}
		case upgrade.StateEnrolling, upgrade.StateEnrollmentComplete:
			if o, ok := s.offerLocked(e, uid, u); ok {
				offers = append(offers, o)
			}
		}
	}
	var out []assignmentOut
	for _, o := range s.resolvePoolsLocked(uid, offers, &changed) {
		cond := o.cond
		if cond == nil {
			cond = s.drawLocked(o.e, uid, o.gid)
			if cond == nil {
				continue // an experiment without conditions hands out nothing
			}
			changed = true
		}
		out = append(out, entries(o.e, cond)...)
	}
	return out, changed
}

func hasExcludeIfReached(e *upgrade.Experiment, at *string) bool {
	for _, p := range e.Partitions {
		if p.ExcludeIfReached && (at == nil || dpKey(p.Site, p.Target) == *at) {
			return true
		}
	}
	return false
}

// inSegment matches a user by id or by membership of a listed group (the
// user's group, not the working group).
func inSegment(seg upgrade.Segment, uid string, u *user) bool {
	if slices.Contains(seg.Users, uid) {
		return true
	}
	for _, g := range seg.Groups {
		if slices.Contains(u.Group[g.Type], g.GroupID) {
			return true
		}
	}
	return false
}

// segmentAllows applies the inclusion and exclusion lists; exclusion wins.
func segmentAllows(e *upgrade.Experiment, uid string, u *user) bool {
	if inSegment(e.Exclusion, uid, u) {
		return false
	}
	if e.FilterMode == upgrade.FilterExcludeAll {
		return inSegment(e.Inclusion, uid, u)
	}
	return true
}

func (s *Sim) excluded(e *upgrade.Experiment, uid, gid string) bool {
	rt := s.st.Runtime[e.ID]
	if rt == nil {
		return false
	}
	if rt.ExcludedUsers[uid] != "" {
		return true
	}
	return groupConsistent(e) && gid != "" && rt.ExcludedGroups[gid] != ""
}

// excludeReachedLocked excludes for good a user (and, with group
// consistency, their working group) who reached an inactive experiment with
// exclude-if-reached. Users or groups already holding a condition keep it.
func (s *Sim) excludeReachedLocked(e *upgrade.Experiment, uid string, u *user) bool {
	if !segmentAllows(e, uid, u) {
		return false
	}
	rt := s.runtimeOf(e.ID)
	changed := false
	_, assigned := rt.Users[uid]
	_, enrolled := rt.Enrolled[uid]
	if rt.ExcludedUsers[uid] == "" && !assigned && !enrolled {
		if rt.ExcludedUsers == nil {
			rt.ExcludedUsers = map[string]string{}
		}
		rt.ExcludedUsers[uid] = reasonReachedPrior
		changed = true
	}
	if groupConsistent(e) {
		gid := u.WorkingGroup[e.Group]
		_, groupAssigned := rt.Groups[gid]
		if gid != "" && rt.ExcludedGroups[gid] == "" && !groupAssigned {
			if rt.ExcludedGroups == nil {
				rt.ExcludedGroups = map[string]string{}
			}
			rt.ExcludedGroups[gid] = reasonReachedPrior
			changed = true
		}
	}
	return changed
}

// existingLocked is the condition the user (or their group) already holds.
func (s *Sim) existingLocked(e *upgrade.Experiment, uid, gid string) *upgrade.Condition {
	rt := s.st.Runtime[e.ID]
	if rt == nil {
		return nil
	}
	if groupConsistent(e) {
		if id, ok := rt.Groups[gid]; ok {
			return e.ConditionByID(id)
		}
		return nil
	}
	if id, ok := rt.Users[uid]; ok {
		return e.ConditionByID(id)
	}
	return nil
}

func (s *Sim) offerLocked(e *upgrade.Experiment, uid string, u *user) (offer, bool) {
	if !segmentAllows(e, uid, u) {
		return offer{}, false
	}
	gid := ""
	if e.AssignmentUnit == upgrade.UnitGroup {
		if gid = u.WorkingGroup[e.Group]; gid == "" {
			return offer{}, false // a group experiment needs the user's working group
		}
	}
	if s.excluded(e, uid, gid) {
		return offer{}, false
	}
	existing := s.existingLocked(e, uid, gid)
	if e.State == upgrade.StateEnrolling {
		return offer{e: e, cond: existing, existing: existing != nil, gid: gid}, true
	}
	switch e.PostExperimentRule {
	case upgrade.PostRuleContinue:
		if existing != nil {
			return offer{e: e, cond: existing, existing: true, gid: gid}, true
		}
	case upgrade.PostRuleAssign:
		if e.RevertTo != nil {
			if c := e.ConditionByID(*e.RevertTo); c != nil {
				return offer{e: e, cond: c, existing: existing != nil, gid: gid}, true
			}
		}
	}
	// revert, assign to the default, or continue for someone never
	// assigned: the default, which the server shows as no entry at all.
	return offer{}, false
}

// resolvePoolsLocked keeps one experiment per set of experiments sharing a
// decision point. The choice is random the first time and then remembered.
func (s *Sim) resolvePoolsLocked(uid string, offers []offer, changed *bool) []offer {
	if len(offers) < 2 {
		return offers
	}
	parent := make([]int, len(offers))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owner := map[string]int{}
	for i, o := range offers {
		for _, p := range o.e.Partitions {
			k := dpKey(p.Site, p.Target)
			if j, ok := owner[k]; ok {
				parent[find(i)] = find(j)
			} else {
				owner[k] = i
			}
		}
	}
	pools := map[int][]int{}
	var roots []int
	for i := range offers {
		r := find(i)
		if _, ok := pools[r]; !ok {
			roots = append(roots, r)
		}
		pools[r] = append(pools[r], i)
	}
	if len(roots) == len(offers) {
		return offers
	}
	picks := s.st.Picks[uid]
	var out []offer
	for _, r := range roots {
		pool := pools[r]
		if len(pool) == 1 {
			out = append(out, offers[pool[0]])
			continue
		}
		pick := -1
		for _, i := range pool {
			for _, p := range offers[i].e.Partitions {
				if picks[dpKey(p.Site, p.Target)] == offers[i].e.ID {
					pick = i
				}
			}
		}
		if pick < 0 {
			for _, i := range pool {
				if offers[i].existing {
					pick = i
					break
				}
			}
		}
		if pick < 0 {
			pick = pool[s.rng.IntN(len(pool))]
		}
		chosen := offers[pick].e.ID
		if picks == nil {
			picks = map[string]string{}
			s.st.Picks[uid] = picks
		}
		for _, i := range pool {
			for _, p := range offers[i].e.Partitions {
				if k := dpKey(p.Site, p.Target); picks[k] != chosen {
					picks[k] = chosen
					*changed = true
				}
			}
		}
		out = append(out, offers[pick])
	}
	return out
}

// drawLocked hands out a condition while enrolling and records it.
func (s *Sim) drawLocked(e *upgrade.Experiment, uid, gid string) *upgrade.Condition {
	if len(e.Conditions) == 0 {
		return nil
	}
	rt := s.runtimeOf(e.ID)
	if rt.Users == nil {
		rt.Users = map[string]string{}
	}
	if rt.Groups == nil {
		rt.Groups = map[string]string{}
	}
	switch {
	case groupConsistent(e):
		if c := e.ConditionByID(rt.Groups[gid]); c != nil {
			return c
		}
		c := s.weightedLocked(e)
		rt.Groups[gid] = c.ID
		return c
	case e.AssignmentUnit == upgrade.UnitGroup:
		// Individual consistency in a group unit: the first condition
		// follows the group, then the user keeps it.
		if c := e.ConditionByID(rt.Users[uid]); c != nil {
			return c
		}
		c := e.ConditionByID(rt.Groups[gid])
		if c == nil {
			c = s.weightedLocked(e)
			rt.Groups[gid] = c.ID
		}
		rt.Users[uid] = c.ID
		return c
	default:
		c := s.weightedLocked(e)
		rt.Users[uid] = c.ID
		return c
	}
}

// weightedLocked draws a condition in proportion to the weights; all-zero
// weights draw uniformly.
func (s *Sim) weightedLocked(e *upgrade.Experiment) *upgrade.Condition {
	total := 0.0
	for _, c := range e.Conditions {
		if c.AssignmentWeight > 0 {
			total += c.AssignmentWeight
		}
	}
	if total <= 0 {
		return &e.Conditions[s.rng.IntN(len(e.Conditions))]
	}
	r := s.rng.Float64() * total
	last := 0
	for i, c := range e.Conditions {
		if c.AssignmentWeight <= 0 {
			continue
		}
		last = i
		if r < c.AssignmentWeight {
			return &e.Conditions[i]
		}
		r -= c.AssignmentWeight
	}
	return &e.Conditions[last]
}

// entries is the answer for one experiment: one entry per decision point.
func entries(e *upgrade.Experiment, cond *upgrade.Condition) []assignmentOut {
	var payloads []conditionPayload
	if len(e.ConditionPayloads) > 0 {
		payloads = decodePayloads(e)
	}
	typ := e.Type
	if typ == "" {
		typ = upgrade.TypeSimple
	}
	out := make([]assignmentOut, 0, len(e.Partitions))
	for _, p := range e.Partitions {
		out = append(out, assignmentOut{
			Site:           p.Site,
			Target:         nullable(p.Target),
			ExperimentType: typ,
			AssignedCondition: []assignedCondOut{{
				ID: cond.ID, ConditionCode: cond.ConditionCode,
				Payload: payloadFor(payloads, cond.ID, p.ID), ExperimentID: e.ID,
			}},
		})
	}
	return out
}

func payloadFor(ps []conditionPayload, condID, dpID string) *upgrade.Payload {
	var general *upgrade.Payload
	for _, p := range ps {
		if p.ParentCondition != condID || p.Payload == nil || p.Payload.Value == "" {
			continue
		}
		if p.DecisionPoint == dpID {
			return &upgrade.Payload{Type: p.Payload.Type, Value: p.Payload.Value}
		}
		if p.DecisionPoint == "" && general == nil {
			general = &upgrade.Payload{Type: p.Payload.Type, Value: p.Payload.Value}
		}
	}
	return general
}

// ---- mark ----

type markBody struct {
	site, target string
	condCode     string
	experimentID string
	status       string
}

func parseMark(body []byte) (markBody, *apiError) {
	var mb markBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return mb, badBody(err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return mb, badBody("the body is not a JSON object")
	}
	ck := &checker{}
	if data := ck.object(m, "", "data", true); data != nil {
		mb.site = ck.str(data, "data", "site", true)
		mb.target = ck.str(data, "data", "target", false)
		if ac := ck.object(data, "data", "assignedCondition", false); ac != nil {
			ck.str(ac, "data.assignedCondition", "id", false)
			mb.condCode = ck.str(ac, "data.assignedCondition", "conditionCode", false)
			mb.experimentID = ck.str(ac, "data.assignedCondition", "experimentId", false)
		}
	}
	mb.status = ck.enum(m, "", "status", markStatuses, false)
	ck.str(m, "", "uniquifier", false)
	ck.str(m, "", "clientError", false)
	return mb, ck.err()
}

func (s *Sim) handleMark(c *call) {
	uid, ok := requireUser(c)
	if !ok {
		return
	}
	mb, bodyErr := parseMark(c.body)
	var out markOut
	err := s.mutate(func() (bool, *apiError) {
		u := s.st.Users[uid]
		if u == nil {
			return false, userNotDefined(uid)
		}
		if bodyErr != nil {
			return false, bodyErr
		}
		var aerr *apiError
		out, aerr = s.markLocked(uid, u, mb)
		return aerr == nil, aerr
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

func hasDecisionPoint(e *upgrade.Experiment, key string) *upgrade.DecisionPoint {
	for i, p := range e.Partitions {
		if dpKey(p.Site, p.Target) == key {
			return &e.Partitions[i]
		}
	}
	return nil
}

// markLocked records a mark. Marks while an experiment enrolls (or has
// completed enrollment) enroll the user in the condition marked as applied;
// "condition not applied" excludes them instead.
func (s *Sim) markLocked(uid string, u *user, mb markBody) (markOut, *apiError) {
	key := dpKey(mb.site, mb.target)
	var cands []*upgrade.Experiment
	for _, e := range s.st.Experiments {
		if (e.State == upgrade.StateEnrolling || e.State == upgrade.StateEnrollmentComplete) && hasDecisionPoint(e, key) != nil {
			cands = append(cands, e)
		}
	}
	var chosen *upgrade.Experiment
	expID := mb.experimentID
	if len(cands) > 0 {
		if expID != "" {
			if i := slices.IndexFunc(cands, func(e *upgrade.Experiment) bool { return e.ID == expID }); i >= 0 {
				chosen = cands[i]
			} else {
				return markOut{}, &apiError{Status: 404, Name: "Error", Type: typeSharedDPInvalid,
					Message: "Experiment ID not provided for shared Decision Point in markExperimentPoint: " + uid}
			}
		} else {
			chosen = s.markTargetLocked(uid, u, key, cands)
			expID = chosen.ID
		}
	}
	if chosen != nil && mb.condCode != "" && chosen.ConditionByCode(mb.condCode) == nil {
		return markOut{}, &apiError{Status: 500, Name: "Error", Type: typeConditionMissing,
			Message: "Condition not found: " + mb.condCode}
	}
	// Everything is checked; from here on the mark is recorded.
	for _, e := range s.st.Experiments {
		if (e.State == upgrade.StateInactive || e.State == upgrade.StateScheduled) && hasExcludeIfReached(e, &key) {
			s.excludeReachedLocked(e, uid, u)
		}
	}
	if chosen != nil {
		s.enrollLocked(chosen, uid, u, key, mb)
	}
	mk := s.st.Marks[uid+"\x1f"+key]
	if mk == nil {
		mk = &mark{ID: s.newID(), UserID: uid, Site: mb.site, Target: mb.target}
		s.st.Marks[uid+"\x1f"+key] = mk
	}
	mk.ExperimentID, mk.Condition, mk.Status = expID, mb.condCode, mb.status
	return markOut{ID: mk.ID, UserID: uid, Site: mb.site, Target: nullable(mb.target),
		ExperimentID: nullable(expID), Condition: nullable(mb.condCode)}, nil
}

// markTargetLocked picks which of several experiments on one decision point
// a mark without an experiment id belongs to: the user's remembered pick,
// else one holding a condition for them, else a fixed choice per user.
func (s *Sim) markTargetLocked(uid string, u *user, key string, cands []*upgrade.Experiment) *upgrade.Experiment {
	if id := s.st.Picks[uid][key]; id != "" {
		if i := slices.IndexFunc(cands, func(e *upgrade.Experiment) bool { return e.ID == id }); i >= 0 {
			return cands[i]
		}
	}
	for _, e := range cands {
		gid := ""
		if e.AssignmentUnit == upgrade.UnitGroup {
			gid = u.WorkingGroup[e.Group]
		}
		if s.existingLocked(e, uid, gid) != nil {
			return e
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	return cands[int(h.Sum32()%uint32(len(cands)))]
}

func (s *Sim) enrollLocked(e *upgrade.Experiment, uid string, u *user, key string, mb markBody) {
	gid := ""
	if e.AssignmentUnit == upgrade.UnitGroup {
		if gid = u.WorkingGroup[e.Group]; gid == "" {
			return
		}
	}
	if !segmentAllows(e, uid, u) || s.excluded(e, uid, gid) {
		return
	}
	rt := s.runtimeOf(e.ID)
	switch {
	case mb.status == upgrade.MarkConditionNotApplied:
		if rt.ExcludedUsers == nil {
			rt.ExcludedUsers = map[string]string{}
		}
		rt.ExcludedUsers[uid] = reasonNotApplied
		delete(rt.Enrolled, uid)
	case mb.status == upgrade.MarkConditionApplied || (mb.status == "" && mb.condCode != ""):
		var cond *upgrade.Condition
		if mb.condCode != "" {
			cond = e.ConditionByCode(mb.condCode)
		} else {
			cond = s.existingLocked(e, uid, gid)
		}
		dp := hasDecisionPoint(e, key)
		if cond == nil || dp == nil {
			return
		}
		if rt.Enrolled == nil {
			rt.Enrolled = map[string]*enrollment{}
		}
		en := rt.Enrolled[uid]
		if en == nil || en.ConditionID != cond.ID {
			en = &enrollment{ConditionID: cond.ID, Partitions: []string{}}
			rt.Enrolled[uid] = en
		}
		en.GroupID = gid
		if !slices.Contains(en.Partitions, dp.ID) {
			en.Partitions = append(en.Partitions, dp.ID)
		}
		s.checkEnrollmentCompleteLocked(e, rt)
	}
}

// checkEnrollmentCompleteLocked ends enrollment once the experiment's
// enrollmentCompleteCondition counts are reached.
func (s *Sim) checkEnrollmentCompleteLocked(e *upgrade.Experiment, rt *runtime) {
	ecc := e.EnrollmentCompleteCondition
	if e.State != upgrade.StateEnrolling || ecc == nil || (ecc.UserCount <= 0 && ecc.GroupCount <= 0) {
		return
	}
	groups := map[string]bool{}
	for _, en := range rt.Enrolled {
		if en.GroupID != "" {
			groups[en.GroupID] = true
		}
	}
	if len(rt.Enrolled) >= ecc.UserCount && len(groups) >= ecc.GroupCount {
		_, _ = s.setStateLocked(e.ID, upgrade.StateEnrollmentComplete, nil)
	}
}

// ---- stats ----

func (s *Sim) handleStats(c *call) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	ck := &checker{}
	id := ck.str(m, "", "experimentId", true)
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	var out upgrade.EnrollmentStats
	if err := s.view(func() { out, aerr = s.statsLocked(id) }); err != nil {
		c.failErr(err)
		return
	}
	if aerr != nil {
		c.fail(aerr)
		return
	}
	c.ok(out)
}

// statsLocked counts enrollments (from marks) per condition and decision
// point, and the exclusions recorded.
func (s *Sim) statsLocked(id string) (upgrade.EnrollmentStats, *apiError) {
	e := s.idx[id]
	if e == nil {
		// The server dereferences the missing experiment.
		return upgrade.EnrollmentStats{}, &apiError{Status: 500, Name: "TypeError",
			Message: "Cannot read properties of undefined (reading 'conditions')"}
	}
	rt := s.st.Runtime[id]
	if rt == nil {
		rt = &runtime{}
	}
	withGroups := e.AssignmentUnit == upgrade.UnitGroup
	distinct := func(keep func(*enrollment) bool) (int, int) {
		users, groups := 0, map[string]bool{}
		for _, en := range rt.Enrolled {
			if !keep(en) {
				continue
			}
			users++
			if withGroups && en.GroupID != "" {
				groups[en.GroupID] = true
			}
		}
		return users, len(groups)
	}
	out := upgrade.EnrollmentStats{ID: id, UsersExcluded: len(rt.ExcludedUsers), GroupsExcluded: len(rt.ExcludedGroups),
		Conditions: []upgrade.ConditionStats{}}
	out.Users, out.Groups = distinct(func(*enrollment) bool { return true })
	for _, cond := range e.Conditions {
		cs := upgrade.ConditionStats{ID: cond.ID, Partitions: []upgrade.PartitionStats{}}
		cs.Users, cs.Groups = distinct(func(en *enrollment) bool { return en.ConditionID == cond.ID })
		for _, p := range e.Partitions {
			ps := upgrade.PartitionStats{ID: p.ID}
			ps.Users, ps.Groups = distinct(func(en *enrollment) bool {
				return en.ConditionID == cond.ID && slices.Contains(en.Partitions, p.ID)
			})
			cs.Partitions = append(cs.Partitions, ps)
		}
		out.Conditions = append(out.Conditions, cs)
	}
	return out, nil
}
