package quality

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestArrowsPointDown holds the import arrows issue 26 turned around: the
// LLM client carries no scripted test server, checkpoint and its suite
// import nothing from the pipeline, the actions do not import checkpoint
// for the params hash, and the scenario runner names no concrete action
// (setup objects are made with actions.BindCreate). Each case lists what
// came back, so the message says which arrow to remove.
func TestArrowsPointDown(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	deps := func(t *testing.T, pattern string) []string {
		t.Helper()
		cmd := exec.CommandContext(ctx, goTool, "list", "-deps", pattern)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pattern, err)
		}
		return strings.Fields(string(out))
	}
	const mod = "github.com/upgrade-agent/upgrade-agent/"
	for _, tc := range []struct {
		pattern string
		banned  func(pkg string) bool
		why     string
	}{
		{"./llm", func(p string) bool { return p == mod+"llm/llmtest" },
			"the client carries the scripted server (script:FILE belongs to llm/llmspec)"},
		{"./checkpoint/...", func(p string) bool { return strings.HasPrefix(p, mod+"pipeline") },
			"checkpoint or its suite knows the pipeline (job records' tests belong to pipeline/jobs/jobstest)"},
		{"./pipeline/actions", func(p string) bool { return p == mod+"checkpoint" },
			"the actions import checkpoint (the params hash is internal/canonjson's)"},
	} {
		var bad []string
		for _, p := range deps(t, tc.pattern) {
			if tc.banned(p) {
				bad = append(bad, p)
			}
		}
		if len(bad) > 0 {
			t.Errorf("go list -deps %s has %s: %s", tc.pattern, strings.Join(bad, ", "), tc.why)
		}
	}

	named := regexp.MustCompile(`\bactions\.Create[A-Za-z]*`)
	files, err := filepath.Glob(filepath.Join("..", "pipeline", "scenario", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in pipeline/scenario: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := named.FindString(line); m != "" {
				t.Errorf("%s:%d names %s: the scenario runner creates setup objects with actions.BindCreate", filepath.ToSlash(f), i+1, m)
			}
		}
	}
}
