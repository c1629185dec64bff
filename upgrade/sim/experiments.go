package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// conditionPayload is one element of an experiment's conditionPayloads.
type conditionPayload struct {
	ID              string           `json:"id"`
	Payload         *upgrade.Payload `json:"payload"`
	ParentCondition string           `json:"parentCondition"`
	DecisionPoint   string           `json:"decisionPoint,omitempty"`
}

// timestamp formats a time like the server does (ISO 8601, UTC, milliseconds).
func (s *Sim) timestamp() string {
	return s.now().UTC().Format("2006-01-02T15:04:05.000Z")
}

// normalizeStored makes every list of a stored experiment non-nil, so the
// answers show [] rather than null.
func normalizeStored(e *upgrade.Experiment) {
	if e.Context == nil {
		e.Context = []string{}
	}
	if e.Tags == nil {
		e.Tags = []string{}
	}
	if e.Conditions == nil {
		e.Conditions = []upgrade.Condition{}
	}
	if e.Partitions == nil {
		e.Partitions = []upgrade.DecisionPoint{}
	}
	for _, seg := range []*upgrade.Segment{&e.Inclusion, &e.Exclusion} {
		if seg.Users == nil {
			seg.Users = []string{}
		}
		if seg.Groups == nil {
			seg.Groups = []upgrade.GroupRef{}
		}
		// The public segments a list names live in its list rows
		// (listRow.SubSegmentIDs), read from the body apart.
		seg.Segments = nil
	}
}

// wire encodes an experiment as the configured server version shows it:
// 6.5 display state names (when display is set) and array segments, or the
// 6.2 internal names and single-object segments.
func (s *Sim) wire(e *upgrade.Experiment, display bool) []byte {
	cp := *e
	shape := upgrade.SegmentsArray
	if s.legacy {
		shape = upgrade.SegmentsObject
	} else if display {
		cp.State = upgrade.State(cp.State.Display())
		cp.StateTimeLogs = make([]upgrade.StateTimeLog, len(e.StateTimeLogs))
		for i, l := range e.StateTimeLogs {
			l.FromState = upgrade.State(l.FromState.Display())
			l.ToState = upgrade.State(l.ToState.Display())
			cp.StateTimeLogs[i] = l
		}
	}
	b, err := cp.MarshalFor(shape)
	if err != nil {
		// The stored model always encodes; keep the answer valid JSON anyway.
		return []byte("{}")
	}
	return b
}

func jsonArray(items [][]byte) []byte {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(it)
	}
	buf.WriteByte(']')
	return buf.Bytes()
}

// prepareExperiment validates a create or update body and decodes it. It
// reads nothing but the metadata, so it runs outside the lock.
func (s *Sim) prepareExperiment(body []byte) (*upgrade.Experiment, []conditionPayload, *apiError) {
	e, payloads, _, aerr := s.prepareBody(body, "create")
	return e, payloads, aerr
}

// prepareBody is prepareExperiment that also tells whether the body carried
// conditionPayloads at all (an update without them fails on the server).
// Verb ("create" or "update") names the operation in the mooclet refusal.
func (s *Sim) prepareBody(body []byte, verb string) (*upgrade.Experiment, []conditionPayload, bool, *apiError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, false, badBody(err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, false, badBody("the body is not a JSON object")
	}
	if aerr := validateExperiment(m); aerr != nil {
		return nil, nil, false, aerr
	}
	if aerr := moocletRefusal(m, verb); aerr != nil {
		return nil, nil, false, aerr
	}
	var e upgrade.Experiment
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, nil, false, badBody(err.Error())
	}
	ctx := e.ContextName()
	if _, ok := s.meta[ctx]; !ok {
		return nil, nil, false, &apiError{Status: 400, Name: "BadRequestError", Type: typeIncorrectParam,
			Message: fmt.Sprintf("The app context %q is not defined in CONTEXT_METADATA.", ctx)}
	}
	payloads := make([]conditionPayload, 0, len(e.ConditionPayloads))
	for i, raw := range e.ConditionPayloads {
		var p conditionPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, nil, false, badBody(fmt.Sprintf("conditionPayloads[%d]: %v", i, err))
		}
		payloads = append(payloads, p)
	}
	e.StateTimeLogs = nil // the server keeps its own log
	shapeStored(&e)
	if e.Type == upgrade.TypeFactorial {
		if aerr := factorialError(&e); aerr != nil {
			return nil, nil, false, aerr
		}
	}
	normalizeStored(&e)
	_, sent := m["conditionPayloads"]
	return &e, payloads, sent && m["conditionPayloads"] != nil, nil
}

