package upgrade

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// From 6.3 on, a server keeps an experiment's inclusion and exclusion lists
// as rows of their own: a create sets them, but a PUT of the experiment
// leaves them as they were, and the single read shows them as []. The
// list routes change them: POST /experiments/{inclusion,exclusion}List adds
// a list, PUT .../{segmentId} replaces one, DELETE .../{segmentId} removes
// one. GET /experiments shows them in full.

// ListKind names the two kinds of experiment lists.
type ListKind string

// The list kinds, as the server's route names spell them.
const (
	ListInclusion ListKind = "inclusion"
	ListExclusion ListKind = "exclusion"
)

// ExperimentList is one list row of an experiment.
type ExperimentList struct {
	SegmentID string
	Name      string
	Context   string
	Segment   Segment
}

type wireListRow struct {
	SegmentID string `json:"segmentId"`
	Segment   struct {
		ID                   string           `json:"id"`
		Name                 string           `json:"name"`
		Context              string           `json:"context"`
		IndividualForSegment []wireIndividual `json:"individualForSegment"`
		GroupForSegment      []GroupRef       `json:"groupForSegment"`
		SubSegments          []SegmentRef     `json:"subSegments"`
	} `json:"segment"`
}

type wireListed struct {
	ID        string        `json:"id"`
	Inclusion []wireListRow `json:"experimentSegmentInclusion"`
	Exclusion []wireListRow `json:"experimentSegmentExclusion"`
}

func (r wireListRow) list() ExperimentList {
	seg := Segment{Users: []string{}, Groups: []GroupRef{}}
	for _, u := range r.Segment.IndividualForSegment {
		seg.Users = append(seg.Users, u.UserID)
	}
	seg.Groups = append(seg.Groups, r.Segment.GroupForSegment...)
	for _, sub := range r.Segment.SubSegments {
		if sub.ID != "" {
			seg.Segments = append(seg.Segments, SegmentRef{ID: sub.ID, Name: sub.Name})
		}
	}
	id := r.SegmentID
	if id == "" {
		id = r.Segment.ID
	}
	return ExperimentList{SegmentID: id, Name: r.Segment.Name, Context: r.Segment.Context, Segment: seg}
}

