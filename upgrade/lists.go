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
// Experiment.Inclusion and Exclusion hold.
func MergeLists(rows []ExperimentList) Segment {
	seg := Segment{Users: []string{}, Groups: []GroupRef{}}
	for _, r := range rows {
		seg.Users = append(seg.Users, r.Segment.Users...)
		seg.Groups = append(seg.Groups, r.Segment.Groups...)
	}
	return seg
}

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

// SetLists makes experiment id's lists hold exactly inclusion and exclusion
// (as sets of users and groups). On a server that keeps lists as rows (6.3
// and later) it replaces the first list of each kind, adds one when there is
// none, and deletes the others (an empty target deletes them all); a kind
// that already holds its members is not written. It then reads the lists
// back and fails with an api error if they differ. Servers before 6.3 take
// the lists with the experiment's PUT, so there it only reads back. Never
// retried (the list routes are writes).
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
	return nil
}

func (c *Client) setList(ctx context.Context, e *Experiment, kind ListKind, rows []ExperimentList, want Segment) error {
	if sameMembers(MergeLists(rows), want) {
		return nil
	}
	base := "/experiments/" + string(kind) + "List"
	keep := 0
	if !want.Empty() {
		var body listBody
		body.ExperimentID = e.ID
		body.List.Context = e.ContextName()
		body.List.Type = "private"
		body.List.UserIDs = append([]string{}, want.Users...)
		body.List.Groups = append([]GroupRef{}, want.Groups...)
		body.List.SubSegmentIDs = []string{}
		r := request{method: http.MethodPost, path: base, body: &body, experimentID: e.ID}
		if len(rows) > 0 {
			body.List.ID, body.List.Name = rows[0].SegmentID, rows[0].Name
			if rows[0].Context != "" {
				body.List.Context = rows[0].Context
			}
			r.method, r.path = http.MethodPut, base+"/"+url.PathEscape(rows[0].SegmentID)
			keep = 1
		} else {
			body.List.Name = fmt.Sprintf("%s list of %s", kind, e.Name)
		}
		if _, err := c.send(ctx, r); err != nil {
			return err
		}
	}
	for _, row := range rows[keep:] {
		r := request{method: http.MethodDelete, path: base + "/" + url.PathEscape(row.SegmentID)}
		if _, err := c.send(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
