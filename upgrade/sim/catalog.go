package sim

import (
	"fmt"
	"slices"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
)

// The catalog is what an admin manages besides experiments: feature flags,
// their include and exclude lists, segments (public, private lists,
// global_exclude), flag exposures and the audit log
// (upgrade-flags-segments.md). A flag list is a row linking a flag to a
// private segment whose id is the list id, as on the server.

// catalog is the part of the data file for flags, segments and audit.
type catalog struct {
	Flags     []*upgrade.FeatureFlag `json:"flags"`
	FlagLists []*flagListRow         `json:"flagLists"`
	Segments  []*simSegment          `json:"segments"`
	// Exposures holds, per flag id, the users it was served to, each once.
	Exposures map[string][]string `json:"exposures,omitempty"`
	Audit     []*auditRow         `json:"audit,omitempty"`
}

// flagListRow links a flag to the private segment that is the list.
type flagListRow struct {
	Kind          string `json:"kind"` // inclusion or exclusion
	FlagID        string `json:"flagId"`
	SegmentID     string `json:"segmentId"`
	Enabled       bool   `json:"enabled"`
	ListType      string `json:"listType"`
	CreatedAt     string `json:"createdAt"`
	UpdatedAt     string `json:"updatedAt"`
	VersionNumber int    `json:"versionNumber"`
}

// simSegment is one segment row with its members.
type simSegment struct {
	ID            string             `json:"id"`
	Name          string             `json:"name"`
	Description   *string            `json:"description"` // nil: created without one, read back as null like 6.5
	ListType      *string            `json:"listType"`
	Context       string             `json:"context"`
	Type          string             `json:"type"`
	Tags          []string           `json:"tags"`
	Users         []string           `json:"users"`
	Groups        []upgrade.GroupRef `json:"groups"`
	SubSegmentIDs []string           `json:"subSegmentIds"`
	CreatedAt     string             `json:"createdAt"`
	UpdatedAt     string             `json:"updatedAt"`
	VersionNumber int                `json:"versionNumber"`
}

// auditRow is one audit log entry.
type auditRow struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Data      obj    `json:"data"`
	CreatedAt string `json:"createdAt"`
}

// cat returns the catalog, making it (with one global exclusion segment per
// context, as the server seeds them) on first use.
func (s *Sim) cat() *catalog {
	if s.st.Catalog == nil {
		s.st.Catalog = &catalog{}
	}
	c := s.st.Catalog
	for _, ctx := range sortedContexts(s.meta) {
		id := upgrade.IDFrom("global_exclude/" + ctx)
		if c.segment(id) == nil {
			now := s.timestamp()
			desc := "Globally excluded Users, Groups and Segments"
			c.Segments = append(c.Segments, &simSegment{ID: id, Name: "Global Exclude", Description: &desc,
				Context: ctx, Type: upgrade.SegmentGlobalExclude, Users: []string{}, Groups: []upgrade.GroupRef{}, SubSegmentIDs: []string{},
				CreatedAt: now, UpdatedAt: now, VersionNumber: 1})
		}
	}
	return c
}

func sortedContexts(m upgrade.ContextMetadata) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (c *catalog) flag(id string) *upgrade.FeatureFlag {
	for _, f := range c.Flags {
		if f.ID == id {
			return f
		}
	}
	return nil
}

func (c *catalog) segment(id string) *simSegment {
	for _, sg := range c.Segments {
		if sg.ID == id {
			return sg
		}
	}
	return nil
}

func (c *catalog) listsOf(flagID, kind string) []*flagListRow {
	var out []*flagListRow
	for _, l := range c.FlagLists {
		if l.FlagID == flagID && l.Kind == kind {
			out = append(out, l)
		}
	}
	return out
}

func (c *catalog) listRow(segID string) *flagListRow {
	for _, l := range c.FlagLists {
		if l.SegmentID == segID {
			return l
		}
	}
	return nil
}

// deleteSegment removes a segment and every reference to it: parents lose
// it as a sub-segment, and a flag list that is this segment goes too.
func (c *catalog) deleteSegment(id string) {
	c.Segments = slices.DeleteFunc(c.Segments, func(sg *simSegment) bool { return sg.ID == id })
	for _, sg := range c.Segments {
		sg.SubSegmentIDs = slices.DeleteFunc(slices.Clone(sg.SubSegmentIDs), func(x string) bool { return x == id })
	}
	c.FlagLists = slices.DeleteFunc(c.FlagLists, func(l *flagListRow) bool { return l.SegmentID == id })
}

