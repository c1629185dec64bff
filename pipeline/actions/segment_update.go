package actions

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// UpdateSegment is the name of the update_segment action.
const UpdateSegment Name = "update_segment"

// UpdateSegmentParams are the params of update_segment: the fields given
// change. Members are given either whole (users, groups, segment_ids: the
// new list of that kind) or as changes (add_*, remove_*), not both for one
// kind.
type UpdateSegmentParams struct {
	SegmentID        string        `json:"segment_id" jsonschema:"id of the public segment (a name is resolved)" ref:"segment"`
	Name             *string       `json:"name,omitempty"`
	Description      *string       `json:"description,omitempty"`
	Tags             *[]string     `json:"tags,omitempty"`
	Users            *[]string     `json:"users,omitempty" jsonschema:"the whole new list of users"`
	Groups           *[]GroupParam `json:"groups,omitempty" jsonschema:"the whole new list of groups"`
	SegmentIDs       *[]string     `json:"segment_ids,omitempty" jsonschema:"the whole new list of sub-segments (names are resolved)" ref:"segment"`
	AddUsers         []string      `json:"add_users,omitempty"`
	RemoveUsers      []string      `json:"remove_users,omitempty"`
	AddGroups        []GroupParam  `json:"add_groups,omitempty"`
	RemoveGroups     []GroupParam  `json:"remove_groups,omitempty"`
	AddSegmentIDs    []string      `json:"add_segment_ids,omitempty" jsonschema:"names are resolved" ref:"segment"`
	RemoveSegmentIDs []string      `json:"remove_segment_ids,omitempty" jsonschema:"names are resolved" ref:"segment"`
}

// Action implements Params.
func (UpdateSegmentParams) Action() Name { return UpdateSegment }

func (p UpdateSegmentParams) canonical() UpdateSegmentParams {
	c := UpdateSegmentParams{SegmentID: idValue(p.SegmentID), Name: trimPtr(p.Name), Description: trimPtr(p.Description),
		Tags: keepList(p.Tags), Users: keepList(p.Users), Groups: keepGroups(p.Groups),
		AddUsers: trimList(p.AddUsers), RemoveUsers: trimList(p.RemoveUsers), AddGroups: normGroups(p.AddGroups), RemoveGroups: normGroups(p.RemoveGroups),
		AddSegmentIDs: idList(p.AddSegmentIDs), RemoveSegmentIDs: idList(p.RemoveSegmentIDs)}
	if p.SegmentIDs != nil {
		ids := idList(*p.SegmentIDs)
		if ids == nil {
			ids = []string{}
		}
		c.SegmentIDs = &ids
	}
	return c
}

// declareSegmentUpdate declares this file's action in r.
func declareSegmentUpdate(r *Registry) {
	Add(r, Def[UpdateSegmentParams]{
		Name: UpdateSegment, Order: 220, Invalidates: []Cache{CacheFlags, CacheExperiments},
		Object:      ObjectSegment,
		Description: "Change a public segment: name, description, tags, and its users, groups and sub-segments (whole lists, or members to add and remove). Every flag and experiment using it changes with it.",
		Canonical:   UpdateSegmentParams.canonical,
		Validate:    validateUpdateSegment,
		Plan:        planUpdateSegment,
		Execute:     executeUpdateSegment,
		Reconcile:   reconcileUpdateSegment,
		Report: ReportAs(func(r SegmentResult) string {
			return fmt.Sprintf("Updated public segment %q (id %s, context %s): it now has %s, %s and %s.", r.Name, r.ID, r.Context,
				plural(len(r.Users), "user", "users"), plural(len(r.Groups), "group", "groups"), plural(len(r.SegmentIDs), "segment", "segments"))
		}),
	})
}

func (p UpdateSegmentParams) touches() bool {
	return p.Name != nil || p.Description != nil || p.Tags != nil || p.Users != nil || p.Groups != nil || p.SegmentIDs != nil ||
		len(p.AddUsers)+len(p.RemoveUsers)+len(p.AddGroups)+len(p.RemoveGroups)+len(p.AddSegmentIDs)+len(p.RemoveSegmentIDs) > 0
}

// applySegment is the segment after the update.
func (p UpdateSegmentParams) apply(s segInfo) segInfo {
	n := s
	if p.Name != nil {
		n.Name = *p.Name
	}
	if p.Description != nil {
		n.Description = *p.Description
	}
	if p.Tags != nil {
		n.Tags = nonEmpty(*p.Tags)
	}
	m := s.Members
	if p.Users != nil {
		m.Users = *p.Users
	}
	if p.Groups != nil {
		m.Groups = *p.Groups
	}
	if p.SegmentIDs != nil {
		m.Segments = *p.SegmentIDs
	}
	m.Users = minus(union(m.Users, p.AddUsers), p.RemoveUsers)
	m.Groups = minusGroups(unionGroups(m.Groups, p.AddGroups), p.RemoveGroups)
	m.Segments = minus(union(m.Segments, p.AddSegmentIDs), p.RemoveSegmentIDs)
	n.Members = m.sorted()
	return n
}

