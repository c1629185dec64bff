package cmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// traceSpan is the part of a span that OTel's stdout exporter writes and
// the tests read.
type traceSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Attributes  []struct {
		Key   string
		Value struct {
			Type  string
			Value any
		}
	}
	Status struct{ Code string }
}

func (s traceSpan) attr(key string) (any, bool) {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Value, true
		}
	}
	return nil, false
}

func readTrace(t *testing.T, file string) []traceSpan {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("trace file: %v", err)
	}
	defer f.Close()
	var spans []traceSpan
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var s traceSpan
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("trace line %d is not a span: %v\n%s", len(spans)+1, err, sc.Text())
		}
		spans = append(spans, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return spans
}

// spansNamed returns the spans whose name is name or starts with name+" ".
func spansNamed(spans []traceSpan, prefix string) []traceSpan {
	var out []traceSpan
	for _, s := range spans {
		if s.Name == prefix || strings.HasPrefix(s.Name, prefix+" ") {
			out = append(out, s)
		}
	}
	return out
}

const traceSecret = "sk-TRACEsecret0123456789abcdef"

// tracedProposal runs `ask --yes` on a scripted proposal with --trace and
// returns the spans written.
func tracedProposal(t *testing.T, extra ...string) (spans []traceSpan, sessionID string) {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "OPENAI_API_KEY="+traceSecret)
	propose := writeTestFile(t, dir, "propose.yaml", proposeHarmless)
	file := filepath.Join(dir, "trace.jsonl")
	args := append([]string{"ask", "--yes", "--model", "gpt-test", "--trace", file, "--llm", "script:" + propose}, extra...)
	args = append(args, "create harmless, my key is "+traceSecret)
	if code, o, e := agentIn(t, env, args...); code != 0 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, o, e)
	}
	return readTrace(t, file), latestSession(t, state)
}

func TestTraceOfAScriptedProposal(t *testing.T) {
	spans, id := tracedProposal(t)
	byID := map[string]traceSpan{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID] = s
	}
	parentName := func(s traceSpan) string { return byID[s.Parent.SpanID].Name }

	turns := spansNamed(spans, "invoke_agent")
	if len(turns) != 1 || turns[0].Name != "invoke_agent upgrade-agent" {
		t.Fatalf("want one invoke_agent upgrade-agent span, got %d: %v", len(turns), names(spans))
	}
	turn := turns[0]
	for k, want := range map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": id,
		"upgrade_agent.turn": float64(1), "upgrade_agent.status": "completed", "upgrade_agent.exit_code": float64(0)} {
		if got, _ := turn.attr(k); got != want {
			t.Errorf("turn span %s = %v, want %v", k, got, want)
		}
	}
	traceID := turn.SpanContext.TraceID
	for _, s := range spans {
		if s.SpanContext.TraceID != traceID {
			t.Errorf("span %s is in trace %s, not the turn's %s", s.Name, s.SpanContext.TraceID, traceID)
		}
	}

	for _, node := range []string{"analyzer", "gatherer", "executor", "responder"} {
		ns := spansNamed(spans, node)
		if len(ns) == 0 {
			t.Errorf("no %s span in %v", node, names(spans))
			continue
		}
		if p := parentName(ns[0]); p != turn.Name {
			t.Errorf("%s span's parent is %q, want the turn", node, p)
		}
	}

	chats := spansNamed(spans, "chat")
	if len(chats) != 3 {
		t.Errorf("want 3 chat spans (one per scripted reply), got %d", len(chats))
	}
	for _, c := range chats {
		if c.Name != "chat gpt-test" {
			t.Errorf("chat span named %q, want %q", c.Name, "chat gpt-test")
		}
		for _, k := range []string{"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.usage.input_tokens",
			"gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons"} {
			if _, ok := c.attr(k); !ok {
				t.Errorf("chat span lacks %s", k)
			}
		}
		if p := byID[c.Parent.SpanID]; p.Parent.SpanID != turn.SpanContext.SpanID {
			t.Errorf("chat span's parent %q is not a node of the turn", p.Name)
		}
	}

	tools := spansNamed(spans, "execute_tool")
	seen := map[string]bool{}
	for _, s := range tools {
		name, _ := s.attr("gen_ai.tool.name")
		seen[fmt.Sprint(name)] = true
		if id, _ := s.attr("gen_ai.tool.call.id"); id == nil {
			t.Errorf("tool span %s lacks gen_ai.tool.call.id", s.Name)
		}
	}
	for _, want := range []string{"set_action_needed", "set_action_params"} {
		if !seen[want] {
			t.Errorf("no execute_tool span for %s; tool spans: %v", want, names(tools))
		}
	}

	acts := spansNamed(spans, "action")
	if len(acts) != 1 {
		t.Fatalf("want one action span, got %v", names(spans))
	}
	if p := parentName(acts[0]); p != "executor" {
		t.Errorf("action span's parent is %q, want executor", p)
	}
	for k, want := range map[string]any{"upgrade_agent.action": "create_experiment", "upgrade_agent.target": "harmless"} {
		if got, _ := acts[0].attr(k); got != want {
			t.Errorf("action span %s = %v, want %v", k, got, want)
		}
	}
	var https []traceSpan
	for _, s := range spans {
		if _, ok := s.attr("http.request.method"); ok {
			https = append(https, s)
		}
	}
	if len(https) == 0 {
		t.Errorf("no HTTP client spans of the UpGrade calls in %v", names(spans))
	}
	var underAction bool
	for _, h := range https {
		if h.Parent.SpanID == acts[0].SpanContext.SpanID {
			underAction = true
		}
	}
	if !underAction {
		t.Errorf("no HTTP span under the action span")
	}

	raw := spansText(t, spans)
	for _, bad := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
		"gen_ai.tool.call.result", "create harmless", traceSecret} {
		if strings.Contains(raw, bad) {
			t.Errorf("the trace holds %q without --trace-content", bad)
		}
	}
}