func encodePayloads(ps []conditionPayload) []json.RawMessage {
	if len(ps) == 0 {
		return nil
	}
	out := make([]json.RawMessage, 0, len(ps))
	for _, p := range ps {
		b, err := json.Marshal(p)
		if err != nil {
			continue
		}
		out = append(out, b)
	}
	return out
}

func decodePayloads(e *upgrade.Experiment) []conditionPayload {
	out := make([]conditionPayload, 0, len(e.ConditionPayloads))
	for _, raw := range e.ConditionPayloads {
		var p conditionPayload
		if json.Unmarshal(raw, &p) == nil {
			out = append(out, p)
		}
	}
	return out
}

// createLocked stores a new experiment (or overwrites one with the same id,
// as the server's POST does) with fresh condition and decision point ids.
func (s *Sim) createLocked(body []byte) (*upgrade.Experiment, *apiError) {
	e, payloads, aerr := s.prepareExperiment(body)
	if aerr != nil {
		return nil, aerr
	}
	created, aerr := s.insertLocked(e, payloads)
	if aerr != nil {
		return nil, aerr
	}
	s.createdListsLocked(created, body)
	return created, nil
}

func (s *Sim) insertLocked(e *upgrade.Experiment, payloads []conditionPayload) (*upgrade.Experiment, *apiError) {
	if e.ID != "" && !upgrade.IsUUID(e.ID) {
		// The id is the primary key of a uuid column: PostgreSQL refuses it.
		return nil, &apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
			Message: fmt.Sprintf("invalid input syntax for type uuid: %q", e.ID)}
	}
	if aerr := s.checkStratLocked(e); aerr != nil {
		return nil, aerr
	}
	old := s.idx[e.ID]
	if e.ID == "" {
		e.ID = s.newID()
	}
	condIDs := map[string]string{}
	for i := range e.Conditions {
		id := s.newID()
		condIDs[e.Conditions[i].ID] = id
		e.Conditions[i].ID = id
	}
	partIDs := map[string]string{}
	for i := range e.Partitions {
		id := s.newID()
		partIDs[e.Partitions[i].ID] = id
		e.Partitions[i].ID = id
	}
	// A 6.5 server stores every new experiment with the continue rule and
	// keeps the revertTo it was sent, which names none of the fresh
	// condition ids: the rule and revertTo only hold after a PUT.
	if !s.legacy {
		e.PostExperimentRule = upgrade.PostRuleContinue
	} else if e.RevertTo != nil {
		if id, ok := condIDs[*e.RevertTo]; ok {
			e.RevertTo = &id
		}
	}
	fillTwoChars(e)
	for i := range payloads {
		payloads[i].ID = s.newID()
		if id, ok := condIDs[payloads[i].ParentCondition]; ok {
			payloads[i].ParentCondition = id
		}
		if id, ok := partIDs[payloads[i].DecisionPoint]; ok {
			payloads[i].DecisionPoint = id
		}
	}
	e.ConditionPayloads = encodePayloads(payloads)
	if aerr := s.storeQueriesLocked(e, nil, true); aerr != nil {
		return nil, aerr
	}
	now := s.timestamp()
	e.CreatedAt, e.UpdatedAt, e.VersionNumber = now, now, 1
	if old != nil {
		// An upsert: the row keeps its creation time; everything that hung
		// on the old conditions is gone with them.
		e.CreatedAt, e.VersionNumber = old.CreatedAt, old.VersionNumber+1
		e.StateTimeLogs = old.StateTimeLogs
		delete(s.st.Runtime, e.ID)
		delete(s.st.Lists, e.ID)
		i := slices.Index(s.st.Experiments, old)
		s.st.Experiments[i] = e
	} else {
		s.st.Experiments = append(s.st.Experiments, e)
	}
	s.idx[e.ID] = e
	s.auditExperiment(upgrade.AuditExperimentCreated, e, nil)
	return e, nil
}

