package llmspec_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/hostile"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmspec"
)

const plantedKey = "sk-PLANTED-secret-0123456789abcdef"

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func userRequest(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "You are a test."}, {Role: llm.RoleUser, Content: text}}}
}

func TestFromSpecScript(t *testing.T) {
	path := writeFile(t, "s.yaml", `
- tools_offered: [find_experiment]
  call:
    find_experiment: {name: Math Hints}
- reply: Found it.
- reply: never asked for
`)
	c, closer, err := llmspec.FromSpec(" script:"+path, llm.Options{APIKey: plantedKey})
	if err != nil {
		t.Fatal(err)
	}
	req := userRequest("find Math Hints")
	req.Tools = []llm.Tool{{Name: "find_experiment", Description: "find by name", Parameters: []byte(`{"type":"object","properties":{"name":{"type":"string"}}}`)}}
	resp, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != `{"name":"Math Hints"}` {
		t.Errorf("tool calls %+v", resp.ToolCalls)
	}
	if resp, err = c.Chat(context.Background(), userRequest("and?")); err != nil || resp.Content != "Found it." {
		t.Errorf("%v %v", resp, err)
	}
	err = closer.Close()
	if err == nil || !strings.Contains(err.Error(), "1 scripted reply was never used") || !strings.Contains(err.Error(), path+":6") {
		t.Errorf("Close = %v", err)
	}
}

func TestFromSpecScriptErrors(t *testing.T) {
	path := writeFile(t, "bad.yaml", "- reply: ok\n- tool_choise: auto\n  reply: x\n")
	if _, _, err := llmspec.FromSpec("script:"+path, llm.Options{}); err == nil || !strings.Contains(err.Error(), path+`:2: unknown key "tool_choise"`) {
		t.Errorf("error = %v", err)
	}
	if _, _, err := llmspec.FromSpec("script:"+filepath.Join(t.TempDir(), "missing.yaml"), llm.Options{}); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("error = %v", err)
	}
	if _, _, err := llmspec.FromSpec("script:", llm.Options{}); !errors.Is(err, llm.ErrInvalidSpec) || !strings.Contains(err.Error(), "want script:FILE") {
		t.Errorf("script: with no file = %v, want ErrInvalidSpec naming script:FILE", err)
	}
}

// The other forms are llm's, with its errors unchanged.
func TestFromSpecOtherFormsAreTheClients(t *testing.T) {
	for spec, want := range map[string]error{"": llm.ErrNotConfigured, "openai": llm.ErrNotConfigured, "bogus": llm.ErrInvalidSpec, "replay:": llm.ErrInvalidSpec} {
		if _, _, err := llmspec.FromSpec(spec, llm.Options{}); !errors.Is(err, want) {
			t.Errorf("FromSpec(%q) = %v, want %v", spec, err, want)
		}
	}
	_, _, err := llmspec.FromSpec("bogus", llm.Options{})
	if err == nil || !strings.Contains(err.Error(), "want openai, script:FILE, record:FILE or replay:FILE") {
		t.Errorf("unknown kind: %v, want the list of the four forms", err)
	}
}

// A script that is an alias bomb, a named pipe nobody writes to, or a
// folder is refused at once, naming the file (issue 15.7).
func TestHostileScripts(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	bomb := writeFile(t, "bomb.yaml", "- call: {analyze_user_request: "+hostile.AliasBomb(6, 9)+"}\n")
	hostile.FIFO(t, fifo)
	for _, tt := range []struct{ spec, want string }{
		{"script:" + bomb, bomb + ":1: alias *l5 expands the document past 262144 values"},
		{"script:" + fifo, "is a named pipe (FIFO), not a regular file"},
		{"script:" + dir, "is a folder, not a regular file"},
	} {
		err := hostile.Within(t, 10*time.Second, func() error {
			_, _, err := llmspec.FromSpec(tt.spec, llm.Options{})
			return err
		})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("FromSpec(%s) = %v, want %q", tt.spec, err, tt.want)
		}
	}
}
