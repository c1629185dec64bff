package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Segment types (upgrade-flags-segments.md, Segments).
const (
	SegmentPublic        = "public"
	SegmentPrivate       = "private"
	SegmentGlobalExclude = "global_exclude"
)

// Segment usage statuses of the segment reads.
const (
	SegmentUsed     = "used"
	SegmentUnused   = "unused"
	SegmentExcluded = "excluded" // the global segments
)

// SegmentUser is one user row of a segment.
type SegmentUser struct {
	SegmentID string `json:"segmentId,omitempty"`
	UserID    string `json:"userId"`
}

// SegmentGroup is one group row of a segment.
type SegmentGroup struct {
	SegmentID string `json:"segmentId,omitempty"`
	GroupID   string `json:"groupId"`
	Type      string `json:"type"`
}

// Ref is the group as a GroupRef.
func (g SegmentGroup) Ref() GroupRef { return GroupRef{Type: g.Type, GroupID: g.GroupID} }

// SegmentRecord is a segment as the server answers it: a public segment, a
// private one (a list of a flag, experiment or segment) or a global
// exclusion segment. SubSegments as answered carry no members of their own;
// read them by id.
type SegmentRecord struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	ListType      string          `json:"listType,omitempty"`
	Context       string          `json:"context"`
	Type          string          `json:"type"`
	Tags          []string        `json:"tags"`
	Status        string          `json:"status,omitempty"`
	CreatedAt     string          `json:"createdAt,omitempty"`
	UpdatedAt     string          `json:"updatedAt,omitempty"`
	VersionNumber int             `json:"versionNumber,omitempty"`
	Users         []SegmentUser   `json:"individualForSegment"`
	Groups        []SegmentGroup  `json:"groupForSegment"`
	SubSegments   []SegmentRecord `json:"subSegments"`
}

// UserIDs lists the segment's own users (not those of its sub-segments).
func (s *SegmentRecord) UserIDs() []string {
	out := make([]string, 0, len(s.Users))
	for _, u := range s.Users {
		out = append(out, u.UserID)
	}
	return out
}

// GroupRefs lists the segment's own groups.
func (s *SegmentRecord) GroupRefs() []GroupRef {
	out := make([]GroupRef, 0, len(s.Groups))
	for _, g := range s.Groups {
		out = append(out, g.Ref())
	}
	return out
}

// SubSegmentIDs lists the ids of the direct sub-segments.
func (s *SegmentRecord) SubSegmentIDs() []string {
	out := make([]string, 0, len(s.SubSegments))
	for _, sub := range s.SubSegments {
		out = append(out, sub.ID)
	}
	return out
}

// Input is the record as a POST /segments body that writes it back
// unchanged (an upsert by id).
func (s *SegmentRecord) Input() SegmentInput {
	return SegmentInput{ID: s.ID, Name: s.Name, Description: s.Description, Context: s.Context, Type: s.Type,
		ListType: s.ListType, Tags: append([]string{}, s.Tags...), UserIDs: s.UserIDs(), Groups: s.GroupRefs(),
		SubSegmentIDs: s.SubSegmentIDs()}
}

// SegmentInput is the segment body of POST /segments, POST /segments/list
// and the flag list routes. The member arrays are always sent ([] when
// empty): the server wants all three.
type SegmentInput struct {
	ID              string     `json:"id,omitempty"`
	Name            string     `json:"name"`
	Description     string     `json:"description"`
	Context         string     `json:"context"`
	Type            string     `json:"type"`
	ListType        string     `json:"listType,omitempty"`
	Tags            []string   `json:"tags,omitempty"`
	UserIDs         []string   `json:"userIds"`
	Groups          []GroupRef `json:"groups"`
	SubSegmentIDs   []string   `json:"subSegmentIds"`
	ParentSegmentID string     `json:"parentSegmentId,omitempty"`
}

