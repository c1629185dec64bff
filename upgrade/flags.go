package upgrade

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Feature flag enumerations (upgrade-flags-segments.md).
const (
	FlagEnabled  = "enabled"
	FlagDisabled = "disabled"
	FlagArchived = "archived"
)

// FlagStatuses lists the flag statuses the server accepts, in its
// spelling: the one list of them, for the client, the simulator, the CLI's
// --status and the agent's actions and lookups (a new slice each call).
func FlagStatuses() []string { return []string{FlagEnabled, FlagDisabled, FlagArchived} }

// FilterModes lists the filter modes of flags and experiments, in the
// server's spelling (a new slice each call).
func FilterModes() []string { return []string{FilterIncludeAll, FilterExcludeAll} }

// FlagStatusOf is a flag status as the server spells it, from any case,
// blanks around it, or a display name ("Enabled"); "" stays "", and
// anything else comes back trimmed for validation to name.
func FlagStatusOf(s string) string { return enumOf(s, FlagStatuses()) }

// FilterModeOf is a filter mode as the server spells it, from any case,
// blanks, or _ and - between words ("include all", "INCLUDE_ALL");
// anything else comes back trimmed.
func FilterModeOf(s string) string { return enumOf(s, FilterModes()) }

// enumOf returns the allowed spelling s matches ignoring case, blanks and
// _/- differences; otherwise s trimmed.
func enumOf(s string, allowed []string) string {
	fold := strings.NewReplacer("_", "", "-", "", " ", "")
	t := strings.TrimSpace(s)
	key := strings.ToLower(fold.Replace(t))
	for _, a := range allowed {
		if strings.ToLower(fold.Replace(a)) == key {
			return a
		}
	}
	return t
}

// FeatureFlag is a flag as the server answers it. Inclusion and Exclusion
// are filled only by the routes that show lists (GET /flags/{id}, PUT, the
// paginated rows without their segments); Exposures only by the paginated
// read.
type FeatureFlag struct {
	ID            string     `json:"id,omitempty"`
	Name          string     `json:"name"`
	Key           string     `json:"key"`
	Description   string     `json:"description"`
	Context       []string   `json:"context"`
	Tags          []string   `json:"tags"`
	Status        string     `json:"status"`
	FilterMode    string     `json:"filterMode"`
	CreatedAt     string     `json:"createdAt,omitempty"`
	UpdatedAt     string     `json:"updatedAt,omitempty"`
	VersionNumber int        `json:"versionNumber,omitempty"`
	Inclusion     []FlagList `json:"featureFlagSegmentInclusion,omitempty"`
	Exclusion     []FlagList `json:"featureFlagSegmentExclusion,omitempty"`
	Exposures     *int       `json:"featureFlagExposures,omitempty"`
}

// ContextName is the flag's first context ("" when none): the one the
// server checks against the context metadata.
func (f *FeatureFlag) ContextName() string {
	if f == nil || len(f.Context) == 0 {
		return ""
	}
	return f.Context[0]
}

// HasContext reports whether the flag serves app context ctx.
func (f *FeatureFlag) HasContext(ctx string) bool {
	for _, c := range f.Context {
		if c == ctx {
			return true
		}
	}
	return false
}

// FlagList is one include or exclude list of a flag, also a usage row of
// GET /segments. A list is a private segment; SegmentID is the list id.
type FlagList struct {
	SegmentID     string          `json:"segmentId"`
	FeatureFlagID string          `json:"featureFlagId,omitempty"`
	Enabled       bool            `json:"enabled"`
	ListType      string          `json:"listType"`
	CreatedAt     string          `json:"createdAt,omitempty"`
	UpdatedAt     string          `json:"updatedAt,omitempty"`
	VersionNumber int             `json:"versionNumber,omitempty"`
	Segment       *SegmentRecord  `json:"segment,omitempty"`
	FeatureFlag   *FlagUsageOwner `json:"featureFlag,omitempty"`
}

