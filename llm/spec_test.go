package llm_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/upgrade-agent/upgrade-agent/internal/hostile"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
)

func TestFromSpecNotConfigured(t *testing.T) {
	for _, spec := range []string{"", "openai", "record:x.json"} {
		_, _, err := llm.FromSpec(spec, llm.Options{})
		if !errors.Is(err, llm.ErrNotConfigured) {
			t.Errorf("FromSpec(%q) error = %v, want ErrNotConfigured", spec, err)
		}
	}
	want := "no LLM configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint), or run with --llm script:FILE or --llm replay:FILE"
	if llm.ErrNotConfigured.Error() != want {
		t.Errorf("message = %q", llm.ErrNotConfigured)
	}
}

// script:FILE is not the client's: llmspec opens it (llm carries no test
// server), so here it is an invalid spec too.
func TestFromSpecInvalid(t *testing.T) {
	for _, spec := range []string{"bogus", "script:", "script:x.yaml", "replay:", "openai:x", "record:"} {
		_, _, err := llm.FromSpec(spec, llm.Options{APIKey: "k"})
		if !errors.Is(err, llm.ErrInvalidSpec) {
			t.Errorf("FromSpec(%q) error = %v, want ErrInvalidSpec", spec, err)
		}
	}
}

// A local server (Ollama, vLLM) needs a base URL but no key.
func TestFromSpecBaseURLWithoutKey(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.TextReply("local"))
	c, closer, err := llm.FromSpec("openai", llm.Options{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	resp, err := c.Chat(context.Background(), userRequest("x"))
	if err != nil || resp.Content != "local" {
		t.Fatalf("%v %v", resp, err)
	}
	if strings.Contains(string(srv.Requests()[0].Body), "Bearer") {
		t.Error("unexpected auth")
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCassetteRoundTrip(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.CallReply(llmtest.NewCall("find_experiment", map[string]string{"name": "Math Hints"})),
		llmtest.TextReply("Math Hints is enrolling."),
	)
	cassette := filepath.Join(t.TempDir(), "calls.json")
	rec, closer, err := llm.FromSpec("record:"+cassette, llm.Options{BaseURL: srv.URL(), APIKey: plantedKey, Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	first := userRequest("Is Math Hints running?")
	first.Tools = twoTools
	ctx := llm.WithNode(context.Background(), "gatherer")
	r1, err := rec.Chat(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	second := first
	second.Messages = append(append([]llm.Message(nil), first.Messages...),
		llm.Message{Role: llm.RoleAssistant, ToolCalls: r1.ToolCalls},
		llm.Message{Role: llm.RoleTool, ToolCallID: r1.ToolCalls[0].ID, Content: `{"status":"enrolling"}`})
	second.Stream = true
	r2, err := rec.Chat(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	srv.Close() // replay must not need it

	data, err := os.ReadFile(cassette)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{plantedKey, "Bearer", "Authorization", "PLANTED"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("cassette contains %q", secret)
		}
	}
	if fi, err := os.Stat(cassette); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cassette mode %v, %v", fi.Mode(), err)
	}

	play, pcloser, err := llm.FromSpec("replay:"+cassette, llm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pcloser.Close()
	p1, err := play.Chat(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	var shown string
	second.OnText = func(d string) { shown += d }
	p2, err := play.Chat(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	ignore := cmpopts.IgnoreFields(llm.Response{}, "Attempts", "UsageEstimated")
	if diff := cmp.Diff(r1, p1, ignore); diff != "" {
		t.Errorf("replayed first answer (-recorded +replayed):\n%s", diff)
	}
	if diff := cmp.Diff(r2, p2, ignore); diff != "" {
		t.Errorf("replayed second answer (-recorded +replayed):\n%s", diff)
	}
	if shown != "Math Hints is enrolling." {
		t.Errorf("OnText got %q", shown)
	}

	// A changed request misses, and the error points at the nearest one.
	changed := first
	changed.Messages = []llm.Message{first.Messages[0], {Role: llm.RoleUser, Content: "Is Math Hints stopped?"}}
	_, err = play.Chat(llm.WithNode(context.Background(), "gatherer"), changed)
	if !errors.Is(err, llm.ErrReplayMiss) || llm.KindOf(err) != llm.KindBadRequest {
		t.Fatalf("error = %v", err)
	}
	for _, want := range []string{"replay:" + cassette, "node gatherer", "nearest recorded request: interaction 1 (node gatherer)",
		`recorded: message 2 user: "Is Math Hints running?"`, `got:      message 2 user: "Is Math Hints stopped?"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("miss error lacks %q:\n%v", want, err)
		}
	}
}

func TestFingerprintIgnoresModelAndFormatting(t *testing.T) {
	a := userRequest("x")
	a.Tools = twoTools
	b := a
	b.Model = "another-model"
	temp := float32(0.3)
	b.Temperature = &temp
	b.Tools = append([]llm.Tool(nil), twoTools...)
	b.Tools[0].Parameters = []byte("{ \"type\": \"object\",\n \"required\": [\"name\"], \"properties\": {\"name\": {\"type\": \"string\"}} }")
	if llm.Fingerprint(a) != llm.Fingerprint(b) {
		t.Error("model, temperature or JSON formatting changed the fingerprint")
	}
	c := a
	c.ToolChoice = llm.Force("find_experiment")
	if llm.Fingerprint(a) == llm.Fingerprint(c) {
		t.Error("tool choice did not change the fingerprint")
	}
}

func TestReplayBadCassette(t *testing.T) {
	tests := []struct{ content, want string }{
		{"{\n  \"version\": 1,\n  \"interactions\": [\n    {\"fingerprint\": oops}\n  ]\n}", ":4: invalid character"},
		{`{"version": 2, "interactions": []}`, "version 2 is not supported"},
		{`{"version": 1, "interactions": [], "extra": 1}`, `unknown field "extra"`},
		{`{"version": 1, "interactions": [{"fingerprint": "md5:x"}]}`, "interaction 1: fingerprint"},
	}
	for _, tt := range tests {
		path := writeFile(t, "c.json", tt.content)
		_, _, err := llm.FromSpec("replay:"+path, llm.Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("error = %v, want %q", err, tt.want)
		}
	}
}

// TestHostileInputFiles: a cassette that is too large, a folder, or a named
// pipe nobody writes to is refused at once, naming the file (issue 15.7;
// scripts are llmspec's, tested there).
func TestHostileInputFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: past the limit without writing 32 MiB.
	if err := f.Truncate(llm.MaxCassetteBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tests := []struct{ spec, want string }{
		{"replay:" + fifo, "is a named pipe (FIFO), not a regular file"},
		{"replay:" + big, "is 33554433 bytes, more than the 32 MiB allowed"},
		{"replay:" + dir, "is a folder, not a regular file"},
	}
	hostile.FIFO(t, fifo)
	for _, tt := range tests {
		err := hostile.Within(t, 10*time.Second, func() error {
			_, _, err := llm.FromSpec(tt.spec, llm.Options{})
			return err
		})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("FromSpec(%s) = %v, want %q", tt.spec, err, tt.want)
		}
	}
}