// updateLocked replaces experiment id with the body, keeping the ids sent.
func (s *Sim) updateLocked(id string, e *upgrade.Experiment, payloads []conditionPayload, payloadsSent bool) (*upgrade.Experiment, *apiError) {
	old := s.idx[id]
	if old == nil {
		if s.legacy {
			return nil, notFoundExperiment()
		}
		// The server reads the missing row and fails on it.
		return nil, typeError("Cannot read properties of undefined (reading 'state')")
	}
	if aerr := s.checkStratLocked(e); aerr != nil {
		return nil, aerr
	}
	if !s.legacy {
		if !payloadsSent {
			return nil, typeError("Cannot read properties of undefined (reading 'reduce')")
		}
		payloads = s.completePayloads(old, e, payloads)
		// Lists are managed by their own routes; a PUT leaves them alone.
		e.Inclusion, e.Exclusion = old.Inclusion, old.Exclusion
	}
	// A PUT without queries deletes them all, as on the server.
	if aerr := s.storeQueriesLocked(e, old, false); aerr != nil {
		return nil, aerr
	}
	fillTwoChars(e)
	e.ID = id
	e.ConditionPayloads = encodePayloads(payloads)
	e.CreatedAt = old.CreatedAt
	e.UpdatedAt = s.timestamp()
	e.VersionNumber = old.VersionNumber + 1
	e.StateTimeLogs = old.StateTimeLogs
	if e.State != old.State {
		e.StateTimeLogs = append(slices.Clone(old.StateTimeLogs), upgrade.StateTimeLog{
			ID: s.newID(), FromState: old.State, ToState: e.State, TimeLog: e.UpdatedAt})
		if e.State == upgrade.StateArchived {
			s.snapshotLocked(old)
		}
	}
	s.st.Experiments[slices.Index(s.st.Experiments, old)] = e
	s.idx[id] = e
	return e, nil
}

// setStateLocked changes a state. The server enforces no transition rules.
// Starting enrollment (from anything but enrollmentComplete) excludes every
// user who has marked one of the experiment's exclude-if-reached decision
// points, whenever that was.
func (s *Sim) setStateLocked(id string, st upgrade.State, scheduleDate *string) (*upgrade.Experiment, *apiError) {
	old := s.idx[id]
	if old == nil {
		// The real server reads the missing row and fails on it.
		return nil, typeError("Cannot read properties of null (reading 'context')")
	}
	if !st.Valid() {
		return nil, badBody("state: must be one of: " + strings.Join(stateNames, ", "))
	}
	e := *old
	now := s.timestamp()
	e.StateTimeLogs = append(slices.Clone(old.StateTimeLogs), upgrade.StateTimeLog{
		ID: s.newID(), FromState: old.State, ToState: st, TimeLog: now})
	e.State = st
	e.UpdatedAt = now
	e.VersionNumber = old.VersionNumber + 1
	if st == upgrade.StateScheduled && scheduleDate != nil {
		d := *scheduleDate
		e.StartOn = &d
	}
	s.st.Experiments[slices.Index(s.st.Experiments, old)] = &e
	s.idx[id] = &e
	s.auditExperiment(upgrade.AuditExperimentStateChanged, &e, obj{"previousState": old.State.Display(), "newState": st.Display()})
	if st == upgrade.StateEnrolling && old.State != upgrade.StateEnrollmentComplete {
		s.excludeReachedLocked(&e)
	}
	if st == upgrade.StateArchived {
		s.snapshotLocked(&e)
	}
	return &e, nil
}

