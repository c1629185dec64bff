package pipeline

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func withOutput(t *testing.T, h *harness, enabled bool) {
	t.Helper()
	s, err := LoadOutputSchema("testdata/handoff.json")
	if err != nil {
		t.Fatal(err)
	}
	h.agent.set.Output = &OutputConfig{Schema: s, Enabled: enabled}
}

func TestOutputFieldsFilledAndNeverStored(t *testing.T) {
	h := newHarness(t)
	withOutput(t, h, true)
	var requestsWhenReplied int
	h.agent.onResponse = func(string) { requestsWhenReplied = len(h.llm.Requests()) }
	res := h.ask("I want to talk to a person",
		analyze(IntentDirectAnswer, "wants a human", map[string]any{"direct_response": "I will hand you over to a colleague."}),
	)
	// A direct answer ends without the responder, and so without output.
	if res.Output != nil {
		t.Fatalf("output on a direct-answer turn without the responder: %+v", res.Output)
	}
	res = h.ask("what contexts exist?",
		analyze(IntentNeedsInfo, "contexts", nil),
		calls(call("get_available_contexts", map[string]any{})),
		text("done"),
		text("There are three contexts. Let me hand you to support for more."),
		calls(call(OutputToolName, map[string]any{"should_handoff": true, "handoff_target": "support"})),
	)
	requireTrace(t, res, NodeAnalyzer, NodeGatherer, NodeResponder, NodeOutput)
	if requestsWhenReplied != 4+1 {
		t.Fatalf("reply delivered after %d requests, want before the extraction call (5)", requestsWhenReplied)
	}
	want := map[string]any{"should_handoff": true, "handoff_target": "support",
		"response_messages": []any{"There are three contexts. Let me hand you to support for more."}}
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Fatalf("output (-want +got):\n%s", diff)
	}
	if len(res.Errors) != 0 {
		t.Fatalf("errors: %+v", res.Errors)
	}
	reqs := h.llm.Requests()
	out := reqs[len(reqs)-1]
	if out.ToolChoice != OutputToolName || len(out.Tools) != 1 || out.ParallelToolCalls == nil || *out.ParallelToolCalls || out.Stream {
		t.Fatalf("output call not forced/alone/serial: %+v", out)
	}
	// The next turn carries no trace of the extraction.
	h.ask("thanks", analyze(IntentDirectAnswer, "thanks", map[string]any{"direct_response": "You're welcome."}))
	next := h.llm.Requests()[len(h.llm.Requests())-1]
	b, _ := json.Marshal(next.Messages)
	if strings.Contains(string(b), OutputToolName) || strings.Contains(string(b), "handoff_target") || strings.Contains(string(b), "structured output") {
		t.Fatalf("extraction leaked into the next turn: %s", b)
	}
	cpRaw, err := os.ReadFile(filepath.Join(h.store.Path(h.sess.cp.SessionID)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cpRaw), "handoff_target") {
		t.Fatal("extraction stored in the checkpoint")
	}
}

func TestOutputMissingToolCall(t *testing.T) {
	h := newHarness(t)
	withOutput(t, h, true)
	res := h.ask("hi",
		analyze(IntentDirectAnswer, "greeting", nil),
		text("Hello!"),
		text("I will not call the tool."),
	)
	if res.Status != StatusCompleted || res.Response != "Hello!" {
		t.Fatalf("reply not delivered: %+v", res)
	}
	fields := map[string]bool{}
	for _, e := range res.Errors {
		if e.Type == ErrTypeValidation {
			fields[e.Field] = true
		}
	}
	if !fields["should_handoff"] || !fields["handoff_target"] {
		t.Fatalf("want per-field errors, got %+v", res.Errors)
	}
}

func TestOutputInvalidArguments(t *testing.T) {
	h := newHarness(t)
	withOutput(t, h, true)
	res := h.ask("hi",
		analyze(IntentDirectAnswer, "greeting", nil),
		text("Hello!"),
		calls(call(OutputToolName, map[string]any{"should_handoff": "yes", "handoff_target": nil})),
	)
	found := false
	for _, e := range res.Errors {
		if e.Field == "should_handoff" && e.Type == ErrTypeValidation {
			found = true
		}
	}
	if !found || res.Response != "Hello!" {
		t.Fatalf("got %+v", res)
	}
}

// requestLog is what the model saw, without ids that differ between runs.
func requestLog(h *harness) string {
	var b strings.Builder
	for _, r := range h.llm.Requests() {
		m, _ := json.Marshal(r.Messages)
		t, _ := json.Marshal(r.Tools)
		b.WriteString(r.Node + " " + r.ToolChoice + " " + string(t) + " " + string(m) + "\n")
	}
	return b.String()
}

func TestOutputOffLeavesRequestsUnchanged(t *testing.T) {
	run := func(configure func(h *harness)) string {
		h := newHarness(t)
		configure(h)
		h.ask("what contexts exist?",
			analyze(IntentNeedsInfo, "contexts", nil),
			calls(call("get_available_contexts", map[string]any{})),
			text("done"),
			text("There are three contexts."),
		)
		return requestLog(h)
	}
	plain := run(func(*harness) {})
	off := run(func(h *harness) { withOutput(t, h, false) })
	if diff := cmp.Diff(plain, off); diff != "" {
		t.Fatalf("flag off changed the requests:\n%s", diff)
	}
}

func TestOutputSchemaErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":      `{`,
		"array at top":  `[]`,
		"no properties": `{"type":"object"}`,
		"not object":    `{"type":"string","properties":{}}`,
		"bad keyword":   `{"type":"object","properties":{"a":{"type":"nope"}}}`,
	} {
		_, err := ParseOutputSchema([]byte(doc), "s.json")
		if err == nil || !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "s.json") {
			t.Errorf("%s: got %v", name, err)
		}
	}
	s, err := ParseOutputSchema([]byte(`{"type":"object","properties":{"response_messages":{"type":"array"}}}`), "only.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.CustomFields()) != 0 {
		t.Fatal("response_messages counted as custom")
	}
}

// TestLoadOutputSchemaRefusesHugeFilesAndFIFOs: the file is checked before
// it is read, and the error names it.
func TestLoadOutputSchemaRefusesHugeFilesAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxOutputSchemaBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOutputSchema(big); err == nil || !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "big.json") {
		t.Errorf("a schema over the limit: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	if _, err := LoadOutputSchema(fifo); err == nil || !errors.Is(err, ErrBadInput) {
		t.Errorf("a FIFO: %v", err)
	}
}

// checkTypes knows JSON Schema's seven type names, as a string or in a
// list, and no other (jsonType is a switch; a typo there would let a bad
// schema through or refuse a good one).
func TestOutputCheckTypesNames(t *testing.T) {
	for _, name := range []string{"null", "boolean", "object", "array", "number", "string", "integer"} {
		doc := map[string]any{"properties": map[string]any{"a": map[string]any{"type": name}}}
		if err := checkTypes(doc, ""); err != nil {
			t.Errorf("type %q: %v", name, err)
		}
		if err := checkTypes(map[string]any{"type": []any{name, "null"}}, ""); err != nil {
			t.Errorf("type [%q null]: %v", name, err)
		}
	}
	for _, name := range []string{"", "int", "String", "float", "map"} {
		if err := checkTypes(map[string]any{"items": map[string]any{"type": name}}, ""); err == nil {
			t.Errorf("type %q accepted", name)
		}
		if err := checkTypes(map[string]any{"type": []any{"string", name}}, ""); err == nil {
			t.Errorf("type [string %q] accepted", name)
		}
	}
}
