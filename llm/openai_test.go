package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
)

const plantedKey = "sk-PLANTED-secret-0123456789abcdef"

// sleeper replaces real waits between retries and records them.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return ctx.Err()
}

func (s *sleeper) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

func newClient(t *testing.T, baseURL string, edit func(*llm.Options)) (*llm.OpenAI, *sleeper) {
	t.Helper()
	sl := &sleeper{}
	opts := llm.Options{BaseURL: baseURL, APIKey: plantedKey, Model: "test-model", Sleep: sl.sleep, Timeout: 10 * time.Second}
	if edit != nil {
		edit(&opts)
	}
	c, err := llm.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, sl
}

func userRequest(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You are a test."},
		{Role: llm.RoleUser, Content: text},
	}}
}

var twoTools = []llm.Tool{
	{Name: "find_experiment", Description: "find by name", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
	{Name: "get_experiment_details", Description: "details", Parameters: json.RawMessage(`{"type":"object","properties":{"experiment_id":{"type":"string"}}}`)},
}

func asError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	if strings.Contains(err.Error(), plantedKey) {
		t.Fatalf("error text leaks the API key: %v", err)
	}
	return e
}

func TestRetryAfter429ThenSuccess(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: "2"}}, llmtest.TextReply("ok"))
	c, sl := newClient(t, srv.URL(), nil)
	resp, err := c.Chat(context.Background(), userRequest("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "ok" || resp.Attempts != 2 {
		t.Errorf("response %+v", resp)
	}
	if diff := cmp.Diff([]time.Duration{2 * time.Second}, sl.got()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: "3600"}}, llmtest.TextReply("ok"))
	c, sl := newClient(t, srv.URL(), func(o *llm.Options) { o.MaxRetryTime = time.Hour })
	if _, err := c.Chat(context.Background(), userRequest("hi")); err != nil {
		t.Fatal(err)
	}
	if w := sl.got(); len(w) != 1 || w[0] != 30*time.Second {
		t.Errorf("waits %v, want [30s]", w)
	}
}

func TestServerErrorsExhaustRetries(t *testing.T) {
	srv := llmtest.NewServer(t)
	for range 3 {
		srv.Enqueue(llmtest.StatusFault(500))
	}
	c, sl := newClient(t, srv.URL(), func(o *llm.Options) { o.MaxRetries = 2 })
	resp, err := c.Chat(context.Background(), userRequest("hi"))
	e := asError(t, err)
	if resp != nil || e.Kind != llm.KindServer || e.Status != 500 || e.Attempts != 3 {
		t.Errorf("error %+v, response %v", e, resp)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(srv.URL(), "/v1"), "http://")
	for _, want := range []string{"LLM " + host, "server error (HTTP 500 Internal Server Error)", "gave up after 3 attempts", "scripted fault"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if n := len(sl.got()); n != 2 {
		t.Errorf("%d waits, want 2", n)
	}
}

// The total time budget stops retries even when the count would allow more.
func TestRetryTimeBudget(t *testing.T) {
	srv := llmtest.NewServer(nil)
	defer srv.Close()
	for range 4 {
		srv.Enqueue(llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503, RetryAfter: "10"}})
	}
	c, sl := newClient(t, srv.URL(), func(o *llm.Options) { o.MaxRetries = 10; o.MaxRetryTime = 25 * time.Second })
	_, err := c.Chat(context.Background(), userRequest("hi"))
	e := asError(t, err)
	if e.Kind != llm.KindServer || e.Attempts != 3 || !strings.Contains(e.Message, "retry time budget of 25s spent") {
		t.Errorf("error %v (attempts %d)", err, e.Attempts)
	}
	if w := sl.got(); len(w) != 2 {
		t.Errorf("waits %v, want two of 10s", w)
	}
	if srv.Pending() != 1 {
		t.Errorf("pending %d, want 1", srv.Pending())
	}
}

func TestConnectionResetThenSuccess(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultReset}}, llmtest.TextReply("after reset"))
	c, sl := newClient(t, srv.URL(), nil)
	resp, err := c.Chat(context.Background(), userRequest("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "after reset" || resp.Attempts != 2 || len(sl.got()) != 1 {
		t.Errorf("response %+v, waits %v", resp, sl.got())
	}
}

