package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

// The client is our own; these tests hold it against the official SDK's
// server over every transport, and against hand-written servers for what
// the SDK never sends.

// httpLog records what the client sent to an HTTP server and how it was
// answered.
type httpLog struct {
	mu       sync.Mutex
	requests []string // "METHOD jsonrpc-method session-id"
	types    map[string]bool
	sessions map[string]bool // Mcp-Session-Id values answered
}

func serveHTTP(t *testing.T, h http.Handler) (*httptest.Server, *httpLog) {
	t.Helper()
	log := &httpLog{types: map[string]bool{}, sessions: map[string]bool{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		method := "-"
		if i := bytes.Index(body, []byte(`"method":"`)); i >= 0 {
			rest := body[i+len(`"method":"`):]
			method = string(rest[:bytes.IndexByte(rest, '"')])
		}
		log.mu.Lock()
		log.requests = append(log.requests, strings.TrimSpace(r.Method+" "+method+" "+r.Header.Get("Mcp-Session-Id")))
		log.mu.Unlock()
		rec := &headerSpy{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		log.mu.Lock()
		defer log.mu.Unlock()
		if ct := rec.Header().Get("Content-Type"); ct != "" {
			log.types[strings.SplitN(ct, ";", 2)[0]] = true
		}
		if sid := rec.Header().Get("Mcp-Session-Id"); sid != "" {
			log.sessions[sid] = true
		}
	}))
	t.Cleanup(ts.Close)
	return ts, log
}

// headerSpy passes everything through; Flush keeps SSE streaming.
type headerSpy struct{ http.ResponseWriter }

func (h *headerSpy) Flush() {
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (l *httpLog) snapshot() ([]string, map[string]bool, map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.requests...), l.types, l.sessions
}

func TestInteropSDKServerOverStreamableHTTP(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonResponse), func(t *testing.T) {
			srv := newServer(t, mcptest.Options{Jobs: true, Advertise: true, PageSize: 2, Extras: true})
			handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() },
				&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
			ts, log := serveHTTP(t, handler)

			m, errs := mcpclient.Connect(testCtx(t), []mcpclient.ServerConfig{{Name: "remote", URL: ts.URL}}, mcpclient.Options{})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			var names []string
			for _, tool := range m.Tools() {
				names = append(names, tool.Name)
			}
			if diff := cmp.Diff([]string{"ask_client", "echo", "long_report", "lookup", "media"}, names); diff != "" {
				t.Errorf("tools over three pages (-want +got):\n%s", diff)
			}
			if res := mustCall(t, m, "mcp__remote__lookup", `{"id":"7"}`, ""); string(res.Structured) != `{"id":"7","name":"item 7"}` {
				t.Errorf("lookup = %+v", res)
			}
			if res := mustCall(t, m, "mcp__remote__media", `{}`, ""); res.Text != wantMedia {
				t.Errorf("media = %q, want %q", res.Text, wantMedia)
			}
			h := mustCall(t, m, "mcp__remote__long_report", `{"topic":"q4","polls":1}`, "effect-2").Job
			if h == nil {
				t.Fatal("no job handle")
			}
			if st := mustStatus(t, m, *h); st.State != mcpclient.StateSucceeded {
				t.Errorf("status = %+v", st)
			}
			if !jsonResponse {
				// Server requests travel on the POST's event stream; in
				// JSON mode they would need the standalone stream, which
				// this client does not open.
				if res := mustCall(t, m, "mcp__remote__ask_client", `{}`, ""); !strings.HasPrefix(res.Text, "ping: ok; sampling: ") ||
					!strings.Contains(res.Text, "method not found") {
					t.Errorf("ask_client = %q, want ping ok and sampling refused", res.Text)
				}
			}
			if err := m.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}

			requests, types, sessions := log.snapshot()
			wantType := "text/event-stream"
			if jsonResponse {
				wantType = "application/json"
			}
			if !types[wantType] {
				t.Errorf("answers were %v, want %s among them", types, wantType)
			}
			if len(sessions) != 1 {
				t.Fatalf("session ids issued: %v, want one", sessions)
			}
			pages, deleted := 0, false
			for i, r := range requests {
				f := strings.Fields(r)
				if i == 0 {
					if r != "POST initialize" {
						t.Errorf("first request %q, want the initialize POST without a session", r)
					}
					continue
				}
				if len(f) != 3 || !sessions[f[2]] {
					t.Errorf("request %q does not carry the session id", r)
				}
				if f[1] == "tools/list" {
					pages++
				}
				deleted = deleted || f[0] == http.MethodDelete
			}
			if pages != 3 {
				t.Errorf("%d tools/list requests, want 3 pages of 2", pages)
			}
			if !deleted {
				t.Errorf("no DELETE ended the session: %q", requests)
			}
		})
	}
}

