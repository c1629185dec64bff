package sim

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// A 6.5 server keeps an experiment's inclusion and exclusion lists as rows
// of their own, each linking the experiment to a private segment. Create
// makes one row of each kind from the body; a PUT of the experiment leaves
// them alone; /experiments/inclusionList and /experiments/exclusionList
// (POST to add, PUT .../{segmentId} to replace, DELETE .../{segmentId})
// change them. Assignment uses the union of an experiment's rows of a
// kind, which is what Experiment.Inclusion and Exclusion hold.

const (
	kindInclusion = "inclusion"
	kindExclusion = "exclusion"
)

// listRow is one list of an experiment.
type listRow struct {
	Kind        string             `json:"kind"`
	ID          string             `json:"id"`
	Name        string             `json:"name"`
	Description *string            `json:"description"`
	ListType    *string            `json:"listType"`
	Context     string             `json:"context"`
	Type        string             `json:"type"`
	Users       []string           `json:"users"`
	Groups      []upgrade.GroupRef `json:"groups"`
	// SubSegmentIDs are the public segments the list includes.
	SubSegmentIDs []string `json:"subSegmentIds,omitempty"`
}

// listRowsLocked returns an experiment's rows of one kind. An experiment
// whose lists were never changed through the list routes has one row per
// kind, made from its create body.
func (s *Sim) listRowsLocked(e *upgrade.Experiment, kind string) []*listRow {
	rows, ok := s.st.Lists[e.ID]
	if !ok {
		rows = createdRows(e)
	}
	var out []*listRow
	for _, r := range rows {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

func createdRows(e *upgrade.Experiment) []*listRow {
	row := func(kind string, seg upgrade.Segment) *listRow {
		id := segmentID(e.ID, kind)
		empty := ""
		return &listRow{Kind: kind, ID: id, Name: id + " Segment", Description: &empty, Context: e.ContextName(),
			Type: "private", Users: slices.Clone(seg.Users), Groups: slices.Clone(seg.Groups)}
	}
	return []*listRow{row(kindInclusion, e.Inclusion), row(kindExclusion, e.Exclusion)}
}

// createdListsLocked finishes a create: the lists made from the body take
// the public segments its list segments include (subSegments: [{id}],
// unknown ids dropped), and each list gets its audit entry, inclusion
// first, as ExperimentService.addList writes them.
func (s *Sim) createdListsLocked(e *upgrade.Experiment, body []byte) {
	var b struct {
		Inclusion json.RawMessage `json:"experimentSegmentInclusion"`
		Exclusion json.RawMessage `json:"experimentSegmentExclusion"`
	}
	_ = json.Unmarshal(body, &b)
	type listSeg struct {
		SubSegments []struct {
			ID string `json:"id"`
		} `json:"subSegments"`
	}
	subs := func(raw json.RawMessage) []string {
		var rows []struct {
			Segment listSeg `json:"segment"`
		}
		if json.Unmarshal(raw, &rows) != nil {
			// the 6.2 form: one segment object
			var one listSeg
			if json.Unmarshal(raw, &one) != nil {
				return nil
			}
			rows = append(rows, struct {
				Segment listSeg `json:"segment"`
			}{one})
		}
		var ids []string
		for _, r := range rows {
			for _, sub := range r.Segment.SubSegments {
				ids = append(ids, sub.ID)
			}
		}
		return s.knownSegments(ids)
	}
	inc, exc := subs(b.Inclusion), subs(b.Exclusion)
	rows := createdRows(e)
	rows[0].SubSegmentIDs, rows[1].SubSegmentIDs = inc, exc
	// ExperimentService.create adds a list per element of the body's
	// arrays: a body without them (or with []) makes an experiment
	// without lists, which every read shows with none and whose audit
	// log has no list entries (measured on 6.5.0, docs/upgrade-real.md).
	kept := rows
	if !s.legacy {
		kept = slices.DeleteFunc(slices.Clone(rows), func(r *listRow) bool {
			raw := b.Inclusion
			if r.Kind == kindExclusion {
				raw = b.Exclusion
			}
			return !hasListElement(raw)
		})
	}
	if len(inc) > 0 || len(exc) > 0 || len(kept) < len(rows) {
		if s.st.Lists == nil {
			s.st.Lists = map[string][]*listRow{}
		}
		s.st.Lists[e.ID] = kept
	}
	for _, r := range kept {
		s.auditExperimentList(e, r, "created", "")
	}
}

// hasListElement says whether a create body's list field holds a list: a
// non-empty array, or the one segment object of the 6.2 form.
func hasListElement(raw json.RawMessage) bool {
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		return len(arr) > 0
	}
	var one map[string]any
	return json.Unmarshal(raw, &one) == nil && one != nil
}

// listInput is the body of the list routes. The server declares no
// validation for it, so nothing but decoding is checked.
type listInput struct {
	ExperimentID string `json:"experimentId"`
	List         struct {
		ID            string             `json:"id"`
		Name          string             `json:"name"`
		Description   *string            `json:"description"`
		ListType      *string            `json:"listType"`
		Context       string             `json:"context"`
		Type          string             `json:"type"`
		UserIDs       []string           `json:"userIds"`
		Groups        []upgrade.GroupRef `json:"groups"`
		SubSegmentIDs []string           `json:"subSegmentIds"`
	} `json:"list"`
}

func serverError(msg, typ string) *apiError {
	return &apiError{Status: 500, Name: "Error", Message: msg, Type: typ}
}

// changeListsLocked applies fn to a copy of an experiment's rows, then
// stores the rows and the experiment's resulting lists.
func (s *Sim) changeListsLocked(e *upgrade.Experiment, fn func(rows []*listRow) []*listRow) {
	rows, ok := s.st.Lists[e.ID]
	if !ok {
		rows = createdRows(e)
	}
	rows = fn(slices.Clone(rows))
	if s.st.Lists == nil {
		s.st.Lists = map[string][]*listRow{}
	}
	s.st.Lists[e.ID] = rows
	next := *e
	next.Inclusion, next.Exclusion = unionOf(rows, kindInclusion), unionOf(rows, kindExclusion)
	s.st.Experiments[slices.Index(s.st.Experiments, e)] = &next
	s.idx[e.ID] = &next
}

func unionOf(rows []*listRow, kind string) upgrade.Segment {
	seg := upgrade.Segment{Users: []string{}, Groups: []upgrade.GroupRef{}}
	for _, r := range rows {
		if r.Kind == kind {
			seg.Users = append(seg.Users, r.Users...)
			seg.Groups = append(seg.Groups, r.Groups...)
		}
	}
	return seg
}

func (s *Sim) handleListAdd(c *call, kind string) {
	var in listInput
	if err := json.Unmarshal(c.body, &in); err != nil {
		c.fail(serverError(err.Error(), ""))
		return
	}
	s.write(c, func() ([]byte, *apiError) {
		e := s.idx[in.ExperimentID]
		if e == nil {
			return nil, serverError(fmt.Sprintf("Error in adding segment for experiment %s list: QueryFailedError: "+
				"null value in column \"experimentId\" of relation \"experiment_segment_%s\" violates not-null constraint", kind, kind), typeQueryFailed)
		}
		row := &listRow{Kind: kind, ID: in.List.ID, Name: in.List.Name, Description: in.List.Description,
			ListType: in.List.ListType, Context: in.List.Context, Type: in.List.Type,
			Users: nonNil(in.List.UserIDs), Groups: append([]upgrade.GroupRef{}, in.List.Groups...),
			SubSegmentIDs: s.knownSegments(in.List.SubSegmentIDs)}
		if row.ID == "" {
			row.ID = s.newID()
		}
		if row.Type == "" {
			row.Type = "private"
		}
		s.changeListsLocked(e, func(rows []*listRow) []*listRow { return append(rows, row) })
		s.auditExperimentList(e, row, "created", "")
		return s.renderListLink(s.idx[e.ID], row), nil
	})
}

func (s *Sim) handleListUpdate(c *call, kind, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	var in listInput
	if err := json.Unmarshal(c.body, &in); err != nil {
		c.fail(serverError(err.Error(), ""))
		return
	}
	if in.List.ID != id {
		c.fail(serverError(fmt.Sprintf("%s: The id in the URL (%s) does not match the list id in the request body (%s).",
			typeIncorrectParam, id, in.List.ID), ""))
		return
	}
	s.write(c, func() ([]byte, *apiError) {
		e := s.idx[in.ExperimentID]
		var found *listRow
		if e != nil {
			for _, r := range s.listRowsLocked(e, kind) {
				if r.ID == id {
					found = r
				}
			}
		}
		if found == nil {
			return nil, serverError(fmt.Sprintf("No existing %s record found for experiment %s and segment %s", kind, id, id), "")
		}
		next := *found
		next.Name, next.Context = in.List.Name, in.List.Context
		if in.List.Description != nil {
			next.Description = in.List.Description
		}
		next.Users, next.Groups = nonNil(in.List.UserIDs), append([]upgrade.GroupRef{}, in.List.Groups...)
		next.SubSegmentIDs = s.knownSegments(in.List.SubSegmentIDs)
		var before *listRow
		s.changeListsLocked(e, func(rows []*listRow) []*listRow {
			for i, r := range rows {
				if r.Kind == kind && r.ID == id {
					before, rows[i] = r, &next
				}
			}
			return rows
		})
		s.auditExperimentList(e, &next, "updated", auditDiff(before, &next))
		return s.renderListLink(s.idx[e.ID], &next), nil
	})
}

func (s *Sim) handleListDelete(c *call, kind, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	s.write(c, func() ([]byte, *apiError) {
		for _, e := range s.st.Experiments {
			for _, r := range s.listRowsLocked(e, kind) {
				if r.ID != id {
					continue
				}
				out := s.renderSegmentRow(e, r, false)
				s.auditExperimentList(e, r, "deleted", "")
				s.changeListsLocked(e, func(rows []*listRow) []*listRow {
					return slices.DeleteFunc(rows, func(x *listRow) bool { return x.Kind == kind && x.ID == id })
				})
				return out, nil
			}
		}
		return nil, serverError(fmt.Sprintf("Segment with ID %s not found for %s", id, kind), "")
	})
}

// write runs a change and answers what it returns (200), or its error.
func (s *Sim) write(c *call, fn func() ([]byte, *apiError)) {
	var out []byte
	err := s.mutate(func() (bool, *apiError) {
		b, aerr := fn()
		out = b
		return aerr == nil, aerr
	})
	if err != nil {
		c.failErr(err)
		return
	}
	c.raw(200, out)
}

// segmentObj is a list's segment row; members adds its users and groups.
func (s *Sim) segmentObj(e *upgrade.Experiment, r *listRow, members bool) obj {
	m := s.rowMeta(e, obj{"id": r.ID, "name": r.Name, "description": strPtr(r.Description), "context": r.Context,
		"type": r.Type, "listType": strPtr(r.ListType), "tags": nil})
	if members {
		users := make([]any, 0, len(r.Users))
		for _, u := range r.Users {
			users = append(users, s.rowMeta(e, obj{"userId": u, "segmentId": r.ID}))
		}
		groups := make([]any, 0, len(r.Groups))
		for _, g := range r.Groups {
			groups = append(groups, s.rowMeta(e, obj{"groupId": g.GroupID, "type": g.Type, "segmentId": r.ID}))
		}
		m["individualForSegment"], m["groupForSegment"], m["subSegments"] = users, groups, s.subSegmentRows(r.SubSegmentIDs)
	}
	return m
}

func (s *Sim) renderSegmentRow(e *upgrade.Experiment, r *listRow, members bool) []byte {
	b, err := json.Marshal(s.segmentObj(e, r, members))
	if err != nil {
		return []byte("{}")
	}
	return b
}

// renderListLink is the answer of adding or replacing a list: the link row
// with the bare experiment row and the segment with its members.
func (s *Sim) renderListLink(e *upgrade.Experiment, r *listRow) []byte {
	exp := s.baseView(e, false)
	m := s.rowMeta(e, obj{"experimentId": e.ID, "segmentId": r.ID, "experiment": exp, "segment": s.segmentObj(e, r, true)})
	b, err := json.Marshal(m)
	if err != nil {
		return []byte("{}")
	}
	return b
}