// ID is the list id: the segment id, read from the row or its segment.
func (l FlagList) ID() string {
	if l.SegmentID != "" || l.Segment == nil {
		return l.SegmentID
	}
	return l.Segment.ID
}

// Input is the body that writes list l of flag flagID back unchanged
// (the list routes replace a list only as a whole): change its members,
// Enabled or ListType, then UpdateFlagList.
func (l FlagList) Input(flagID string) FlagListInput {
	in := FlagListInput{FlagID: flagID, Enabled: l.Enabled, ListType: l.ListType}
	if l.Segment != nil {
		in.Segment = l.Segment.Input()
	}
	in.Segment.ID = l.ID()
	return in
}

// FlagUsageOwner is the flag a list row belongs to, as list answers and the
// usage arrays of the segment reads embed it.
type FlagUsageOwner struct {
	ID          string   `json:"id,omitempty"`
	Name        string   `json:"name"`
	Key         string   `json:"key,omitempty"`
	Description string   `json:"description,omitempty"`
	Status      string   `json:"status,omitempty"`
	Context     []string `json:"context,omitempty"`
	FilterMode  string   `json:"filterMode,omitempty"`
}

// FlagListInput is the body of the flag list routes. FlagID goes out as
// "id"; Segment.ID is the list id on a PUT (and may be set on an add).
type FlagListInput struct {
	FlagID   string       `json:"id"`
	Enabled  bool         `json:"enabled"`
	ListType string       `json:"listType"`
	Segment  SegmentInput `json:"segment"`
}

// FlagPage is the answer of POST /flags/paginated.
type FlagPage struct {
	Total int           `json:"total"`
	Skip  int           `json:"skip"`
	Take  int           `json:"take"`
	Nodes []FeatureFlag `json:"nodes"`
}

// FeatureFlagRequest is the body of POST /v6/featureflag. Session groups and
// IncludeStoredUserGroups go together or not at all.
type FeatureFlagRequest struct {
	Context                 string              `json:"context"`
	GroupsForSession        map[string][]string `json:"groupsForSession,omitempty"`
	IncludeStoredUserGroups *bool               `json:"includeStoredUserGroups,omitempty"`
}

// MarshalJSON sends groupsForSession, even empty, whenever
// includeStoredUserGroups is set: the server wants both or neither.
func (r FeatureFlagRequest) MarshalJSON() ([]byte, error) {
	type plain struct {
		Context                 string              `json:"context"`
		GroupsForSession        map[string][]string `json:"groupsForSession,omitempty"`
		IncludeStoredUserGroups *bool               `json:"includeStoredUserGroups,omitempty"`
	}
	if r.IncludeStoredUserGroups == nil {
		return json.Marshal(plain(r))
	}
	groups := r.GroupsForSession
	if groups == nil {
		groups = map[string][]string{}
	}
	return json.Marshal(struct {
		Context                 string              `json:"context"`
		GroupsForSession        map[string][]string `json:"groupsForSession"`
		IncludeStoredUserGroups bool                `json:"includeStoredUserGroups"`
	}{r.Context, groups, *r.IncludeStoredUserGroups})
}

// flagListRoute is the path of a flag list kind (/flags/inclusionList),
// once kind and the id (of what) are checked.
func (c *Client) flagListRoute(method string, kind ListKind, what, id string) (string, error) {
	path := "/flags/" + string(kind) + "List"
	if kind != ListInclusion && kind != ListExclusion {
		return "", c.localError(method, path, CategoryValidation, fmt.Sprintf("unknown list kind %q (inclusion or exclusion)", string(kind)))
	}
	return path, c.checkID(method, path, what, id)
}

func (c *Client) checkID(method, path, what, id string) error {
	if strings.TrimSpace(id) == "" {
		return c.localError(method, path, CategoryValidation, what+" id is empty")
	}
	return nil
}

// Flags returns every feature flag, without lists (GET /flags).
func (c *Client) Flags(ctx context.Context) ([]FeatureFlag, error) {
	return getArray[FeatureFlag](ctx, c, "/flags")
}

