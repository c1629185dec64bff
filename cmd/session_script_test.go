package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

func init() {
	// sessionfile LIST.json DEST copies the checkpoint of the first session
	// of a `sessions list -o json` output to DEST and sets $SESSION.
	scriptCmds["sessionfile"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: sessionfile LIST.json DEST")
		}
		var rows []SessionRow
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &rows))
		if len(rows) == 0 {
			ts.Fatalf("no sessions in %s", args[0])
		}
		id := rows[0].ID
		src := filepath.Join(ts.Getenv("UPGRADE_AGENT_HOME"), "sessions", id, "checkpoint.json")
		b, err := os.ReadFile(src)
		ts.Check(err)
		ts.Check(os.WriteFile(ts.MkAbs(args[1]), b, 0o600))
		ts.Setenv("SESSION", id)
	}
	// locksession ID holds the session's lock until the script ends, as a
	// second process would.
	scriptCmds["locksession"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: locksession ID")
		}
		store, err := checkpoint.OpenFileStore(ts.Getenv("UPGRADE_AGENT_HOME"))
		ts.Check(err)
		unlock, err := store.Lock(args[0])
		ts.Check(err)
		ts.Defer(unlock)
	}
}

// mcpTestServerMain is the test MCP server on stdio; its options come as
// JSON in MCP_TEST_SERVER_OPTS.
func mcpTestServerMain() {
	var opts mcptest.Options
	if err := json.Unmarshal([]byte(os.Getenv("MCP_TEST_SERVER_OPTS")), &opts); err != nil {
		fmt.Fprintf(os.Stderr, "mcp-test-server: MCP_TEST_SERVER_OPTS: %v\n", err)
		os.Exit(2)
	}
	srv, err := mcptest.New(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcp-test-server: %v\n", err)
		os.Exit(2)
	}
	if err := srv.Serve(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintf(os.Stderr, "mcp-test-server: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}
