// Package mcpclient connects upgrade-agent to the MCP servers listed in the
// config (mcp_servers) and offers their tools to the pipeline.
//
// It is for:
//   - starting each server (a stdio command or a streamable-HTTP URL) and
//     speaking MCP's JSON-RPC with it through its own small client (the
//     official Go SDK costs every command about 1.2 ms of package init; it
//     is a test dependency only, see docs/mcp.md "The client"), and
//     reporting, per server, one that cannot start, initialize or list its
//     tools, while the others keep working;
//   - naming tools for the LLM ("mcp__<server>__<tool>") and saying which are
//     read-only (annotations.readOnlyHint): the gatherer may call those, every
//     other tool is an executor action behind confirmation;
//   - the job contract of spec/durability.md over _meta
//     ("com.upgrade-agent/job"): recording the advertisement per server,
//     sending an idempotency key derived from the executor's effect id, turning
//     a job-backed answer into a JobHandle that can be stored in a checkpoint,
//     polling it through the reserved tool "job_status" and fetching the final
//     result in another process;
//   - MCP tasks (protocol 2025-11-25: task-augmented tools/call, tasks/get,
//     tasks/result) behind the same JobHandle, for servers that declare them.
//
// It must not:
//   - import the pipeline, cmd, llm or checkpoint packages: the caller stores
//     Capability and JobHandle values in its checkpoint, this package only
//     makes them JSON-serialisable;
//   - decide about confirmation, waiting or suspending: it reports ReadOnly,
//     Destructive and Job, the pipeline and the job runner decide;
//   - sleep or poll on its own: JobStatus asks once, FetchJob never blocks on
//     an unfinished job;
//   - log or return the values of a server's Env or Headers (they often hold
//     tokens), nor pass this process's environment wholesale to a stdio server.
package mcpclient
