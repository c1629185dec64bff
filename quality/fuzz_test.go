package quality

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// The parsers of outside input whose own packages have no fuzz target get
// one here. Seeds: testdata/fuzz/<Target>/ plus the f.Add calls; CI runs
// them as ordinary tests, `make fuzz-smoke` fuzzes them.

// FuzzOutputSchema: any --output-schema file is either rejected as bad
// input naming the file, or yields a schema whose custom fields exclude the
// framework's own response_messages.
func FuzzOutputSchema(f *testing.F) {
	for _, glob := range []string{"../scenarios/schemas/*.json", "../pipeline/testdata/*.json"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"type":"object","properties":{"response_messages":{"type":"array"},"x":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`))
	for _, b := range hostileJSON() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := pipeline.ParseOutputSchema(data, "fuzz.json")
		if err != nil {
			if !errors.Is(err, pipeline.ErrBadInput) {
				t.Fatalf("error is not bad input (exit 2): %v", err)
			}
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, c := range s.CustomFields() {
			if c == pipeline.ResponseMessagesField {
				t.Fatalf("%s listed as a custom field", c)
			}
		}
	})
}

// hostileJSON are seeds shaped against JSON readers (issue 15.7): nesting
// past encoding/json's depth limit, a schema that nests its own
// definitions, and a large string and a long array (256 KiB each: large
// enough to cross buffer sizes, small enough to keep fuzzing fast).
func hostileJSON() [][]byte {
	return [][]byte{
		[]byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000)),
		[]byte(`{"type":"object","properties":` + strings.Repeat(`{"a":{"type":"object","properties":`, 500) + `{}` + strings.Repeat(`}}`, 500) + `}`),
		[]byte(`{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`),
		[]byte(`{"message":"` + strings.Repeat("x", 256<<10) + `"}`),
		[]byte(`[` + strings.Repeat(`{},`, 256<<10/3) + `{}]`),
	}
}

// handlerTransport serves requests with a handler in process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// fuzzLLM plays analyzer -> one gatherer tool call -> gatherer close ->
// responder, in process, with the fuzzed call; it records the tool results
// the pipeline sent back.
type fuzzLLM struct {
	mu      sync.Mutex
	tool    uint8  // index into the gatherer's tools; 254: an unknown tool; 255: the analyzer's own call gets args
	args    string // the fuzzed arguments
	results []string
}

const fuzzAnalyze = `{"intent_type":"needs_info","confidence":0.9,"user_request_summary":"Look something up.","reasoning":"fuzz"}`

func (c *fuzzLLM) Chat(_ context.Context, req llm.Request) (*llm.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &llm.Response{Attempts: 1, FinishReason: "stop"}
	last := req.Messages[len(req.Messages)-1]
	switch req.Node {
	case pipeline.NodeAnalyzer:
		args := fuzzAnalyze
		if c.tool == 255 && last.Role != llm.RoleTool && !strings.HasPrefix(last.Content, "Call analyze_user_request") {
			args = c.args
		}
		resp.ToolCalls = []llm.ToolCall{{ID: "a1", Name: "analyze_user_request", Arguments: args}}
	case pipeline.NodeGatherer:
		if last.Role == llm.RoleTool {
			c.results = append(c.results, last.Content)
			resp.Content = "Done."
			break
		}
		name := "get_experiment_names"
		switch {
		case c.tool == 254:
			name = "no_such_tool"
		case c.tool != 255 && len(req.Tools) > 0:
			name = req.Tools[int(c.tool)%len(req.Tools)].Name
		}
		args := "{}"
		if c.tool != 255 {
			args = c.args
		}
		resp.ToolCalls = []llm.ToolCall{{ID: "g1", Name: name, Arguments: args}}
	default:
		resp.Content = "Here is what I found."
	}
	if len(resp.ToolCalls) > 0 {
		resp.FinishReason = "tool_calls"
	}
	return resp, nil
}

// FuzzToolArguments: whatever arguments the model sends to whichever
// gatherer tool (or to the analyzer's forced call), the turn ends normally
// (completed or awaiting a confirmation), never with a Go error or a panic,
// and every tool result sent back is JSON.
func FuzzToolArguments(f *testing.F) {
	f.Add(uint8(6), `{"name": "Math`)
	f.Add(uint8(6), `{"name": 42}`)
	f.Add(uint8(4), `{"experiment_id": "Math Hints"}`)
	f.Add(uint8(255), `{"intent_type": "maybe"}`)
	f.Add(uint8(255), `not json`)
	f.Add(uint8(254), `{}`)
	s, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		f.Fatal(err)
	}
	api, err := upgrade.New(upgrade.Config{BaseURL: "http://sim.invalid/api", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: handlerTransport{s.Handler()}}})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := actions.Run(context.Background(), api, actions.CreateExperimentParams{Name: "Math Hints", Context: "assign-prog",
		DecisionPoints: []actions.DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []actions.ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}}}); err != nil {
		f.Fatal(err)
	}
	client := &fuzzLLM{}
	agent, err := pipeline.New(pipeline.Deps{LLM: client, API: api}, pipeline.Settings{Model: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tool uint8, args string) {
		client.mu.Lock()
		client.tool, client.args, client.results = tool, args, nil
		client.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := agent.Ask(ctx, pipeline.NewSession("fuzz00000001", time.Now()), "Look something up.")
		if err != nil {
			t.Fatalf("the turn failed: %v", err)
		}
		if res.Status != pipeline.StatusCompleted && res.Status != pipeline.StatusAwaitingConfirmation {
			t.Fatalf("status %s (%s)", res.Status, res.TerminationReason)
		}
		client.mu.Lock()
		defer client.mu.Unlock()
		for _, r := range client.results {
			if !json.Valid([]byte(r)) {
				t.Fatalf("tool result is not JSON: %q", r)
			}
		}
	})
}

