package scenario

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts of scenarios/")

// repoRoot walks up from the package folder to the folder holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test folder")
		}
		dir = parent
	}
}

// TestScenarios runs every file under scenarios/ and compares its
// transcript with golden/<name>.txt (go test ./... -update rewrites them).
func TestScenarios(t *testing.T) {
	root := repoRoot(t)
	scs, err := LoadAll([]string{filepath.Join(root, "scenarios")})
	if err != nil {
		t.Fatal(err)
	}
	opts := RunOptions{Update: *update, GoldenDir: filepath.Join(root, "golden")}
	for _, sc := range scs {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			rep, err := Run(context.Background(), sc, opts)
			if err != nil {
				t.Fatalf("%s: %v", sc.File, err)
			}
			if testing.Verbose() {
				t.Logf("transcript:\n%s", rep.Transcript)
			}
			if !rep.Passed() {
				t.Fatalf("%s\n%s", rep.Summary(), rep.Details())
			}
		})
	}
}