// What convertResult makes of the media tool's blocks.
const wantMedia = "caption\n[image image/png omitted]\n[audio audio/wav omitted]\n" +
	"[resource link file:///reports/q3.pdf]\nthe notes\n[resource file:///logo.png]"

func TestInteropSDKServerRequestsAndContent(t *testing.T) {
	opts := mcptest.Options{PageSize: 1, Extras: true}
	for name, cfg := range map[string]mcpclient.ServerConfig{
		"memory": memConfig(t, newServer(t, opts), "s"),
		"stdio":  stdioConfig(t, "s", opts),
	} {
		t.Run(name, func(t *testing.T) {
			m := connect(t, mcpclient.Options{}, cfg)
			if n := len(m.Tools()); n != 5 {
				t.Errorf("%d tools over pages of one, want 5", n)
			}
			if res := mustCall(t, m, "mcp__s__media", `{}`, ""); res.Text != wantMedia {
				t.Errorf("media = %q, want %q", res.Text, wantMedia)
			}
			res := mustCall(t, m, "mcp__s__ask_client", `{}`, "")
			if !strings.HasPrefix(res.Text, "ping: ok; sampling: ") || !strings.Contains(res.Text, "method not found") {
				t.Errorf("ask_client = %q, want ping ok and sampling refused", res.Text)
			}
		})
	}
}

func rawConfig(behaviour string) mcpclient.ServerConfig {
	return mcpclient.ServerConfig{Name: "raw", Command: os.Args[0], Env: map[string]string{
		serverModeEnv: "raw:" + behaviour,
		"GORACE":      "atexit_sleep_ms=0",
	}}
}

func TestServerExitingMidCallIsAnErrorNamingIt(t *testing.T) {
	m := connect(t, mcpclient.Options{}, rawConfig("exit"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.Call(ctx, "mcp__raw__work", nil, "")
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Call = %v (context: %v), want the server's exit", err, ctx.Err())
	}
	for _, want := range []string{"mcp__raw__work", "exit status 4", "raw: out of memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := m.Call(ctx, "mcp__raw__work", nil, ""); err == nil || !strings.Contains(err.Error(), "connection to the server lost") {
		t.Errorf("a call after the exit: %v", err)
	}
}

func TestHostileServerOutputFailsTheCall(t *testing.T) {
	for behaviour, want := range map[string]string{
		"huge":    "too large",
		"invalid": "invalid JSON",
	} {
		t.Run(behaviour, func(t *testing.T) {
			m := connect(t, mcpclient.Options{}, rawConfig(behaviour))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := m.Call(ctx, "mcp__raw__work", nil, "")
			if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "mcp__raw__work") {
				t.Fatalf("Call = %v (context: %v), want an error with %q naming the tool", err, ctx.Err(), want)
			}
		})
	}
}

func TestServerRequestsAndStrayMessagesAreHandled(t *testing.T) {
	m := connect(t, mcpclient.Options{}, rawConfig("chatty"))
	for range 2 {
		res := mustCall(t, m, "mcp__raw__work", `{}`, "")
		if want := "ping: result {}; sampling: error -32601"; res.Text != want {
			t.Errorf("work = %q, want %q", res.Text, want)
		}
	}
}

func TestCallEndsWithItsContext(t *testing.T) {
	m := connect(t, mcpclient.Options{}, rawConfig("silent"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := m.Call(ctx, "mcp__raw__work", nil, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call = %v, want the deadline", err)
	}
}

func TestHTTPCallEndsWithItsContext(t *testing.T) {
	srv := newServer(t, mcptest.Options{})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil)
	cancelled := make(chan string, 1)
	ts, _ := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte(`"tools/call"`)):
			<-r.Context().Done() // never answers
			return
		case bytes.Contains(body, []byte(`"notifications/cancelled"`)):
			cancelled <- string(body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sdk.ServeHTTP(w, r)
	}))
	m := connect(t, mcpclient.Options{}, mcpclient.ServerConfig{Name: "remote", URL: ts.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := m.Call(ctx, "mcp__remote__echo", []byte(`{"text":"x"}`), ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call = %v, want the deadline", err)
	}
	select {
	case msg := <-cancelled:
		if !strings.Contains(msg, `"requestId":3`) {
			t.Errorf("cancellation %s, want requestId 3 (the tools/call)", msg)
		}
	case <-testCtx(t).Done():
		t.Error("no notifications/cancelled")
	}
}

func TestHTTPServerDyingMidCallIsAnError(t *testing.T) {
	srv := newServer(t, mcptest.Options{})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil)
	ts, _ := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sdk.ServeHTTP(w, r)
	}))
	m := connect(t, mcpclient.Options{}, mcpclient.ServerConfig{Name: "remote", URL: ts.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.Call(ctx, "mcp__remote__echo", []byte(`{"text":"x"}`), "")
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "mcp__remote__echo") {
		t.Fatalf("Call = %v (context: %v), want an error naming the tool", err, ctx.Err())
	}
}