// deleteSegmentLocked is DELETE /segments/{id}: the segment goes from the
// catalog and from the experiment lists that include it.
func (s *Sim) deleteSegmentLocked(id string) {
	s.cat().deleteSegment(id)
	for _, rows := range s.st.Lists {
		for _, r := range rows {
			if slices.Contains(r.SubSegmentIDs, id) {
				r.SubSegmentIDs = slices.DeleteFunc(slices.Clone(r.SubSegmentIDs), func(x string) bool { return x == id })
			}
		}
	}
}

// audit appends one audit log entry.
func (s *Sim) audit(typ string, data obj) {
	c := s.cat()
	// Not from the id stream: auditing must not shift the ids (and so the
	// draws and goldens) of everything created afterwards.
	id := upgrade.IDFrom(fmt.Sprintf("audit/%d/%s/%v", len(c.Audit), typ, data["experimentId"]))
	c.Audit = append(c.Audit, &auditRow{ID: id, Type: typ, Data: data, CreatedAt: s.timestamp()})
}

// ---- rendering ----

func (s *Sim) segmentRow(sg *simSegment) obj {
	var tags any
	if sg.Tags != nil {
		tags = sg.Tags
	}
	var lt any
	if sg.ListType != nil {
		lt = *sg.ListType
	}
	return obj{"id": sg.ID, "name": sg.Name, "description": strPtr(sg.Description), "listType": lt, "context": sg.Context,
		"type": sg.Type, "tags": tags, "createdAt": sg.CreatedAt, "updatedAt": sg.UpdatedAt, "versionNumber": sg.VersionNumber}
}

// segmentFull is a segment with its members and its direct sub-segments
// (rows without members).
func (s *Sim) segmentFull(c *catalog, sg *simSegment) obj {
	m := s.segmentRow(sg)
	users := make([]any, 0, len(sg.Users))
	for _, u := range sg.Users {
		users = append(users, obj{"segmentId": sg.ID, "userId": u, "createdAt": sg.UpdatedAt, "updatedAt": sg.UpdatedAt, "versionNumber": 1})
	}
	groups := make([]any, 0, len(sg.Groups))
	for _, g := range sg.Groups {
		groups = append(groups, obj{"segmentId": sg.ID, "groupId": g.GroupID, "type": g.Type, "createdAt": sg.UpdatedAt, "updatedAt": sg.UpdatedAt, "versionNumber": 1})
	}
	subs := []any{}
	for _, id := range sg.SubSegmentIDs {
		if sub := c.segment(id); sub != nil {
			subs = append(subs, s.segmentRow(sub))
		}
	}
	m["individualForSegment"], m["groupForSegment"], m["subSegments"] = users, groups, subs
	return m
}

func flagRow(f *upgrade.FeatureFlag) obj {
	return obj{"id": f.ID, "name": f.Name, "key": f.Key, "description": f.Description, "context": f.Context, "tags": f.Tags,
		"status": f.Status, "filterMode": f.FilterMode, "createdAt": f.CreatedAt, "updatedAt": f.UpdatedAt, "versionNumber": f.VersionNumber}
}

func listRowObj(l *flagListRow) obj {
	return obj{"segmentId": l.SegmentID, "featureFlagId": l.FlagID, "enabled": l.Enabled, "listType": l.ListType,
		"createdAt": l.CreatedAt, "updatedAt": l.UpdatedAt, "versionNumber": l.VersionNumber}
}

// flagWithLists is GET /flags/{id} and the PUT answer.
func (s *Sim) flagWithLists(c *catalog, f *upgrade.FeatureFlag) obj {
	m := flagRow(f)
	for _, k := range []struct{ kind, key string }{{kindInclusion, "featureFlagSegmentInclusion"}, {kindExclusion, "featureFlagSegmentExclusion"}} {
		rows := []any{}
		for _, l := range c.listsOf(f.ID, k.kind) {
			r := listRowObj(l)
			if sg := c.segment(l.SegmentID); sg != nil {
				r["segment"] = s.segmentFull(c, sg)
			}
			rows = append(rows, r)
		}
		m[k.key] = rows
	}
	return m
}

// ---- evaluation and usage ----

