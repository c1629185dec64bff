package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

var (
	flagSearchKeys  = []string{"all", "name", "key", "status", "tag", "context", "id"}
	flagSortKeys    = []string{"name", "key", "status", "updatedAt"}
	segmentSortKeys = []string{"name", "updatedAt"}
)

// catalogRoute finds the handler of a flag, segment or audit route; nil when
// the path is none of them. All of them are admin routes except
// /v6/featureflag.
func (s *Sim) catalogRoute(m string, segs, low []string) (h func(*call), admin bool) {
	n := len(segs)
	at := func(i int, v string) bool { return n > i && low[i] == v }
	switch {
	case n == 2 && at(0, "v6") && at(1, "featureflag") && m == http.MethodPost:
		return s.handleFeatureFlag, false
	case n == 1 && at(0, "audit") && m == http.MethodPost:
		return s.handleAudit, true
	case at(0, "flags"):
		return s.flagRoute(m, segs, low), true
	case at(0, "segments"):
		return s.segmentRoute(m, segs, low), true
	}
	return nil, false
}

func (s *Sim) flagRoute(m string, segs, low []string) func(*call) {
	n := len(segs)
	switch {
	case n == 1 && m == http.MethodGet:
		return s.handleFlags
	case n == 1 && m == http.MethodPost:
		return s.handleFlagCreate
	case n == 2 && low[1] == "paginated" && m == http.MethodPost:
		return s.handleFlagsPage
	case n == 2 && low[1] == "status" && m == http.MethodPatch:
		return func(c *call) { s.handleFlagPatch(c, "status", upgrade.FlagStatuses()) }
	case n == 2 && low[1] == "filtermode" && m == http.MethodPatch:
		return func(c *call) { s.handleFlagPatch(c, "filterMode", upgrade.FilterModes()) }
	case n == 2 && isListKind(low[1]) && m == http.MethodPost:
		return func(c *call) { s.handleFlagListAdd(c, listKind(low[1])) }
	case n == 3 && isListKind(low[1]) && m == http.MethodPut:
		return func(c *call) { s.handleFlagListPut(c, listKind(low[1]), segs[2]) }
	case n == 3 && isListKind(low[1]) && m == http.MethodDelete:
		return func(c *call) { s.handleFlagListDelete(c, listKind(low[1]), segs[2]) }
	case n == 2 && m == http.MethodGet:
		return func(c *call) { s.handleFlagGet(c, segs[1]) }
	case n == 2 && m == http.MethodPut:
		return func(c *call) { s.handleFlagPut(c, segs[1]) }
	case n == 2 && m == http.MethodDelete:
		return func(c *call) { s.handleFlagDelete(c, segs[1]) }
	}
	return nil
}

// answer runs fn under the read lock and answers its value (200).
func (s *Sim) answer(c *call, fn func() (any, *apiError)) {
	var (
		out  any
		aerr *apiError
	)
	if err := s.view(func() { out, aerr = fn() }); err != nil {
		c.failErr(err)
		return
	}
	if aerr != nil {
		c.fail(aerr)
		return
	}
	c.ok(out)
}

// change runs fn as a change and answers its value (200).
func (s *Sim) change(c *call, fn func() (any, *apiError)) {
	s.write(c, func() ([]byte, *apiError) {
		v, aerr := fn()
		if aerr != nil {
			return nil, aerr
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, storageError(err)
		}
		return b, nil
	})
}

func (s *Sim) handleFlags(c *call) {
	s.answer(c, func() (any, *apiError) {
		out := []any{}
		for _, f := range s.cat().Flags {
			out = append(out, flagRow(f))
		}
		return out, nil
	})
}

func (s *Sim) handleFlagGet(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	var out obj
	if err := s.view(func() {
		cat := s.cat()
		if f := cat.flag(id); f != nil {
			out = s.flagWithLists(cat, f)
		}
	}); err != nil {
		c.failErr(err)
		return
	}
	if out == nil {
		// 6.5 answers an unknown flag with 204 and no body.
		c.w.WriteHeader(http.StatusNoContent)
		return
	}
	c.ok(out)
}

