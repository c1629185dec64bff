// Package testserver is an MCP server for the tests of mcpclient (and for
// trying the CLI by hand through testdata/mcpserver). It implements the
// server side of the job contract of spec/durability.md and of MCP tasks on
// its own, on the official Go SDK and without using mcpclient's code, so the
// tests check the client against an independent reading of the wire shapes.
// Only FromSDK refers to mcpclient, for its Transport interface.
//
// Tools: echo (plain), lookup (read-only), long_report (job-backed when the
// call asks for a job or a task, blocking otherwise), slow_lookup (read-only
// and job-backed, with ReadJobs), media and ask_client (with Extras) and the
// reserved job_status.
//
// It must not be used in production code, and must not sleep: jobs advance
// only when polled (or when a test calls Finish or Cancel).
package mcptest
