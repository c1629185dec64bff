package mcpclient_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

// The scenario of a suspended turn: one process starts the job and exits,
// another (with another server process) follows it to the end.
func TestStdioJobAcrossProcesses(t *testing.T) {
	state := filepath.Join(t.TempDir(), "jobs.json")
	cfg := stdioConfig(t, "reports", mcptest.Options{Jobs: true, Advertise: true, StateFile: state})

	first, errs := mcpclient.Connect(testCtx(t), []mcpclient.ServerConfig{cfg}, mcpclient.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if res := mustCall(t, first, "mcp__reports__echo", `{"text":"over stdio"}`, ""); res.Text != "over stdio" {
		t.Errorf("echo = %+v", res)
	}
	res := mustCall(t, first, "mcp__reports__long_report", `{"topic":"q3"}`, "effect-9")
	retry := mustCall(t, first, "mcp__reports__long_report", `{"topic":"q3"}`, "effect-9")
	if res.Job == nil || retry.Job == nil || res.Job.Key != retry.Job.Key {
		t.Fatalf("START and its retry: %+v / %+v, want the same job", res.Job, retry.Job)
	}
	stored, _ := json.Marshal(res.Job)
	caps := first.Capabilities()
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	st, err := mcptest.LoadState(state)
	if err != nil {
		t.Fatal(err)
	}
	key := mcpclient.IdempotencyKey("effect-9", "reports", "long_report")
	if st.Starts[key] != 1 || st.StartRequests[key] != 2 {
		t.Errorf("server counted %d starts of %d START requests, want 1 of 2", st.Starts[key], st.StartRequests[key])
	}

	second := connect(t, mcpclient.Options{Known: caps}, cfg)
	var h mcpclient.JobHandle
	if err := json.Unmarshal(stored, &h); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for s := mustStatus(t, second, h); ; s = mustStatus(t, second, h) {
		seen = append(seen, s.State)
		if s.Terminal() {
			break
		}
	}
	if diff := cmp.Diff([]string{mcpclient.StateRunning, mcpclient.StateSucceeded}, seen); diff != "" {
		t.Errorf("states seen by the second process (-want +got):\n%s", diff)
	}
	if got := mustFetch(t, second, h); got.IsError || got.Text != "report on q3: 3 sections" {
		t.Errorf("FetchJob = %+v", got)
	}
}

func TestStdioTasks(t *testing.T) {
	m := connect(t, mcpclient.Options{}, stdioConfig(t, "tasks", mcptest.Options{Tasks: true}))
	h := mustCall(t, m, "mcp__tasks__long_report", `{"topic":"q3","polls":1}`, "effect-1").Job
	if h == nil || h.Kind != mcpclient.KindTask {
		t.Fatalf("handle = %+v, want a task", h)
	}
	if st := mustStatus(t, m, *h); st.State != mcpclient.StateSucceeded {
		t.Errorf("status = %+v", st)
	}
	if got := mustFetch(t, m, *h); got.IsError || got.Text != "report on q3: 3 sections" {
		t.Errorf("FetchJob = %+v", got)
	}
}

func TestStreamableHTTP(t *testing.T) {
	srv := newServer(t, mcptest.Options{Jobs: true, Advertise: true})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil)
	var (
		mu       sync.Mutex
		auth     = map[string]int{}
		versions = map[string]int{}
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.Header.Get("Authorization")]++
		versions[r.Method+" "+r.Header.Get("Mcp-Protocol-Version")]++
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Setenv("MCPCLIENT_TEST_TOKEN", "tok-123")

	m := connect(t, mcpclient.Options{}, mcpclient.ServerConfig{
		Name:    "remote",
		URL:     ts.URL,
		Headers: map[string]string{"Authorization": "Bearer ${MCPCLIENT_TEST_TOKEN}"},
	})
	if diff := cmp.Diff(map[string]mcpclient.Capability{"remote": {JobVersion: 1}}, m.Capabilities()); diff != "" {
		t.Errorf("Capabilities (-want +got):\n%s", diff)
	}
	if res := mustCall(t, m, "mcp__remote__echo", `{"text":"over http"}`, ""); res.Text != "over http" {
		t.Errorf("echo = %+v", res)
	}
	h := mustCall(t, m, "mcp__remote__long_report", `{"topic":"q3","polls":1}`, "effect-1").Job
	if h == nil {
		t.Fatal("no job handle over HTTP")
	}
	if st := mustStatus(t, m, *h); st.State != mcpclient.StateSucceeded {
		t.Errorf("status = %+v", st)
	}
	if got := mustFetch(t, m, *h); got.Text != "report on q3: 3 sections" {
		t.Errorf("FetchJob = %+v", got)
	}

	mu.Lock()
	defer mu.Unlock()
	for value, n := range auth {
		if value != "Bearer tok-123" {
			t.Errorf("%d requests had Authorization %q", n, value)
		}
	}
	// The initialize POST goes out before a version is negotiated; every
	// later POST must say which version the session speaks.
	for key, n := range versions {
		if key != "POST 2025-11-25" && !(key == "POST " && n == 1) && key != "DELETE 2025-11-25" {
			t.Errorf("%d requests %q, want POST with Mcp-Protocol-Version 2025-11-25", n, key)
		}
	}
	if versions["POST 2025-11-25"] < 5 {
		t.Errorf("requests by method and version: %v", versions)
	}
}