func TestResetEveryTimeIsANetworkError(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultReset}}, llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultReset}})
	c, _ := newClient(t, srv.URL(), func(o *llm.Options) { o.MaxRetries = 1 })
	_, err := c.Chat(context.Background(), userRequest("hi"))
	if e := asError(t, err); e.Kind != llm.KindNetwork || e.Attempts != 2 {
		t.Errorf("error %v", err)
	}
}

func TestTruncatedBodyIsRetried(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			srv := llmtest.NewServer(t)
			srv.Enqueue(llmtest.Reply{Text: "first answer", Fault: &llmtest.Fault{Kind: llmtest.FaultTruncated}}, llmtest.TextReply("whole"))
			c, _ := newClient(t, srv.URL(), nil)
			req := userRequest("hi")
			req.Stream = stream
			resp, err := c.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "whole" || resp.Attempts != 2 {
				t.Errorf("response %+v", resp)
			}
		})
	}
}

// Once text has been shown through OnText, a cut stream is not retried:
// the person would see two different answers glued together.
func TestTruncatedStreamAfterTextIsNotRetried(t *testing.T) {
	srv := llmtest.NewServer(nil)
	defer srv.Close()
	srv.Enqueue(llmtest.Reply{Text: "a long answer that is cut", Fault: &llmtest.Fault{Kind: llmtest.FaultTruncated}}, llmtest.TextReply("never"))
	c, _ := newClient(t, srv.URL(), nil)
	req := userRequest("hi")
	req.Stream = true
	var shown strings.Builder
	req.OnText = func(d string) { shown.WriteString(d) }
	_, err := c.Chat(context.Background(), req)
	if e := asError(t, err); e.Kind != llm.KindTruncated || e.Attempts != 1 || shown.Len() == 0 {
		t.Errorf("error %v, shown %q", err, shown.String())
	}
}

func TestEmptyChoices(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultEmptyChoices}})
		c, _ := newClient(t, srv.URL(), nil)
		req := userRequest("hi")
		req.Stream = stream
		_, err := c.Chat(context.Background(), req)
		if e := asError(t, err); e.Kind != llm.KindEmpty || e.Attempts != 1 {
			t.Errorf("stream=%v: error %v", stream, err)
		}
	}
}

func TestFinishReasonLength(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Text: "partial answ", Fault: &llmtest.Fault{Kind: llmtest.FaultLength}})
		c, _ := newClient(t, srv.URL(), nil)
		req := userRequest("hi")
		req.Stream = stream
		req.MaxTokens = 3
		resp, err := c.Chat(context.Background(), req)
		e := asError(t, err)
		if e.Kind != llm.KindLength || !strings.Contains(err.Error(), "max_tokens=3") {
			t.Errorf("stream=%v: error %v", stream, err)
		}
		if resp == nil || resp.Content != "partial answ" || resp.FinishReason != "length" {
			t.Errorf("stream=%v: partial response %+v", stream, resp)
		}
		if got := srv.Requests()[0].MaxTokens; got != 3 {
			t.Errorf("max_tokens on the wire = %d", got)
		}
	}
}

func TestMalformedToolArgumentsReturnedAsIs(t *testing.T) {
	srv := llmtest.NewServer(t)
	raw := `{"action_params": {"name": "Math Hints",`
	srv.Enqueue(llmtest.CallReply(llmtest.Call{Name: "set_action_params", Arguments: raw}))
	c, _ := newClient(t, srv.URL(), nil)
	req := userRequest("create it")
	req.Tools = twoTools
	resp, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ToolCall{{ID: "call_1", Name: "set_action_params", Arguments: raw}}
	if diff := cmp.Diff(want, resp.ToolCalls); diff != "" || resp.FinishReason != "tool_calls" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
}