func validateUpdateSegment(c *Checker, p UpdateSegmentParams) error {
	s, err := c.segment("segment_id", p.SegmentID)
	if err != nil || s == nil {
		return err
	}
	if !p.touches() {
		c.Missing("fields", "name what changes: name, description, tags, users, groups, segment_ids, or add_/remove_ members")
		return nil
	}
	both := func(whole bool, add, remove int, kind string) {
		if whole && add+remove > 0 {
			c.Add(kind, "give either the whole list %s or add_%s/remove_%s, not both", kind, kind, kind)
		}
	}
	both(p.Users != nil, len(p.AddUsers), len(p.RemoveUsers), "users")
	both(p.Groups != nil, len(p.AddGroups), len(p.RemoveGroups), "groups")
	both(p.SegmentIDs != nil, len(p.AddSegmentIDs), len(p.RemoveSegmentIDs), "segment_ids")
	for i, u := range p.RemoveUsers {
		if !contains(s.Members.Users, u) {
			c.AddValue(fmt.Sprintf("remove_users[%d]", i), u, "segment %q has no such user", s.Name)
		}
	}
	for i, g := range p.RemoveGroups {
		if len(minusGroups([]GroupParam{g}, s.Members.Groups)) > 0 {
			c.AddValue(fmt.Sprintf("remove_groups[%d]", i), g.Type+":"+g.GroupID, "segment %q has no such group", s.Name)
		}
	}
	for i, id := range p.RemoveSegmentIDs {
		if !contains(s.Members.Segments, id) {
			c.AddValue(fmt.Sprintf("remove_segment_ids[%d]", i), id, "segment %q does not hold this segment", s.Name)
		}
	}
	n := p.apply(*s)
	if p.Name != nil {
		if n.Name == "" {
			c.Add("name", "name cannot be empty")
		} else if err := c.segmentName(n.Name, n.Context, s.ID); err != nil {
			return err
		}
	}
	added := memberSet{Users: minus(n.Members.Users, s.Members.Users), Groups: minusGroups(n.Members.Groups, s.Members.Groups),
		Segments: minus(n.Members.Segments, s.Members.Segments)}
	return c.members("", added, s.Context, s.ID)
}

// segmentUsageLines says where a segment is used; the warning when a
// change leaves a used segment empty or deletes it.
func segmentUsageLines(b *Planner, d *segDir, s segInfo) []usage {
	uses := d.usages(s.ID)
	parents := d.parents(s.ID)
	if len(uses) == 0 && len(parents) == 0 {
		b.Line("Used by: no flag, experiment or segment.")
		return nil
	}
	b.Line("Used by:")
	for _, u := range uses {
		b.Line("  - %s", u)
	}
	for _, p := range parents {
		b.Line("  - segment %s (holds it as a sub-segment)", quote(p.Name))
	}
	return uses
}

// liveUses lists the uses whose assignments a change alters at once: any
// flag, and experiments that are enrolling.
func liveUses(uses []usage) []string {
	var out []string
	for _, u := range uses {
		if u.Kind == "flag" || u.running() {
			out = append(out, fmt.Sprintf("%s %s", u.Kind, quote(u.Name)))
		}
	}
	return minus(out, nil)
}

func planUpdateSegment(b *Planner, p UpdateSegmentParams) error {
	s, d, err := b.segmentAndSegments(p.SegmentID)
	if err != nil {
		return err
	}
	n := p.apply(s)
	b.Line("Update public segment %s (id %s, context %s):", quote(s.Name), s.ID, ident(s.Context))
	if n.Name != s.Name {
		b.Line("  name: %s -> %s", quote(s.Name), quote(n.Name))
	}
	if n.Description != s.Description {
		b.Line("  description: %s -> %s", quoteOrNone(s.Description), quoteOrNone(n.Description))
	}
	if fmtUsers(n.Tags) != fmtUsers(s.Tags) {
		b.Line("  tags: %s -> %s", fmtUsers(s.Tags), fmtUsers(n.Tags))
	}
	b.Line("  Members:")
	diff := diffMembers(s.Members, n.Members)
	fmtDiff(b, diff, d)
	b.Line("  After the change: %s", fmtMembers(n.Members, d))
	uses := segmentUsageLines(b, d, s)
	live := liveUses(uses)
	switch {
	case len(live) > 0 && n.Members.empty() && !s.Members.empty():
		b.Warn("the segment becomes empty while it is used by %s: UpGrade allows it silently, and the change applies to them from the next request", strings.Join(live, ", "))
	case len(live) > 0 && !diff.empty():
		b.Warn("the segment is used by %s: the change applies to them from the next request", strings.Join(live, ", "))
	}
	if diff.empty() && n.Name == s.Name && n.Description == s.Description && fmtUsers(n.Tags) == fmtUsers(s.Tags) {
		b.Warn("nothing would change")
	}
	return nil
}

func executeUpdateSegment(ctx context.Context, env Env, p UpdateSegmentParams, _ string) (Outcome, error) {
	rec, err := env.API.Segment(ctx, p.SegmentID)
	if err != nil {
		return Outcome{}, err
	}
	cur := segInfoOf(rec)
	held, err := holdSegment(ctx, env.API, p.apply(cur))
	if err != nil {
		return Outcome{}, err
	}
	return Result(segmentResult(held))
}

func reconcileUpdateSegment(ctx context.Context, env Env, p UpdateSegmentParams, _ string, _ time.Time) (Reconciliation, error) {
	rec, err := env.API.Segment(ctx, p.SegmentID)
	if err != nil {
		if isNotFound(err) {
			return Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("segment %s no longer exists", p.SegmentID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile update_segment: %w", err)
	}
	cur := segInfoOf(rec)
	// Whole lists and add/remove are both idempotent: applied to a segment
	// that already has them, they change nothing.
	if diffs := segmentDiffs(p.apply(cur), cur); len(diffs) > 0 {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("segment %q does not hold the new values yet (%s): the update did not happen", cur.Name, strings.Join(diffs, "; "))}, nil
	}
	raw, err := Result(segmentResult(cur))
	return Reconciliation{Outcome: OutcomeDone, Result: raw.Result, Note: fmt.Sprintf("segment %q already holds every value of the update", cur.Name)}, err
}
