package sim

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestInfo(t *testing.T) {
	tests := []struct {
		version, want string
	}{
		{"", "6.5.0"},
		{"6.2.1", "6.2.1"},
	}
	for _, tt := range tests {
		ts := startSim(t, Options{Version: tt.version})
		var got upgrade.ServerInfo
		ts.must("GET", "", nil).decode(t, &got)
		want := upgrade.ServerInfo{Name: "UpGrade (simulator)", Version: tt.want, Description: got.Description}
		if diff := cmp.Diff(want, got); diff != "" || got.Description == "" {
			t.Errorf("GET /api (-want +got):\n%s", diff)
		}
	}
}

func TestUnknownRouteAnswersHTML404(t *testing.T) {
	ts := startSim(t, Options{})
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/x", "Cannot GET /api/x"},
		{"PATCH", "/experiments", "Cannot PATCH /api/experiments"},
		{"GET", "/experiments/single", "Cannot GET /api/experiments/single"},
		{"POST", "/v6/nothing", "Cannot POST /api/v6/nothing"},
	} {
		r := ts.do(tc.method, tc.path, nil)
		if r.status != http.StatusNotFound {
			t.Errorf("%s %s: status %d, want 404", tc.method, tc.path, r.status)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("%s %s: Content-Type %q, want text/html", tc.method, tc.path, ct)
		}
		if !strings.Contains(string(r.body), "<pre>"+tc.want+"</pre>") || json.Valid(r.body) {
			t.Errorf("%s %s: body %q", tc.method, tc.path, r.body)
		}
	}
	// Outside /api too.
	resp, err := http.Get(strings.TrimSuffix(ts.base, "/api") + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /other: status %d", resp.StatusCode)
	}
}

func TestCreateReplacesConditionAndDecisionPointIDs(t *testing.T) {
	ts := startSim(t, Options{Seed: 1})
	body := expBody("Math Hints", func(m map[string]any) {
		m["postExperimentRule"] = "assign"
		m["revertTo"] = "cond-b"
		m["conditionPayloads"] = []any{map[string]any{
			"id": "pl-1", "payload": map[string]any{"type": "string", "value": "hint-v2"},
			"parentCondition": "cond-b", "decisionPoint": "dp-1"}}
	})
	r := ts.must("POST", "/experiments", body)
	raw := r.object(t)
	var e upgrade.Experiment
	r.decode(t, &e)

	if !uuidV4.MatchString(e.ID) {
		t.Errorf("experiment id %q is not a UUIDv4", e.ID)
	}
	for _, c := range e.Conditions {
		if c.ID == "cond-a" || c.ID == "cond-b" || !uuidV4.MatchString(c.ID) {
			t.Errorf("condition %s kept id %q; want a fresh UUIDv4", c.ConditionCode, c.ID)
		}
	}
	if p := e.Partitions[0]; p.ID == "dp-1" || !uuidV4.MatchString(p.ID) {
		t.Errorf("decision point kept id %q", p.ID)
	}
	variant := e.ConditionByCode("variant")
	// A 6.5 server stores the continue rule on create and keeps the
	// revertTo sent, which now names no condition.
	if e.PostExperimentRule != "continue" || e.RevertTo == nil || *e.RevertTo != "cond-b" || e.ConditionByID(*e.RevertTo) != nil {
		t.Errorf("post rule %s, revertTo %v; want continue and the stale id cond-b", e.PostExperimentRule, e.RevertTo)
	}
	var pl conditionPayload
	if len(e.ConditionPayloads) != 1 {
		t.Fatalf("conditionPayloads = %s", e.ConditionPayloads)
	}
	if err := json.Unmarshal(e.ConditionPayloads[0], &pl); err != nil {
		t.Fatal(err)
	}
	if pl.ParentCondition != variant.ID || pl.DecisionPoint != e.Partitions[0].ID {
		t.Errorf("payload not remapped: %+v", pl)
	}
	if e.VersionNumber != 1 || e.CreatedAt == "" || e.CreatedAt != e.UpdatedAt {
		t.Errorf("versionNumber %d createdAt %q updatedAt %q", e.VersionNumber, e.CreatedAt, e.UpdatedAt)
	}
	if raw["state"] != "inactive" {
		t.Errorf("state %v", raw["state"])
	}
	if _, ok := raw["experimentSegmentInclusion"]; ok {
		t.Errorf("the 6.5 create answer shows no lists: %v", raw["experimentSegmentInclusion"])
	}

	// The assign answer carries the payload of the condition at that point.
	ts.setState(e.ID, "enrolling")
	ts.initUser("u1", nil, nil)
	var seen bool
	for i := 0; i < 40 && !seen; i++ {
		u := users("p", 40)[i]
		ts.initUser(u, nil, nil)
		for _, a := range ts.assign(u, "assign-prog") {
			ac := a.AssignedCondition[0]
			if ac.ConditionCode == "variant" {
				seen = true
				if ac.Payload == nil || ac.Payload.Value != "hint-v2" || ac.Payload.Type != "string" {
					t.Errorf("variant payload = %+v", ac.Payload)
				}
			} else if ac.Payload != nil {
				t.Errorf("control payload = %+v, want null", ac.Payload)
			}
		}
	}
	if !seen {
		t.Error("no user got variant in 40 tries")
	}
}

