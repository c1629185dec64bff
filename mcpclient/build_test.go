package mcpclient_test

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// testdata/mcpserver is skipped by go build ./... and go vet ./...; this keeps
// it compiling when the test server changes.
func TestMCPServerCommandBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	out, err := exec.CommandContext(testCtx(t), goTool, "build", "-o", filepath.Join(t.TempDir(), "mcpserver"), "./testdata/mcpserver").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./testdata/mcpserver: %v\n%s", err, out)
	}
}
