package sim

import (
	"strings"
	"testing"
)

// Mooclets are off on a standard 6.5 backend: every way in is a 400 and
// nothing is stored (upgrade-results-designs.md section 10).
func TestMoocletRefusals(t *testing.T) {
	ts := startSim(t, Options{})
	params := map[string]any{"assignmentAlgorithm": "ts_configurable", "prior": map[string]any{"success": 1, "failure": 1}}
	tests := []struct {
		name string
		mod  func(map[string]any)
		msg  string // a substring of the message
	}{
		{"ts_configurable without parameters", func(m map[string]any) { m["assignmentAlgorithm"] = "ts_configurable" }, "Invalid body"},
		{"ts_configurable with parameters", func(m map[string]any) {
			m["assignmentAlgorithm"] = "ts_configurable"
			m["moocletPolicyParameters"] = params
		}, "Failed to create Experiment: moocletPolicyParameters was provided but mooclets are not enabled on backend."},
		{"random with parameters", func(m map[string]any) { m["moocletPolicyParameters"] = params },
			"Failed to create Experiment: moocletPolicyParameters was provided"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ts.do("POST", "/experiments", expBody("Mooclet", tt.mod))
			if r.status != 400 || !strings.Contains(string(r.body), tt.msg) {
				t.Fatalf("status %d, body %s, want 400 with %q", r.status, r.body, tt.msg)
			}
		})
	}
	if n := len(ts.srv.Sim().Experiments()); n != 0 {
		t.Errorf("%d experiments stored after refused creates", n)
	}

	e := ts.create(expBody("Plain"))
	upd := expBody("Plain", func(m map[string]any) {
		m["id"] = e.ID
		m["moocletPolicyParameters"] = params
	})
	r := ts.do("PUT", "/experiments/"+e.ID, upd)
	if r.status != 400 || !strings.Contains(string(r.body), "Failed to update Experiment: moocletPolicyParameters") {
		t.Errorf("update with parameters: %d %s", r.status, r.body)
	}

	ts.must("POST", "/v6/init", map[string]any{}, "User-Id", "u1")
	for _, rt := range []struct{ method, path string }{
		{"POST", "/v6/reward"},
		{"GET", "/experiments/mooclet-rewards/" + e.ID},
	} {
		r := ts.do(rt.method, rt.path, map[string]any{"experimentId": e.ID, "rewardValue": "SUCCESS"}, "User-Id", "u1")
		if r.status != 400 || r.object(t)["errorCode"] == nil {
			t.Errorf("%s %s: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
}

// A segment sent without a description reads back null, as on a real 6.5;
// one sent with "" keeps "" (issue 30, the leftover differences).
func TestSegmentWithoutDescriptionIsNull(t *testing.T) {
	ts := startSim(t, Options{})
	for _, tc := range []struct {
		name string
		desc any // nil: the key is left out
		want any
	}{{"without", nil, nil}, {"empty", "", ""}, {"given", "d", "d"}} {
		body := map[string]any{"name": "seg " + tc.name, "context": "assign-prog", "type": "public",
			"userIds": []any{"u1"}, "groups": []any{}, "subSegmentIds": []any{}}
		if tc.desc != nil {
			body["description"] = tc.desc
		}
		id, _ := ts.must("POST", "/segments", body).object(t)["id"].(string)
		got := ts.must("GET", "/segments/"+id, nil).object(t)
		if d, ok := got["description"]; !ok || d != tc.want {
			t.Errorf("%s: description %#v (present %v), want %#v", tc.name, d, ok, tc.want)
		}
	}
}