// getArray GETs a JSON array; null or [] is an empty, non-nil slice.
func getArray[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	out := []T{}
	if err := c.call(ctx, request{method: http.MethodGet, path: path, idempotent: true}, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
}

// Flag returns flag id with both lists. The server answers an unknown id
// with 204 and no body: that is a not_found error here.
func (c *Client) Flag(ctx context.Context, id string) (*FeatureFlag, error) {
	path := "/flags/" + url.PathEscape(id)
	if err := c.checkID(http.MethodGet, "/flags/", "flag", id); err != nil {
		return nil, err
	}
	var out *FeatureFlag
	r := request{method: http.MethodGet, path: path, idempotent: true, emptyMeansNull: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, idError(err, id)
	}
	if out == nil {
		return nil, c.localError(r.method, r.path, CategoryNotFound, fmt.Sprintf("feature flag %s not found", id))
	}
	out.sortLists()
	return out, nil
}

// compareTimes orders two RFC 3339 times; one that does not parse sorts
// as its text.
func compareTimes(a, b string) int {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	if errA != nil || errB != nil {
		return cmp.Compare(a, b)
	}
	return ta.Compare(tb)
}

// sortLists puts both lists oldest first (createdAt). A real 6.5 server
// returns them in its database's row order, which changes when a list is
// updated (PostgreSQL rewrites the row), so plans, reach sentences and
// tables would otherwise list them differently from one read to the next;
// createdAt survives a list's PUT. Lists of the same millisecond keep the
// server's order (the simulator's is the order they were added in).
func (f *FeatureFlag) sortLists() {
	for _, ls := range [][]FlagList{f.Inclusion, f.Exclusion} {
		slices.SortStableFunc(ls, func(a, b FlagList) int { return compareTimes(a.CreatedAt, b.CreatedAt) })
	}
}

// idError explains a 400 for a malformed id.
func idError(err error, id string) error {
	var e *Error
	if errors.As(err, &e) && e.Category == CategoryValidation && !IsUUID(id) {
		e.Message = fmt.Sprintf("%q is not a valid id (UpGrade ids are UUIDs)", id)
	}
	return err
}

// FlagsPage returns one page of flags, each with its exposure count. It is a
// POST that only reads, so it is retried.
func (c *Client) FlagsPage(ctx context.Context, req PageRequest) (*FlagPage, error) {
	out, err := postPage[FlagPage](ctx, c, "/flags/paginated", req)
	if err != nil {
		return nil, err
	}
	if out.Nodes == nil {
		out.Nodes = []FeatureFlag{}
	}
	return out, nil
}

// postPage POSTs a page request (a read, so retried) and decodes a P.
func postPage[P any](ctx context.Context, c *Client, path string, req PageRequest) (*P, error) {
	var out P
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: req, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// flagBody is what create and update send: every required field present,
// lists never (they have routes of their own).
func flagBody(f *FeatureFlag, withID bool) *FeatureFlag {
	b := &FeatureFlag{Name: f.Name, Key: f.Key, Description: f.Description, Status: f.Status, FilterMode: f.FilterMode,
		Context: append([]string{}, f.Context...), Tags: append([]string{}, f.Tags...)}
	if withID {
		b.ID = f.ID
	}
	return b
}

// CreateFlag creates f (its id and lists are not sent) and returns the
// server's row, which has no lists. A key already used in the same context
// array is a validation error (the server's 409). Never retried.
func (c *Client) CreateFlag(ctx context.Context, f *FeatureFlag) (*FeatureFlag, error) {
	const path = "/flags"
	if f == nil {
		return nil, c.localError(http.MethodPost, path, CategoryValidation, "create feature flag: no flag given")
	}
	var out FeatureFlag
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: flagBody(f, false)}, &out); err != nil {
		return nil, conflictIsValidation(err)
	}
	return &out, nil
}

