// Package llm is the agent's only door to a language model: one Chat call
// per request, over any OpenAI-compatible chat-completions API (OpenAI,
// Azure OpenAI, Ollama, vLLM, LiteLLM...), plus the scripted, recording and
// replaying variants chosen with --llm (FromSpec).
//
// It owns the wire: message and tool conversion, tool_choice, streaming
// reassembly, bounded retries of transient failures, typed errors (*Error
// with an ErrorKind the CLI maps to an exit code) and token usage. Tool
// schemas come from actions.SchemaFor; this package sends them as given. It
// is the only package that imports go-openai.
//
// It must not know about pipeline nodes beyond their name (a header and a
// cassette field), must not decide what a tool call means, and must never
// write the API key anywhere: not in errors, logs, cassettes or files.
package llm