func TestCreateValidation(t *testing.T) {
	ts := startSim(t, Options{})
	tests := []struct {
		name   string
		mod    func(map[string]any)
		detail string // a substring of the rule that failed
		msg    string // message when it is not the generic one
	}{
		{"no name", func(m map[string]any) { delete(m, "name") }, "name", ""},
		{"empty name", func(m map[string]any) { m["name"] = "" }, "name", ""},
		{"bad state", func(m map[string]any) { m["state"] = "started" }, "state", ""},
		{"bad unit", func(m map[string]any) { m["assignmentUnit"] = "class" }, "assignmentUnit", ""},
		{"no consistency", func(m map[string]any) { delete(m, "consistencyRule") }, "consistencyRule", ""},
		{"bad post rule", func(m map[string]any) { m["postExperimentRule"] = "keep" }, "postExperimentRule", ""},
		{"bad filter mode", func(m map[string]any) { m["filterMode"] = "all" }, "filterMode", ""},
		{"bad type", func(m map[string]any) { m["type"] = "Fancy" }, "type", ""},
		{"no tags", func(m map[string]any) { delete(m, "tags") }, "tags", ""},
		{"empty context", func(m map[string]any) { m["context"] = []any{} }, "context", ""},
		{"condition without id", func(m map[string]any) {
			m["conditions"] = []any{map[string]any{"conditionCode": "control", "assignmentWeight": 100, "order": 1}}
		}, "conditions[0].id", ""},
		{"weight not a number", func(m map[string]any) {
			m["conditions"] = []any{map[string]any{"id": "c", "conditionCode": "control", "assignmentWeight": "50", "order": 1}}
		}, "assignmentWeight", ""},
		{"decision point without id", func(m map[string]any) {
			m["partitions"] = []any{map[string]any{"site": "SelectSection", "order": 1, "excludeIfReached": false}}
		}, "partitions[0].id", ""},
		{"decision point without excludeIfReached", func(m map[string]any) {
			m["partitions"] = []any{map[string]any{"id": "d", "site": "SelectSection", "order": 1}}
		}, "excludeIfReached", ""},
		{"group unit without group", func(m map[string]any) { m["assignmentUnit"] = "group" }, "assignmentUnit", ""},
		{"group with individual unit", func(m map[string]any) { m["group"] = "classId" }, "assignmentUnit", ""},
		{"bad segment type", func(m map[string]any) {
			m["experimentSegmentInclusion"] = []any{map[string]any{"segment": map[string]any{"type": "secret"}}}
		}, "segment.type", ""},
		{"unknown context", func(m map[string]any) { m["context"] = []any{"nowhere"} }, "",
			`The app context "nowhere" is not defined in CONTEXT_METADATA.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ts.do("POST", "/experiments", expBody("Bad", tt.mod))
			if r.status != 400 {
				t.Fatalf("status %d, body %s", r.status, r.body)
			}
			var got upgrade.ServerError
			r.decode(t, &got)
			want := upgrade.ServerError{Name: "BadRequestError", Message: "Invalid body, check 'errors' property for more info.",
				EndPoint: "/api/experiments", ErrorCode: 400, Type: "Parameter not in the correct format"}
			if tt.msg != "" {
				want.Message = tt.msg
			}
			got.Request = nil
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error body (-want +got):\n%s", diff)
			}
			if d := r.header.Get("X-Sim-Error-Detail"); !strings.Contains(d, tt.detail) {
				t.Errorf("detail %q does not mention %q", d, tt.detail)
			}
		})
	}
	if n := len(ts.srv.Sim().Experiments()); n != 0 {
		t.Errorf("%d experiments stored after failed creates", n)
	}
	// A body that is not JSON at all.
	r := ts.do("POST", "/experiments", "{nope")
	if r.status != 400 || r.object(t)["name"] != "SyntaxError" {
		t.Errorf("malformed JSON: %d %s", r.status, r.body)
	}
}

func TestCreateWithExistingIDOverwrites(t *testing.T) {
	ts := startSim(t, Options{})
	first := ts.create(expBody("One"))
	second := ts.create(expBody("One renamed", func(m map[string]any) { m["id"] = first.ID }))
	if second.ID != first.ID {
		t.Fatalf("upsert changed the id: %s -> %s", first.ID, second.ID)
	}
	var names []upgrade.ExperimentName
	ts.must("GET", "/experiments/names", nil).decode(t, &names)
	if diff := cmp.Diff([]upgrade.ExperimentName{{ID: first.ID, Name: "One renamed"}}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if second.VersionNumber != 2 || second.CreatedAt != first.CreatedAt {
		t.Errorf("upsert: version %d createdAt %s (first %s)", second.VersionNumber, second.CreatedAt, first.CreatedAt)
	}
}

func TestSingleExperiment(t *testing.T) {
	ts := startSim(t, Options{})
	e := ts.create(expBody("Single"))
	var got upgrade.Experiment
	ts.must("GET", "/experiments/single/"+e.ID, nil).decode(t, &got)
	if diff := cmp.Diff(e, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("single (-created +got):\n%s", diff)
	}

	r := ts.do("GET", "/experiments/single/not-a-uuid", nil)
	if r.status != 400 || r.object(t)["name"] != "BadRequestError" {
		t.Errorf("non-UUID id: %d %s", r.status, r.body)
	}
	r = ts.do("GET", "/experiments/single/3f0b6a55-1c7e-4c1e-9a53-2b8f0f7d9c11", nil)
	var se upgrade.ServerError
	r.decode(t, &se)
	if r.status != 404 || se.ErrorCode != 404 || se.Name != "Error" || se.Type != "Query Failed" ||
		!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("unknown id: %d %s", r.status, r.body)
	}
}

func TestUpdateKeepsIDs(t *testing.T) {
	ts := startSim(t, Options{})
	e := ts.create(expBody("Update me"))
	e.Name = "Updated"
	e.Conditions[0].AssignmentWeight, e.Conditions[1].AssignmentWeight = 30, 70
	e.Conditions = append(e.Conditions, upgrade.Condition{ID: "8a1e2a57-0a7d-4a43-8d8e-3b1c9a0e7f00", ConditionCode: "third", Order: 3})
	body := putBody(t, e)
	var got upgrade.Experiment
	ts.must("PUT", "/experiments/"+e.ID, body).decode(t, &got)
	if got.Name != "Updated" || got.VersionNumber != 2 {
		t.Errorf("name %q version %d", got.Name, got.VersionNumber)
	}
	for i, c := range e.Conditions {
		if got.Conditions[i].ID != c.ID || got.Conditions[i].AssignmentWeight != c.AssignmentWeight {
			t.Errorf("condition %d: got %+v want %+v", i, got.Conditions[i], c)
		}
	}
	if got.Partitions[0].ID != e.Partitions[0].ID {
		t.Errorf("decision point id changed: %s -> %s", e.Partitions[0].ID, got.Partitions[0].ID)
	}
	// Every condition got a payload at every decision point: its code.
	if len(got.ConditionPayloads) != 3 {
		t.Errorf("payloads after the update: %s", got.ConditionPayloads)
	}
	// The server fails (500, a TypeError) on an unknown id and on a body
	// without conditionPayloads; neither changes anything.
	r := ts.do("PUT", "/experiments/"+"0d9b1bb8-7a43-4f5f-9b55-5f1f4c0c0c0c", body)
	if se := r.object(t); r.status != 500 || se["name"] != "TypeError" {
		t.Errorf("PUT unknown id: %d %s", r.status, r.body)
	}
	delete(body, "conditionPayloads")
	body["name"] = "Not stored"
	r = ts.do("PUT", "/experiments/"+e.ID, body)
	if se := r.object(t); r.status != 500 || se["name"] != "TypeError" {
		t.Errorf("PUT without conditionPayloads: %d %s", r.status, r.body)
	}
	if cur, _ := ts.srv.Sim().Experiment(e.ID); cur.Name != "Updated" {
		t.Errorf("a failed PUT changed the name to %q", cur.Name)
	}
}

func TestStateChange(t *testing.T) {
	ts := startSim(t, Options{})
	e := ts.create(expBody("States"))
	r := ts.must("POST", "/experiments/state", map[string]any{"experimentId": e.ID, "state": "enrolling"})
	raw := r.object(t)
	if raw["state"] != "running" {
		t.Errorf("6.5 shows state %v, want running", raw["state"])
	}
	logs, _ := raw["stateTimeLogs"].([]any)
	if len(logs) != 1 {
		t.Fatalf("stateTimeLogs = %v", raw["stateTimeLogs"])
	}
	l := logs[0].(map[string]any)
	if l["fromState"] != "inactive" || l["toState"] != "running" || l["timeLog"] == "" || l["id"] == "" {
		t.Errorf("log = %v", l)
	}
	// Display names are accepted in requests, and any transition is allowed.
	for _, tc := range []struct{ send, show string }{
		{"paused", "paused"}, {"completed", "completed"}, {"enrollmentComplete", "paused"},
		{"archived", "archived"}, {"inactive", "inactive"},
	} {
		got := ts.must("POST", "/experiments/state", map[string]any{"experimentId": e.ID, "state": tc.send}).object(t)
		if got["state"] != tc.show {
			t.Errorf("state %s shows %v, want %s", tc.send, got["state"], tc.show)
		}
	}
	stored, _ := ts.srv.Sim().Experiment(e.ID)
	if stored.State != upgrade.StateInactive || len(stored.StateTimeLogs) != 6 || stored.VersionNumber != 7 {
		t.Errorf("stored state %s, %d logs, version %d", stored.State, len(stored.StateTimeLogs), stored.VersionNumber)
	}

	r = ts.do("POST", "/experiments/state", map[string]any{"experimentId": "0d9b1bb8-7a43-4f5f-9b55-5f1f4c0c0c0c", "state": "enrolling"})
	if r.status != 500 || r.object(t)["errorCode"] != float64(500) {
		t.Errorf("unknown experiment: %d %s, want 500 JSON", r.status, r.body)
	}
	r = ts.do("POST", "/experiments/state", map[string]any{"experimentId": e.ID, "state": "started"})
	if r.status != 400 {
		t.Errorf("bad state: %d", r.status)
	}
	// Through the full PUT a state change is logged too, and the log
	// entries sent back (with their ids) are accepted.
	cur, _ := ts.srv.Sim().Experiment(e.ID)
	cur.State = upgrade.StateEnrolling
	var put upgrade.Experiment
	ts.must("PUT", "/experiments/"+e.ID, putBody(t, cur)).decode(t, &put)
	// The answer echoes the logs sent; the stored experiment has the new one.
	stored, _ = ts.srv.Sim().Experiment(e.ID)
	if put.State != upgrade.StateEnrolling || len(put.StateTimeLogs) != 6 || len(stored.StateTimeLogs) != 7 {
		t.Errorf("PUT state %s, %d logs shown, %d stored", put.State, len(put.StateTimeLogs), len(stored.StateTimeLogs))
	}
}

func TestVersion62Shapes(t *testing.T) {
	ts := startSim(t, Options{Version: "6.2.0"})
	// A 6.2 client sends the single-object segment shape.
	body := expBody("Legacy", func(m map[string]any) {
		m["experimentSegmentInclusion"] = segment([]string{"alice"}, nil)[0]
		m["experimentSegmentExclusion"] = segment(nil, [][2]string{{"classId", "c9"}})[0]
		m["filterMode"] = "excludeAll"
	})
	created := ts.must("POST", "/experiments", body).object(t)
	id := created["id"].(string)
	raw := ts.must("POST", "/experiments/state", map[string]any{"experimentId": id, "state": "running"}).object(t)
	if raw["state"] != "enrolling" {
		t.Errorf("6.2 shows %v, want the internal name enrolling", raw["state"])
	}
	inc, ok := raw["experimentSegmentInclusion"].(map[string]any)
	if !ok {
		t.Fatalf("6.2 inclusion should be an object: %v", raw["experimentSegmentInclusion"])
	}
	users := inc["segment"].(map[string]any)["individualForSegment"].([]any)
	if len(users) != 1 || users[0].(map[string]any)["userId"] != "alice" {
		t.Errorf("inclusion users %v", users)
	}
	stored, _ := ts.srv.Sim().Experiment(id)
	want := upgrade.Segment{Users: []string{}, Groups: []upgrade.GroupRef{{Type: "classId", GroupID: "c9"}}}
	if diff := cmp.Diff(want, stored.Exclusion); diff != "" {
		t.Errorf("exclusion (-want +got):\n%s", diff)
	}
}

func TestDeleteAnswersArray(t *testing.T) {
	ts := startSim(t, Options{})
	e := ts.create(expBody("Doomed"))
	r := ts.must("DELETE", "/experiments/"+e.ID, nil)
	var rows []upgrade.Experiment
	r.decode(t, &rows)
	if len(rows) != 1 || rows[0].ID != e.ID || rows[0].Name != "Doomed" {
		t.Errorf("delete answered %s", r.body)
	}
	if r := ts.do("DELETE", "/experiments/"+e.ID, nil); r.status != 404 {
		t.Errorf("second delete: %d", r.status)
	}
	if r := ts.do("DELETE", "/experiments/zzz", nil); r.status != 400 {
		t.Errorf("delete non-UUID: %d", r.status)
	}
	if r := ts.do("GET", "/experiments/single/"+e.ID, nil); r.status != 404 {
		t.Errorf("single after delete: %d", r.status)
	}
}

func TestListsAndPagination(t *testing.T) {
	ts := startSim(t, Options{})
	a := ts.create(expBody("Alpha hints", func(m map[string]any) { m["tags"] = []any{"math"} }))
	b := ts.create(expBody("Beta stream", func(m map[string]any) {
		m["context"] = []any{"mathstream"}
		m["conditions"] = []any{cond("x", "question-hint-default", 50, 1), cond("y", "question-hint-tutorbot", 50, 2)}
		m["partitions"] = []any{dp("p", "lesson-stream", "question-hint", false)}
	}))
	c := ts.create(expBody("Gamma hints"))
	ts.setState(c.ID, "enrolling")

	var all []map[string]any
	ts.must("GET", "/experiments", nil).decode(t, &all)
	if len(all) != 3 || all[2]["state"] != "running" {
		t.Errorf("GET /experiments: %d items, last state %v", len(all), all[len(all)-1]["state"])
	}

	page := func(body map[string]any) (int, []string) {
		t.Helper()
		var p struct {
			Total int `json:"total"`
			Nodes []struct {
				Name string `json:"name"`
			} `json:"nodes"`
		}
		ts.must("POST", "/experiments/paginated", body).decode(t, &p)
		var names []string
		for _, n := range p.Nodes {
			names = append(names, n.Name)
		}
		return p.Total, names
	}
	tests := []struct {
		name  string
		body  map[string]any
		total int
		names []string
	}{
		{"default newest first", map[string]any{"skip": 0, "take": 10}, 3, []string{"Gamma hints", "Beta stream", "Alpha hints"}},
		{"by name ascending, paged", map[string]any{"skip": 1, "take": 1, "sortParams": map[string]any{"key": "name", "sortAs": "ASC"}}, 3, []string{"Beta stream"}},
		{"search name", map[string]any{"skip": 0, "take": 10, "searchParams": map[string]any{"key": "name", "string": "HINTS"},
			"sortParams": map[string]any{"key": "name", "sortAs": "ASC"}}, 2, []string{"Alpha hints", "Gamma hints"}},
		{"search status display name", map[string]any{"skip": 0, "take": 10, "searchParams": map[string]any{"key": "status", "string": "running"}}, 1, []string{"Gamma hints"}},
		{"search context", map[string]any{"skip": 0, "take": 10, "searchParams": map[string]any{"key": "context", "string": "stream"}}, 1, []string{"Beta stream"}},
		{"search tag", map[string]any{"skip": 0, "take": 10, "searchParams": map[string]any{"key": "tag", "string": "MAT"}}, 1, []string{"Alpha hints"}},
		{"search all by site", map[string]any{"skip": 0, "take": 10, "searchParams": map[string]any{"key": "all", "string": "lesson"}}, 1, []string{"Beta stream"}},
	}
	for _, tt := range tests {
		total, names := page(tt.body)
		if total != tt.total || !cmp.Equal(names, tt.names) {
			t.Errorf("%s: total %d names %v, want %d %v", tt.name, total, names, tt.total, tt.names)
		}
	}
	if r := ts.do("POST", "/experiments/paginated", map[string]any{"take": 10}); r.status != 400 {
		t.Errorf("paginated without skip: %d", r.status)
	}
	if r := ts.do("POST", "/experiments/paginated", map[string]any{"skip": 0, "take": 1, "sortParams": map[string]any{"key": "color", "sortAs": "ASC"}}); r.status != 400 {
		t.Errorf("paginated with a bad sort key: %d", r.status)
	}
	_ = a
	_ = b
}

func TestContextMetadata(t *testing.T) {
	ts := startSim(t, Options{})
	var got struct {
		ContextMetadata upgrade.ContextMetadata `json:"contextMetadata"`
	}
	ts.must("GET", "/experiments/contextMetaData", nil).decode(t, &got)
	if diff := cmp.Diff(upgrade.DefaultContextMetadata(), got.ContextMetadata); diff != "" {
		t.Errorf("default metadata (-want +got):\n%s", diff)
	}
}

func TestAdminToken(t *testing.T) {
	ts := startSim(t, Options{Token: "s3cret"})
	r := ts.do("GET", "/experiments", nil)
	if r.status != 401 || r.object(t)["name"] != "AuthorizationRequiredError" {
		t.Errorf("no token: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/experiments", nil, "Authorization", "Bearer wrong"); r.status != 401 {
		t.Errorf("wrong token: %d", r.status)
	}
	ts.must("GET", "/experiments", nil, "Authorization", "Bearer s3cret")
	// Client routes and the health check need no admin token.
	ts.must("GET", "", nil)
	ts.must("POST", "/v6/init", map[string]any{}, "User-Id", "u")
}