// record converts a stored segment to the client model, members included
// and sub-segments as bare rows (the evaluator looks them up by id).
func (c *catalog) record(sg *simSegment) upgrade.SegmentRecord {
	r := upgrade.SegmentRecord{ID: sg.ID, Name: sg.Name, Context: sg.Context, Type: sg.Type}
	for _, u := range sg.Users {
		r.Users = append(r.Users, upgrade.SegmentUser{SegmentID: sg.ID, UserID: u})
	}
	for _, g := range sg.Groups {
		r.Groups = append(r.Groups, upgrade.SegmentGroup{SegmentID: sg.ID, Type: g.Type, GroupID: g.GroupID})
	}
	for _, id := range sg.SubSegmentIDs {
		if sub := c.segment(id); sub != nil {
			r.SubSegments = append(r.SubSegments, upgrade.SegmentRecord{ID: sub.ID, Name: sub.Name})
		}
	}
	return r
}

// evalInput is the flag with its lists and every segment, for flageval.
func (c *catalog) evalInput(f *upgrade.FeatureFlag) (*upgrade.FeatureFlag, flageval.Segments, []upgrade.SegmentRecord) {
	recs := make([]upgrade.SegmentRecord, 0, len(c.Segments))
	var global []upgrade.SegmentRecord
	for _, sg := range c.Segments {
		recs = append(recs, c.record(sg))
		if sg.Type == upgrade.SegmentGlobalExclude {
			global = append(global, c.record(sg))
		}
	}
	segs := flageval.NewSegments(recs...)
	cp := *f
	cp.Inclusion, cp.Exclusion = nil, nil
	for _, l := range c.FlagLists {
		if l.FlagID != f.ID {
			continue
		}
		fl := upgrade.FlagList{SegmentID: l.SegmentID, FeatureFlagID: f.ID, Enabled: l.Enabled, ListType: l.ListType, Segment: segs[l.SegmentID]}
		if l.Kind == kindInclusion {
			cp.Inclusion = append(cp.Inclusion, fl)
		} else {
			cp.Exclusion = append(cp.Exclusion, fl)
		}
	}
	return &cp, segs, global
}

// descendants lists the segments below sg (not sg), each once.
func (c *catalog) descendants(sg *simSegment) map[string]bool {
	out := map[string]bool{}
	var walk func(ids []string)
	walk = func(ids []string) {
		for _, id := range ids {
			if out[id] {
				continue
			}
			out[id] = true
			if sub := c.segment(id); sub != nil {
				walk(sub.SubSegmentIDs)
			}
		}
	}
	walk(sg.SubSegmentIDs)
	return out
}

// usageRoots are the private segments of every flag list and of every
// non-archived experiment's lists: what makes a segment "used".
func (s *Sim) usageRoots(c *catalog) []*simSegment {
	var out []*simSegment
	for _, e := range s.st.Experiments {
		if e.State == upgrade.StateArchived {
			continue
		}
		for _, kind := range []string{kindInclusion, kindExclusion} {
			for _, r := range s.listRowsLocked(e, kind) {
				out = append(out, &simSegment{ID: r.ID, SubSegmentIDs: r.SubSegmentIDs})
			}
		}
	}
	for _, l := range c.FlagLists {
		if sg := c.segment(l.SegmentID); sg != nil {
			out = append(out, sg)
		}
	}
	return out
}

// parentSegments are the server's "parent segments": segments with a
// sub-segment whose listType is "Segment" (a list that includes public
// segments), each shown with those sub-segments only.
func (c *catalog) parentSegments() []*simSegment {
	var out []*simSegment
	for _, sg := range c.Segments {
		for _, id := range sg.SubSegmentIDs {
			if sub := c.segment(id); sub != nil && sub.ListType != nil && *sub.ListType == "Segment" {
				out = append(out, sg)
				break
			}
		}
	}
	return out
}

// usedSegments imitates SegmentService.getSegmentStatus. shown are the
// segments of the answer: only their sub-segments are followed, so a
// segment below a used one is "used" in GET /segments (every public
// segment is shown) and in a page holding its parent, but "unused" in
// GET /segments/status/{id}. The segments two levels below a parent
// segment start as used, and are never followed.
func (s *Sim) usedSegments(c *catalog, shown []*simSegment) map[string]bool {
	used := map[string]bool{}
	for _, p := range c.parentSegments() {
		for _, id := range p.SubSegmentIDs {
			if sub := c.segment(id); sub != nil && sub.ListType != nil && *sub.ListType == "Segment" {
				for _, x := range sub.SubSegmentIDs {
					used[x] = true
				}
			}
		}
	}
	children := map[string][]string{}
	for _, sg := range shown {
		children[sg.ID] = sg.SubSegmentIDs
	}
	var collect func(id string)
	collect = func(id string) {
		if used[id] {
			return
		}
		used[id] = true
		for _, sub := range children[id] {
			collect(sub)
		}
	}
	for _, root := range s.usageRoots(c) {
		collect(root.ID)
		for _, sub := range root.SubSegmentIDs {
			collect(sub)
		}
	}
	return used
}