func TestTraceContentIsRedacted(t *testing.T) {
	spans, _ := tracedProposal(t, "--trace-content")
	raw := spansText(t, spans)
	for _, want := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
		"gen_ai.tool.call.result", "create harmless", "[REDACTED]"} {
		if !strings.Contains(raw, want) {
			t.Errorf("the trace lacks %q with --trace-content", want)
		}
	}
	if strings.Contains(raw, traceSecret) {
		t.Errorf("the trace holds the API key")
	}
}

func spansText(t *testing.T, spans []traceSpan) string {
	t.Helper()
	b, err := json.Marshal(spans)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func names(spans []traceSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// The executed action's audit entry and its change carry the turn's trace
// id, so a person reading either finds the trace.
func TestAuditAndChangeCarryTheTraceID(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+state, "OPENAI_API_KEY="+traceSecret)
	propose := writeTestFile(t, dir, "propose.yaml", proposeHarmless)
	file := filepath.Join(dir, "trace.jsonl")
	if code, o, e := agentIn(t, env, "ask", "--yes", "--model", "gpt-test", "--trace", file, "--llm", "script:"+propose, "create harmless"); code != 0 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, o, e)
	}
	turns := spansNamed(readTrace(t, file), "invoke_agent")
	if len(turns) != 1 {
		t.Fatalf("want one turn span, got %d", len(turns))
	}
	want := strings.ToLower(turns[0].SpanContext.TraceID)

	code, out, errOut := agentIn(t, env, "audit", "-o", "json")
	if code != 0 {
		t.Fatalf("audit: exit %d\n%s", code, errOut)
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("audit -o json: %v\n%s", err, out)
	}
	executed := 0
	for _, e := range entries {
		if e["event"] == "executed" {
			executed++
			if got, _ := e["trace_id"].(string); strings.ToLower(got) != want {
				t.Errorf("executed audit entry's trace_id = %q, want %q", got, want)
			}
		}
	}
	if executed != 1 {
		t.Errorf("%d executed audit entries, want 1: %s", executed, out)
	}

	code, out, errOut = agentIn(t, env, "changes", "list", "-o", "json")
	if code != 0 {
		t.Fatalf("changes list: exit %d\n%s", code, errOut)
	}
	var changes []map[string]any
	if err := json.Unmarshal([]byte(out), &changes); err != nil {
		t.Fatalf("changes list -o json: %v\n%s", err, out)
	}
	if len(changes) != 1 {
		t.Fatalf("%d changes, want 1: %s", len(changes), out)
	}
	if got, _ := changes[0]["trace_id"].(string); strings.ToLower(got) != want {
		t.Errorf("change's trace_id = %q, want %q", got, want)
	}
}

// TestTraceOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT and _HEADERS set, a
// turn's spans reach an OTLP/HTTP collector as JSON, with the headers; a
// header list the exporter cannot read is a usage error naming the
// variable, without its value.
func TestTraceOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(b))
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	dir := t.TempDir()
	propose := writeTestFile(t, dir, "propose.yaml", proposeHarmless)
	env := agentEnv(t, "UPGRADE_AGENT_HOME="+filepath.Join(dir, "state"), "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20"+traceSecret)
	if code, o, e := agentIn(t, env, "ask", "--yes", "--model", "gpt-test", "--llm", "script:"+propose, "create harmless"); code != 0 {
		t.Fatalf("ask: exit %d\n%s\n%s", code, o, e)
	}
	mu.Lock()
	all := strings.Join(bodies, "\n")
	gotAuth := strings.Join(auth, ",")
	mu.Unlock()
	for _, want := range []string{"/v1/traces application/json {\"resourceSpans\":", `"name":"invoke_agent upgrade-agent"`, `"name":"chat gpt-test"`, `"stringValue":"upgrade-agent"`} {
		if !strings.Contains(all, want) {
			t.Errorf("the collector got no %s in:\n%.2000s", want, all)
		}
	}
	if !strings.Contains(gotAuth, "Bearer "+traceSecret) {
		t.Errorf("Authorization headers %q", gotAuth)
	}

	bad := agentEnv(t, "UPGRADE_AGENT_HOME="+filepath.Join(dir, "state"), "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS=Authorization "+traceSecret)
	code, o, e := agentIn(t, bad, "experiments", "list")
	if code != 2 || !strings.Contains(e, "OTEL_EXPORTER_OTLP_HEADERS") || strings.Contains(o+e, traceSecret) {
		t.Errorf("a malformed header list: exit %d, stderr %q; want 2 naming the variable, without the value", code, e)
	}
}
