package mcpclient_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
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
	// A cold build compiles the MCP SDK: on two busy cores that takes longer than
	// testCtx's 30 seconds, so the bound here is the build's own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", filepath.Join(t.TempDir(), "mcpserver"), "./testdata/mcpserver").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./testdata/mcpserver: %v\n%s", err, out)
	}
}