func (s SegmentInput) normalized() SegmentInput {
	s.UserIDs = append([]string{}, s.UserIDs...)
	s.Groups = append([]GroupRef{}, s.Groups...)
	s.SubSegmentIDs = append([]string{}, s.SubSegmentIDs...)
	if s.Type == "" {
		s.Type = SegmentPrivate
	}
	return s
}

// ExperimentUsageRow is a list row of an experiment in the usage arrays.
type ExperimentUsageRow struct {
	SegmentID    string         `json:"segmentId"`
	ExperimentID string         `json:"experimentId"`
	Experiment   *UsageOwner    `json:"experiment,omitempty"`
	Segment      *SegmentRecord `json:"segment,omitempty"`
}

// UsageOwner is the experiment a usage row names.
type UsageOwner struct {
	ID          string   `json:"id,omitempty"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Context     []string `json:"context,omitempty"`
	State       State    `json:"state,omitempty"`
}

// SegmentUsage is the five usage arrays the segment reads carry: every list
// row of the whole server, by kind.
type SegmentUsage struct {
	ExperimentInclusion []ExperimentUsageRow `json:"experimentSegmentInclusionData"`
	ExperimentExclusion []ExperimentUsageRow `json:"experimentSegmentExclusionData"`
	FlagInclusion       []FlagList           `json:"featureFlagSegmentInclusionData"`
	FlagExclusion       []FlagList           `json:"featureFlagSegmentExclusionData"`
	AllParentSegments   json.RawMessage      `json:"allParentSegments,omitempty"`
}

// SegmentsAnswer is GET /segments: the public segments with their status,
// and the usage arrays.
type SegmentsAnswer struct {
	Segments []SegmentRecord `json:"segmentsData"`
	SegmentUsage
}

// SegmentStatusAnswer is GET /segments/status/{id}: the segment with its
// status and the usage arrays, named with the "Data" suffix as in GET
// /segments (checked against 6.5 by the differential test).
type SegmentStatusAnswer struct {
	Segment SegmentRecord `json:"segment"`
	SegmentUsage
}

// SegmentPage is POST /segments/paginated: nodes is an object.
type SegmentPage struct {
	Total int            `json:"total"`
	Skip  int            `json:"skip"`
	Take  int            `json:"take"`
	Nodes SegmentsAnswer `json:"nodes"`
}

// Segments returns the public segments with their status and the usage
// arrays (GET /segments).
func (c *Client) Segments(ctx context.Context) (*SegmentsAnswer, error) {
	var out SegmentsAnswer
	if err := c.call(ctx, request{method: http.MethodGet, path: "/segments", idempotent: true}, &out); err != nil {
		return nil, err
	}
	if out.Segments == nil {
		out.Segments = []SegmentRecord{}
	}
	return &out, nil
}

// Segment returns segment id with its members and sub-segments. Private
// and unknown segments are not_found.
func (c *Client) Segment(ctx context.Context, id string) (*SegmentRecord, error) {
	if err := c.checkID(http.MethodGet, "/segments/", "segment", id); err != nil {
		return nil, err
	}
	var out SegmentRecord
	r := request{method: http.MethodGet, path: "/segments/" + url.PathEscape(id), idempotent: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, segmentError(err, id)
	}
	return &out, nil
}

// SegmentStatus returns segment id with its status and the usage arrays.
func (c *Client) SegmentStatus(ctx context.Context, id string) (*SegmentStatusAnswer, error) {
	if err := c.checkID(http.MethodGet, "/segments/status/", "segment", id); err != nil {
		return nil, err
	}
	var out SegmentStatusAnswer
	r := request{method: http.MethodGet, path: "/segments/status/" + url.PathEscape(id), idempotent: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, segmentError(err, id)
	}
	return &out, nil
}

// GlobalSegments returns the global exclusion segments (status "excluded").
func (c *Client) GlobalSegments(ctx context.Context) ([]SegmentRecord, error) {
	return getArray[SegmentRecord](ctx, c, "/segments/global")
}

// SegmentsPage returns one page of public segments. A POST that only
// reads, so it is retried.
func (c *Client) SegmentsPage(ctx context.Context, req PageRequest) (*SegmentPage, error) {
	var out SegmentPage
	r := request{method: http.MethodPost, path: "/segments/paginated", body: req, idempotent: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	if out.Nodes.Segments == nil {
		out.Nodes.Segments = []SegmentRecord{}
	}
	return &out, nil
}

// UpsertSegment creates segment in, or replaces segment in.ID (members and
// sub-segments as a whole) when that id exists; a new id is kept. Unknown
// sub-segment ids are dropped by the server. A public name already used in
// the context is a validation error. Never retried.
func (c *Client) UpsertSegment(ctx context.Context, in SegmentInput) (*SegmentRecord, error) {
	const path = "/segments"
	if strings.TrimSpace(in.Name) == "" || strings.TrimSpace(in.Context) == "" {
		return nil, c.localError(http.MethodPost, path, CategoryValidation, "segment: name and context are required")
	}
	in = in.normalized()
	in.ParentSegmentID = ""
	var out SegmentRecord
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: &in}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSegment deletes segment id (allowed while used: it vanishes from
// every list and parent) and returns the deleted row. The server answers an
// unknown id with 500 "Query Failed": not_found once a GET confirms it.
// Never retried.
func (c *Client) DeleteSegment(ctx context.Context, id string) (*SegmentRecord, error) {
	if err := c.checkID(http.MethodDelete, "/segments/", "segment", id); err != nil {
		return nil, err
	}
	var out SegmentRecord
	r := request{method: http.MethodDelete, path: "/segments/" + url.PathEscape(id), emptyMeansNull: true}
	if err := c.call(ctx, r, &out); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Status >= 500 && IsUUID(id) {
			if _, gerr := c.Segment(ctx, id); CategoryOf(gerr) == CategoryNotFound {
				return nil, &Error{Category: CategoryNotFound, Status: e.Status, Method: e.Method, URL: e.URL,
					Message: fmt.Sprintf("segment %s not found", id), Err: err}
			}
		}
		return nil, segmentError(err, id)
	}
	if out.ID == "" {
		out.ID = id
	}
	return &out, nil
}

// AddSegmentList adds a private list (in, with ParentSegmentID set) to a
// public segment and returns the list. Never retried.
func (c *Client) AddSegmentList(ctx context.Context, in SegmentInput) (*SegmentRecord, error) {
	const path = "/segments/list"
	if err := c.checkID(http.MethodPost, path, "parent segment", in.ParentSegmentID); err != nil {
		return nil, err
	}
	in = in.normalized()
	var out SegmentRecord
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: &in}, &out); err != nil {
		return nil, segmentError(err, in.ParentSegmentID)
	}
	return &out, nil
}

// DeleteSegmentList deletes list listID of public segment parentID and
// returns the deleted row. Never retried.
func (c *Client) DeleteSegmentList(ctx context.Context, listID, parentID string) (*SegmentRecord, error) {
	if err := c.checkID(http.MethodDelete, "/segments/list/", "list", listID); err != nil {
		return nil, err
	}
	if err := c.checkID(http.MethodDelete, "/segments/list/", "parent segment", parentID); err != nil {
		return nil, err
	}
	var out SegmentRecord
	r := request{method: http.MethodDelete, path: "/segments/list/" + url.PathEscape(listID),
		body: map[string]string{"parentSegmentId": parentID}, emptyMeansNull: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, segmentError(err, listID)
	}
	if out.ID == "" {
		out.ID = listID
	}
	return &out, nil
}

// segmentError names the segment in a not_found and explains a malformed id.
func segmentError(err error, id string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Category == CategoryValidation && !IsUUID(id):
		e.Message = fmt.Sprintf("%q is not a valid id (UpGrade ids are UUIDs)", id)
	case e.Category == CategoryNotFound:
		e.Message = fmt.Sprintf("segment %s not found", id)
	}
	return err
}
