// Package pipeline is the agent: one turn of a conversation from the
// person's message to the checkpoint on disk (spec/pipeline.md).
//
// A turn runs the nodes analyzer, gatherer, confirmation, executor and
// responder through runGraph (graph.go). A node returns the next node, or
// an interrupt value (awaitConfirmation, suspendOnJob); Agent.pause is the
// one place an interrupt becomes a pause. runGraph hands it what a node
// returned; showing a pending confirmation again (reply.go) and crash
// recovery re-attaching to a job (executor.go) build the same values and
// hand them to it too. The rules of pipeline.md for choosing the next node
// are the named functions of routing.go.
//
// The turn works on typed values, held by the Session (session.go): the
// draft action, bound and hashed once per change, and the pending
// confirmation (Pending: the bound action and what the person was shown).
// Session is the only writer of the checkpoint's interrupt, status and
// next node, and writes the state's derived fields (action_needed,
// action_params, missing_params, needs_confirmation,
// confirmation_message) from those values; its fields are unexported.
//
// Agent.Ask runs a turn for a message; a clear yes or no to a pending
// confirmation is a Decision (Agent.Decide) that enters the graph at the
// executor or the responder. Agent.Resume continues a session whatever
// stopped it. New builds an Agent from Deps, Settings and options (MCP
// servers, the view's callbacks); nothing changes it afterwards. New is the
// one wiring function of the CLI, the scenario runner and the benchmarks.
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
