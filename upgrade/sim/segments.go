package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// segmentInput is the segment body of POST /segments, /segments/list and
// the flag list routes.
type segmentInput struct {
	ID              string             `json:"id"`
	Name            string             `json:"name"`
	Description     *string            `json:"description"`
	Context         string             `json:"context"`
	Type            string             `json:"type"`
	ListType        *string            `json:"listType"`
	Tags            []string           `json:"tags"`
	UserIDs         []string           `json:"userIds"`
	Groups          []upgrade.GroupRef `json:"groups"`
	SubSegmentIDs   []string           `json:"subSegmentIds"`
	ParentSegmentID string             `json:"parentSegmentId"`
	// descriptionLeftOut: the body had no description key; an upsert of
	// an existing segment then keeps the stored one (TypeORM skips
	// undefined columns).
	descriptionLeftOut bool
}

func (s *Sim) segmentRoute(m string, segs, low []string) func(*call) {
	n := len(segs)
	switch {
	case n == 1 && m == http.MethodGet:
		return s.handleSegments
	case n == 1 && m == http.MethodPost:
		return s.handleSegmentUpsert
	case n == 2 && low[1] == "global" && m == http.MethodGet:
		return s.handleGlobalSegments
	case n == 2 && low[1] == "paginated" && m == http.MethodPost:
		return s.handleSegmentsPage
	case n == 2 && low[1] == "list" && m == http.MethodPost:
		return s.handleSegmentListAdd
	case n == 3 && low[1] == "list" && m == http.MethodDelete:
		return func(c *call) { s.handleSegmentListDelete(c, segs[2]) }
	case n == 3 && low[1] == "status" && m == http.MethodGet:
		return func(c *call) { s.handleSegmentStatus(c, segs[2]) }
	case n == 2 && m == http.MethodGet:
		return func(c *call) { s.handleSegmentGet(c, segs[1]) }
	case n == 2 && m == http.MethodDelete:
		return func(c *call) { s.handleSegmentDelete(c, segs[1]) }
	}
	return nil
}

func segmentNotFound() *apiError {
	return &apiError{Status: 404, Name: "NotFoundException", Message: "Segment not found."}
}

