package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// NodeHeader is the request header naming the pipeline node (it must equal
// llm.NodeHeader; this package cannot import llm, which imports it).
const NodeHeader = "X-Upgrade-Agent-Node"

// TB is the part of testing.TB the server uses; a *testing.T fits.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
}

// Message is a chat message as the server received it.
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
	Name       string
}

// ToolCall is an assistant tool call inside a received message.
type ToolCall struct {
	ID, Name, Arguments string
}

// RecordedRequest is one chat-completions request, decoded.
type RecordedRequest struct {
	Call              int    // 1-based, in arrival order
	Path              string // URL path, query included
	Node              string // the X-Upgrade-Agent-Node header
	Model             string
	Messages          []Message
	Tools             []string // names of the tools offered, in order
	ToolChoice        string   // as sent: "" (absent), auto, none, required, or the forced function's name
	ParallelToolCalls *bool
	Stream            bool
	IncludeUsage      bool
	Temperature       *float64
	MaxTokens         int    // max_tokens or max_completion_tokens
	Body              []byte // the raw JSON body
}

// PromptChars is the size of the request's prompt as the cost issue counts
// it: the compact JSON of its messages plus the compact JSON of its tools.
func (r RecordedRequest) PromptChars() int {
	var body struct {
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return 0
	}
	n := 0
	for _, part := range []json.RawMessage{body.Messages, body.Tools} {
		var buf bytes.Buffer
		if len(part) > 0 && json.Compact(&buf, part) == nil {
			n += buf.Len()
		}
	}
	return n
}

// Server is a scripted OpenAI-compatible chat-completions endpoint on
// 127.0.0.1. It answers each call with the next queued Reply, records every
// request, and reports calls it could not answer and replies never used.
type Server struct {
	srv *httpServer

	mu       sync.Mutex
	queue    []Reply
	next     int // index in queue of the next reply
	calls    int
	ids      int
	reqs     []RecordedRequest
	failures []string
}

// NewServer starts a server. With t non-nil, the server is closed when the
// test ends and any failure or unused reply fails the test; pass nil to
// check with Verify yourself.
func NewServer(t TB) *Server {
	s := &Server{}
	s.srv = startHTTP(http.HandlerFunc(s.handle))
	if t != nil {
		t.Helper()
		t.Cleanup(func() {
			t.Helper()
			err := s.Verify()
			s.Close()
			if err != nil {
				t.Errorf("%v", err)
			}
		})
	}
	return s
}

// URL is the base URL to configure a client with (OPENAI_BASE_URL); it ends
// in /v1.
func (s *Server) URL() string { return s.srv.url + "/v1" }

// Close stops the server. It is safe to call more than once.
func (s *Server) Close() { s.srv.Close() }

// Enqueue adds replies to the end of the script.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Pending is the number of replies not used yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) - s.next
}

// Requests returns a copy of every request received so far.
func (s *Server) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Failures lists the calls the script could not answer (no reply left, a
// failed check, an unreadable request), one readable line each.
func (s *Server) Failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failures)
}

// Verify returns an error listing the failures and the replies never used,
// or nil. It changes nothing.
func (s *Server) Verify() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lines []string
	lines = append(lines, s.failures...)
	if left := s.queue[s.next:]; len(left) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "llmtest: %d scripted %s never used (after %d %s):", len(left),
			plural(len(left), "reply was", "replies were"), s.calls, plural(s.calls, "call", "calls"))
		for i, r := range left {
			fmt.Fprintf(&b, "\n  #%d %s", s.next+i+1, r.describe())
		}
		lines = append(lines, b.String())
	}
	if len(lines) == 0 {
		return nil
	}
	return errors.New(strings.Join(lines, "\n"))
}

// Reset drops the replies not used yet and the failures, so a runner can
// script the next step from a clean slate. Requests and id numbering stay.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = nil
	s.next = 0
	s.failures = nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// describe summarises a reply for failure messages.
func (r Reply) describe() string {
	var parts []string
	if r.Fault != nil {
		parts = append(parts, "fault "+r.Fault.describe())
	}
	if len(r.Calls) > 0 {
		names := make([]string, len(r.Calls))
		for i, c := range r.Calls {
			names[i] = c.Name
		}
		parts = append(parts, "call "+strings.Join(names, ", "))
	}
	if r.Text != "" {
		t := r.Text
		if len(t) > 60 {
			t = t[:60] + "..."
		}
		parts = append(parts, fmt.Sprintf("reply %q", t))
	}
	s := strings.Join(parts, " + ")
	if r.Source != "" {
		s += " (" + r.Source + ")"
	}
	return s
}

