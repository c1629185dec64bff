package upgrade

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// reply is one canned answer of the fake server.
type reply struct {
	status int
	body   string
	header map[string]string
	// hangUp closes the connection without answering (a network error).
	hangUp bool
}

// seen is one request as the fake server received it.
type seen struct {
	Method  string
	Path    string
	Headers map[string]string // only the headers the tests care about
	Body    any               // decoded JSON, nil when there was no body
}

// fakeUpGrade answers routes ("METHOD /path") with queued replies; the last
// reply of a route repeats. Unknown routes get Express's HTML 404 page, like
// the real server.
type fakeUpGrade struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string][]reply
	log    []seen
}

func newFake(t *testing.T, routes map[string][]reply) *fakeUpGrade {
	t.Helper()
	f := &fakeUpGrade{t: t, routes: routes}
	if f.routes == nil {
		f.routes = map[string][]reply{}
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeUpGrade) url() string { return f.srv.URL + "/api" }

func (f *fakeUpGrade) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	s := seen{Method: r.Method, Path: r.URL.Path, Headers: map[string]string{}}
	for _, h := range []string{"Authorization", "User-Id", "Content-Type"} {
		if v := r.Header.Get(h); v != "" {
			s.Headers[h] = v
		}
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &s.Body); err != nil {
			s.Body = "INVALID JSON: " + string(raw)
		}
	}
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.log = append(f.log, s)
	queue := f.routes[key]
	var rp reply
	found := len(queue) > 0
	if found {
		rp = queue[0]
		if len(queue) > 1 {
			f.routes[key] = queue[1:]
		}
	}
	f.mu.Unlock()
	if !found {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, strings.Replace(readTestdata(f.t, "express-404.html"), "GET /api/nope", r.Method+" "+r.URL.Path, 1))
		return
	}
	if rp.hangUp {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if rp.status == 0 {
		rp.status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rp.status)
	io.WriteString(w, rp.body)
}

// requests returns what the server saw so far.
func (f *fakeUpGrade) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.log...)
}

// count counts the requests to one route.
func (f *fakeUpGrade) count(route string) int {
	n := 0
	for _, s := range f.requests() {
		if s.Method+" "+s.Path == route {
			n++
		}
	}
	return n
}

// sleeper records the waits the retry loop asks for and advances a fake
// clock by them, so no test ever waits for real.
type sleeper struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newSleeper() *sleeper {
	return &sleeper{now: time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)}
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	s.now = s.now.Add(d)
	return ctx.Err()
}

func (s *sleeper) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// newClient builds a client for the fake with an instant sleeper; mutate
// adjusts the config.
func newClient(t *testing.T, baseURL string, mutate func(*Config)) (*Client, *sleeper) {
	t.Helper()
	sl := newSleeper()
	cfg := Config{BaseURL: baseURL, Sleep: sl.Sleep, Now: sl.Now, Timeout: 10 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, sl
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("reading testdata: %v", err)
	}
	return string(b)
}

// jsonOf decodes a JSON literal for comparisons.
func jsonOf(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	return v
}

// maskIDs replaces every UUID-looking string in a decoded JSON value with
// "<uuid>", so bodies with freshly minted ids compare stably.
func maskIDs(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = maskIDs(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = maskIDs(e)
		}
		return out
	case string:
		if IsUUID(x) {
			return "<uuid>"
		}
	}
	return v
}

// wantMathHints is the fixture experiment in normalised form: the 6.5 and
// 6.2 fixtures must both decode to it.
func wantMathHints() Experiment {
	return Experiment{
		ID:                  "0b7e5c2e-8d0a-4f57-9d6f-3c1a2b4c5d6e",
		Name:                "Math Hints",
		Description:         "Which hint style helps",
		Context:             []string{"assign-prog"},
		State:               StateEnrolling,
		ConsistencyRule:     "individual",
		AssignmentUnit:      "individual",
		PostExperimentRule:  "continue",
		Tags:                []string{"math"},
		FilterMode:          "includeAll",
		Type:                "Simple",
		AssignmentAlgorithm: "random",
		Conditions: []Condition{
			{ID: "a1d2c3b4-0000-4000-8000-000000000001", ConditionCode: "control", AssignmentWeight: 50, Order: 1, TwoCharacterID: "CO"},
			{ID: "a1d2c3b4-0000-4000-8000-000000000002", ConditionCode: "variant", AssignmentWeight: 50, Order: 2, TwoCharacterID: "VA"},
		},
		Partitions: []DecisionPoint{
			{ID: "b1d2c3b4-0000-4000-8000-000000000001", Site: "SelectSection", Target: "absolute_value_plot_equality", Order: 1, TwoCharacterID: "SE"},
		},
		Inclusion:         Segment{Users: []string{"student-1"}, Groups: []GroupRef{{Type: "schoolId", GroupID: "school-7"}}},
		Exclusion:         Segment{Users: []string{"student-9"}, Groups: []GroupRef{}},
		ConditionPayloads: []json.RawMessage{},
		Queries:           []json.RawMessage{},
		StateTimeLogs:     []StateTimeLog{{ID: "c1d2c3b4-0000-4000-8000-000000000001", FromState: StateInactive, ToState: StateEnrolling, TimeLog: "2025-03-04T10:05:00.000Z"}},
		CreatedAt:         "2025-03-04T10:00:00.000Z",
		UpdatedAt:         "2025-03-04T10:05:00.000Z",
		VersionNumber:     2,
	}
}