// FuzzLLMResponse: whatever an OpenAI-compatible endpoint answers, the
// client returns a response or an *llm.Error with a kind and a one-line
// message naming the provider, never a panic.
func FuzzLLMResponse(f *testing.F) {
	f.Add(uint16(200), "application/json", []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	f.Add(uint16(200), "application/json", []byte(`{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]},"finish_reason":"tool_calls"}]}`))
	f.Add(uint16(200), "application/json", []byte(`{"choices":[]}`))
	f.Add(uint16(200), "application/json", []byte(`{"choices":[{"message":{"content":"cut"},"finish_reason":"length"}]}`))
	f.Add(uint16(429), "application/json", []byte(`{"error":{"message":"slow down","type":"rate_limit","code":"rate_limit_exceeded"}}`))
	f.Add(uint16(502), "text/html", []byte(`<html><title>502 Bad Gateway</title></html>`))
	f.Add(uint16(401), "application/json", []byte(`{"error":{"message":"bad key"}}`))
	f.Add(uint16(200), "application/json", []byte(`{"choices":[{"message":{"content":"tru`))
	for _, b := range hostileJSON() {
		f.Add(uint16(200), "application/json", b)
	}
	var (
		mu          sync.Mutex
		status      int
		contentType string
		body        []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		st, ct, b := status, contentType, body
		mu.Unlock()
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(st)
		_, _ = w.Write(b)
	}))
	f.Cleanup(srv.Close)
	c, err := llm.New(llm.Options{BaseURL: srv.URL + "/v1", APIKey: "sk-fuzz", Model: "m", MaxRetries: -1, Timeout: 5 * time.Second,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		f.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	f.Fuzz(func(t *testing.T, st uint16, ct string, b []byte) {
		// 200..599 without the 1xx informational answers, which net/http
		// handles itself; a content type that is no valid header value
		// would make the test server, not the client, break HTTP.
		code := 200 + int(st)%400
		if !printable(ct) {
			ct = ""
		}
		mu.Lock()
		status, contentType, body = code, ct, b
		mu.Unlock()
		resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
			Tools: []llm.Tool{{Name: "f", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}})
		if err == nil {
			if resp == nil {
				t.Fatal("no error and no response")
			}
			return
		}
		var le *llm.Error
		if !errors.As(err, &le) || le.Kind == "" {
			t.Fatalf("status %d: not an *llm.Error with a kind: %#v", code, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "LLM "+host+": ") || strings.Contains(msg, "\n") {
			t.Fatalf("status %d: message does not name the provider in one line: %q", code, msg)
		}
		if code == 401 && le.Kind != llm.KindAuth {
			t.Fatalf("401 gave kind %s", le.Kind)
		}
	})
}

// FuzzUpgradeResponse: whatever an UpGrade server answers to any of the
// client's reads and writes, the client returns a result or an error with a
// category (api, auth, validation, not_found, unknown), never a panic.
func FuzzUpgradeResponse(f *testing.F) {
	for _, glob := range []string{"../upgrade/testdata/*"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(uint16(200), "application/json", b)
				f.Add(uint16(404), "text/html", b)
			}
		}
	}
	f.Add(uint16(200), "application/json", []byte(`[]`))
	f.Add(uint16(200), "application/json", []byte(`{"name":"UpGrade","version":"6.5.0"}`))
	f.Add(uint16(200), "application/json", []byte(`[{"id":"x","name":"n","conditions":null}]`))
	f.Add(uint16(400), "application/json", []byte(`{"message":"Invalid body","errors":[{"property":"p","constraints":{"a":"b"}}]}`))
	f.Add(uint16(500), "text/html", []byte(`<html><title>oops</title></html>`))
	f.Add(uint16(200), "application/json", []byte(`{"contextMetadata":{"assign-prog":{"EXP_IDS":["a"],"EXP_POINTS":["b"],"CONDITIONS":["c"],"GROUP_TYPES":["g"]}}}`))
	for _, b := range hostileJSON() {
		f.Add(uint16(200), "application/json", b)
	}
	var (
		mu          sync.Mutex
		status      int
		contentType string
		body        []byte
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		st, ct, b := status, contentType, body
		mu.Unlock()
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(st)
		_, _ = w.Write(b)
	})
	c, err := upgrade.New(upgrade.Config{BaseURL: "http://upgrade.invalid/api", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: handlerTransport{h}}})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	exp := &upgrade.Experiment{Name: "n", Context: []string{"assign-prog"}, State: upgrade.StateInactive}
	ops := []func() error{
		func() error { _, err := c.Health(ctx); return err },
		func() error { _, err := c.ContextMetadata(ctx); return err },
		func() error { _, err := c.ExperimentNames(ctx); return err },
		func() error { _, err := c.Experiments(ctx); return err },
		func() error { _, err := c.Experiment(ctx, "e1"); return err },
		func() error { _, err := c.EnrollmentStats(ctx, "e1"); return err },
		func() error { _, err := c.CreateExperiment(ctx, exp); return err },
		func() error { _, err := c.SetState(ctx, "e1", upgrade.StateEnrolling); return err },
		func() error { _, err := c.DeleteExperiment(ctx, "e1"); return err },
		func() error { _, err := c.Init(ctx, "u1", upgrade.InitRequest{}); return err },
		func() error { _, err := c.Assign(ctx, "u1", "assign-prog"); return err },
	}
	f.Fuzz(func(t *testing.T, st uint16, ct string, b []byte) {
		code := 200 + int(st)%400
		if !printable(ct) {
			ct = ""
		}
		mu.Lock()
		status, contentType, body = code, ct, b
		mu.Unlock()
		for i, op := range ops {
			err := op()
			if err != nil && upgrade.CategoryOf(err) == "" {
				t.Fatalf("operation %d, status %d: an error without a category: %v", i, code, err)
			}
		}
	})
}

// printable reports whether s is a valid header value: printable ASCII.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }
