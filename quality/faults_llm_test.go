package quality

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
)

// greet is a direct answer: one LLM call.
const greet = `- call:
    analyze_user_request: {intent_type: direct_answer, confidence: 0.9, user_request_summary: A greeting., reasoning: Small talk., direct_response: "Hello from the agent."}
`

// repeat is n copies of a scripted reply.
func repeat(n int, reply string) string { return strings.Repeat(reply, n) }

// continues checks that a session survives a failed or retried turn: its
// checkpoint loads, and the next process can go on with it. A failed turn
// is run again by `resume`; a completed one takes the next message.
func continues(t *testing.T, c *cli, id string, failed bool) {
	t.Helper()
	r := c.run("sessions", "show", id)
	wantCode(t, r, 0)
	next := c.script("next.yaml", `- call:
    analyze_user_request: {intent_type: direct_answer, confidence: 0.9, user_request_summary: A greeting., reasoning: Small talk., direct_response: "Still here."}
`)
	if failed {
		r = c.run("resume", id, "--llm", next)
		wantCode(t, r, 0)
		wantContains(t, r, "retrying the failed turn", "Still here.")
		return
	}
	r = c.run("ask", "--session", id, "--llm", next, "Hi again")
	wantCode(t, r, 0)
	wantContains(t, r, "Still here.")
}

// TestLLMFaultsRetried: transient faults are retried inside the one call,
// the turn succeeds and still counts one LLM call.
func TestLLMFaultsRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault string
		log   []string // in the -v log: the failed attempt and the wait
	}{
		// Retry-After is honoured: the wait is the server's 50 ms, not the
		// client's own backoff (which starts at 350 ms or more).
		{"429 with Retry-After", "- fault: {status: 429, retry_after: \"0.05\"}\n", []string{"kind=rate_limit status=429", "wait=50ms"}},
		{"connection reset", "- fault: reset\n", []string{"kind=network", "attempt=2"}},
		{"truncated body", "- fault: truncated\n", []string{"kind=truncated", "attempt=2"}},
		{"503 once", "- fault: {status: 503, retry_after: \"0.01\"}\n", []string{"kind=server status=503", "wait=10ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			r := c.run("ask", "-v", "-o", "json", "--llm", c.script("s.yaml", tt.fault+greet), "Hi")
			wantCode(t, r, 0)
			wantContains(t, r, `"status": "completed"`, "Hello from the agent.", `"llm_calls": 1`)
			wantContains(t, r, tt.log...)
			if strings.Contains(r.stderr, "warning:") {
				t.Errorf("the script was not used exactly:\n%s", r)
			}
			continues(t, c, jsonField(t, r, "session_id"), false)
		})
	}
}

// TestLLMFaultsFail: faults that retrying cannot fix, or that persist past
// the retry budget, end the turn with exit 1 and one line naming the
// provider and the cause; the checkpoint stays valid and `resume` runs the
// turn again.
func TestLLMFaultsFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		code   int
		want   []string
	}{
		// Four attempts (one and three retries), then a clean failure. The
		// script holds exactly four faults: a fifth attempt would find no
		// reply and the server would report it.
		{"500 exhausted", repeat(4, "- fault: {status: 500, retry_after: \"0.01\"}\n"), 1,
			[]string{"server error (HTTP 500 Internal Server Error)", "gave up after 4 attempts"}},
		{"502 exhausted", repeat(4, "- fault: {status: 502, retry_after: \"0.01\"}\n"), 1,
			[]string{"server error (HTTP 502 Bad Gateway)", "gave up after 4 attempts"}},
		{"503 exhausted", repeat(4, "- fault: {status: 503, retry_after: \"0.01\"}\n"), 1,
			[]string{"server error (HTTP 503 Service Unavailable)", "gave up after 4 attempts"}},
		{"finish_reason length", "- fault: length\n  reply: This answer was cut\n", 1,
			[]string{"reply cut off at the token limit (finish_reason length)"}},
		{"empty choices", "- fault: empty_choices\n", 1,
			[]string{"empty reply (no choices)"}},
		{"401", "- fault: 401\n", 3,
			[]string{"authentication refused (HTTP 401 Unauthorized)", "OPENAI_API_KEY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			spec := c.script("s.yaml", tt.script)
			r := c.run("ask", "--llm", spec, "Hi")
			wantCode(t, r, tt.code)
			// The provider is named: a script is "script:FILE".
			wantContains(t, r, "Error: analyzer: LLM "+spec+": ")
			wantContains(t, r, tt.want...)
			if strings.Contains(r.stderr, "never used") || strings.Contains(r.stderr, "no scripted reply left") {
				t.Errorf("the retries did not match the script:\n%s", r)
			}
			continues(t, c, sessionOf(t, r), true)
		})
	}
}

