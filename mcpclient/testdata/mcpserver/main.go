// Command mcpserver runs the test MCP server of mcpclient on stdio, for
// trying upgrade-agent's mcp_servers by hand:
//
//	go build -o /tmp/mcpserver ./mcpclient/testdata/mcpserver
//
// and in the config:
//
//	mcp_servers:
//	  - name: reports
//	    command: /tmp/mcpserver
//	    args: [-jobs, -advertise, -state, /tmp/mcpserver-jobs.json]
//
// It lives under testdata so that go build ./... and go vet ./... skip it;
// the package tests run the same server by re-executing the test binary.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/upgrade-agent/upgrade-agent/mcpclient/mcptest"
)

func main() {
	var opts mcptest.Options
	flag.BoolVar(&opts.Jobs, "jobs", false, "run long_report as a job when the call asks for one, and list job_status")
	flag.BoolVar(&opts.Advertise, "advertise", false, "advertise the com.upgrade-agent/job contract at initialize")
	flag.IntVar(&opts.JobVersion, "job-version", 1, "advertised job contract version")
	flag.BoolVar(&opts.Tasks, "tasks", false, "offer MCP tasks (2025-11-25) for long_report")
	flag.StringVar(&opts.TaskSupport, "task-support", "optional", "long_report's execution.taskSupport: optional or required")
	flag.IntVar(&opts.Polls, "polls", 2, "status polls before a job ends")
	flag.StringVar(&opts.StateFile, "state", "", "keep jobs in this JSON file, so that another process can follow them")
	flag.Parse()

	srv, err := mcptest.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(2)
	}
	if err := srv.Serve(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}
