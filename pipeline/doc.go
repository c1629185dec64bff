// Package pipeline is the agent: one turn of a conversation from the
// person's message to the checkpoint on disk (spec/pipeline.md).
//
// A turn runs the nodes analyzer, gatherer, confirmation, executor and
// responder through runGraph (graph.go). A node returns the next node, or
// an interrupt value (awaitConfirmation, suspendOnJob) that runGraph alone
// turns into a pause; routing between nodes is decided by the named
// functions of routing.go. Session (session.go) is the only writer of the
// checkpoint's interrupt, status and derived fields, and Pending is the one
// shape of an action waiting for a yes: bound params and their hash, the
// text shown. Agent.Ask runs a turn; Agent.Resume continues a session
// whatever stopped it. New builds an Agent from Deps and Settings and is
// the one wiring function of the CLI, the scenario runner and the
// benchmarks.
//
// Actions are pipeline/actions values; MCP tools join them through the
// mcpAction adapter (mcp.go), so nothing here branches on where an action
// comes from. A clear yes or no is read in Go (reply.go) and only the
// person's own words, --yes or the never policy approve: nothing the model
// or a file says does.
//
// The package must not import go-openai (llm does), talk HTTP itself
// (upgrade and mcpclient do), print (cmd renders a Result), or map
// outcomes to exit codes (exitcode does).
package pipeline