// UpdateFlag replaces flag f.ID with f (all fields; its lists are not sent)
// and returns the flag with both lists. A change of Context[0] makes the
// server drop every list. An unknown id (the server's 500) is not_found once
// a GET confirms it. Never retried.
func (c *Client) UpdateFlag(ctx context.Context, f *FeatureFlag) (*FeatureFlag, error) {
	if f == nil || strings.TrimSpace(f.ID) == "" {
		return nil, c.localError(http.MethodPut, "/flags/", CategoryValidation, "update feature flag: the flag id is empty")
	}
	var out FeatureFlag
	r := request{method: http.MethodPut, path: "/flags/" + url.PathEscape(f.ID), body: flagBody(f, true)}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, c.flagMissing(ctx, conflictIsValidation(idError(err, f.ID)), f.ID)
	}
	out.sortLists()
	return &out, nil
}

// SetFlagStatus sets flag id's status (any status to any) and returns the
// row without lists. Never retried.
func (c *Client) SetFlagStatus(ctx context.Context, id, status string) (*FeatureFlag, error) {
	return c.patchFlag(ctx, "/flags/status", id, map[string]string{"flagId": id, "status": status})
}

// SetFlagFilterMode sets flag id's filter mode (includeAll, excludeAll) and
// returns the row without lists. Never retried.
func (c *Client) SetFlagFilterMode(ctx context.Context, id, mode string) (*FeatureFlag, error) {
	return c.patchFlag(ctx, "/flags/filterMode", id, map[string]string{"flagId": id, "filterMode": mode})
}

func (c *Client) patchFlag(ctx context.Context, path, id string, body map[string]string) (*FeatureFlag, error) {
	if err := c.checkID(http.MethodPatch, path, "flag", id); err != nil {
		return nil, err
	}
	var out FeatureFlag
	if err := c.call(ctx, request{method: http.MethodPatch, path: path, body: body}, &out); err != nil {
		return nil, c.flagMissing(ctx, err, id)
	}
	return &out, nil
}

// DeleteFlag deletes flag id and its lists and returns the deleted row (the
// server answers an array holding it). Unknown: not_found. Never retried.
func (c *Client) DeleteFlag(ctx context.Context, id string) (*FeatureFlag, error) {
	if err := c.checkID(http.MethodDelete, "/flags/", "flag", id); err != nil {
		return nil, err
	}
	r := request{method: http.MethodDelete, path: "/flags/" + url.PathEscape(id)}
	data, err := c.send(ctx, r)
	if err != nil {
		if CategoryOf(err) == CategoryNotFound {
			return nil, c.localError(r.method, r.path, CategoryNotFound, fmt.Sprintf("feature flag %s not found", id))
		}
		return nil, idError(err, id)
	}
	rows, err := c.decodeRows(r, data)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, c.localError(r.method, r.path, CategoryNotFound, fmt.Sprintf("feature flag %s not found (nothing was deleted)", id))
	}
	return &rows[0], nil
}

// decodeRows reads an array of flags, a single flag or nothing.
func (c *Client) decodeRows(r request, data []byte) ([]FeatureFlag, error) {
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0 || string(trimmed) == "null":
		return nil, nil
	case trimmed[0] == '[':
		var rows []FeatureFlag
		err := c.decode(r, data, &rows)
		return rows, err
	}
	var row FeatureFlag
	if err := c.decode(r, data, &row); err != nil {
		return nil, err
	}
	return []FeatureFlag{row}, nil
}

// AddFlagList adds an include (ListInclusion) or exclude list to flag
// in.FlagID and returns the list with its segment and flag. Empty member
// arrays are sent as []. An unknown flag is not_found. Never retried.
func (c *Client) AddFlagList(ctx context.Context, kind ListKind, in FlagListInput) (*FlagList, error) {
	path, err := c.flagListRoute(http.MethodPost, kind, "flag", in.FlagID)
	if err != nil {
		return nil, err
	}
	in.Segment = in.Segment.normalized()
	var out FlagList
	if err := c.call(ctx, request{method: http.MethodPost, path: path, body: &in}, &out); err != nil {
		return nil, c.flagMissing(ctx, err, in.FlagID)
	}
	return &out, nil
}