// segmentStatus is a segment's status in an answer showing segments shown.
func segmentStatus(sg *simSegment, used map[string]bool) string {
	switch {
	case sg.Type == upgrade.SegmentGlobalExclude:
		return upgrade.SegmentExcluded
	case used[sg.ID]:
		return upgrade.SegmentUsed
	}
	return upgrade.SegmentUnused
}

// usageArrays are the five arrays of the segment reads: every list row of
// the server with its flag or experiment and its segment's sub-segments.
func (s *Sim) usageArrays(c *catalog, used map[string]bool) obj {
	sub := func(ids []string) []any {
		out := []any{}
		for _, id := range ids {
			if sg := c.segment(id); sg != nil {
				out = append(out, s.segmentRow(sg))
			}
		}
		return out
	}
	flagRows := func(kind string) []any {
		out := []any{}
		for _, l := range c.FlagLists {
			f := c.flag(l.FlagID)
			sg := c.segment(l.SegmentID)
			if l.Kind != kind || f == nil || sg == nil {
				continue
			}
			r := listRowObj(l)
			r["featureFlag"] = obj{"name": f.Name, "description": f.Description, "status": f.Status, "context": f.Context}
			r["segment"] = obj{"id": sg.ID, "subSegments": sub(sg.SubSegmentIDs)}
			out = append(out, r)
		}
		return out
	}
	expRows := func(kind string) []any {
		out := []any{}
		for _, e := range s.st.Experiments {
			for _, r := range s.listRowsLocked(e, kind) {
				out = append(out, s.rowMeta(e, obj{"segmentId": r.ID, "experimentId": e.ID,
					"experiment": obj{"name": e.Name, "description": e.Description, "context": e.Context, "state": e.State.Display()},
					"segment":    obj{"id": r.ID, "subSegments": sub(r.SubSegmentIDs)}}))
			}
		}
		return out
	}
	parents := []any{}
	for _, sg := range c.parentSegments() {
		p := s.segmentRow(sg)
		lists := []any{}
		for _, id := range sg.SubSegmentIDs {
			if l := c.segment(id); l != nil && l.ListType != nil && *l.ListType == "Segment" {
				r := s.segmentRow(l)
				r["subSegments"] = sub(l.SubSegmentIDs)
				lists = append(lists, r)
			}
		}
		p["subSegments"] = lists
		p["status"] = segmentStatus(sg, used)
		parents = append(parents, p)
	}
	return obj{
		"experimentSegmentInclusionData":  expRows(kindInclusion),
		"experimentSegmentExclusionData":  expRows(kindExclusion),
		"featureFlagSegmentInclusionData": flagRows(kindInclusion),
		"featureFlagSegmentExclusionData": flagRows(kindExclusion),
		"allParentSegments":               parents,
	}
}

// withSubSegments is e with the members of the public segments its list
// rows include (at any depth) added to its inclusion and exclusion, so that
// assignment sees them [exp incl via public segment]. e itself when no
// list has sub-segments.
func (s *Sim) withSubSegments(e *upgrade.Experiment) *upgrade.Experiment {
	rows := s.st.Lists[e.ID]
	if !slices.ContainsFunc(rows, func(r *listRow) bool { return len(r.SubSegmentIDs) > 0 }) {
		return e
	}
	cat := s.cat()
	cp := *e
	cp.Inclusion = upgrade.Segment{Users: slices.Clone(e.Inclusion.Users), Groups: slices.Clone(e.Inclusion.Groups)}
	cp.Exclusion = upgrade.Segment{Users: slices.Clone(e.Exclusion.Users), Groups: slices.Clone(e.Exclusion.Groups)}
	for _, r := range rows {
		target := &cp.Inclusion
		if r.Kind == kindExclusion {
			target = &cp.Exclusion
		}
		for id := range cat.descendants(&simSegment{SubSegmentIDs: r.SubSegmentIDs}) {
			if sg := cat.segment(id); sg != nil {
				target.Users = append(target.Users, sg.Users...)
				target.Groups = append(target.Groups, sg.Groups...)
			}
		}
	}
	return &cp
}