func TestNoRetryOnClientErrors(t *testing.T) {
	tests := []struct {
		status int
		body   string
		kind   llm.ErrorKind
		want   string
	}{
		{401, `{"error":{"message":"Incorrect API key provided: ` + plantedKey + `","type":"invalid_request_error","code":"invalid_api_key"}}`,
			llm.KindAuth, "authentication refused (HTTP 401 Unauthorized): Incorrect API key provided: [REDACTED] (check OPENAI_API_KEY"},
		{403, "", llm.KindAuth, "authentication refused (HTTP 403 Forbidden)"},
		{400, `{"error":{"message":"Invalid schema for function 'x'","type":"invalid_request_error"}}`,
			llm.KindBadRequest, "request rejected (HTTP 400 Bad Request): Invalid schema for function 'x'"},
		{404, "<html><body>Not Found</body></html>", llm.KindBadRequest, "the server answered with an HTML page instead of JSON"},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`,
			llm.KindRateLimit, "rate limited (HTTP 429 Too Many Requests): You exceeded your current quota"},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			srv := llmtest.NewServer(t)
			srv.Enqueue(llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: tt.status, Body: tt.body}})
			c, sl := newClient(t, srv.URL(), nil)
			_, err := c.Chat(context.Background(), userRequest("hi"))
			e := asError(t, err)
			if e.Kind != tt.kind || e.Status != tt.status || e.Attempts != 1 || len(sl.got()) != 0 {
				t.Errorf("error %+v, waits %v", e, sl.got())
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1 (no retry)", n)
			}
		})
	}
}

func TestWireOptions(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.Reply{ToolChoice: "find_experiment", Calls: []llmtest.Call{llmtest.NewCall("find_experiment", map[string]string{"name": "x"})}},
		llmtest.Reply{ToolChoice: "required", Text: "b"},
		llmtest.Reply{ToolChoice: "auto", Text: "c"},
		llmtest.Reply{ToolChoice: "none", Text: "d"},
	)
	c, _ := newClient(t, srv.URL(), nil)
	no := false
	zero := float32(0)
	warm := float32(0.5)

	forced := userRequest("find x")
	forced.Tools = twoTools
	forced.ToolChoice = llm.Force("find_experiment")
	forced.ParallelToolCalls = &no
	forced.Temperature = &zero
	required := forced
	required.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired}
	required.ParallelToolCalls = nil
	required.Temperature = &warm
	auto := forced
	auto.ToolChoice = llm.ToolChoice{}
	auto.Temperature = nil
	plain := userRequest("no tools")
	plain.ParallelToolCalls = &no // dropped: providers refuse it without tools
	for _, req := range []llm.Request{forced, required, auto, plain} {
		if _, err := c.Chat(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	type wire struct {
		ToolChoice  string
		Parallel    *bool
		Temperature *float64
		Tools       int
	}
	var got []wire
	for _, r := range reqs {
		got = append(got, wire{r.ToolChoice, r.ParallelToolCalls, r.Temperature, len(r.Tools)})
	}
	f0, f5 := 0.0, 0.5
	want := []wire{
		{"find_experiment", &no, &f0, 2},
		{"required", nil, &f5, 2},
		{"auto", &no, nil, 2},
		{"", nil, nil, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("on the wire (-want +got):\n%s", diff)
	}
	body := string(reqs[0].Body)
	for _, frag := range []string{`"temperature":0,`, `"parallel_tool_calls":false`,
		`"tool_choice":{"type":"function","function":{"name":"find_experiment"}}`, `"model":"test-model"`} {
		if !strings.Contains(body, frag) {
			t.Errorf("body lacks %s:\n%s", frag, body)
		}
	}
	if strings.Contains(string(reqs[2].Body), "temperature") {
		t.Errorf("temperature sent although nil: %s", reqs[2].Body)
	}
}

func TestRequestValidation(t *testing.T) {
	c, _ := newClient(t, "http://127.0.0.1:1/v1", nil)
	bad := userRequest("x")
	bad.ToolChoice = llm.Force("missing")
	bad.Tools = twoTools
	_, err := c.Chat(context.Background(), bad)
	if e := asError(t, err); e.Kind != llm.KindBadRequest || !strings.Contains(err.Error(), `forces "missing"`) {
		t.Errorf("error %v", err)
	}
	_, err = c.Chat(context.Background(), llm.Request{})
	if e := asError(t, err); e.Kind != llm.KindBadRequest {
		t.Errorf("error %v", err)
	}
}

func TestStreamingReassemblesInterleavedToolCalls(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Text: "Let me look both up.", Calls: []llmtest.Call{
		llmtest.NewCall("get_experiment_details", map[string]string{"experiment_id": "exp-aaaa-1111"}),
		llmtest.NewCall("find_experiment", map[string]string{"name": "Math Hints, variant B"}),
	}})
	c, _ := newClient(t, srv.URL(), nil)
	req := userRequest("look up")
	req.Tools = twoTools
	req.Stream = true
	var deltas []string
	req.OnText = func(d string) { deltas = append(deltas, d) }
	resp, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) < 2 || strings.Join(deltas, "") != "Let me look both up." || resp.Content != "Let me look both up." {
		t.Errorf("deltas %q, content %q", deltas, resp.Content)
	}
	want := []llm.ToolCall{
		{ID: "call_1", Name: "get_experiment_details", Arguments: `{"experiment_id":"exp-aaaa-1111"}`},
		{ID: "call_2", Name: "find_experiment", Arguments: `{"name":"Math Hints, variant B"}`},
	}
	if diff := cmp.Diff(want, resp.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	r := srv.Requests()[0]
	if !r.Stream || !r.IncludeUsage {
		t.Errorf("stream %v include_usage %v", r.Stream, r.IncludeUsage)
	}
	if resp.UsageEstimated || resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 || resp.FinishReason != "tool_calls" {
		t.Errorf("usage %+v estimated %v finish %q", resp.Usage, resp.UsageEstimated, resp.FinishReason)
	}
}

func TestUsageFromServer(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.TextReply("12345678"))
	c, _ := newClient(t, srv.URL(), nil)
	resp, err := c.Chat(context.Background(), userRequest("abcd"))
	if err != nil {
		t.Fatal(err)
	}
	// prompt: "system"+"You are a test."+"user"+"abcd" = 29 chars -> 8; completion 8 chars -> 2
	want := llm.Usage{PromptTokens: 8, CompletionTokens: 2}
	if resp.Usage != want || resp.UsageEstimated {
		t.Errorf("usage %+v (estimated %v), want %+v", resp.Usage, resp.UsageEstimated, want)
	}
}

// A provider that reports cached tokens, and one that reports no usage.
func TestUsageCachedAndEstimated(t *testing.T) {
	var withUsage bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		usage := ""
		if withUsage {
			usage = `,"usage":{"prompt_tokens":1200,"completion_tokens":30,"total_tokens":1230,"prompt_tokens_details":{"cached_tokens":1024}}`
		}
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"0123456789"},"finish_reason":"stop"}]` + usage + `}`))
	})
	ts := httptest.NewServer(h)
	defer ts.Close()
	c, _ := newClient(t, ts.URL+"/v1", nil)

	withUsage = true
	resp, err := c.Chat(context.Background(), userRequest("abcd"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (llm.Usage{PromptTokens: 1200, CompletionTokens: 30, CachedTokens: 1024}); resp.Usage != want || resp.UsageEstimated {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
	withUsage = false
	resp, err = c.Chat(context.Background(), userRequest("abcd"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (llm.Usage{PromptTokens: 8, CompletionTokens: 3}); resp.Usage != want || !resp.UsageEstimated {
		t.Errorf("estimated usage %+v (estimated %v), want %+v", resp.Usage, resp.UsageEstimated, want)
	}
}

func TestNodeHeader(t *testing.T) {
	if llm.NodeHeader != llmtest.NodeHeader {
		t.Fatalf("llm.NodeHeader %q != llmtest.NodeHeader %q", llm.NodeHeader, llmtest.NodeHeader)
	}
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.TextReply("a"), llmtest.TextReply("b"))
	c, _ := newClient(t, srv.URL(), nil)
	ctx := llm.WithNode(context.Background(), "gatherer")
	if _, err := c.Chat(ctx, userRequest("x")); err != nil {
		t.Fatal(err)
	}
	req := userRequest("y")
	req.Node = "responder" // the request's own node wins over the context's
	if _, err := c.Chat(ctx, req); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if reqs[0].Node != "gatherer" || reqs[1].Node != "responder" {
		t.Errorf("nodes %q, %q", reqs[0].Node, reqs[1].Node)
	}
}

func TestUnexpectedCallFailsReadably(t *testing.T) {
	srv := llmtest.NewServer(nil)
	defer srv.Close()
	c, sl := newClient(t, srv.URL(), nil)
	req := userRequest("hello")
	req.Tools = []llm.Tool{{Name: "analyze_user_request"}}
	req.ToolChoice = llm.Force("analyze_user_request")
	_, err := c.Chat(llm.WithNode(context.Background(), "analyzer"), req)
	e := asError(t, err)
	want := "call 1 (node analyzer, tools offered [analyze_user_request]): no scripted reply left"
	if e.Kind != llm.KindBadRequest || !strings.Contains(err.Error(), want) || len(sl.got()) != 0 {
		t.Errorf("error %v", err)
	}
	if v := srv.Verify(); v == nil || !strings.Contains(v.Error(), want) {
		t.Errorf("Verify = %v", v)
	}
}

func TestContextCanceled(t *testing.T) {
	srv := llmtest.NewServer(nil)
	defer srv.Close()
	c, _ := newClient(t, srv.URL(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Chat(ctx, userRequest("x"))
	if e := asError(t, err); e.Kind != llm.KindCanceled || !errors.Is(err, context.Canceled) {
		t.Errorf("error %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent after cancel", n)
	}
}

// A server that never answers: the per-attempt timeout ends the call as a
// network error, and it is retried within the count.
func TestAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer ts.Close()
	defer close(release)
	c, _ := newClient(t, ts.URL+"/v1", func(o *llm.Options) { o.Timeout = 50 * time.Millisecond; o.MaxRetries = 1 })
	_, err := c.Chat(context.Background(), userRequest("x"))
	e := asError(t, err)
	if e.Kind != llm.KindNetwork || e.Attempts != 2 || !strings.Contains(err.Error(), "no complete answer within 50ms") {
		t.Errorf("error %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Errorf("%d calls, want 2", calls)
	}
}

func TestConnectionRefused(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there any more
	c, _ := newClient(t, url+"/v1", func(o *llm.Options) { o.MaxRetries = -1 })
	_, err := c.Chat(context.Background(), userRequest("x"))
	if e := asError(t, err); e.Kind != llm.KindNetwork || e.Attempts != 1 || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %v", err)
	}
}

func TestAzure(t *testing.T) {
	var path, key, auth string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, key, auth = r.URL.RequestURI(), r.Header.Get("api-key"), r.Header.Get("Authorization")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	}))
	defer ts.Close()
	c, _ := newClient(t, ts.URL, func(o *llm.Options) { o.AzureAPIVersion = "2024-10-21"; o.Model = "my-deployment" })
	if _, err := c.Chat(context.Background(), userRequest("x")); err != nil {
		t.Fatal(err)
	}
	if path != "/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21" || key != plantedKey || auth != "" {
		t.Errorf("path %q, api-key set %v, authorization %q", path, key == plantedKey, auth)
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"ftp://x", "localhost:11434", "http://user:pw@host/v1"} {
		if _, err := llm.New(llm.Options{BaseURL: u}); err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("New(%q) error = %v", u, err)
		}
	}
	c, err := llm.New(llm.Options{})
	if err != nil || c.Model() != llm.DefaultModel || c.Model() != "gpt-4o-mini" || c.Provider() != "api.openai.com" {
		t.Errorf("defaults: %v %v", c, err)
	}
}