// UpdateFlagList replaces list in.Segment.ID of flag in.FlagID as a whole
// (members, enabled, list type) and returns it. An unknown list, or one of
// the other kind, is not_found. Never retried.
func (c *Client) UpdateFlagList(ctx context.Context, kind ListKind, in FlagListInput) (*FlagList, error) {
	base, err := c.flagListRoute(http.MethodPut, kind, "list", in.Segment.ID)
	if err != nil {
		return nil, err
	}
	in.Segment = in.Segment.normalized()
	var out FlagList
	r := request{method: http.MethodPut, path: base + "/" + url.PathEscape(in.Segment.ID), body: &in}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, c.listMissing(err, kind, in.Segment.ID)
	}
	return &out, nil
}

// DeleteFlagList deletes list listID of a flag and returns the deleted
// segment row. An unknown list, or one of the other kind, is not_found.
// Never retried.
func (c *Client) DeleteFlagList(ctx context.Context, kind ListKind, listID string) (*SegmentRecord, error) {
	base, err := c.flagListRoute(http.MethodDelete, kind, "list", listID)
	if err != nil {
		return nil, err
	}
	var out SegmentRecord
	r := request{method: http.MethodDelete, path: base + "/" + url.PathEscape(listID), emptyMeansNull: true}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, c.listMissing(err, kind, listID)
	}
	if out.ID == "" {
		out.ID = listID
	}
	return &out, nil
}

// FeatureFlagKeys asks the client API which flags user userID gets in
// req.Context (POST /v6/featureflag). Each key returned records an exposure
// on the server; a repeated call records nothing new, so it is retried.
func (c *Client) FeatureFlagKeys(ctx context.Context, userID string, req FeatureFlagRequest) ([]string, error) {
	r := request{method: http.MethodPost, path: "/v6/featureflag", body: req, userID: userID, idempotent: true}
	if err := c.checkUser(r); err != nil {
		return nil, err
	}
	if req.GroupsForSession != nil && req.IncludeStoredUserGroups == nil {
		return nil, c.localError(r.method, r.path, CategoryValidation, "groupsForSession and includeStoredUserGroups go together")
	}
	out := []string{}
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// flagMissing turns the server's 500 for an unknown flag id into not_found
// once a GET confirms that the flag does not exist; any other error, or a
// flag that exists, keeps the original error.
func (c *Client) flagMissing(ctx context.Context, err error, id string) error {
	return confirmMissing(err, "feature flag", id, func() error {
		_, err := c.Flag(ctx, id)
		return err
	})
}

// confirmMissing turns the server's 500 for an unknown id into not_found
// ("<what> <id> not found") once get, a read of the id, answers not_found.
func confirmMissing(err error, what, id string, get func() error) error {
	var e *Error
	if !errors.As(err, &e) || e.Status < 500 || !IsUUID(id) {
		return err
	}
	if CategoryOf(get()) == CategoryNotFound {
		return &Error{Category: CategoryNotFound, Status: e.Status, Method: e.Method, URL: e.URL,
			Message: fmt.Sprintf("%s %s not found", what, id), Err: err}
	}
	return err
}

// listMissing maps the 500s of a list PUT or DELETE that name a missing
// record ("No existing inclusion record found", "Segment with ID .. not
// found for inclusion") to not_found.
func (c *Client) listMissing(err error, kind ListKind, id string) error {
	var e *Error
	if !errors.As(err, &e) || e.Status < 500 {
		return err
	}
	msg := strings.ToLower(e.Message)
	if strings.Contains(msg, "no existing") || strings.Contains(msg, "not found") {
		return &Error{Category: CategoryNotFound, Status: e.Status, Method: e.Method, URL: e.URL,
			Message: fmt.Sprintf("%s list %s not found on this flag (%s)", kind, id, e.Message), Err: err}
	}
	return err
}

// conflictIsValidation makes the server's 409 (a flag key already used in
// that context) a validation error: the input must change.
func conflictIsValidation(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusConflict {
		e.Category = CategoryValidation
	}
	return err
}