// flagFields checks the fields a flag create/update body and an imported
// flag file share (FeatureFlagValidation's, measured on 6.5).
func (ck *checker) flagFields(m map[string]any) {
	ck.str(m, "", "name", true)
	ck.str(m, "", "key", true)
	ck.str(m, "", "description", false)
	ck.enum(m, "", "status", upgrade.FlagStatuses(), true)
	ck.enum(m, "", "filterMode", upgrade.FilterModes(), true)
	if a, ok := ck.array(m, "", "context", true); ok {
		if len(a) == 0 {
			ck.failf("context", "should not be empty")
		}
		for i, v := range a {
			if _, isStr := v.(string); !isStr {
				ck.failf(fmt.Sprintf("context[%d]", i), "must be a string")
			}
		}
	}
	if a, ok := ck.array(m, "", "tags", true); ok {
		for i, v := range a {
			if _, isStr := v.(string); !isStr {
				ck.failf(fmt.Sprintf("tags[%d]", i), "must be a string")
			}
		}
	}
}

// parseFlag validates a flag create/update body as the server does.
func (s *Sim) parseFlag(c *call) (*upgrade.FeatureFlag, *apiError) {
	m, aerr := c.object()
	if aerr != nil {
		return nil, aerr
	}
	ck := &checker{}
	ck.flagFields(m)
	if aerr := ck.err(); aerr != nil {
		return nil, aerr
	}
	var f upgrade.FeatureFlag
	if err := json.Unmarshal(c.body, &f); err != nil {
		return nil, badBody(err.Error())
	}
	if _, ok := m["description"]; !ok {
		// The server writes NULL into a NOT NULL column.
		return nil, &apiError{Status: 500, Name: "Error", Type: typeQueryFailed,
			Message: `Error in creating feature flag document "addFeatureFlagInDB" QueryFailedError: null value in column "description" of relation "feature_flag" violates not-null constraint`}
	}
	if _, known := s.meta[f.Context[0]]; !known {
		return nil, unknownContext(f.Context[0])
	}
	f.Inclusion, f.Exclusion, f.Exposures = nil, nil, nil
	return &f, nil
}

// unknownContext is the answer to a flag or segment of a context the
// metadata does not define.
func unknownContext(ctx string) *apiError {
	return &apiError{Status: 400, Name: "BadRequestError", Type: typeIncorrectParam,
		Message: fmt.Sprintf("The app context %q is not defined in CONTEXT_METADATA.", ctx)}
}

func dupKey(cat *catalog, f *upgrade.FeatureFlag) *apiError {
	for _, o := range cat.Flags {
		if o.ID != f.ID && o.Key == f.Key && slices.Equal(o.Context, f.Context) {
			return &apiError{Status: 409, Name: "Error", Type: "Feature Flag with same key already exists for this app-context",
				Message: "A flag with this key already exists for this app-context"}
		}
	}
	return nil
}

func (s *Sim) handleFlagCreate(c *call) {
	f, aerr := s.parseFlag(c)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		if f.ID != "" && cat.flag(f.ID) != nil {
			// The sent id is replaced, but a flag with that id and key
			// makes the insert fail.
			if cat.flag(f.ID).Key == f.Key {
				return nil, &apiError{Status: 500, Name: "Error", Type: typeQueryFailed,
					Message: `Error in creating feature flag document "addFeatureFlagInDB" QueryFailedError: duplicate key value violates unique constraint "UQ_653d98ebae725596b4052f80a65"`}
			}
		}
		f.ID = s.newID()
		if aerr := dupKey(cat, f); aerr != nil {
			return nil, aerr
		}
		now := s.timestamp()
		f.CreatedAt, f.UpdatedAt, f.VersionNumber = now, now, 1
		cat.Flags = append(cat.Flags, f)
		s.audit(upgrade.AuditFlagCreated, obj{"flagId": f.ID, "flagName": f.Name})
		return flagRow(f), nil
	})
}