// Logs at debug level carry sizes and outcomes, never the key.
func TestLogsNeverHoldTheKey(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.Reply{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 503, Body: `{"error":{"message":"bad key ` + plantedKey + `"}}`}},
		llmtest.TextReply("ok"))
	c, _ := newClient(t, srv.URL(), func(o *llm.Options) { o.Logger = logger })
	if _, err := c.Chat(llm.WithNode(context.Background(), "responder"), userRequest("x")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	out := buf.String()
	if strings.Contains(out, plantedKey) || !strings.Contains(out, "llm retry") || !strings.Contains(out, "node=responder") {
		t.Errorf("log:\n%s", out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// BenchmarkChatLoopback measures one whole call through go-openai, the
// transport and the scripted server over loopback: the floor under every
// scripted scenario step.
func BenchmarkChatLoopback(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(b *testing.B) {
			srv := llmtest.NewServer(nil)
			defer srv.Close()
			c, err := llm.New(llm.Options{BaseURL: srv.URL()})
			if err != nil {
				b.Fatal(err)
			}
			req := userRequest("find Math Hints")
			req.Tools = twoTools
			req.Stream = stream
			zero := float32(0)
			req.Temperature = &zero
			reply := llmtest.CallReply(llmtest.NewCall("find_experiment", map[string]string{"name": "Math Hints"}))
			b.ResetTimer()
			for range b.N {
				srv.Enqueue(reply)
				if _, err := c.Chat(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
