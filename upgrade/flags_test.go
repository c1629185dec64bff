package upgrade

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	flagID = "6c31e1d0-0000-4000-8000-000000000001"
	segID  = "ed61e1d0-0000-4000-8000-000000000002"
)

const flagRow = `{"id":"` + flagID + `","name":"Math hints","key":"MATH_HINTS","description":"","context":["assign-prog"],"tags":[],"status":"enabled","filterMode":"excludeAll","versionNumber":2}`

const typeError500 = `{"name":"TypeError","message":"Cannot read properties of undefined (reading 'featureFlagSegmentInclusion')"}`

// TestFlagErrorMapping: every route's own way of saying "not found" ends as
// not_found, other failures keep their category (upgrade-flags-segments.md).
func TestFlagErrorMapping(t *testing.T) {
	notFound204 := reply{status: http.StatusNoContent}
	tests := []struct {
		name    string
		routes  map[string][]reply
		call    func(context.Context, *Client) error
		wantCat Category
		wantMsg string
	}{
		{name: "GET unknown flag: 204 empty", routes: map[string][]reply{"GET /api/flags/" + flagID: {notFound204}},
			call:    func(ctx context.Context, c *Client) error { _, err := c.Flag(ctx, flagID); return err },
			wantCat: CategoryNotFound, wantMsg: "feature flag " + flagID + " not found"},
		{name: "GET malformed id", routes: map[string][]reply{"GET /api/flags/abc": {{status: 400, body: `{"name":"BadRequestError","message":"Invalid params, check 'errors' property for more info.","type":"Parameter not in the correct format"}`}}},
			call:    func(ctx context.Context, c *Client) error { _, err := c.Flag(ctx, "abc"); return err },
			wantCat: CategoryValidation, wantMsg: `"abc" is not a valid id`},
		{name: "PUT unknown id: 500 TypeError, GET confirms", routes: map[string][]reply{
			"PUT /api/flags/" + flagID: {{status: 500, body: typeError500}}, "GET /api/flags/" + flagID: {notFound204}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.UpdateFlag(ctx, &FeatureFlag{ID: flagID, Name: "x", Key: "X", Context: []string{"assign-prog"}})
				return err
			},
			wantCat: CategoryNotFound, wantMsg: "feature flag " + flagID + " not found"},
		{name: "PUT 500 on a flag that exists stays api", routes: map[string][]reply{
			"PUT /api/flags/" + flagID: {{status: 500, body: typeError500}}, "GET /api/flags/" + flagID: {{body: flagRow}}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.UpdateFlag(ctx, &FeatureFlag{ID: flagID, Name: "x", Key: "X", Context: []string{"assign-prog"}})
				return err
			},
			wantCat: CategoryAPI, wantMsg: "Cannot read"},
		{name: "PUT dup key: 409 is validation", routes: map[string][]reply{
			"PUT /api/flags/" + flagID: {{status: 409, body: `{"name":"Error","type":"Feature Flag with same key already exists for this app-context","message":"A flag with this key already exists for this app-context"}`}}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.UpdateFlag(ctx, &FeatureFlag{ID: flagID, Name: "x", Key: "X", Context: []string{"assign-prog"}})
				return err
			},
			wantCat: CategoryValidation, wantMsg: "A flag with this key already exists"},
		{name: "create dup key: 409 is validation", routes: map[string][]reply{
			"POST /api/flags": {{status: 409, body: `{"name":"Error","message":"A flag with this key already exists for this app-context"}`}}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.CreateFlag(ctx, &FeatureFlag{Name: "x", Key: "X"})
				return err
			},
			wantCat: CategoryValidation, wantMsg: "already exists"},
		{name: "PATCH status unknown flag", routes: map[string][]reply{
			"PATCH /api/flags/status": {{status: 500, body: typeError500}}, "GET /api/flags/" + flagID: {notFound204}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.SetFlagStatus(ctx, flagID, FlagEnabled)
				return err
			},
			wantCat: CategoryNotFound},
		{name: "PATCH filterMode unknown flag", routes: map[string][]reply{
			"PATCH /api/flags/filterMode": {{status: 500, body: typeError500}}, "GET /api/flags/" + flagID: {notFound204}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.SetFlagFilterMode(ctx, flagID, FilterIncludeAll)
				return err
			},
			wantCat: CategoryNotFound},
		{name: "DELETE unknown flag: 404", routes: map[string][]reply{
			"DELETE /api/flags/" + flagID: {{status: 404, body: `{"name":"NotFoundError","message":"","type":"Query Failed"}`}}},
			call:    func(ctx context.Context, c *Client) error { _, err := c.DeleteFlag(ctx, flagID); return err },
			wantCat: CategoryNotFound, wantMsg: "feature flag " + flagID + " not found"},
		{name: "list add to unknown flag: 500 Query Failed", routes: map[string][]reply{
			"POST /api/flags/inclusionList": {{status: 500, body: `{"name":"QueryFailedError","message":"Query Failed"}`}}, "GET /api/flags/" + flagID: {notFound204}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.AddFlagList(ctx, ListInclusion, FlagListInput{FlagID: flagID, Enabled: true, ListType: "Individual"})
				return err
			},
			wantCat: CategoryNotFound},
		{name: "list PUT unknown list", routes: map[string][]reply{
			"PUT /api/flags/exclusionList/" + segID: {{status: 500, body: `{"name":"Error","message":"No existing exclusion record found for segment ` + segID + `"}`}}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.UpdateFlagList(ctx, ListExclusion, FlagListInput{FlagID: flagID, Segment: SegmentInput{ID: segID}})
				return err
			},
			wantCat: CategoryNotFound, wantMsg: "exclusion list " + segID + " not found"},
		{name: "list DELETE other kind", routes: map[string][]reply{
			"DELETE /api/flags/inclusionList/" + segID: {{status: 500, body: `{"name":"Error","message":"Segment with ID ` + segID + ` not found for inclusion"}`}}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.DeleteFlagList(ctx, ListInclusion, segID)
				return err
			},
			wantCat: CategoryNotFound},
		{name: "list kind checked before sending", routes: nil,
			call: func(ctx context.Context, c *Client) error {
				_, err := c.DeleteFlagList(ctx, "include", segID)
				return err
			},
			wantCat: CategoryValidation, wantMsg: `unknown list kind "include"`},
		{name: "segment 404", routes: map[string][]reply{
			"GET /api/segments/" + segID: {{status: 404, body: `{"name":"NotFoundException","message":"Segment not found."}`}}},
			call:    func(ctx context.Context, c *Client) error { _, err := c.Segment(ctx, segID); return err },
			wantCat: CategoryNotFound, wantMsg: "segment " + segID + " not found"},
		{name: "segment DELETE unknown: 500 Query Failed, GET confirms", routes: map[string][]reply{
			"DELETE /api/segments/" + segID: {{status: 500, body: `{"name":"Error","message":"Query Failed"}`}},
			"GET /api/segments/" + segID:    {{status: 404, body: `{"name":"NotFoundException","message":"Segment not found."}`}}},
			call:    func(ctx context.Context, c *Client) error { _, err := c.DeleteSegment(ctx, segID); return err },
			wantCat: CategoryNotFound},
		{name: "public segment name taken: 400", routes: map[string][]reply{
			"POST /api/segments": {{status: 400, body: `{"message":"Segment name pilot already exists in context assign-prog"}`}}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.UpsertSegment(ctx, SegmentInput{Name: "pilot", Context: "assign-prog", Type: SegmentPublic})
				return err
			},
			wantCat: CategoryValidation, wantMsg: "already exists in context"},
		{name: "featureflag: user not initialised", routes: map[string][]reply{
			"POST /api/v6/featureflag": {{status: 404, body: `{"name":"Error","message":"Experiment user not defined"}`}}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.FeatureFlagKeys(ctx, "u1", FeatureFlagRequest{Context: "assign-prog"})
				return err
			},
			wantCat: CategoryNotFound, wantMsg: "Experiment user not defined"},
		{name: "featureflag: half the session fields", routes: nil,
			call: func(ctx context.Context, c *Client) error {
				_, err := c.FeatureFlagKeys(ctx, "u1", FeatureFlagRequest{Context: "assign-prog", GroupsForSession: map[string][]string{}})
				return err
			},
			wantCat: CategoryValidation},
		{name: "audit: both ids", routes: nil,
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Audit(ctx, AuditRequest{Take: 10, ExperimentID: "a", FlagID: "b"})
				return err
			},
			wantCat: CategoryValidation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.routes)
			c, _ := newClient(t, f.url(), func(cfg *Config) { cfg.MaxRetries = -1 })
			err := tt.call(t.Context(), c)
			if cat := CategoryOf(err); cat != tt.wantCat {
				t.Fatalf("category %q, want %q (err %v)", cat, tt.wantCat, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q lacks %q", err, tt.wantMsg)
			}
			if tt.routes == nil && len(f.requests()) != 0 {
				t.Errorf("a request was sent: %+v", f.requests())
			}
		})
	}
}

