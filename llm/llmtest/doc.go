// Package llmtest is a scripted OpenAI-compatible chat-completions server
// on 127.0.0.1, for tests, scenarios and `--llm script:FILE`. The agent
// reaches it through its normal go-openai client, so scripted runs exercise
// the same code as live runs.
//
// Each call is answered by the next queued Reply (text, tool calls, or a
// fault such as a 429, a reset connection or a truncated body), after the
// reply's checks of the request. A call the script cannot answer is recorded
// as a failure naming the node, the call number and the tools offered, and
// answered with HTTP 400 so the client stops at once; Verify reports those
// failures and the replies never used.
//
// It must not import package llm (llm imports it for script mode) and must
// never listen on anything but loopback.
package llmtest
