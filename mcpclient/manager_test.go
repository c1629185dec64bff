package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

func TestToolsAreListedWithQualifiedNamesAndReadOnlyFlags(t *testing.T) {
	reports := newServer(t, mcptest.Options{Jobs: true, Advertise: true})
	future := newServer(t, mcptest.Options{Jobs: true, Advertise: true, JobVersion: 3})
	m := connect(t, mcpclient.Options{}, memConfig(t, reports, "reports"), memConfig(t, future, "future"))

	want := []mcpclient.Tool{
		{Server: "reports", Name: "echo", QualifiedName: "mcp__reports__echo", Destructive: true},
		{Server: "reports", Name: "long_report", QualifiedName: "mcp__reports__long_report"},
		{Server: "reports", Name: "lookup", QualifiedName: "mcp__reports__lookup", ReadOnly: true},
		{Server: "future", Name: "echo", QualifiedName: "mcp__future__echo", Destructive: true},
		{Server: "future", Name: "long_report", QualifiedName: "mcp__future__long_report"},
		{Server: "future", Name: "lookup", QualifiedName: "mcp__future__lookup", ReadOnly: true},
	}
	if diff := cmp.Diff(want, m.Tools(), cmpopts.IgnoreFields(mcpclient.Tool{}, "Description", "InputSchema")); diff != "" {
		t.Errorf("Tools() (-want +got), job_status must be hidden:\n%s", diff)
	}

	lookup, ok := m.Tool("mcp__reports__lookup")
	if !ok {
		t.Fatal("Tool(mcp__reports__lookup) not found")
	}
	if lookup.Description != "Look an item up by id." {
		t.Errorf("description = %q", lookup.Description)
	}
	var schema struct {
		Type     string   `json:"type"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(lookup.InputSchema, &schema); err != nil || schema.Type != "object" || !cmp.Equal(schema.Required, []string{"id"}) {
		t.Errorf("input schema = %s (%v)", lookup.InputSchema, err)
	}

	wantCaps := map[string]mcpclient.Capability{"reports": {JobVersion: 1}, "future": {JobVersion: 1}}
	if diff := cmp.Diff(wantCaps, m.Capabilities()); diff != "" {
		t.Errorf("Capabilities() (-want +got); a server advertising v3 negotiates v1:\n%s", diff)
	}
}

func TestPlainCall(t *testing.T) {
	m := connect(t, mcpclient.Options{}, memConfig(t, newServer(t, mcptest.Options{}), "plain"))

	got := mustCall(t, m, "mcp__plain__echo", `{"text": "hello"}`, "")
	if diff := cmp.Diff(&mcpclient.CallResult{Text: "hello"}, got); diff != "" {
		t.Errorf("echo (-want +got):\n%s", diff)
	}
	got = mustCall(t, m, "mcp__plain__lookup", `{"id":"42"}`, "")
	want := &mcpclient.CallResult{Text: `{"id":"42","name":"item 42"}`, Structured: json.RawMessage(`{"id":"42","name":"item 42"}`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lookup (-want +got):\n%s", diff)
	}
	got = mustCall(t, m, "mcp__plain__lookup", ``, "")
	if !got.IsError || got.Text != "lookup needs an id" {
		t.Errorf("lookup without args = %+v, want the tool's error result", got)
	}
}

func TestCallRejectsUnknownToolsAndNonObjectArguments(t *testing.T) {
	m := connect(t, mcpclient.Options{}, memConfig(t, newServer(t, mcptest.Options{}), "plain"))
	ctx := testCtx(t)

	if _, err := m.Call(ctx, "mcp__plain__nope", nil, ""); !errors.Is(err, mcpclient.ErrUnknownTool) {
		t.Errorf("unknown tool: err = %v, want ErrUnknownTool", err)
	}
	if _, err := m.Call(ctx, "mcp__plain__echo", json.RawMessage(`["hello"]`), ""); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Errorf("array arguments: err = %v, want a message about a JSON object", err)
	}
	h := mcpclient.JobHandle{Server: "elsewhere", Tool: "long_report", Kind: mcpclient.KindMeta, Key: "job-1"}
	if _, err := m.JobStatus(ctx, h); !errors.Is(err, mcpclient.ErrServerUnavailable) {
		t.Errorf("handle of an unconnected server: err = %v, want ErrServerUnavailable", err)
	}
	h = mcpclient.JobHandle{Server: "plain", Tool: "long_report", Kind: "mystery", Key: "job-1"}
	if _, err := m.FetchJob(ctx, h); !errors.Is(err, mcpclient.ErrBadHandle) {
		t.Errorf("unknown kind: err = %v, want ErrBadHandle", err)
	}
}

func TestMetaJobLifecycle(t *testing.T) {
	srv := newServer(t, mcptest.Options{Jobs: true, Advertise: true})
	m := connect(t, mcpclient.Options{}, memConfig(t, srv, "reports"))

	res := mustCall(t, m, "mcp__reports__long_report", `{"topic": "q3"}`, "effect-1")
	want := &mcpclient.JobHandle{Server: "reports", Tool: "long_report", Kind: mcpclient.KindMeta, Key: "job-1",
		Version: 1, Args: json.RawMessage(`{"topic":"q3"}`)}
	if diff := cmp.Diff(want, res.Job); diff != "" {
		t.Fatalf("Call: job handle (-want +got):\n%s", diff)
	}
	h := *res.Job

	if _, err := m.FetchJob(testCtx(t), h); !errors.Is(err, mcpclient.ErrJobNotFinished) {
		t.Errorf("FetchJob while running: err = %v, want ErrJobNotFinished", err)
	}
	statuses := []mcpclient.JobStatus{mustStatus(t, m, h), mustStatus(t, m, h)}
	wantStatuses := []mcpclient.JobStatus{
		{State: mcpclient.StateRunning, Done: 1, Total: 2, Message: "1 of 2 polls"},
		{State: mcpclient.StateSucceeded, Done: 2, Total: 2, Message: "report ready"},
	}
	if diff := cmp.Diff(wantStatuses, statuses); diff != "" {
		t.Errorf("JobStatus polls (-want +got):\n%s", diff)
	}
	got := mustFetch(t, m, h)
	wantRes := &mcpclient.CallResult{Text: "report on q3: 3 sections", Structured: json.RawMessage(`{"sections":3,"topic":"q3"}`)}
	if diff := cmp.Diff(wantRes, got); diff != "" {
		t.Errorf("FetchJob (-want +got):\n%s", diff)
	}
}

func TestMetaJobFailureAndCancellationAreErrorResults(t *testing.T) {
	srv := newServer(t, mcptest.Options{Jobs: true, Advertise: true})
	m := connect(t, mcpclient.Options{}, memConfig(t, srv, "reports"))

	failed := mustCall(t, m, "mcp__reports__long_report", `{"topic":"q3","fail":"disk full","polls":0}`, "effect-f").Job
	if failed == nil {
		t.Fatal("no job handle")
	}
	if st := mustStatus(t, m, *failed); st.State != mcpclient.StateFailed || st.Message != "disk full" {
		t.Errorf("status of a failing job = %+v", st)
	}
	if diff := cmp.Diff(&mcpclient.CallResult{IsError: true, Text: "disk full"}, mustFetch(t, m, *failed)); diff != "" {
		t.Errorf("FetchJob of a failed job (-want +got):\n%s", diff)
	}

	// A server whose failed FETCH says nothing: the message comes from job_status.
	quiet := mustCall(t, m, "mcp__reports__long_report", `{"topic":"q3","fail":"disk full","polls":0,"quiet":true}`, "effect-q").Job
	mustStatus(t, m, *quiet)
	if diff := cmp.Diff(&mcpclient.CallResult{IsError: true, Text: "disk full"}, mustFetch(t, m, *quiet)); diff != "" {
		t.Errorf("FetchJob of a quietly failed job (-want +got):\n%s", diff)
	}

	cancelled := mustCall(t, m, "mcp__reports__long_report", `{"topic":"q4"}`, "effect-c").Job
	if err := srv.Cancel(cancelled.Key); err != nil {
		t.Fatal(err)
	}
	if st := mustStatus(t, m, *cancelled); st.State != mcpclient.StateCancelled {
		t.Errorf("status of a cancelled job = %+v", st)
	}
	if diff := cmp.Diff(&mcpclient.CallResult{IsError: true, Text: "cancelled by the operator"}, mustFetch(t, m, *cancelled)); diff != "" {
		t.Errorf("FetchJob of a cancelled job (-want +got):\n%s", diff)
	}
}

func TestSameEffectIDStartsOneJob(t *testing.T) {
	srv := newServer(t, mcptest.Options{Jobs: true, Advertise: true})
	m := connect(t, mcpclient.Options{}, memConfig(t, srv, "reports"))

	first := mustCall(t, m, "mcp__reports__long_report", `{"topic":"q3"}`, "effect-7").Job
	retry := mustCall(t, m, "mcp__reports__long_report", `{"topic":"q3"}`, "effect-7").Job
	other := mustCall(t, m, "mcp__reports__long_report", `{"topic":"q3"}`, "effect-8").Job
	if first == nil || retry == nil || other == nil {
		t.Fatalf("want three handles, got %v %v %v", first, retry, other)
	}
	if first.Key != retry.Key {
		t.Errorf("a retried START got job %s, the first got %s", retry.Key, first.Key)
	}
	if other.Key == first.Key {
		t.Errorf("another effect id reused job %s", other.Key)
	}
	key := mcpclient.IdempotencyKey("effect-7", "reports", "long_report")
	if got := srv.StartRequests(key); got != 2 {
		t.Errorf("START requests with the key = %d, want 2 (the retry must reach the server)", got)
	}
	if got := srv.Starts(key); got != 1 {
		t.Errorf("jobs started for the key = %d, want 1", got)
	}
}

func TestNonAdvertisingServerUsesTheBlockingPath(t *testing.T) {
	// Jobs: the server could run one if asked; it does not advertise, so the
	// client must not ask.
	srv := newServer(t, mcptest.Options{Jobs: true})
	m := connect(t, mcpclient.Options{}, memConfig(t, srv, "plain"))

	got := mustCall(t, m, "mcp__plain__long_report", `{"topic":"q3"}`, "effect-1")
	want := &mcpclient.CallResult{Text: "report on q3: 3 sections", Structured: json.RawMessage(`{"sections":3,"topic":"q3"}`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Call (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]mcpclient.Capability{"plain": {}}, m.Capabilities()); diff != "" {
		t.Errorf("Capabilities (-want +got):\n%s", diff)
	}
	if _, ok := m.Tool("mcp__plain__job_status"); !ok {
		t.Error("a server without the job contract keeps its job_status tool as an ordinary tool")
	}
}

func TestKnownCapabilityIsUsedWithoutReadvertisement(t *testing.T) {
	srv := newServer(t, mcptest.Options{Jobs: true}) // runs jobs, advertises nothing
	known := map[string]mcpclient.Capability{
		"reports": {JobVersion: 1},
		"gone":    {JobVersion: 1, Tasks: true},
	}
	m, errs := mcpclient.Connect(testCtx(t), []mcpclient.ServerConfig{
		memConfig(t, srv, "reports"),
		{Name: "gone", Command: filepath.Join(t.TempDir(), "missing-server")},
	}, mcpclient.Options{Known: known})
	t.Cleanup(func() { _ = m.Close() })
	if len(errs) != 1 {
		t.Fatalf("errs = %v, want one for the missing server", errs)
	}
	if diff := cmp.Diff(known, m.Capabilities()); diff != "" {
		t.Errorf("Capabilities (-want +got): the known ones must survive:\n%s", diff)
	}
	if _, ok := m.Tool("mcp__reports__job_status"); ok {
		t.Error("job_status is offered although the server is job-aware through Known")
	}
	res := mustCall(t, m, "mcp__reports__long_report", `{"topic":"q3","polls":1}`, "effect-1")
	if res.Job == nil {
		t.Fatalf("Call = %+v, want a job handle", res)
	}
	if st := mustStatus(t, m, *res.Job); st.State != mcpclient.StateSucceeded {
		t.Errorf("status = %+v", st)
	}
	if got := mustFetch(t, m, *res.Job); got.IsError || got.Text != "report on q3: 3 sections" {
		t.Errorf("FetchJob = %+v", got)
	}

	// Without Known the same server is a plain one.
	plain := connect(t, mcpclient.Options{}, memConfig(t, srv, "reports"))
	if res := mustCall(t, plain, "mcp__reports__long_report", `{"topic":"q3"}`, "effect-2"); res.Job != nil {
		t.Errorf("without Known: Call = %+v, want the blocking result", res)
	}
}

func TestJobHandleSurvivesANewManager(t *testing.T) {
	srv := newServer(t, mcptest.Options{Jobs: true, Advertise: true})
	first, errs := mcpclient.Connect(testCtx(t), []mcpclient.ServerConfig{memConfig(t, srv, "reports")}, mcpclient.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	res := mustCall(t, first, "mcp__reports__long_report", `{"topic":"q3"}`, "effect-1")
	stored, err := json.Marshal(res.Job) // what goes into the checkpoint
	if err != nil {
		t.Fatal(err)
	}
	caps, err := json.Marshal(first.Capabilities())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if want := `{"reports":{"job_version":1}}`; string(caps) != want {
		t.Errorf("checkpointed capabilities = %s, want %s", caps, want)
	}

	var h mcpclient.JobHandle
	if err := json.Unmarshal(stored, &h); err != nil {
		t.Fatal(err)
	}
	var known map[string]mcpclient.Capability
	if err := json.Unmarshal(caps, &known); err != nil {
		t.Fatal(err)
	}
	second := connect(t, mcpclient.Options{Known: known}, memConfig(t, srv, "reports"))
	for st := mustStatus(t, second, h); !st.Terminal(); st = mustStatus(t, second, h) {
	}
	if got := mustFetch(t, second, h); got.IsError || got.Text != "report on q3: 3 sections" {
		t.Errorf("FetchJob in the new Manager = %+v", got)
	}
}

func TestFailingServersAreReportedAndSkipped(t *testing.T) {
	good := newServer(t, mcptest.Options{})
	m, errs := mcpclient.Connect(testCtx(t), []mcpclient.ServerConfig{
		{Name: "broken", Command: filepath.Join(t.TempDir(), "no-such-server")},
		{Name: "crashy", Command: mustExecutable(t), Env: map[string]string{"MCPCLIENT_TEST_SERVER": "crash"}},
		{Name: "bad name"},
		memConfig(t, good, "good"),
		{Name: "good", Command: "true"},
	}, mcpclient.Options{})
	t.Cleanup(func() { _ = m.Close() })

	type reported struct{ Server, Op string }
	var got []reported
	for _, err := range errs {
		var se *mcpclient.ServerError
		if !errors.As(err, &se) {
			t.Fatalf("error %v is not a *ServerError", err)
		}
		if !strings.Contains(err.Error(), `"`+se.Server+`"`) {
			t.Errorf("error %q does not name its server", err)
		}
		got = append(got, reported{se.Server, se.Op})
		if se.Server == "crashy" && !strings.Contains(se.Stderr, "cannot open the database") {
			t.Errorf("crashy: stderr tail = %q, want the server's own message", se.Stderr)
		}
	}
	want := []reported{
		{"broken", mcpclient.OpStart},
		{"crashy", mcpclient.OpInitialize},
		{"bad name", mcpclient.OpConfig},
		{"good", mcpclient.OpConfig}, // listed twice
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reported errors (-want +got):\n%s", diff)
	}
	if res := mustCall(t, m, "mcp__good__echo", `{"text":"still here"}`, ""); res.Text != "still here" {
		t.Errorf("echo on the good server = %+v", res)
	}
	for _, tool := range m.Tools() {
		if tool.Server != "good" {
			t.Errorf("tool %s of a skipped server is offered", tool.QualifiedName)
		}
	}
}

func mustExecutable(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServerThatNeverAnswersTimesOut(t *testing.T) {
	good := newServer(t, mcptest.Options{})
	m, errs := mcpclient.Connect(testCtx(t), []mcpclient.ServerConfig{
		{Name: "silent", Command: mustExecutable(t), Env: map[string]string{"MCPCLIENT_TEST_SERVER": "hang", "GORACE": "atexit_sleep_ms=0"}},
		memConfig(t, good, "good"),
	}, mcpclient.Options{Timeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = m.Close() })
	var se *mcpclient.ServerError
	if len(errs) != 1 || !errors.As(errs[0], &se) || se.Server != "silent" || se.Op != mcpclient.OpInitialize ||
		!errors.Is(errs[0], context.DeadlineExceeded) {
		t.Fatalf("errs = %v, want one initialize timeout of server silent", errs)
	}
	if _, ok := m.Tool("mcp__good__echo"); !ok {
		t.Error("the good server's tools are missing")
	}
}