func TestFlagBodiesAndAnswers(t *testing.T) {
	f := newFake(t, map[string][]reply{
		"POST /api/flags":               {{body: flagRow}},
		"DELETE /api/flags/" + flagID:   {{body: "[" + flagRow + "]"}},
		"POST /api/flags/inclusionList": {{body: `{"segmentId":"` + segID + `","enabled":true,"listType":"Individual","featureFlag":{"name":"Math hints"},"segment":{"id":"` + segID + `","name":"l","type":"private","context":"assign-prog","individualForSegment":[{"userId":"u1"}],"groupForSegment":[],"subSegments":[]}}`}},
		"POST /api/flags/paginated":     {{body: `{"total":1,"skip":0,"take":10,"nodes":[` + strings.TrimSuffix(flagRow, "}") + `,"featureFlagExposures":3}]}`}},
		"POST /api/segments/paginated":  {{body: `{"total":1,"nodes":{"segmentsData":[{"id":"` + segID + `","name":"pilot","type":"public","status":"unused","individualForSegment":[],"groupForSegment":[],"subSegments":[]}],"experimentSegmentInclusionData":[],"experimentSegmentExclusionData":[],"featureFlagSegmentInclusionData":[],"featureFlagSegmentExclusionData":[],"allParentSegments":[]}}`}},
		"POST /api/v6/featureflag":      {{body: `["MATH_HINTS"]`}},
	})
	c, _ := newClient(t, f.url(), nil)
	ctx := t.Context()
	created, err := c.CreateFlag(ctx, &FeatureFlag{ID: "ignored", Name: "Math hints", Key: "MATH_HINTS", Context: []string{"assign-prog"},
		Status: FlagDisabled, FilterMode: FilterExcludeAll, Inclusion: []FlagList{{SegmentID: "x"}}})
	if err != nil || created.ID != flagID {
		t.Fatalf("create: %+v, %v", created, err)
	}
	body := f.requests()[0].Body.(map[string]any)
	want := map[string]any{"name": "Math hints", "key": "MATH_HINTS", "description": "", "context": []any{"assign-prog"},
		"tags": []any{}, "status": "disabled", "filterMode": "excludeAll"}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("create body (-want +got):\n%s", diff)
	}
	deleted, err := c.DeleteFlag(ctx, flagID)
	if err != nil || deleted.Key != "MATH_HINTS" {
		t.Fatalf("delete: %+v, %v", deleted, err)
	}
	l, err := c.AddFlagList(ctx, ListInclusion, FlagListInput{FlagID: flagID, Enabled: true, ListType: "Individual",
		Segment: SegmentInput{Name: "l", Context: "assign-prog", UserIDs: []string{"u1"}}})
	if err != nil || l.ID() != segID || l.Segment.UserIDs()[0] != "u1" || l.FeatureFlag.Name != "Math hints" {
		t.Fatalf("add list: %+v, %v", l, err)
	}
	lb := f.requests()[2].Body.(map[string]any)["segment"].(map[string]any)
	for _, k := range []string{"userIds", "groups", "subSegmentIds"} {
		if _, ok := lb[k].([]any); !ok {
			t.Errorf("list body lacks array %s: %v", k, lb)
		}
	}
	if lb["type"] != "private" {
		t.Errorf("list type %v, want private", lb["type"])
	}
	page, err := c.FlagsPage(ctx, PageRequest{Take: 10})
	if err != nil || page.Total != 1 || page.Nodes[0].Exposures == nil || *page.Nodes[0].Exposures != 3 {
		t.Fatalf("flags page: %+v, %v", page, err)
	}
	sp, err := c.SegmentsPage(ctx, PageRequest{Take: 10})
	if err != nil || sp.Nodes.Segments[0].Name != "pilot" {
		t.Fatalf("segments page: %+v, %v", sp, err)
	}
	include := false
	keys, err := c.FeatureFlagKeys(ctx, "u1", FeatureFlagRequest{Context: "assign-prog", GroupsForSession: map[string][]string{"classId": {"c7"}}, IncludeStoredUserGroups: &include})
	if err != nil || len(keys) != 1 {
		t.Fatalf("featureflag: %v, %v", keys, err)
	}
	last := f.requests()[len(f.requests())-1]
	if last.Headers["User-Id"] != "u1" || last.Body.(map[string]any)["includeStoredUserGroups"] != false {
		t.Errorf("featureflag request %+v", last)
	}
}

func TestStateHistorySorted(t *testing.T) {
	exp := `{"id":"` + flagID + `","name":"e","context":["assign-prog"],"state":"running","conditions":[],"partitions":[],
	"stateTimeLogs":[{"id":"b","fromState":"running","toState":"paused","timeLog":"2026-01-02T00:00:00.000Z"},
	{"id":"a","fromState":"inactive","toState":"running","timeLog":"2026-01-01T00:00:00.000Z"}]}`
	f := newFake(t, map[string][]reply{"GET /api/experiments/single/" + flagID: {{body: exp}}})
	c, _ := newClient(t, f.url(), nil)
	got, err := c.StateHistory(t.Context(), flagID)
	if err != nil {
		t.Fatal(err)
	}
	want := []StateTimeLog{{ID: "a", FromState: StateInactive, ToState: StateEnrolling, TimeLog: "2026-01-01T00:00:00.000Z"},
		{ID: "b", FromState: StateEnrolling, ToState: StateEnrollmentComplete, TimeLog: "2026-01-02T00:00:00.000Z"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}