func notFoundExperiment() *apiError {
	return &apiError{Status: 404, Name: "Error", Message: "Experiment not found!", Type: typeQueryFailed}
}

// sentLogs reads the stateTimeLogs of a request body (nil when unreadable).
func sentLogs(body []byte) []upgrade.StateTimeLog {
	var b struct {
		StateTimeLogs []upgrade.StateTimeLog `json:"stateTimeLogs"`
	}
	_ = json.Unmarshal(body, &b)
	return b.StateTimeLogs
}

func typeError(msg string) *apiError { return &apiError{Status: 500, Name: "TypeError", Message: msg} }

// fillTwoChars gives conditions and decision points without a short code
// one, as the server does.
func fillTwoChars(e *upgrade.Experiment) {
	for i := range e.Conditions {
		if e.Conditions[i].TwoCharacterID == "" {
			e.Conditions[i].TwoCharacterID = twoChars(e.Conditions[i].ID)
		}
	}
	for i := range e.Partitions {
		if e.Partitions[i].TwoCharacterID == "" {
			e.Partitions[i].TwoCharacterID = twoChars(e.Partitions[i].ID)
		}
	}
}

// completePayloads applies the update rules of a 6.5 server to the payloads
// sent: only those at a current decision point stay, every condition gets one
// at every decision point (its code, as a string, unless one was sent), and
// a payload that still shows the condition's old code follows a new code.
func (s *Sim) completePayloads(old, e *upgrade.Experiment, sent []conditionPayload) []conditionPayload {
	byPoint := map[string]conditionPayload{}
	for _, p := range sent {
		if hasPartitionID(e, p.DecisionPoint) {
			byPoint[p.DecisionPoint+"\x1f"+p.ParentCondition] = p
		}
	}
	var out []conditionPayload
	for _, dp := range e.Partitions {
		for _, c := range e.Conditions {
			p, ok := byPoint[dp.ID+"\x1f"+c.ID]
			if !ok {
				out = append(out, conditionPayload{ID: s.newID(), ParentCondition: c.ID, DecisionPoint: dp.ID,
					Payload: &upgrade.Payload{Type: "string", Value: c.ConditionCode}})
				continue
			}
			if oc := old.ConditionByID(c.ID); oc != nil && p.Payload != nil && p.Payload.Value == oc.ConditionCode {
				p.Payload = &upgrade.Payload{Type: p.Payload.Type, Value: c.ConditionCode}
			}
			out = append(out, p)
		}
	}
	return out
}

func hasPartitionID(e *upgrade.Experiment, id string) bool {
	for _, p := range e.Partitions {
		if p.ID == id {
			return true
		}
	}
	return false
}

func (s *Sim) handleList(c *call) {
	var items [][]byte
	if err := s.view(func() {
		for _, e := range s.st.Experiments {
			items = append(items, s.render(e, viewList))
		}
	}); err != nil {
		c.failErr(err)
		return
	}
	c.raw(200, jsonArray(items))
}

func (s *Sim) handleNames(c *call) {
	out := []upgrade.ExperimentName{}
	if err := s.view(func() {
		for _, e := range s.st.Experiments {
			out = append(out, upgrade.ExperimentName{ID: e.ID, Name: e.Name})
		}
	}); err != nil {
		c.failErr(err)
		return
	}
	c.ok(out)
}

func (s *Sim) handleSingle(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	var out []byte
	if err := s.view(func() {
		if e := s.idx[id]; e != nil {
			out = s.render(e, viewSingle)
		}
	}); err != nil {
		c.failErr(err)
		return
	}
	if out == nil {
		c.fail(notFoundExperiment())
		return
	}
	c.raw(200, out)
}