func (s *Sim) handleFlagPut(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	f, aerr := s.parseFlag(c)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		old := cat.flag(id)
		if old == nil {
			return nil, typeError("Cannot destructure property 'featureFlagSegmentExclusion' of '_a' as it is null.")
		}
		f.ID = id
		if aerr := dupKey(cat, f); aerr != nil {
			return nil, aerr
		}
		if f.ContextName() != old.ContextName() {
			// A new context[0] deletes every list of the flag.
			for _, l := range slices.Clone(cat.FlagLists) {
				if l.FlagID == id {
					cat.deleteSegment(l.SegmentID)
				}
			}
		}
		f.CreatedAt, f.UpdatedAt, f.VersionNumber = old.CreatedAt, s.timestamp(), old.VersionNumber+1
		diff := auditDiff(flagRow(old), flagRow(f))
		*old = *f
		s.audit(upgrade.AuditFlagUpdated, obj{"flagId": f.ID, "flagName": f.Name, "diff": diff})
		return s.flagWithLists(cat, old), nil
	})
}

func (s *Sim) handleFlagPatch(c *call, field string, values []string) {
	m, aerr := c.object()
	if aerr != nil {
		c.fail(aerr)
		return
	}
	ck := &checker{}
	id := ck.str(m, "", "flagId", true)
	val := ck.enum(m, "", field, values, true)
	if id != "" && !upgrade.IsUUID(id) {
		ck.failf("flagId", "must be a UUID")
	}
	if aerr := ck.err(); aerr != nil {
		c.fail(aerr)
		return
	}
	s.change(c, func() (any, *apiError) {
		f := s.cat().flag(id)
		if f == nil {
			// The server's own failure, worded by the property each
			// route reads first.
			if field == "status" {
				return nil, typeError("Cannot read properties of null (reading 'context')")
			}
			return nil, typeError("Cannot read properties of undefined (reading 'name')")
		}
		prev := f.Status
		if field == "status" {
			f.Status = val
		} else {
			f.FilterMode = val
		}
		f.UpdatedAt, f.VersionNumber = s.timestamp(), f.VersionNumber+1
		if field == "status" {
			s.audit(upgrade.AuditFlagStatusChanged, obj{"flagId": f.ID, "flagName": f.Name, "previousState": prev, "newState": val})
		} else {
			s.audit(upgrade.AuditFlagUpdated, obj{"flagId": f.ID, "flagName": f.Name, "filterMode": val})
		}
		return flagRow(f), nil
	})
}

func (s *Sim) handleFlagDelete(c *call, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		f := cat.flag(id)
		if f == nil {
			return nil, &apiError{Status: 404, Name: "NotFoundError", Message: "", Type: typeQueryFailed}
		}
		for _, l := range slices.Clone(cat.FlagLists) {
			if l.FlagID == id {
				cat.deleteSegment(l.SegmentID)
			}
		}
		cat.Flags = slices.DeleteFunc(cat.Flags, func(x *upgrade.FeatureFlag) bool { return x.ID == id })
		delete(cat.Exposures, id)
		s.audit(upgrade.AuditFlagDeleted, obj{"flagName": f.Name})
		return []any{flagRow(f)}, nil
	})
}

func (s *Sim) handleFlagsPage(c *call) {
	m, search, sortBy, aerr := pageParams(c, flagSearchKeys, flagSortKeys)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	skip, take := intOf(m["skip"]), intOf(m["take"])
	s.answer(c, func() (any, *apiError) {
		cat := s.cat()
		var list []*upgrade.FeatureFlag
		for _, f := range cat.Flags {
			if search == nil || flagMatches(f, search) {
				list = append(list, f)
			}
		}
		total := len(list)
		sortFlags(list, sortBy)
		list = page(list, skip, take)
		nodes := []any{}
		for _, f := range list {
			r := flagRow(f)
			r["featureFlagExposures"] = len(cat.Exposures[f.ID])
			if inc := cat.listsOf(f.ID, kindInclusion); len(inc) > 0 {
				rows := []any{}
				for _, l := range inc {
					rows = append(rows, listRowObj(l))
				}
				r["featureFlagSegmentInclusion"] = rows
			}
			nodes = append(nodes, r)
		}
		out := obj{"total": total, "nodes": nodes}
		echoPaging(m, out)
		return out, nil
	})
}