// knownSegments keeps the ids of existing segments: the server drops
// unknown sub-segment ids silently.
func (s *Sim) knownSegments(ids []string) []string {
	cat := s.cat()
	out := []string{}
	for _, id := range ids {
		if cat.segment(id) != nil && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// subSegmentRows renders sub-segment ids as bare segment rows.
func (s *Sim) subSegmentRows(ids []string) []any {
	cat := s.cat()
	out := []any{}
	for _, id := range ids {
		if sg := cat.segment(id); sg != nil {
			out = append(out, s.segmentRow(sg))
		}
	}
	return out
}

// checkSegmentInput applies the body rules of the segment routes.
func checkSegmentInput(m map[string]any, base string) *apiError {
	ck := &checker{}
	ck.str(m, base, "name", true)
	ck.str(m, base, "context", true)
	ck.enum(m, base, "type", segmentTypes, true)
	ck.array(m, base, "userIds", true)
	ck.objects(m, base, "groups", true)
	ck.array(m, base, "subSegmentIds", true)
	return ck.err()
}

// upsertSegmentLocked creates in, or replaces segment in.ID as a whole
// when it exists (POST /segments upserts by id; a new id is kept).
func (s *Sim) upsertSegmentLocked(cat *catalog, in *segmentInput) (*simSegment, *apiError) {
	if in.Type != upgrade.SegmentPrivate {
		for _, o := range cat.Segments {
			if o.ID != in.ID && o.Type != upgrade.SegmentPrivate && o.Name == in.Name && o.Context == in.Context {
				// No name in this error body.
				return nil, &apiError{Status: 400, Type: typeIncorrectParam,
					Message: fmt.Sprintf("Segment name %s already exists in context %s", in.Name, in.Context)}
			}
		}
	}
	if aerr := s.checkSubSegmentMix(cat, in); aerr != nil {
		return nil, aerr
	}
	if in.ID != "" && !upgrade.IsUUID(in.ID) {
		return nil, &apiError{Status: 500, Name: "QueryFailedError", Type: typeQueryFailed,
			Message: fmt.Sprintf("invalid input syntax for type uuid: %q", in.ID)}
	}
	now := s.timestamp()
	sg := cat.segment(in.ID)
	if sg == nil {
		id := in.ID
		if id == "" {
			id = s.newID()
		}
		sg = &simSegment{ID: id, CreatedAt: now, VersionNumber: 0}
		cat.Segments = append(cat.Segments, sg)
	}
	// A segment sent without a description has none: 6.5 reads it back
	// as null, not "".
	var desc *string
	if in.Description != nil {
		d := *in.Description
		desc = &d
	} else if in.descriptionLeftOut {
		desc = sg.Description
	}
	subs := slices.DeleteFunc(s.knownSegments(in.SubSegmentIDs), func(id string) bool { return id == sg.ID })
	sg.Name, sg.Description, sg.Context, sg.Type, sg.ListType = in.Name, desc, in.Context, in.Type, in.ListType
	sg.Tags = in.Tags
	sg.Users = dedup(nonNil(in.UserIDs))
	sg.Groups = dedupGroups(in.Groups)
	sg.SubSegmentIDs = subs
	sg.UpdatedAt = now
	sg.VersionNumber++
	return sg, nil
}

// checkSubSegmentMix imitates addSegmentDataWithPipeline: when some of a
// public segment's subSegmentIds exist and others do not, the lookup answers
// undefined for the unknown ones and the server fails on them (all unknown:
// they are dropped).
func (s *Sim) checkSubSegmentMix(cat *catalog, in *segmentInput) *apiError {
	if in.Type != upgrade.SegmentPublic {
		return nil
	}
	known := 0
	for _, id := range in.SubSegmentIDs {
		if cat.segment(id) != nil {
			known++
		}
	}
	if known == 0 || known == len(in.SubSegmentIDs) {
		return nil
	}
	for _, id := range in.SubSegmentIDs {
		sg := cat.segment(id)
		if sg == nil {
			return typeError("Cannot read properties of undefined (reading 'type')")
		}
		if sg.Type == upgrade.SegmentPrivate {
			return typeError("Cannot read properties of undefined (reading 'individualForSegment')")
		}
	}
	return nil
}

func dedup(in []string) []string {
	out := []string{}
	for _, v := range in {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func dedupGroups(in []upgrade.GroupRef) []upgrade.GroupRef {
	out := []upgrade.GroupRef{}
	for _, g := range in {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

func (s *Sim) handleSegments(c *call) {
	s.answer(c, func() (any, *apiError) {
		cat := s.cat()
		var shown []*simSegment
		for _, sg := range cat.Segments {
			if sg.Type == upgrade.SegmentPublic {
				shown = append(shown, sg)
			}
		}
		return s.segmentsAnswer(cat, shown), nil
	})
}

func (s *Sim) handleGlobalSegments(c *call) {
	s.answer(c, func() (any, *apiError) {
		cat := s.cat()
		out := []any{}
		for _, sg := range cat.Segments {
			if sg.Type == upgrade.SegmentGlobalExclude {
				r := s.segmentFull(cat, sg)
				r["status"] = upgrade.SegmentExcluded
				out = append(out, r)
			}
		}
		return out, nil
	})
}

func (s *Sim) handleSegmentGet(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	s.answer(c, func() (any, *apiError) {
		cat := s.cat()
		sg := cat.segment(id)
		if sg == nil || sg.Type == upgrade.SegmentPrivate {
			return nil, segmentNotFound()
		}
		r := s.segmentFull(cat, sg)
		r["experimentSegmentInclusion"], r["experimentSegmentExclusion"] = nil, nil
		return r, nil
	})
}

func (s *Sim) handleSegmentStatus(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	s.answer(c, func() (any, *apiError) {
		cat := s.cat()
		sg := cat.segment(id)
		if sg == nil || sg.Type == upgrade.SegmentPrivate {
			return nil, segmentNotFound()
		}
		used := s.usedSegments(cat, []*simSegment{sg})
		r := s.segmentFull(cat, sg)
		r["status"] = segmentStatus(sg, used)
		r["experimentSegmentInclusion"], r["experimentSegmentExclusion"] = nil, nil
		out := s.usageArrays(cat, used)
		out["segment"] = r
		return out, nil
	})
}

func (s *Sim) handleSegmentsPage(c *call) {
	m, search, sortBy, aerr := pageParams(c, searchKeys, segmentSortKeys)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	skip, take := intOf(m["skip"]), intOf(m["take"])
	s.answer(c, func() (any, *apiError) {
		cat := s.cat()
		var list []*simSegment
		for _, sg := range cat.Segments {
			if sg.Type == upgrade.SegmentPublic && (search == nil || segmentMatches(sg, search)) {
				list = append(list, sg)
			}
		}
		total := len(list)
		sortByField(list, sortBy, func(sg *simSegment, key string) string {
			if key == "name" {
				return sg.Name
			}
			return sg.UpdatedAt
		})
		nodes := s.segmentsAnswer(cat, page(list, skip, take))
		out := obj{"total": total, "nodes": nodes}
		echoPaging(m, out)
		return out, nil
	})
}

// segmentMatches imitates the segment search: "name" and "tag" search that
// column, "id" an exact id (no condition for a non-UUID); every other key,
// "context" included (the server's switch tests name || context, which is
// name), searches name, context and tags.
// segmentsAnswer is the body of GET /segments and the nodes of a page: the
// segments shown with their status, and the usage arrays.
func (s *Sim) segmentsAnswer(cat *catalog, shown []*simSegment) obj {
	used := s.usedSegments(cat, shown)
	out := s.usageArrays(cat, used)
	data := []any{}
	for _, sg := range shown {
		r := s.segmentFull(cat, sg)
		r["status"] = segmentStatus(sg, used)
		data = append(data, r)
	}
	out["segmentsData"] = data
	return out
}

func segmentMatches(sg *simSegment, p map[string]any) bool {
	key, _ := p["key"].(string)
	str, _ := p["string"].(string)
	has := func(hay string) bool { return ilikeContains(hay, str) }
	switch key {
	case "name":
		return has(sg.Name)
	case "tag":
		return has(strings.Join(sg.Tags, ","))
	case "id":
		return !upgrade.IsUUID(str) || strings.EqualFold(sg.ID, str)
	}
	return has(sg.Name) || has(sg.Context) || has(strings.Join(sg.Tags, ",")) || (upgrade.IsUUID(str) && strings.EqualFold(sg.ID, str))
}

func (s *Sim) readSegmentInput(c *call) (*segmentInput, *apiError) {
	m, aerr := c.object()
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkSegmentInput(m, ""); aerr != nil {
		return nil, aerr
	}
	var in segmentInput
	if err := json.Unmarshal(c.body, &in); err != nil {
		return nil, badBody(err.Error())
	}
	_, sent := m["description"]
	in.descriptionLeftOut = !sent
	return &in, nil
}

func (s *Sim) handleSegmentUpsert(c *call) {
	in, aerr := s.readSegmentInput(c)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	if _, known := s.meta[in.Context]; !known {
		c.fail(unknownContext(in.Context))
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		sg, aerr := s.upsertSegmentLocked(cat, in)
		if aerr != nil {
			return nil, aerr
		}
		return s.segmentFull(cat, sg), nil
	})
}

func (s *Sim) handleSegmentDelete(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		sg := cat.segment(id)
		if sg == nil {
			return nil, &apiError{Status: 500, Name: "Error", Message: "Query Failed"}
		}
		out := s.segmentRow(sg)
		s.deleteSegmentLocked(id)
		return out, nil
	})
}

func (s *Sim) handleSegmentListAdd(c *call) {
	in, aerr := s.readSegmentInput(c)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		parent := cat.segment(in.ParentSegmentID)
		if parent == nil || parent.Type == upgrade.SegmentPrivate {
			return nil, serverError("Parent Segment not found", "")
		}
		in.Type = upgrade.SegmentPrivate
		sg, aerr := s.upsertSegmentLocked(cat, in)
		if aerr != nil {
			return nil, aerr
		}
		if !slices.Contains(parent.SubSegmentIDs, sg.ID) {
			parent.SubSegmentIDs = append(slices.Clone(parent.SubSegmentIDs), sg.ID)
		}
		// The parent is saved again: tags null become [].
		if parent.Tags == nil {
			parent.Tags = []string{}
		}
		parent.UpdatedAt, parent.VersionNumber = s.timestamp(), parent.VersionNumber+1
		return s.segmentFull(cat, sg), nil
	})
}

func (s *Sim) handleSegmentListDelete(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	ck := &checker{}
	parentID := ck.str(m, "", "parentSegmentId", true)
	if parentID != "" && !upgrade.IsUUID(parentID) {
		ck.failf("parentSegmentId", "must be a UUID")
	}
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		parent := cat.segment(parentID)
		if parent == nil || parent.Type == upgrade.SegmentPrivate {
			return nil, serverError("Parent Segment  not found", "")
		}
		sg := cat.segment(id)
		if sg == nil || !slices.Contains(parent.SubSegmentIDs, id) {
			return nil, serverError(fmt.Sprintf("List %s not found in parent segment %s", id, parentID), "")
		}
		out := s.segmentRow(sg)
		cat.deleteSegment(id)
		if parent.Tags == nil {
			parent.Tags = []string{}
		}
		parent.UpdatedAt, parent.VersionNumber = s.timestamp(), parent.VersionNumber+1
		return out, nil
	})
}