func (s *Sim) handleCreate(c *call) {
	e, payloads, aerr := s.prepareExperiment(c.body)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	var out []byte
	err := s.mutate(func() (bool, *apiError) {
		created, aerr := s.insertLocked(e, payloads)
		if aerr != nil {
			return false, aerr
		}
		s.createdListsLocked(created, c.body)
		out = s.render(created, viewCreate)
		return true, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.raw(200, out)
}

func (s *Sim) handleUpdate(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	e, payloads, payloadsSent, aerr := s.prepareBody(c.body, "update")
	if aerr != nil {
		c.fail(aerr)
		return
	}
	var sent map[string]json.RawMessage
	_ = json.Unmarshal(c.body, &sent)
	desc, descSent := sent["description"]
	if !s.legacy && descSent && string(desc) == "null" {
		c.fail(&apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
			Message: `null value in column "description" of relation "experiment" violates not-null constraint`})
		return
	}
	_, stratSent := sent["stratificationFactor"]
	var out []byte
	err := s.mutate(func() (bool, *apiError) {
		before := s.idx[id]
		if !s.legacy && !descSent && before != nil {
			// A 6.5 PUT without a description keeps the stored one.
			e.Description = before.Description
		}
		if !s.legacy && !stratSent && before != nil && before.StratificationFactor != nil {
			// So does a PUT without stratificationFactor (TypeORM skips
			// the undefined relation), whatever the algorithm; only an
			// explicit null drops it.
			sf := *before.StratificationFactor
			e.StratificationFactor = &sf
		}
		updated, aerr := s.updateLocked(id, e, payloads, payloadsSent)
		if aerr != nil {
			return false, aerr
		}
		if !s.legacy {
			s.auditExperiment(upgrade.AuditExperimentUpdated, updated, obj{"diff": auditDiff(before, updated)})
		}
		// The answer shows the time logs that were sent, not the
		// stored ones.
		shown := *updated
		shown.StateTimeLogs = sentLogs(c.body)
		out = s.render(&shown, viewUpdate)
		if !s.legacy && (!descSent || !stratSent) {
			// and its answer, made from the body, has neither key
			m := s.renderObj(&shown, viewUpdate)
			if !descSent {
				delete(m, "description")
			}
			if !stratSent {
				delete(m, "stratificationFactor")
			}
			out, _ = json.Marshal(m)
		}
		return true, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.raw(200, out)
}

func (s *Sim) handleState(c *call) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	ck := &checker{}
	if id := ck.str(m, "", "experimentId", true); id != "" && !upgrade.IsUUID(id) {
		ck.failf("experimentId", "must be a UUID")
	}
	if v, ok := m["state"]; !ok || v == nil {
		ck.failf("state", "should not be null or undefined")
	} else {
		ck.enum(m, "", "state", stateNames, true)
	}
	ck.date(m, "", "scheduleDate", false)
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	id, _ := m["experimentId"].(string)
	st, _ := m["state"].(string)
	var sched *string
	if d, ok := m["scheduleDate"].(string); ok {
		sched = &d
	}
	var out []byte
	err := s.mutate(func() (bool, *apiError) {
		old := s.idx[id]
		e, aerr := s.setStateLocked(id, upgrade.NormalizeState(st), sched)
		if aerr != nil {
			return false, aerr
		}
		out = s.renderState(old, e)
		return true, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.raw(200, out)
}

func (s *Sim) handleDelete(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	var out []byte
	err := s.mutate(func() (bool, *apiError) {
		e := s.idx[id]
		if e == nil {
			return false, &apiError{Status: 404, Name: "NotFoundException", Message: "Experiment not found."}
		}
		s.st.Experiments = slices.DeleteFunc(s.st.Experiments, func(x *upgrade.Experiment) bool { return x == e })
		delete(s.idx, id)
		delete(s.st.Runtime, id)
		delete(s.st.Lists, id)
		s.auditExperiment(upgrade.AuditExperimentDeleted, e, nil)
		// The server answers the raw deleted rows: internal state names.
		out = jsonArray([][]byte{s.render(e, viewDeleted)})
		return true, nil
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.raw(200, out)
}

func (s *Sim) handlePaginated(c *call) {
	m, search, sortBy, aerr := pageParams(c, searchKeys, sortKeys)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	skip, take := intOf(m["skip"]), intOf(m["take"])
	var nodes [][]byte
	total := 0
	if err := s.view(func() {
		list := make([]*upgrade.Experiment, 0, len(s.st.Experiments))
		for _, e := range s.st.Experiments {
			if search == nil || matchesSearch(e, search) {
				list = append(list, e)
			}
		}
		total = len(list)
		if !s.legacy {
			// The server takes the page in id order and sorts only the
			// page.
			sort.SliceStable(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		} else {
			sortExperiments(list, sortBy)
		}
		if skip > 0 {
			list = list[min(skip, len(list)):]
		}
		if take > 0 && take < len(list) {
			list = list[:take]
		}
		if !s.legacy {
			sortExperiments(list, sortBy)
		}
		for _, e := range list {
			nodes = append(nodes, s.render(e, viewPage))
		}
	}); err != nil {
		c.failErr(err)
		return
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"total":%d,"nodes":`, total)
	buf.Write(jsonArray(nodes))
	if !s.legacy {
		// 6.5 echoes the paging parameters it was sent.
		for _, k := range []string{"skip", "take", "searchParams", "sortParams"} {
			if v, ok := m[k]; ok {
				b, err := json.Marshal(v)
				if err == nil {
					fmt.Fprintf(&buf, `,%q:%s`, k, b)
				}
			}
		}
	}
	buf.WriteByte('}')
	c.raw(200, buf.Bytes())
}

func intOf(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	f, err := n.Float64()
	if err != nil || f < 0 {
		return 0
	}
	if f > 1e9 {
		return 1e9
	}
	return int(f)
}

// matchesSearch imitates the server's ILIKE search: substrings, case
// insensitive; the status is compared whole, in either vocabulary.
func matchesSearch(e *upgrade.Experiment, p map[string]any) bool {
	key, _ := p["key"].(string)
	str, _ := p["string"].(string)
	needle := strings.ToLower(str)
	has := func(hay string) bool { return strings.Contains(strings.ToLower(hay), needle) }
	status := func() bool { return upgrade.NormalizeState(str) == e.State }
	name := func() bool { return has(e.Name) }
	ctx := func() bool { return has(strings.Join(e.Context, ",")) }
	tag := func() bool { return has(strings.Join(e.Tags, ",")) }
	switch key {
	case "name":
		return name()
	case "status":
		return status()
	case "context":
		return ctx()
	case "tag":
		return tag()
	case "id":
		return strings.EqualFold(e.ID, str)
	}
	if name() || status() || ctx() || tag() || strings.EqualFold(e.ID, str) {
		return true
	}
	for _, dp := range e.Partitions {
		if has(dp.Site) || has(dp.Target) {
			return true
		}
	}
	return false
}

// sortExperiments orders by the requested key, newest update first by
// default; ties keep creation order.
func sortExperiments(list []*upgrade.Experiment, p map[string]any) {
	key, dir := "updatedAt", "DESC"
	if p != nil {
		key, _ = p["key"].(string)
		dir, _ = p["sortAs"].(string)
	}
	field := func(e *upgrade.Experiment) string {
		switch key {
		case "name":
			return e.Name
		case "state":
			return string(e.State)
		case "postExperimentRule":
			return e.PostExperimentRule
		}
		return e.UpdatedAt
	}
	sort.SliceStable(list, func(i, j int) bool {
		a, b := field(list[i]), field(list[j])
		if dir == "DESC" {
			return a > b
		}
		return a < b
	})
}