// pageParams validates a paginated body.
func pageParams(c *call, searchKeys, sortKeys []string) (m, search, sortBy map[string]any, aerr *apiError) {
	m, aerr = c.object()
	if aerr != nil {
		return nil, nil, nil, aerr
	}
	ck := &checker{}
	ck.number(m, "", "skip", false, true)
	ck.number(m, "", "take", false, true)
	if v, ok := m["searchParams"]; !absent(v, ok) {
		if search = ck.object(m, "", "searchParams", false); search != nil {
			ck.enum(search, "searchParams", "key", searchKeys, false)
			ck.str(search, "searchParams", "string", true)
		}
	}
	if v, ok := m["sortParams"]; !absent(v, ok) {
		if sortBy = ck.object(m, "", "sortParams", false); sortBy != nil {
			ck.enum(sortBy, "sortParams", "key", sortKeys, true)
			ck.enum(sortBy, "sortParams", "sortAs", sortDirections, true)
		}
	}
	return m, search, sortBy, ck.err()
}

func echoPaging(m map[string]any, out obj) {
	for _, k := range []string{"skip", "take", "searchParams", "sortParams"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
}

func page[T any](list []T, skip, take int) []T {
	if skip > 0 {
		list = list[min(skip, len(list)):]
	}
	if take > 0 && take < len(list) {
		list = list[:take]
	}
	return list
}

// flagMatches imitates the paginated search. Neither "key" nor "all"
// searches the key column on 6.5 [paginated: search key='key']: both look
// at the name (and "all" at status, context and tags too).
func flagMatches(f *upgrade.FeatureFlag, p map[string]any) bool {
	key, _ := p["key"].(string)
	str, _ := p["string"].(string)
	has := func(hay string) bool { return ilikeContains(hay, str) }
	switch key {
	case "name":
		return has(f.Name)
	case "status":
		return has(f.Status)
	case "context":
		return has(strings.Join(f.Context, ","))
	case "tag":
		return has(strings.Join(f.Tags, ","))
	case "id":
		// A search for a non-UUID id has no condition at all.
		return !upgrade.IsUUID(str) || strings.EqualFold(f.ID, str)
	}
	return has(f.Name) || has(f.Status) || has(strings.Join(f.Context, ",")) || has(strings.Join(f.Tags, ",")) ||
		(upgrade.IsUUID(str) && strings.EqualFold(f.ID, str))
}

// ilikeContains is PostgreSQL's hay ILIKE '%needle%' as the server builds
// it: case-insensitive, '%' escaped (literal) but '_' left a wildcard that
// matches any one character.
func ilikeContains(hay, needle string) bool {
	h, n := []rune(strings.ToLower(hay)), []rune(strings.ToLower(needle))
	for i := 0; i+len(n) <= len(h); i++ {
		match := true
		for j, r := range n {
			if r != '_' && r != h[i+j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func sortFlags(list []*upgrade.FeatureFlag, p map[string]any) {
	sortByField(list, p, func(f *upgrade.FeatureFlag, key string) string {
		switch key {
		case "name":
			return f.Name
		case "key":
			return f.Key
		case "status":
			return f.Status
		}
		return f.UpdatedAt
	})
}

// sortByField orders a page by sortParams {key, sortAs}, newest update
// first by default; ties keep creation order.
func sortByField[T any](list []T, p map[string]any, field func(T, string) string) {
	key, dir := "updatedAt", "DESC"
	if p != nil {
		key, _ = p["key"].(string)
		dir, _ = p["sortAs"].(string)
	}
	sort.SliceStable(list, func(i, j int) bool {
		if dir == "DESC" {
			return field(list[i], key) > field(list[j], key)
		}
		return field(list[i], key) < field(list[j], key)
	})
}

// flagListBody is the body of the flag list routes.
type flagListBody struct {
	FlagID   string        `json:"id"`
	Enabled  *bool         `json:"enabled"`
	ListType string        `json:"listType"`
	Segment  *segmentInput `json:"segment"`
}

func (s *Sim) parseFlagList(c *call) (*flagListBody, *apiError) {
	m, aerr := c.object()
	if aerr != nil {
		return nil, aerr
	}
	var in flagListBody
	if err := json.Unmarshal(c.body, &in); err != nil {
		return nil, badBody(err.Error())
	}
	ck := &checker{}
	ck.boolean(m, "", "enabled", true)
	ck.str(m, "", "listType", true) // @IsNotEmpty on 6.5: missing or "" is a 400
	if aerr := ck.err(); aerr != nil {
		return nil, aerr
	}
	if seg, ok := m["segment"].(map[string]any); ok {
		// The list validator validates its segment as a nested object.
		if aerr := checkSegmentInput(seg, "segment"); aerr != nil {
			return nil, aerr
		}
	}
	if in.Segment == nil {
		return nil, typeError("Cannot set properties of undefined (setting 'type')")
	}
	return &in, nil
}

func (s *Sim) listAnswer(cat *catalog, l *flagListRow) obj {
	r := listRowObj(l)
	if f := cat.flag(l.FlagID); f != nil {
		r["featureFlag"] = flagRow(f)
	}
	if sg := cat.segment(l.SegmentID); sg != nil {
		r["segment"] = s.segmentFull(cat, sg)
	}
	return r
}

func (s *Sim) handleFlagListAdd(c *call, kind string) {
	in, aerr := s.parseFlagList(c)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		if cat.flag(in.FlagID) == nil {
			return nil, &apiError{Status: 500, Name: "Error", Type: typeQueryFailed, Message: fmt.Sprintf(
				`Error in adding segment for feature flag %s list: QueryFailedError: null value in column "featureFlagId" of relation "feature_flag_segment_%s" violates not-null constraint`, kind, kind)}
		}
		in.Segment.Type = upgrade.SegmentPrivate // a list added to a flag is forced private
		sg, aerr := s.upsertSegmentLocked(cat, in.Segment)
		if aerr != nil {
			return nil, aerr
		}
		now := s.timestamp()
		l := &flagListRow{Kind: kind, FlagID: in.FlagID, SegmentID: sg.ID, Enabled: *in.Enabled, ListType: in.ListType,
			CreatedAt: now, UpdatedAt: now, VersionNumber: 1}
		cat.FlagLists = append(cat.FlagLists, l)
		s.auditFlagList(cat.flag(in.FlagID), sg, kind, "created", "")
		return s.listAnswer(cat, l), nil
	})
}

func (s *Sim) handleFlagListPut(c *call, kind, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	in, aerr := s.parseFlagList(c)
	if aerr != nil {
		c.fail(aerr)
		return
	}
	if in.Segment.ID != id {
		c.fail(serverError(fmt.Sprintf("%s: The id in the URL (%s) does not match the list id in the request body (%s).",
			typeIncorrectParam, id, in.Segment.ID), ""))
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		l := cat.listRow(id)
		if l == nil || l.Kind != kind {
			return nil, serverError(fmt.Sprintf("No existing %s record found for feature flag %s and segment %s", kind, in.FlagID, id), "")
		}
		// The type sent is kept: "public" makes the list a visible segment.
		var before obj
		if old := cat.segment(id); old != nil {
			before = s.segmentFull(cat, old)
		}
		sg, aerr := s.upsertSegmentLocked(cat, in.Segment)
		if aerr != nil {
			return nil, aerr
		}
		if f := cat.flag(l.FlagID); f != nil {
			s.auditFlagList(f, sg, kind, "updated", auditDiff(before, s.segmentFull(cat, sg)))
		}
		l.Enabled, l.ListType = *in.Enabled, in.ListType
		l.UpdatedAt, l.VersionNumber = s.timestamp(), l.VersionNumber+1
		return s.listAnswer(cat, l), nil
	})
}

func (s *Sim) handleFlagListDelete(c *call, kind, id string) {
	if !upgrade.IsUUID(id) {
		c.fail(badParam("id: must be a UUID"))
		return
	}
	s.change(c, func() (any, *apiError) {
		cat := s.cat()
		l := cat.listRow(id)
		sg := cat.segment(id)
		if l == nil || l.Kind != kind || sg == nil {
			return nil, serverError(fmt.Sprintf("Segment with ID %s not found for %s", id, kind), "")
		}
		out := s.segmentRow(sg)
		if f := cat.flag(l.FlagID); f != nil {
			s.auditFlagList(f, sg, kind, "deleted", "")
		}
		cat.deleteSegment(id)
		return out, nil
	})
}