// TestLLMTimeout: an attempt that gets no answer within llm_timeout is cut
// and retried; when every attempt times out the turn fails cleanly, after a
// bounded number of attempts.
func TestLLMTimeout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		hangs int64 // attempts that get no answer; then the script answers
		code  int
	}{{"then success", 1, 0}, {"exhausted", 1 << 30, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			script := llmtest.NewServer(t)
			script.Enqueue(llmtest.CallReply(llmtest.NewCall("analyze_user_request", map[string]any{
				"intent_type": "direct_answer", "confidence": 0.9, "user_request_summary": "A greeting.",
				"reasoning": "Small talk.", "direct_response": "Hello after a timeout."})))
			if tt.hangs > 1 {
				script.Reset() // the script is never reached
			}
			h := newHangingLLM(t, script, tt.hangs)
			c := newCLI(t)
			c.env["OPENAI_API_KEY"] = "sk-test-timeout-0000000000"
			c.env["OPENAI_BASE_URL"] = h.url
			cfg := c.file("config.yaml", "llm_timeout: 200ms\n")
			r := c.run("--config", cfg, "ask", "Hi")
			wantCode(t, r, tt.code)
			attempts := h.requests.Load()
			if tt.code == 0 {
				wantContains(t, r, "Hello after a timeout.")
				if attempts != 2 {
					t.Errorf("%d attempts, want 2 (one timed out, one answered)", attempts)
				}
				continues(t, c, sessionOf(t, r), false)
				return
			}
			u, err := url.Parse(h.url)
			if err != nil {
				t.Fatal(err)
			}
			wantContains(t, r, "Error: analyzer: LLM "+u.Host+": network error", "no complete answer within 200ms", "gave up after 4 attempts")
			if attempts != 4 {
				t.Errorf("%d attempts, want 4 (the retry count is bounded)", attempts)
			}
			continues(t, c, sessionOf(t, r), true)
		})
	}
}

// hangingLLM never answers the first `hangs` requests (until the client
// gives up on them) and passes the others to a scripted server.
type hangingLLM struct {
	url      string
	requests atomic.Int64
}

func newHangingLLM(t *testing.T, script *llmtest.Server, hangs int64) *hangingLLM {
	t.Helper()
	target, err := url.Parse(script.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	stop := make(chan struct{})
	var once sync.Once
	h := &hangingLLM{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.requests.Add(1) <= hangs {
			select {
			case <-r.Context().Done(): // the client timed out and hung up
			case <-stop:
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		once.Do(func() { close(stop) })
		srv.Close()
	})
	h.url = srv.URL + "/v1"
	return h
}

// TestLLMBadToolCalls: malformed JSON, schema-violating arguments and
// unknown tool names get an error result that says what is wrong, the
// model corrects itself and the turn completes.
func TestLLMBadToolCalls(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("ask", "-o", "json", "--llm", c.script("s.yaml", `
- call:
    analyze_user_request: {intent_type: maybe, confidence: 0.9, user_request_summary: Find Math Hints., reasoning: lookup}
- messages_contain: ['intent_type: got \"maybe\": use direct_answer or needs_info']
  call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: Find Math Hints., reasoning: lookup}
- raw_call: {name: find_experiment, arguments: '{"name": "Math'}
- messages_contain: [arguments are not valid JSON]
  raw_call: {name: find_experiment, arguments: '{"name": ["Math"]}'}
- messages_contain: ['name: got a list: expected a string']
  raw_call: {name: lookup_experiment, arguments: '{"name": "Math Hints"}'}
- messages_contain: ['unknown tool \"lookup_experiment\"']
  call:
    find_experiment: {name: Math Hints}
- reply: Nothing by that name.
- reply: There is no experiment called Math Hints yet.
`), "Find the Math Hints experiment")
	wantCode(t, r, 0)
	wantContains(t, r, `"status": "completed"`, "There is no experiment called Math Hints yet.", `"llm_calls": 8`)
	if strings.Contains(r.stderr, "warning:") {
		t.Errorf("the script was not used exactly:\n%s", r)
	}
	continues(t, c, jsonField(t, r, "session_id"), false)
}

// jsonField reads a top-level string field of the JSON on stdout.
func jsonField(t *testing.T, r result, field string) string {
	t.Helper()
	var v map[string]any
	if err := decodeJSON(r.stdout, &v); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r)
	}
	s, _ := v[field].(string)
	if s == "" {
		t.Fatalf("no %s in the JSON output:\n%s", field, r)
	}
	return s
}
