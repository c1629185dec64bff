package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// stepClock is a clock that moves one second per reading, so that
// updatedAt orders writes without sleeping.
func stepClock() func() time.Time {
	var n atomic.Int64
	base := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Second) }
}

// testServer is a simulator over real HTTP on loopback, spoken to with plain
// net/http and encoding/json.
type testServer struct {
	t      testing.TB
	srv    *Server
	base   string
	client *http.Client
}

func startSim(t testing.TB, opts Options) *testServer {
	t.Helper()
	if opts.Now == nil {
		opts.Now = stepClock()
	}
	srv, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &testServer{t: t, srv: srv, base: srv.URL(), client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

type reply struct {
	status int
	body   []byte
	header http.Header
}

func (r reply) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r reply) object(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.decode(t, &m)
	return m
}

// do sends a request; hdr holds header name/value pairs.
func (ts *testServer) do(method, path string, body any, hdr ...string) reply {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatalf("encoding body: %v", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, ts.base+path, rd)
	if err != nil {
		ts.t.Fatalf("request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("reading answer: %v", err)
	}
	return reply{status: resp.StatusCode, body: b, header: resp.Header}
}

// must sends a request that has to answer 200.
func (ts *testServer) must(method, path string, body any, hdr ...string) reply {
	ts.t.Helper()
	r := ts.do(method, path, body, hdr...)
	if r.status != http.StatusOK {
		ts.t.Fatalf("%s %s: status %d, body %s, detail %q", method, path, r.status, r.body, r.header.Get("X-Sim-Error-Detail"))
	}
	return r
}

// expBody is a valid experiment body for assign-prog, to be adjusted.
func expBody(name string, mods ...func(map[string]any)) map[string]any {
	m := map[string]any{
		"name":               name,
		"description":        "test experiment",
		"context":            []any{"assign-prog"},
		"state":              "inactive",
		"consistencyRule":    "individual",
		"assignmentUnit":     "individual",
		"postExperimentRule": "continue",
		"tags":               []any{},
		"filterMode":         "includeAll",
		"type":               "Simple",
		"revertTo":           nil,
		"conditions": []any{
			cond("cond-a", "control", 50, 1),
			cond("cond-b", "variant", 50, 2),
		},
		"partitions": []any{
			dp("dp-1", "SelectSection", "absolute_value_plot_equality", false),
		},
		"experimentSegmentInclusion": []any{},
		"experimentSegmentExclusion": []any{},
	}
	for _, f := range mods {
		f(m)
	}
	return m
}

func cond(id, code string, weight float64, order int) map[string]any {
	return map[string]any{"id": id, "conditionCode": code, "assignmentWeight": weight, "order": order}
}

func dp(id, site, target string, excludeIfReached bool) map[string]any {
	return map[string]any{"id": id, "site": site, "target": target, "order": 1, "excludeIfReached": excludeIfReached}
}

// segment builds one 6.5 segment list.
func segment(users []string, groups [][2]string) []any {
	ind := []any{}
	for _, u := range users {
		ind = append(ind, map[string]any{"userId": u})
	}
	grp := []any{}
	for _, g := range groups {
		grp = append(grp, map[string]any{"type": g[0], "groupId": g[1]})
	}
	return []any{map[string]any{"segment": map[string]any{
		"individualForSegment": ind, "groupForSegment": grp, "subSegments": []any{}, "type": "private"}}}
}

// create posts an experiment and returns the server's copy.
func (ts *testServer) create(body map[string]any) upgrade.Experiment {
	ts.t.Helper()
	var e upgrade.Experiment
	ts.must("POST", "/experiments", body).decode(ts.t, &e)
	return e
}

func (ts *testServer) setState(id string, st string) {
	ts.t.Helper()
	ts.must("POST", "/experiments/state", map[string]any{"experimentId": id, "state": st})
}

func (ts *testServer) initUser(id string, group map[string][]string, wg map[string]string) {
	ts.t.Helper()
	body := map[string]any{}
	if group != nil {
		body["group"] = group
	}
	if wg != nil {
		body["workingGroup"] = wg
	}
	ts.must("POST", "/v6/init", body, "User-Id", id)
}

// assign returns the decoded answer of /v6/assign.
func (ts *testServer) assign(user, context string) []upgrade.Assignment {
	ts.t.Helper()
	var out []upgrade.Assignment
	ts.must("POST", "/v6/assign", map[string]any{"context": context}, "User-Id", user).decode(ts.t, &out)
	return out
}

// codeAt is the condition code a user got at a site/target ("" = default).
func codeAt(t testing.TB, as []upgrade.Assignment, site, target string) string {
	t.Helper()
	code := ""
	n := 0
	for _, a := range as {
		if a.Site == site && a.Target == target {
			n++
			if len(a.AssignedCondition) != 1 {
				t.Fatalf("assignment at %s/%s has %d conditions", site, target, len(a.AssignedCondition))
			}
			code = a.AssignedCondition[0].ConditionCode
		}
	}
	if n > 1 {
		t.Fatalf("%d assignments for one decision point %s/%s: %+v", n, site, target, as)
	}
	return code
}

func (ts *testServer) mark(user, site, target, code, expID, status string) reply {
	ts.t.Helper()
	body := map[string]any{
		"data": map[string]any{"site": site, "target": target,
			"assignedCondition": map[string]any{"conditionCode": code, "experimentId": expID}},
		"status": status,
	}
	return ts.must("POST", "/v6/mark", body, "User-Id", user)
}

func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

// post is a client call safe to use from any goroutine: it reports
// failures instead of stopping the test.
func post(ts *testServer, path, user string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest("POST", ts.base+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Id", user)
	resp, err := ts.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: status %d: %s", path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// putBody is an update body as the client sends it: the whole experiment,
// conditionPayloads included (a 6.5 server fails an update without them).
func putBody(t testing.TB, e upgrade.Experiment) map[string]any {
	t.Helper()
	b, err := e.MarshalFor(upgrade.SegmentsArray)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["conditionPayloads"] == nil {
		m["conditionPayloads"] = []any{}
	}
	return m
}
