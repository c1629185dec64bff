package sim

import (
	"bytes"
	"encoding/binary"
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
	reasonReachedAfter = "reached after enrollment complete"
	reasonNotApplied   = "condition not applied"
	reasonSegment      = "participant on exclusion list"
	reasonGroupLogic   = "excluded due to group logic"
	reasonInvalidGroup = "invalid group or working group"
	reasonNoGroup      = "no group specified"
)

type assignedCondOut struct {
	ID string `json:"id"`
	// ConditionCode is the code, or with a one-factor factorial the
	// level's payload object.
	ConditionCode any              `json:"conditionCode"`
	Payload       *upgrade.Payload `json:"payload"`
	ExperimentID  string           `json:"experimentId"`
}

type assignmentOut struct {
	Site              string            `json:"site"`
	Target            *string           `json:"target"`
	ExperimentType    string            `json:"experimentType"`
	AssignedCondition []assignedCondOut `json:"assignedCondition"`
	AssignedFactor    []any             `json:"assignedFactor,omitempty"`
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

// requireUser reads the User-Id header the client routes demand.
func requireUser(c *call) (string, bool) {
	id := c.r.Header.Get("User-Id")
	if id == "" {
		c.fail(&apiError{Status: 400, Name: "Error", Message: "User-Id header not found.", Type: typeIncorrectParam})
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
	// A working group outside the user's groups is stored as sent; group
	// experiments then treat the user as having no valid group.
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
	existed := false
	err := s.mutate(func() (bool, *apiError) {
		existed = s.st.Users[uid] != nil
		resp, changed, aerr := s.applyInitLocked(uid, ib)
		out = resp
		return changed, aerr
	})
	if err != nil {
		c.failErr(err)
		return
	}
	if existed {
		// A known user (also one a stratification upload made) is
		// answered with the stored group and workingGroup, null when
		// never set: the server spreads its user document under the body
		// (probed on a real 6.5.0, docs/upgrade-real.md).
		res := obj{"id": out.ID, "group": nil, "workingGroup": nil}
		if out.Group != nil {
			res["group"] = out.Group
		}
		if out.WorkingGroup != nil {
			res["workingGroup"] = out.WorkingGroup
		}
		c.ok(res)
		return
	}
	// A new user's answer leaves out what was not sent.
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
	if bodyErr == nil {
		if _, known := s.meta[ctx]; !known {
			bodyErr = &apiError{Status: 400, Name: "Error", Type: typeIncorrectParam, Message: "Invalid app context: " + ctx}
		}
	}
	// Assign records nothing: a condition is only stored when the user
	// marks it, so this is a read.
	var (
		out  []assignmentOut
		aerr *apiError
	)
	err := s.view(func() {
		u := s.st.Users[uid]
		switch {
		case u == nil:
			aerr = userNotDefined(uid)
		case bodyErr != nil:
			aerr = bodyErr
		default:
			out = s.assignLocked(uid, u, ctx)
		}
	})
	if err == nil && aerr != nil {
		err = aerr
	}
	if err != nil {
		c.failErr(err)
		return
	}
	if out == nil {
		out = []assignmentOut{}
	}
	c.ok(out)
}

// unit maps the seed and some keys to a number in [0, 1). The server draws
// from a generator seeded with the experiment and user (or group) ids, so
// a draw is the same on every call until the weights change; this is the
// same idea with the simulator's seed mixed in.
func (s *Sim) unit(keys ...string) float64 {
	h := fnv.New64a()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(s.seed))
	_, _ = h.Write(seed[:])
	for _, k := range keys {
		_, _ = h.Write([]byte(k))
		_, _ = h.Write([]byte{0})
	}
	x := h.Sum64()
	// splitmix64's finaliser: FNV alone barely changes the high bits for
	// ids that differ in their last character.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// workingGroupOf is the user's working group of the experiment's group
// type ("" when none).
func workingGroupOf(e *upgrade.Experiment, u *user) string {
	if e.Group == "" {
		return ""
	}
	return u.WorkingGroup[e.Group]
}

// validGroup says whether a user can take part in a group experiment: they
// have groups and working groups, and the working group of the
// experiment's type is one of their groups of that type.
func validGroup(e *upgrade.Experiment, u *user) bool {
	if len(u.Group) == 0 || len(u.WorkingGroup) == 0 {
		return false
	}
	wg, ok := u.WorkingGroup[e.Group]
	if !ok {
		return false
	}
	return slices.Contains(u.Group[e.Group], wg)
}

// assignLocked decides the conditions of a user for a context, without
// recording anything.
func (s *Sim) assignLocked(uid string, u *user, ctx string) []assignmentOut {
	var cands []*upgrade.Experiment
	for _, e := range s.st.Experiments {
		if !slices.Contains(e.Context, ctx) {
			continue
		}
		if e.State != upgrade.StateEnrolling && e.State != upgrade.StateEnrollmentComplete {
			continue
		}
		en := s.enrollmentOf(e, uid)
		if e.AssignmentUnit == upgrade.UnitGroup && en == nil && !validGroup(e, u) {
			continue
		}
		if !segmentAllows(s.withSubSegments(e), uid, u) {
			continue
		}
		cands = append(cands, e)
	}
	var out []assignmentOut
	for _, e := range s.poolPicksLocked(uid, u, cands) {
		if e.AssignmentUnit == upgrade.UnitWithinSubjects {
			if rt := s.st.Runtime[e.ID]; e.State == upgrade.StateEnrolling && (rt == nil || rt.ExcludedUsers[uid] == "") {
				out = append(out, s.wsEntries(e, uid)...)
			}
			continue
		}
		var held *upgrade.Condition
		if en := s.enrollmentOf(e, uid); en != nil {
			held = e.ConditionByID(en.ConditionID)
		}
		if cond := s.decideLocked(e, uid, u, held); cond != nil {
			out = append(out, entries(e, cond)...)
		}
	}
	return out
}

func (s *Sim) enrollmentOf(e *upgrade.Experiment, uid string) *enrollment {
	if rt := s.st.Runtime[e.ID]; rt != nil {
		return rt.Enrolled[uid]
	}
	return nil
}

// decideLocked is the condition an experiment gives a user who holds held
// (nil: none) at the decision point in question, following the server's
// order of individual and group enrollments and exclusions for each
// consistency rule, and the post-experiment rule once enrollment is
// complete. A fresh draw is only made while enrolling.
func (s *Sim) decideLocked(e *upgrade.Experiment, uid string, u *user, held *upgrade.Condition) *upgrade.Condition {
	rt := s.st.Runtime[e.ID]
	if rt == nil {
		rt = &runtime{}
	}
	wg := workingGroupOf(e, u)
	userOut := rt.ExcludedUsers[uid] != ""
	groupOut := wg != "" && rt.ExcludedGroups[wg] != ""
	var groupHeld *upgrade.Condition
	if wg != "" {
		if id, ok := rt.Groups[wg]; ok {
			groupHeld = e.ConditionByID(id)
		}
	}
	// first returns the first rule that applies: an exclusion (nil) or a
	// held condition.
	type step struct {
		excluded bool
		cond     *upgrade.Condition
	}
	first := func(steps ...step) (*upgrade.Condition, bool) {
		for _, st := range steps {
			if st.excluded {
				return nil, true
			}
			if st.cond != nil {
				return st.cond, true
			}
		}
		return nil, false
	}
	var (
		cond    *upgrade.Condition
		decided bool
	)
	switch e.ConsistencyRule {
	case upgrade.ConsistencyIndividual:
		cond, decided = first(step{excluded: userOut}, step{cond: held}, step{excluded: groupOut}, step{cond: groupHeld})
	case upgrade.ConsistencyGroup:
		cond, decided = first(step{excluded: groupOut}, step{cond: groupHeld}, step{excluded: userOut}, step{cond: held})
	default:
		if e.AssignmentUnit == upgrade.UnitIndividual {
			cond = held
		} else {
			cond = groupHeld
		}
		decided = cond != nil
	}
	switch e.State {
	case upgrade.StateEnrollmentComplete:
		switch e.PostExperimentRule {
		case upgrade.PostRuleContinue:
			return cond
		case upgrade.PostRuleAssign:
			if e.RevertTo != nil {
				return e.ConditionByID(*e.RevertTo)
			}
		}
		return nil
	case upgrade.StateEnrolling:
		if decided {
			return cond
		}
		return s.drawLocked(e, uid, u)
	}
	return nil
}

// poolPicksLocked keeps one experiment of each set sharing decision points:
// the one the user (or their group) is enrolled in, the running one when
// several are, else one of the running experiments that has not excluded
// them, picked by a number fixed per user.
func (s *Sim) poolPicksLocked(uid string, u *user, exps []*upgrade.Experiment) []*upgrade.Experiment {
	if len(exps) == 0 {
		return nil
	}
	parent := make([]int, len(exps))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owner := map[string]int{}
	for i, e := range exps {
		for _, p := range e.Partitions {
			k := dpKey(p.Site, p.Target)
			if j, ok := owner[k]; ok {
				parent[find(i)] = find(j)
			} else {
				owner[k] = i
			}
		}
	}
	pools := map[int][]*upgrade.Experiment{}
	var roots []int
	for i, e := range exps {
		r := find(i)
		if _, ok := pools[r]; !ok {
			roots = append(roots, r)
		}
		pools[r] = append(pools[r], e)
	}
	pick := s.unit("pool", uid)
	var out []*upgrade.Experiment
	for _, r := range roots {
		pool := pools[r]
		var held, open []*upgrade.Experiment
		for _, e := range pool {
			rt := s.st.Runtime[e.ID]
			wg := workingGroupOf(e, u)
			hasGroup := false
			if rt != nil && wg != "" {
				_, hasGroup = rt.Groups[wg]
			}
			if s.enrollmentOf(e, uid) != nil || hasGroup {
				held = append(held, e)
				continue
			}
			if e.State != upgrade.StateEnrolling || rt != nil && (rt.ExcludedUsers[uid] != "" || wg != "" && rt.ExcludedGroups[wg] != "") {
				continue
			}
			open = append(open, e)
		}
		switch {
		case len(held) == 1:
			out = append(out, held[0])
		case len(held) > 1:
			if i := slices.IndexFunc(held, func(e *upgrade.Experiment) bool { return e.State == upgrade.StateEnrolling }); i >= 0 {
				out = append(out, held[i])
			}
		case len(open) > 0:
			out = append(out, open[int(pick*float64(len(open)))])
		}
	}
	return out
}

func hasExcludeIfReached(e *upgrade.Experiment) bool {
	for _, p := range e.Partitions {
		if p.ExcludeIfReached {
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

// excludeReachedLocked runs when an experiment starts enrolling: everyone
// who ever marked one of its exclude-if-reached decision points is
// excluded (and, with group consistency, their working group), enrolled
// or not.
func (s *Sim) excludeReachedLocked(e *upgrade.Experiment) {
	if !hasExcludeIfReached(e) {
		return
	}
	sites, targets := map[string]bool{}, map[string]bool{}
	for _, p := range e.Partitions {
		if p.ExcludeIfReached {
			sites[p.Site], targets[p.Target] = true, true
		}
	}
	rt := s.runtimeOf(e.ID)
	for _, mk := range s.st.Marks {
		// The server matches sites and targets separately.
		if !sites[mk.Site] || !targets[mk.Target] {
			continue
		}
		u := s.st.Users[mk.UserID]
		if e.ConsistencyRule == upgrade.ConsistencyGroup && u != nil {
			if wg := workingGroupOf(e, u); wg != "" {
				setReason(&rt.ExcludedGroups, wg, reasonReachedPrior)
			}
		}
		if e.ConsistencyRule == upgrade.ConsistencyIndividual || e.ConsistencyRule == upgrade.ConsistencyGroup ||
			e.AssignmentUnit == upgrade.UnitWithinSubjects {
			setReason(&rt.ExcludedUsers, mk.UserID, reasonReachedPrior)
		}
	}
}

func setReason(m *map[string]string, k, reason string) {
	if *m == nil {
		*m = map[string]string{}
	}
	if (*m)[k] == "" {
		(*m)[k] = reason
	}
}

// drawLocked is the weighted draw of the server: conditions in their order,
// a number below 100, the first condition whose running weight total
// reaches it. Weights that add up to less than 100 leave the rest to the
// first condition. The number is the server's: seedrandom(experimentId +
// "_" + userId), the working group's id for a group unit, so the same ids
// draw the same condition here and on UpGrade, whatever the simulator's
// seed.
func (s *Sim) drawLocked(e *upgrade.Experiment, uid string, u *user) *upgrade.Condition {
	if len(e.Conditions) == 0 {
		return nil
	}
	key := uid
	if e.AssignmentUnit == upgrade.UnitGroup {
		key = workingGroupOf(e, u)
	}
	order := make([]int, len(e.Conditions))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return e.Conditions[a].Order - e.Conditions[b].Order })
	r := seedRandom(e.ID+"_"+key) * 100
	sum := 0.0
	for _, i := range order {
		sum += e.Conditions[i].AssignmentWeight
		if r <= sum {
			return &e.Conditions[i]
		}
	}
	return &e.Conditions[order[0]]
}

// entries is the answer for one experiment: one entry per decision point.
// Payloads are delivered per decision point only.
func entries(e *upgrade.Experiment, cond *upgrade.Condition) []assignmentOut {
	var payloads []conditionPayload
	if len(e.ConditionPayloads) > 0 {
		payloads = decodePayloads(e)
	}
	typ := e.Type
	if typ == "" {
		typ = upgrade.TypeSimple
	}
	var code any = cond.ConditionCode
	var factors []any
	if typ == upgrade.TypeFactorial {
		code, factors = factorialAssignment(e, cond)
	}
	out := make([]assignmentOut, 0, len(e.Partitions))
	for _, p := range e.Partitions {
		out = append(out, assignmentOut{
			Site:           p.Site,
			Target:         nullable(p.Target),
			ExperimentType: typ,
			AssignedCondition: []assignedCondOut{{
				ID: cond.ID, ConditionCode: code,
				Payload: payloadFor(payloads, cond.ID, p.ID), ExperimentID: e.ID,
			}},
			AssignedFactor: factors,
		})
	}
	return out
}

// wsEntries is a within-subjects answer: at each decision point, the
// conditions in the order the user gets them.
func (s *Sim) wsEntries(e *upgrade.Experiment, uid string) []assignmentOut {
	payloads := decodePayloads(e)
	out := make([]assignmentOut, 0, len(e.Partitions))
	for i := range e.Partitions {
		p := &e.Partitions[i]
		conds := []assignedCondOut{}
		for _, c := range s.withinSubjectsCodes(e, uid, p) {
			conds = append(conds, assignedCondOut{ID: c.ID, ConditionCode: c.ConditionCode,
				Payload: payloadFor(payloads, c.ID, p.ID), ExperimentID: e.ID})
		}
		out = append(out, assignmentOut{Site: p.Site, Target: nullable(p.Target), ExperimentType: upgrade.TypeSimple, AssignedCondition: conds})
	}
	return out
}

func payloadFor(ps []conditionPayload, condID, dpID string) *upgrade.Payload {
	for _, p := range ps {
		if p.ParentCondition == condID && p.DecisionPoint == dpID && p.Payload != nil {
			return &upgrade.Payload{Type: p.Payload.Type, Value: p.Payload.Value}
		}
	}
	return nil
}

// ---- mark ----

type markBody struct {
	site, target string
	condCode     string
	experimentID string
	status       string
	uniquifier   string
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
		// The v6 validator wants the target too.
		mb.target = ck.str(data, "data", "target", true)
		if ac := ck.object(data, "data", "assignedCondition", false); ac != nil {
			ck.str(ac, "data.assignedCondition", "id", false)
			mb.condCode = ck.str(ac, "data.assignedCondition", "conditionCode", false)
			mb.experimentID = ck.str(ac, "data.assignedCondition", "experimentId", false)
		}
	}
	mb.status = ck.enum(m, "", "status", markStatuses, false)
	mb.uniquifier = ck.str(m, "", "uniquifier", false)
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

// knowsCode says whether a mark's condition code means something to the
// experiment: a condition code or a payload value.
func knowsCode(e *upgrade.Experiment, code string) bool {
	if e.ConditionByCode(code) != nil {
		return true
	}
	for _, p := range decodePayloads(e) {
		if p.Payload != nil && p.Payload.Value == code {
			return true
		}
	}
	return false
}

// markLocked records a mark. The experiment is any one holding the
// decision point, whatever its state or context: the one named, or one
// picked by a number fixed per user. Only a running experiment (or one
// whose enrollment is complete) enrolls or excludes; every mark is kept,
// and exclude-if-reached reads them when an experiment starts.
func (s *Sim) markLocked(uid string, u *user, mb markBody) (markOut, *apiError) {
	key := dpKey(mb.site, mb.target)
	var cands []*upgrade.Experiment
	for _, e := range s.st.Experiments {
		if hasDecisionPoint(e, key) != nil {
			cands = append(cands, e)
		}
	}
	var chosen *upgrade.Experiment
	expID := mb.experimentID
	if len(cands) > 0 {
		if expID != "" {
			i := slices.IndexFunc(cands, func(e *upgrade.Experiment) bool { return e.ID == expID })
			if i < 0 {
				return markOut{}, &apiError{Status: 404, Name: "Error", Type: typeQueryFailed,
					Message: "Experiment ID not provided for shared Decision Point in markExperimentPoint: " + uid}
			}
			chosen = cands[i]
		} else {
			chosen = cands[int(s.unit("mark", uid)*float64(len(cands)))]
			expID = chosen.ID
		}
	}
	if chosen != nil && mb.condCode != "" && !knowsCode(chosen, mb.condCode) {
		return markOut{}, &apiError{Status: 500, Name: "Error", Type: typeConditionMissing,
			Message: "Condition not found: " + mb.condCode}
	}
	// Everything is checked; from here on the mark is recorded.
	mk := s.st.Marks[uid+"\x1f"+key]
	if mk == nil {
		mk = &mark{ID: s.newID(), UserID: uid, Site: mb.site, Target: mb.target}
		s.st.Marks[uid+"\x1f"+key] = mk
	}
	mk.ExperimentID, mk.Condition, mk.Status = expID, mb.condCode, mb.status
	if chosen != nil && chosen.State == upgrade.StateArchived {
		// An archived experiment enrols nobody; the answer names the
		// condition sent, as every mark's does.
		return markOut{ID: mk.ID, UserID: uid, Site: mb.site, Target: nullable(mb.target),
			ExperimentID: nullable(expID), Condition: nullable(mb.condCode)}, nil
	}
	if chosen != nil && chosen.AssignmentUnit == upgrade.UnitWithinSubjects {
		s.withinSubjectsMarkLocked(chosen, uid, u, hasDecisionPoint(chosen, key), mb)
	} else if chosen != nil && (chosen.State == upgrade.StateEnrolling || chosen.State == upgrade.StateEnrollmentComplete) {
		s.enrollLocked(chosen, uid, u, hasDecisionPoint(chosen, key), mb)
		if chosen.EnrollmentCompleteCondition != nil {
			s.checkEnrollmentCompleteLocked(chosen)
		}
	}
	return markOut{ID: mk.ID, UserID: uid, Site: mb.site, Target: nullable(mb.target),
		ExperimentID: nullable(expID), Condition: nullable(mb.condCode)}, nil
}

// enrollLocked applies a mark to a running (or enrollment-complete)
// experiment the way the server does. What is stored is the condition the
// experiment gives the user, whatever code was marked; only "condition not
// applied" excludes instead. After enrollment is complete a user (or group)
// reaching the point without an enrollment is excluded.
func (s *Sim) enrollLocked(e *upgrade.Experiment, uid string, u *user, dp *upgrade.DecisionPoint, mb markBody) {
	rt := s.runtimeOf(e.ID)
	if mb.status == upgrade.MarkConditionNotApplied {
		setReason(&rt.ExcludedUsers, uid, reasonNotApplied)
		return
	}
	if !segmentAllows(s.withSubSegments(e), uid, u) {
		setReason(&rt.ExcludedUsers, uid, reasonSegment)
		return
	}
	groupUnit := e.AssignmentUnit == upgrade.UnitGroup
	noGroup := groupUnit && (len(u.Group) == 0 || len(u.WorkingGroup) == 0)
	invalid := groupUnit && !noGroup && !validGroup(e, u)
	wg := workingGroupOf(e, u)
	en := rt.Enrolled[uid]
	heldHere := en != nil && slices.Contains(en.Partitions, dp.ID)
	userOut := rt.ExcludedUsers[uid] != ""
	_, groupHeld := rt.Groups[wg]
	groupHeld = groupHeld && wg != ""
	groupOut := wg != "" && rt.ExcludedGroups[wg] != ""

	if e.State == upgrade.StateEnrollmentComplete && e.ConsistencyRule != upgrade.ConsistencyExperiment {
		if groupUnit && wg != "" && !invalid && !groupHeld && !groupOut {
			setReason(&rt.ExcludedGroups, wg, reasonReachedAfter)
		}
		if !heldHere && !userOut && (!groupUnit || !groupHeld) {
			setReason(&rt.ExcludedUsers, uid, reasonReachedAfter)
		}
		return
	}
	var held *upgrade.Condition
	if heldHere {
		held = e.ConditionByID(en.ConditionID)
	}
	var cond *upgrade.Condition
	if !groupUnit || (!noGroup && !invalid) {
		cond = s.decideLocked(e, uid, u, held)
	}
	if groupUnit {
		if !groupHeld && !groupOut && cond != nil && !noGroup && !invalid {
			if rt.Groups == nil {
				rt.Groups = map[string]string{}
			}
			rt.Groups[wg] = cond.ID
		}
		if groupOut && !userOut && e.ConsistencyRule != upgrade.ConsistencyExperiment {
			setReason(&rt.ExcludedUsers, uid, reasonGroupLogic)
			userOut = true
		}
		if !heldHere && !userOut && (invalid || noGroup) && e.ConsistencyRule != upgrade.ConsistencyExperiment {
			reason := reasonNoGroup
			if invalid {
				reason = reasonInvalidGroup
			}
			setReason(&rt.ExcludedUsers, uid, reason)
			return
		}
	}
	if heldHere || userOut || cond == nil || noGroup || invalid {
		return
	}
	if rt.Enrolled == nil {
		rt.Enrolled = map[string]*enrollment{}
	}
	if en == nil {
		en = &enrollment{At: s.timestamp(), ConditionID: cond.ID, Partitions: []string{}}
		rt.Enrolled[uid] = en
	}
	en.GroupID = wg
	en.Partitions = append(en.Partitions, dp.ID)
}

// checkEnrollmentCompleteLocked ends enrollment once the experiment's
// enrollmentCompleteCondition is met: for a group unit with both counts,
// that many groups each with that many enrolled users; otherwise that many
// enrolled users, or that many users who marked its decision points.
func (s *Sim) checkEnrollmentCompleteLocked(e *upgrade.Experiment) {
	ecc := e.EnrollmentCompleteCondition
	if e.State != upgrade.StateEnrolling || ecc == nil {
		return
	}
	rt := s.runtimeOf(e.ID)
	done := false
	switch {
	case e.AssignmentUnit == upgrade.UnitGroup && ecc.GroupCount > 0 && ecc.UserCount > 0:
		perGroup := map[string]int{}
		for _, en := range rt.Enrolled {
			if en.GroupID != "" {
				perGroup[en.GroupID]++
			}
		}
		full := 0
		for _, n := range perGroup {
			if n >= ecc.UserCount {
				full++
			}
		}
		done = full >= ecc.GroupCount
	case ecc.UserCount > 0:
		marked := map[string]bool{}
		for _, mk := range s.st.Marks {
			if hasDecisionPoint(e, dpKey(mk.Site, mk.Target)) != nil {
				marked[mk.UserID] = true
			}
		}
		done = len(rt.Enrolled) >= ecc.UserCount || len(marked) >= ecc.UserCount
	}
	if done {
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
		if !upgrade.IsUUID(id) {
			// PostgreSQL refuses the id before any row is read.
			return upgrade.EnrollmentStats{}, &apiError{Status: 500, Name: "QueryFailedError",
				Message: fmt.Sprintf("invalid input syntax for type uuid: %q", id)}
		}
		return upgrade.EnrollmentStats{}, typeError("Cannot read properties of null (reading 'conditions')")
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
			if withGroups {
				// Group units count the enrollments of groups that
				// are enrolled themselves.
				if _, ok := rt.Groups[en.GroupID]; !ok || en.GroupID == "" {
					continue
				}
			}
			users++
			if withGroups && en.GroupID != "" {
				groups[en.GroupID] = true
			}
		}
		return users, len(groups)
	}
	out := upgrade.EnrollmentStats{ID: id, UsersExcluded: len(rt.ExcludedUsers), Conditions: []upgrade.ConditionStats{}}
	if withGroups {
		out.GroupsExcluded = len(rt.ExcludedGroups)
	}
	out.Users, out.Groups = distinct(func(*enrollment) bool { return true })
	if e.AssignmentUnit == upgrade.UnitWithinSubjects {
		return s.wsStats(e, rt, out), nil
	}
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