// wireRequest is the subset of a chat-completions request the server reads.
type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Stream            bool            `json:"stream"`
	StreamOptions     *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature         *float64 `json:"temperature"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
}

// contentText reads a message content: a string or a list of text parts.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

// toolChoiceText renders tool_choice as one word: a mode or a function name.
func toolChoiceText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Function.Name != "" {
		return obj.Function.Name
	}
	return string(raw)
}

const maxBody = 32 << 20

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		msg := fmt.Sprintf("llmtest: unexpected request %s %s (only POST .../chat/completions is served)", r.Method, r.URL.Path)
		s.mu.Lock()
		s.failures = append(s.failures, msg)
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, msg)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "llmtest: reading the request: "+err.Error())
		return
	}
	var wr wireRequest
	decodeErr := json.Unmarshal(body, &wr)

	rec := RecordedRequest{
		Path: r.URL.RequestURI(), Node: r.Header.Get(NodeHeader), Model: wr.Model,
		ParallelToolCalls: wr.ParallelToolCalls, Stream: wr.Stream,
		IncludeUsage: wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage,
		Temperature:  wr.Temperature, MaxTokens: max(wr.MaxTokens, wr.MaxCompletionTokens),
		ToolChoice: toolChoiceText(wr.ToolChoice), Body: body,
	}
	for _, m := range wr.Messages {
		msg := Message{Role: m.Role, Content: contentText(m.Content), Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		rec.Messages = append(rec.Messages, msg)
	}
	for _, t := range wr.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}

	s.mu.Lock()
	s.calls++
	rec.Call = s.calls
	s.reqs = append(s.reqs, rec)
	prefix := fmt.Sprintf("llmtest: call %d (node %s, tools offered [%s])", rec.Call, nodeName(rec.Node), strings.Join(rec.Tools, ", "))
	var reply Reply
	var problems []string
	switch {
	case decodeErr != nil:
		problems = append(problems, "the request body is not a chat-completions JSON object: "+decodeErr.Error())
	case s.next >= len(s.queue):
		problems = append(problems, fmt.Sprintf("no scripted reply left (%d %s scripted, all used); last message: %s",
			len(s.queue), plural(len(s.queue), "reply", "replies"), lastMessage(rec.Messages)))
	default:
		reply = s.queue[s.next]
		s.next++
		problems = check(reply, rec)
	}
	if len(problems) > 0 {
		msg := prefix + ": " + strings.Join(problems, "; ")
		if reply.Source != "" {
			msg = fmt.Sprintf("%s: reply #%d (%s): %s", prefix, s.next, reply.Source, strings.Join(problems, "; "))
		}
		s.failures = append(s.failures, msg)
		s.mu.Unlock()
		// 400 is never retried by the client, so the run stops at once
		// with this text in its error.
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	ids := make([]string, len(reply.Calls))
	for i := range ids {
		s.ids++
		ids[i] = fmt.Sprintf("call_%d", s.ids)
	}
	s.mu.Unlock()

	a := answer{
		id: fmt.Sprintf("chatcmpl-llmtest-%d", rec.Call), model: wr.Model, reply: reply, ids: ids,
		promptTokens: estimate(promptChars(&wr)),
	}
	a.completionTokens = estimate(a.completionChars())
	s.serve(w, rec, a)
}

func nodeName(n string) string {
	if n == "" {
		return "(unnamed)"
	}
	return n
}

func lastMessage(msgs []Message) string {
	if len(msgs) == 0 {
		return "(none)"
	}
	m := msgs[len(msgs)-1]
	t := m.Content
	if t == "" && len(m.ToolCalls) > 0 {
		t = "tool calls " + m.ToolCalls[0].Name
	}
	if len(t) > 80 {
		t = t[:80] + "..."
	}
	return fmt.Sprintf("%s %q", m.Role, t)
}

// check compares a request with a reply's expectations.
func check(r Reply, rec RecordedRequest) []string {
	var problems []string
	if r.ToolsOffered != nil {
		want := slices.Sorted(slices.Values(r.ToolsOffered))
		got := slices.Sorted(slices.Values(rec.Tools))
		if !slices.Equal(slices.Compact(want), slices.Compact(got)) {
			problems = append(problems, fmt.Sprintf("tools_offered: want [%s], got [%s]",
				strings.Join(r.ToolsOffered, ", "), strings.Join(rec.Tools, ", ")))
		}
	}
	if r.ToolChoice != "" {
		got := rec.ToolChoice
		if got == "" {
			got = "none"
			if len(rec.Tools) > 0 {
				got = "auto"
			}
		}
		if got != r.ToolChoice {
			problems = append(problems, fmt.Sprintf("tool_choice: want %s, got %s", r.ToolChoice, got))
		}
	}
	if len(r.MessagesContain) > 0 {
		all := messagesText(rec.Messages)
		for _, sub := range r.MessagesContain {
			if !strings.Contains(all, sub) {
				problems = append(problems, fmt.Sprintf("messages_contain: %q is not in the messages", sub))
			}
		}
	}
	return problems
}

func messagesText(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Content)
		b.WriteByte('\n')
		for _, tc := range m.ToolCalls {
			b.WriteString(tc.Name)
			b.WriteByte(' ')
			b.WriteString(tc.Arguments)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func promptChars(wr *wireRequest) int {
	n := 0
	for _, m := range wr.Messages {
		n += len(m.Role) + len(contentText(m.Content)) + len(m.Name) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	for _, t := range wr.Tools {
		n += len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
	}
	return n
}

// estimate is the server's token count: characters / 4, rounded up.
func estimate(chars int) int { return (chars + 3) / 4 }

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": "llmtest_error", "code": nil},
	})
}

// answer is what the server is about to send for one call.
type answer struct {
	id, model                      string
	reply                          Reply
	ids                            []string
	promptTokens, completionTokens int
}

func (a answer) completionChars() int {
	n := len(a.reply.Text)
	for _, c := range a.reply.Calls {
		n += len(c.Name) + len(c.Arguments)
	}
	return n
}

func (a answer) finishReason() string {
	switch {
	case a.reply.Fault != nil && a.reply.Fault.Kind == FaultLength:
		return "length"
	case len(a.reply.Calls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// created is a fixed timestamp, so recorded answers are byte-stable.
const created = 1700000000

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (a answer) usage() *wireUsage {
	return &wireUsage{PromptTokens: a.promptTokens, CompletionTokens: a.completionTokens,
		TotalTokens: a.promptTokens + a.completionTokens}
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

func (s *Server) serve(w http.ResponseWriter, rec RecordedRequest, a answer) {
	if f := a.reply.Fault; f != nil {
		switch f.Kind {
		case FaultStatus:
			if f.RetryAfter != "" {
				w.Header().Set("Retry-After", f.RetryAfter)
			}
			if f.Body != "" {
				ct := "application/json"
				if !json.Valid([]byte(f.Body)) {
					ct = "text/html; charset=utf-8"
					if !strings.HasPrefix(strings.TrimSpace(f.Body), "<") {
						ct = "text/plain; charset=utf-8"
					}
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(f.Status)
				_, _ = io.WriteString(w, f.Body)
				return
			}
			writeError(w, f.Status, fmt.Sprintf("scripted fault: HTTP %d %s", f.Status, http.StatusText(f.Status)))
			return
		case FaultReset:
			resetConnection(w)
			return
		}
	}
	if rec.Stream {
		s.serveStream(w, rec, a)
		return
	}
	type wireMessage struct {
		Role      string         `json:"role"`
		Content   *string        `json:"content"`
		ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	}
	type wireChoice struct {
		Index        int         `json:"index"`
		Message      wireMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	}
	msg := wireMessage{Role: "assistant"}
	if a.reply.Text != "" || len(a.reply.Calls) == 0 {
		msg.Content = &a.reply.Text
	}
	for i, c := range a.reply.Calls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{ID: a.ids[i], Type: "function",
			Function: wireFunction(c)})
	}
	choices := []wireChoice{{Message: msg, FinishReason: a.finishReason()}}
	if a.reply.Fault != nil && a.reply.Fault.Kind == FaultEmptyChoices {
		choices = []wireChoice{}
	}
	body, _ := json.Marshal(map[string]any{
		"id": a.id, "object": "chat.completion", "created": created, "model": a.model,
		"choices": choices, "usage": a.usage(),
	})
	w.Header().Set("Content-Type", "application/json")
	if a.reply.Fault != nil && a.reply.Fault.Kind == FaultTruncated {
		body = body[:len(body)/2]
	}
	_, _ = w.Write(body)
}

// resetConnection drops the TCP connection without an HTTP answer; SO_LINGER
// 0 makes the peer see a reset rather than a clean close.
func resetConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // net/http closes the connection quietly
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// pieces splits s into up to n parts on rune boundaries, so streamed text
// and arguments arrive in several deltas.
func pieces(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := max(1, (len(s)+n-1)/n)
	var out []string
	for len(s) > 0 {
		cut := min(size, len(s))
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}