// A hand-written streamable-HTTP server: the answer to tools/call is an
// event stream with a comment, an event of another type, a notification and
// a ping request before the response, whose data spans two lines.
func TestSSEResponseAmongOtherEvents(t *testing.T) {
	var (
		mu       sync.Mutex
		pingAns  string
		answered = make(chan struct{})
	)
	ts, log := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msg := string(body)
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case strings.Contains(msg, `"method":"initialize"`):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "sess-1")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"hand","version":"1"}}}`)
		case strings.Contains(msg, `"method":"tools/list"`):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"work","inputSchema":{"type":"object"}}]}}`)
		case strings.Contains(msg, `"method":"tools/call"`):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": keep-alive\n\n"+
				"event: other\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"wrong\"}]}}\n\n"+
				"id: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"+
				"data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}\n\n")
			http.NewResponseController(w).Flush()
			// Like a real server: the answer waits for the client's pong.
			select {
			case <-answered:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\r\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"right\"}]}}\r\n\r\n")
		case strings.Contains(msg, `"id":"srv-1"`):
			mu.Lock()
			pingAns = msg
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			close(answered)
		default: // notifications
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	m, errs := mcpclient.Connect(testCtx(t), []mcpclient.ServerConfig{{Name: "hand", URL: ts.URL}}, mcpclient.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if res := mustCall(t, m, "mcp__hand__work", `{}`, ""); res.Text != "right" {
		t.Errorf("work = %q, want the message event's answer", res.Text)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if pingAns != `{"jsonrpc":"2.0","id":"srv-1","result":{}}` {
		t.Errorf("answer to the server's ping = %q", pingAns)
	}
	requests, _, _ := log.snapshot()
	want := []string{"POST initialize", "POST notifications/initialized sess-1", "POST tools/list sess-1",
		"POST tools/call sess-1", "POST - sess-1", "DELETE - sess-1"}
	if diff := cmp.Diff(want, requests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// The SDK's own client was what this package used before; on the same
// server, our client must offer the same tools (schema bytes included:
// they go into prompts) and read the same results.
func TestSameToolsAndResultsAsTheSDKClient(t *testing.T) {
	srv := newServer(t, mcptest.Options{Jobs: true, Advertise: true, ReadJobs: true, Extras: true})
	ours := connect(t, mcpclient.Options{}, memConfig(t, srv, "s"))

	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	sdk, err := mcp.NewClient(&mcp.Implementation{Name: "sdk"}, nil).Connect(testCtx(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sdk.Close() })

	var want []mcpclient.Tool
	for tool, err := range sdk.Tools(testCtx(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == mcpclient.JobStatusTool {
			continue
		}
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		readOnly := tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		want = append(want, mcpclient.Tool{
			Server: "s", Name: tool.Name, QualifiedName: mcpclient.QualifiedName("s", tool.Name),
			Description: tool.Description, InputSchema: schema, ReadOnly: readOnly,
			Destructive: !readOnly && (tool.Annotations == nil || tool.Annotations.DestructiveHint == nil || *tool.Annotations.DestructiveHint),
		})
	}
	if diff := cmp.Diff(want, ours.Tools()); diff != "" {
		t.Errorf("tools: SDK client (-) and ours (+):\n%s", diff)
	}

	for _, c := range []struct{ tool, args string }{
		{"echo", `{"text":"a <b> & \"c\""}`},
		{"lookup", `{"id":"9"}`},
		{"lookup", `{}`},
		{"media", `{}`},
	} {
		res, err := sdk.CallTool(testCtx(t), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatal(err)
		}
		got := mustCall(t, ours, "mcp__s__"+c.tool, c.args, "")
		if diff := cmp.Diff(sdkResult(res), got); diff != "" {
			t.Errorf("%s %s: SDK client (-) and ours (+):\n%s", c.tool, c.args, diff)
		}
	}
}

// sdkResult is how this package read an SDK CallToolResult before it had
// its own client.
func sdkResult(res *mcp.CallToolResult) *mcpclient.CallResult {
	out := &mcpclient.CallResult{IsError: res.IsError}
	var parts []string
	for _, c := range res.Content {
		switch v := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, v.Text)
		case *mcp.EmbeddedResource:
			if v.Resource.Text != "" {
				parts = append(parts, v.Resource.Text)
			} else {
				parts = append(parts, fmt.Sprintf("[resource %s]", v.Resource.URI))
			}
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s]", v.URI))
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s omitted]", v.MIMEType))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s omitted]", v.MIMEType))
		}
	}
	out.Text = strings.Join(parts, "\n")
	if res.StructuredContent != nil {
		out.Structured, _ = json.Marshal(res.StructuredContent)
	}
	return out
}
