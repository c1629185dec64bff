package sim

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The answers of a 6.5 server do not show one experiment document: each
// route shows its own subset of the stored rows, with the row metadata
// (createdAt, updatedAt, versionNumber) on conditions, decision points,
// payloads, time logs and segment lists. The views below reproduce those
// subsets key by key (checked by the differential test); 6.2 answers keep
// the plain document of wire().

type view int

const (
	viewCreate   view = iota // POST /experiments
	viewSingle               // GET /experiments/single/{id}
	viewList                 // GET /experiments
	viewPage                 // a node of POST /experiments/paginated
	viewUpdate               // PUT /experiments/{id}
	viewDeleted              // a row of DELETE /experiments/{id}
	viewStateOld             // the old experiment inside a new state time log
)

type obj = map[string]any

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func strPtr(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// twoChars derives the short code the server gives every condition and
// decision point when none was sent (random there; stable here).
func twoChars(id string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	sum := sha256.Sum256([]byte(id))
	return string([]byte{alphabet[int(sum[0])%len(alphabet)], alphabet[int(sum[1])%len(alphabet)]})
}

func (s *Sim) rowMeta(e *upgrade.Experiment, m obj) obj {
	m["createdAt"] = e.CreatedAt
	m["updatedAt"] = e.UpdatedAt
	m["versionNumber"] = 1
	return m
}

// baseView is the experiment row itself. display chooses the 6.5 state
// names.
func (s *Sim) baseView(e *upgrade.Experiment, display bool) obj {
	st := string(e.State)
	if display {
		st = e.State.Display()
	}
	alg := e.AssignmentAlgorithm
	if alg == "" {
		alg = upgrade.AlgorithmRandom
	}
	var ecc any
	if e.EnrollmentCompleteCondition != nil {
		ecc = obj{"userCount": e.EnrollmentCompleteCondition.UserCount, "groupCount": e.EnrollmentCompleteCondition.GroupCount}
	}
	return obj{
		"id": e.ID, "name": e.Name, "description": e.Description, "context": e.Context, "state": st,
		"startOn": strPtr(e.StartOn), "endOn": strPtr(e.EndOn), "consistencyRule": nullIfEmpty(e.ConsistencyRule),
		"assignmentUnit": e.AssignmentUnit, "postExperimentRule": e.PostExperimentRule,
		"enrollmentCompleteCondition": ecc, "tags": e.Tags, "group": nullIfEmpty(e.Group),
		"conditionOrder": nullIfEmpty(e.ConditionOrder), "filterMode": e.FilterMode, "backendVersion": s.version, "type": e.Type,
		"assignmentAlgorithm": alg, "revertTo": strPtr(e.RevertTo),
		"createdAt": e.CreatedAt, "updatedAt": e.UpdatedAt, "versionNumber": e.VersionNumber,
	}
}

func (s *Sim) conditionsView(e *upgrade.Experiment, v view) []any {
	out := make([]any, 0, len(e.Conditions))
	var payloads []conditionPayload
	if v == viewSingle || v == viewList {
		payloads = decodePayloads(e)
	}
	factorial := e.Type == upgrade.TypeFactorial
	for _, c := range e.Conditions {
		m := s.rowMeta(e, obj{"id": c.ID, "twoCharacterId": c.TwoCharacterID, "name": nullIfEmpty(c.Name),
			"description": nullIfEmpty(c.Description), "conditionCode": c.ConditionCode,
			"assignmentWeight": c.AssignmentWeight, "order": c.Order})
		switch v {
		case viewSingle, viewList:
			// Reads show each condition's payload rows in their stored
			// form, besides the experiment-level list; a factorial
			// experiment's conditions have none (its payloads are the
			// levels').
			if !factorial {
				own := []any{}
				for _, p := range payloads {
					if p.ParentCondition == c.ID && p.Payload != nil {
						own = append(own, s.rowMeta(e, obj{"id": p.ID, "payloadType": p.Payload.Type, "payloadValue": p.Payload.Value}))
					}
				}
				m["conditionPayloads"] = own
			}
			m["levelCombinationElements"] = s.elementsView(e, c)
		case viewCreate:
			if factorial {
				m["levelCombinationElements"] = s.elementsView(e, c)
			}
		case viewUpdate:
			m["experimentId"] = e.ID
			if factorial {
				// A PUT answers a factorial's conditions with their
				// elements (probe [switch: simple -> factorial] PUT).
				m["levelCombinationElements"] = s.elementsView(e, c)
			}
		}
		out = append(out, m)
	}
	return out
}

func (s *Sim) partitionsView(e *upgrade.Experiment, v view) []any {
	out := make([]any, 0, len(e.Partitions))
	for _, p := range e.Partitions {
		m := s.rowMeta(e, obj{"id": p.ID, "twoCharacterId": p.TwoCharacterID, "site": p.Site,
			"target": p.Target, "description": p.Description, "order": p.Order, "excludeIfReached": p.ExcludeIfReached})
		if v == viewUpdate {
			m["experimentId"] = e.ID
		}
		if (v == viewSingle || v == viewList) && e.Type == upgrade.TypeFactorial {
			// A factorial read joins the payload rows of the decision
			// point here, each with its condition (rows a PUT made as
			// Simple before a switch: probe [switch: simple -> factorial]).
			m["conditionPayloads"] = s.pointPayloads(e, p.ID)
		}
		out = append(out, m)
	}
	return out
}

// payloadsView shows the stored payloads. Reads go through the decision
// points, so payloads without one are only visible in the create answer.
func (s *Sim) payloadsView(e *upgrade.Experiment, v view) []any {
	out := []any{}
	for _, p := range decodePayloads(e) {
		if p.DecisionPoint == "" && v != viewCreate {
			continue
		}
		m := s.rowMeta(e, obj{"id": p.ID, "parentCondition": p.ParentCondition, "payload": p.Payload})
		if p.DecisionPoint != "" && (e.Type != upgrade.TypeFactorial || (v != viewSingle && v != viewList)) {
			m["decisionPoint"] = p.DecisionPoint
		}
		out = append(out, m)
	}
	return out
}

// pointPayloads are a factorial read's payload rows of decision point id,
// each naming its condition as a row.
func (s *Sim) pointPayloads(e *upgrade.Experiment, id string) []any {
	out := []any{}
	for _, p := range decodePayloads(e) {
		if p.DecisionPoint != id || p.Payload == nil {
			continue
		}
		var parent any = p.ParentCondition
		if c := e.ConditionByID(p.ParentCondition); c != nil {
			parent = s.rowMeta(e, obj{"id": c.ID, "twoCharacterId": c.TwoCharacterID, "name": nullIfEmpty(c.Name),
				"description": nullIfEmpty(c.Description), "conditionCode": c.ConditionCode,
				"assignmentWeight": c.AssignmentWeight, "order": c.Order})
		}
		out = append(out, s.rowMeta(e, obj{"id": p.ID, "parentCondition": parent, "payloadType": p.Payload.Type, "payloadValue": p.Payload.Value}))
	}
	return out
}

func (s *Sim) logsView(e *upgrade.Experiment, display bool) []any {
	out := make([]any, 0, len(e.StateTimeLogs))
	for _, l := range e.StateTimeLogs {
		from, to := string(l.FromState), string(l.ToState)
		if display {
			from, to = l.FromState.Display(), l.ToState.Display()
		}
		out = append(out, obj{"id": l.ID, "fromState": from, "toState": to, "timeLog": l.TimeLog,
			"createdAt": l.TimeLog, "updatedAt": l.TimeLog, "versionNumber": 1})
	}
	return out
}

// segmentID names the stored list behind an inclusion or exclusion.
func segmentID(expID, which string) string { return upgrade.IDFrom(expID + "/" + which) }

// segmentsView is the full list shape of GET /experiments: each list row
// with its private segment and members.
func (s *Sim) segmentsView(e *upgrade.Experiment, kind string) []any {
	out := []any{}
	for _, r := range s.listRowsLocked(e, kind) {
		out = append(out, s.rowMeta(e, obj{"experimentId": e.ID, "segmentId": r.ID, "segment": s.segmentObj(e, r, true)}))
	}
	return out
}

// render encodes one experiment for a route.
func (s *Sim) render(e *upgrade.Experiment, v view) []byte {
	if s.legacy {
		return s.wire(e, v != viewDeleted)
	}
	b, err := json.Marshal(s.renderObj(e, v))
	if err != nil {
		return []byte("{}")
	}
	return b
}

func (s *Sim) renderObj(e *upgrade.Experiment, v view) obj {
	m := s.baseView(e, v != viewDeleted && v != viewStateOld)
	switch v {
	case viewDeleted:
		m["stratificationFactorStratificationFactorName"] = nil
		return m
	case viewPage:
		m["partitions"] = s.partitionsView(e, v)
		m["stateTimeLogs"] = []any{} // 6.5's paginated rows never carry the history
		links := []any{}
		for _, r := range s.listRowsLocked(e, kindInclusion) {
			links = append(links, s.rowMeta(e, obj{"experimentId": e.ID, "segmentId": r.ID}))
		}
		m["experimentSegmentInclusion"] = links
		return m
	case viewStateOld:
		m["partitions"] = s.partitionsView(e, v)
		m["queries"] = s.queriesView(e, v)
		m["stateTimeLogs"] = s.logsView(e, false)
		return m
	}
	m["conditions"] = s.conditionsView(e, v)
	m["partitions"] = s.partitionsView(e, v)
	m["conditionPayloads"] = s.payloadsView(e, v)
	m["factors"] = s.factorsView(e)
	m["queries"] = s.queriesView(e, v)
	if v == viewCreate {
		// The create answer echoes a stratified experiment's factor.
		if e.StratificationFactor != nil {
			m["stratificationFactor"] = stratView(e)
		}
		return m
	}
	m["stateTimeLogs"] = s.logsView(e, true)
	if v == viewList {
		m["experimentSegmentInclusion"] = s.segmentsView(e, kindInclusion)
		m["experimentSegmentExclusion"] = s.segmentsView(e, kindExclusion)
		return m
	}
	if v == viewSingle {
		m["experimentSegmentInclusion"] = s.typedSegmentsView(e, kindInclusion)
		m["experimentSegmentExclusion"] = s.typedSegmentsView(e, kindExclusion)
	} else {
		// The update answer leaves the lists out: they are managed
		// through the list routes.
		m["experimentSegmentInclusion"] = []any{}
		m["experimentSegmentExclusion"] = []any{}
	}
	if v == viewSingle {
		m["stratificationFactor"] = s.stratRowView(e)
	} else {
		m["stratificationFactor"] = stratView(e)
	}
	return m
}

// typedSegmentsView is the list shape of GET /experiments/single/{id}: like
// GET /experiments, but only the lists whose kind the server can name
// (ExperimentService.inferListType), with listType set to that kind.
func (s *Sim) typedSegmentsView(e *upgrade.Experiment, kind string) []any {
	out := []any{}
	for _, r := range s.listRowsLocked(e, kind) {
		lt := inferListType(r)
		if lt == "" {
			continue
		}
		seg := s.segmentObj(e, r, true)
		seg["listType"] = lt
		out = append(out, s.rowMeta(e, obj{"experimentId": e.ID, "segmentId": r.ID, "segment": seg}))
	}
	return out
}

// inferListType names a list's kind as the 6.5 single read does: the stored
// listType, else "individual" for users only, the group type for groups of
// one type only, "segment" for public segments only, "" (the list is left
// out) otherwise.
func inferListType(r *listRow) string {
	if r.ListType != nil && *r.ListType != "" {
		return *r.ListType
	}
	subs := len(r.SubSegmentIDs)
	switch {
	case len(r.Users) > 0 && len(r.Groups) == 0 && subs == 0:
		return "individual"
	case len(r.Users) == 0 && len(r.Groups) == 0 && subs > 0:
		return "segment"
	case len(r.Users) == 0 && len(r.Groups) > 0 && subs == 0:
		t := r.Groups[0].Type
		for _, g := range r.Groups {
			if g.Type != t || g.Type == "All" {
				return ""
			}
		}
		return t
	}
	return ""
}

// renderState is the answer of POST /experiments/state: the experiment as
// it was, with the new state and the time logs, the newest of which holds
// the old experiment (internal state names).
func (s *Sim) renderState(old, now *upgrade.Experiment) []byte {
	if s.legacy {
		return s.wire(now, true)
	}
	m := s.baseView(old, true)
	m["state"] = now.State.Display()
	m["partitions"] = s.partitionsView(old, viewStateOld)
	m["queries"] = s.queriesView(old, viewStateOld)
	logs := s.logsView(now, true)
	if n := len(logs); n > 0 && len(now.StateTimeLogs) > len(old.StateTimeLogs) {
		logs[n-1].(obj)["experiment"] = s.renderObj(old, viewStateOld)
	}
	m["stateTimeLogs"] = logs
	b, err := json.Marshal(m)
	if err != nil {
		return []byte("{}")
	}
	return b
}