// Lists returns the list rows of experiment id, read from GET /experiments
// (the only read that shows them on 6.5). The experiment must exist.
func (c *Client) Lists(ctx context.Context, id string) (inclusion, exclusion []ExperimentList, err error) {
	shape, err := c.segmentShape(ctx)
	if err != nil {
		return nil, nil, err
	}
	if shape == SegmentsObject {
		// Before 6.3 the lists are part of the experiment itself.
		e, err := c.Experiment(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if !e.Inclusion.Empty() {
			inclusion = []ExperimentList{{Context: e.ContextName(), Segment: e.Inclusion}}
		}
		if !e.Exclusion.Empty() {
			exclusion = []ExperimentList{{Context: e.ContextName(), Segment: e.Exclusion}}
		}
		return inclusion, exclusion, nil
	}
	var all []wireListed
	r := request{method: http.MethodGet, path: "/experiments", idempotent: true}
	if err := c.call(ctx, r, &all); err != nil {
		return nil, nil, err
	}
	for _, e := range all {
		if e.ID != id {
			continue
		}
		for _, row := range e.Inclusion {
			inclusion = append(inclusion, row.list())
		}
		for _, row := range e.Exclusion {
			exclusion = append(exclusion, row.list())
		}
		return inclusion, exclusion, nil
	}
	return nil, nil, c.localError(http.MethodGet, "/experiments", CategoryNotFound, fmt.Sprintf("experiment %s not found", id))
}

// ListReader reads an experiment and its lists: the Client, or a fake.
type ListReader interface {
	Experiment(ctx context.Context, id string) (*Experiment, error)
	Lists(ctx context.Context, id string) (inclusion, exclusion []ExperimentList, err error)
}

// ExperimentWithLists reads an experiment with its inclusion and exclusion
// lists: what the server holds. UpGrade 6.5's single read shows no lists,
// so every reader that shows or compares them (the executor's plans and
// validation, the agent's lookups, experiments show) reads through here.
func ExperimentWithLists(ctx context.Context, r ListReader, id string) (*Experiment, error) {
	e, err := r.Experiment(ctx, id)
	if err != nil {
		return nil, err
	}
	inc, exc, err := r.Lists(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading the lists of experiment %s: %w", id, err)
	}
	e.Inclusion, e.Exclusion = MergeLists(inc), MergeLists(exc)
	return e, nil
}

// MergeLists merges the members of list rows into one segment, the shape
// Experiment.Inclusion and Exclusion hold: the users, groups and public
// segments of all rows.
func MergeLists(rows []ExperimentList) Segment {
	seg := Segment{Users: []string{}, Groups: []GroupRef{}}
	for _, r := range rows {
		seg.Users = append(seg.Users, r.Segment.Users...)
		seg.Groups = append(seg.Groups, r.Segment.Groups...)
		seg.Segments = append(seg.Segments, r.Segment.Segments...)
	}
	return seg
}

// NamesSegments reports whether the list row includes public segments.
func (l ExperimentList) NamesSegments() bool { return len(l.Segment.Segments) > 0 }

// sameMembers compares two segments as sets.
func sameMembers(a, b Segment) bool {
	users := func(s Segment) []string {
		out := slices.Clone(s.Users)
		slices.Sort(out)
		return slices.Compact(out)
	}
	groups := func(s Segment) []string {
		out := make([]string, 0, len(s.Groups))
		for _, g := range s.Groups {
			out = append(out, g.Type+"\x1f"+g.GroupID)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(users(a), users(b)) && slices.Equal(groups(a), groups(b))
}

type listBody struct {
	ExperimentID string `json:"experimentId"`
	List         struct {
		ID            string     `json:"id,omitempty"`
		Name          string     `json:"name"`
		Context       string     `json:"context"`
		Type          string     `json:"type"`
		UserIDs       []string   `json:"userIds"`
		Groups        []GroupRef `json:"groups"`
		SubSegmentIDs []string   `json:"subSegmentIds"`
	} `json:"list"`
}

// SetLists makes experiment id's lists hold exactly the users and groups of
// inclusion and exclusion; the public segments the lists name are kept as
// they are (their Segments in inclusion and exclusion are not read). A list
// row naming a segment (made in the web UI as a "segment" list) is never
// deleted or replaced: when it also holds users or groups that the target
// lacks, it is rewritten with its segments and only the wanted members. On a
// server that keeps lists as rows (6.3 and later) the other members go to
// the first list of each kind without segments (replaced, or added when
// there is none), and the other such lists are deleted (an empty target
// deletes them all); a kind that already holds its members is not written.
// It then reads the lists back and fails with an api error if the members
// differ or a segment was lost. Servers before 6.3 take the lists with the
// experiment's PUT, so there it only reads back. Never retried (the list
// routes are writes).
func (c *Client) SetLists(ctx context.Context, e *Experiment, inclusion, exclusion Segment) error {
	if e == nil || strings.TrimSpace(e.ID) == "" {
		return c.localError(http.MethodPut, "/experiments/", CategoryValidation, "set lists: the experiment id is empty")
	}
	shape, err := c.segmentShape(ctx)
	if err != nil {
		return err
	}
	if shape == SegmentsObject {
		cur, err := c.Experiment(ctx, e.ID)
		if err != nil {
			return err
		}
		if !sameMembers(cur.Inclusion, inclusion) || !sameMembers(cur.Exclusion, exclusion) {
			return &Error{Category: CategoryAPI, Method: http.MethodPut, URL: c.baseRedacted + "/experiments/" + e.ID,
				Message: "the server did not keep the experiment's lists"}
		}
		return nil
	}
	inc, exc, err := c.Lists(ctx, e.ID)
	if err != nil {
		return err
	}
	incSegs, excSegs := MergeLists(inc).SegmentIDs(), MergeLists(exc).SegmentIDs()
	for _, k := range []struct {
		kind ListKind
		rows []ExperimentList
		want Segment
	}{{ListInclusion, inc, inclusion}, {ListExclusion, exc, exclusion}} {
		if err := c.setList(ctx, e, k.kind, k.rows, k.want); err != nil {
			return err
		}
	}
	inc, exc, err = c.Lists(ctx, e.ID)
	if err != nil {
		return err
	}
	if !sameMembers(MergeLists(inc), inclusion) || !sameMembers(MergeLists(exc), exclusion) {
		return &Error{Category: CategoryAPI, Method: http.MethodPut, URL: c.baseRedacted + "/experiments/" + e.ID,
			Message: "the server did not keep the experiment's lists"}
	}
	if !slices.Equal(MergeLists(inc).SegmentIDs(), incSegs) || !slices.Equal(MergeLists(exc).SegmentIDs(), excSegs) {
		return &Error{Category: CategoryAPI, Method: http.MethodPut, URL: c.baseRedacted + "/experiments/" + e.ID,
			Message: "the experiment's lists naming public segments changed while its users and groups were set"}
	}
	return nil
}

// setList sets the members of one kind of lists: rows naming segments keep
// their segments (and those of their own members that want holds); the rest
// of want goes to the plain rows.
func (c *Client) setList(ctx context.Context, e *Experiment, kind ListKind, rows []ExperimentList, want Segment) error {
	base := "/experiments/" + string(kind) + "List"
	wantUsers := map[string]bool{}
	for _, u := range want.Users {
		wantUsers[u] = true
	}
	wantGroups := map[GroupRef]bool{}
	for _, g := range want.Groups {
		wantGroups[g] = true
	}
	heldUsers, heldGroups := map[string]bool{}, map[GroupRef]bool{}
	var plain []ExperimentList
	for _, row := range rows {
		if !row.NamesSegments() {
			plain = append(plain, row)
			continue
		}
		keep := Segment{Users: []string{}, Groups: []GroupRef{}, Segments: row.Segment.Segments}
		for _, u := range row.Segment.Users {
			if wantUsers[u] {
				keep.Users = append(keep.Users, u)
				heldUsers[u] = true
			}
		}
		for _, g := range row.Segment.Groups {
			if wantGroups[g] {
				keep.Groups = append(keep.Groups, g)
				heldGroups[g] = true
			}
		}
		if len(keep.Users) == len(row.Segment.Users) && len(keep.Groups) == len(row.Segment.Groups) {
			continue
		}
		body := newListBody(e, row, keep)
		r := request{method: http.MethodPut, path: base + "/" + url.PathEscape(row.SegmentID), body: &body, experimentID: e.ID}
		if _, err := c.send(ctx, r); err != nil {
			return err
		}
	}
	rest := Segment{Users: []string{}, Groups: []GroupRef{}}
	for _, u := range want.Users {
		if !heldUsers[u] {
			rest.Users = append(rest.Users, u)
		}
	}
	for _, g := range want.Groups {
		if !heldGroups[g] {
			rest.Groups = append(rest.Groups, g)
		}
	}
	if sameMembers(MergeLists(plain), rest) {
		return nil
	}
	keep := 0
	if !rest.Empty() {
		r := request{method: http.MethodPost, path: base, experimentID: e.ID}
		if len(plain) > 0 {
			body := newListBody(e, plain[0], rest)
			r.body = &body
			r.method, r.path = http.MethodPut, base+"/"+url.PathEscape(plain[0].SegmentID)
			keep = 1
		} else {
			body := newListBody(e, ExperimentList{Name: fmt.Sprintf("%s list of %s", kind, e.Name)}, rest)
			r.body = &body
		}
		if _, err := c.send(ctx, r); err != nil {
			return err
		}
	}
	for _, row := range plain[keep:] {
		r := request{method: http.MethodDelete, path: base + "/" + url.PathEscape(row.SegmentID)}
		if _, err := c.send(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// newListBody is the body that makes list row (new when its SegmentID is
// empty) hold members: users, groups and public segments.
func newListBody(e *Experiment, row ExperimentList, members Segment) listBody {
	var body listBody
	body.ExperimentID = e.ID
	body.List.ID, body.List.Name = row.SegmentID, row.Name
	body.List.Context = e.ContextName()
	if row.Context != "" {
		body.List.Context = row.Context
	}
	body.List.Type = "private"
	body.List.UserIDs = append([]string{}, members.Users...)
	body.List.Groups = append([]GroupRef{}, members.Groups...)
	body.List.SubSegmentIDs = members.SegmentIDs()
	return body
}
