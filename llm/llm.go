package llm

import (
	"context"
	"encoding/json"
)

// Role of a chat message.
type Role string

// Chat roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is one function call the model asked for. Arguments are kept as
// the raw text the model produced, even when it is not valid JSON: the caller
// decides how to answer a malformed call.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one chat message.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"` // for RoleTool
	Name       string     `json:"name,omitempty"`
}

// Tool is a function the model may call. Parameters is a JSON Schema object.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict,omitempty"`
}

// ToolChoiceMode says how the model must use the tools.
type ToolChoiceMode string

// Tool choice modes. ToolChoiceFunction forces the function named in
// ToolChoice.Function.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required"
	ToolChoiceFunction ToolChoiceMode = "function"
)

// ToolChoice is the tool_choice of a request. The zero value means auto (or
// nothing sent when there are no tools).
type ToolChoice struct {
	Mode     ToolChoiceMode
	Function string
}

// Force returns a tool choice that forces one function.
func Force(name string) ToolChoice { return ToolChoice{Mode: ToolChoiceFunction, Function: name} }

// Request is one chat-completion call.
type Request struct {
	Model             string
	Messages          []Message
	Tools             []Tool
	ToolChoice        ToolChoice
	ParallelToolCalls *bool    // nil: not sent
	Temperature       *float32 // nil: not sent; 0 is sent as 0
	MaxTokens         int      // 0: not sent
	Stream            bool
	// OnText, when streaming, receives text deltas as they arrive.
	OnText func(delta string)
	// Node names the pipeline node making the call (for logs, cassettes and
	// the scripted server's error messages). Not sent to the provider.
	Node string
}

// Usage counts the tokens of one call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.PromptTokens += u2.PromptTokens
	u.CompletionTokens += u2.CompletionTokens
	u.CachedTokens += u2.CachedTokens
}

// Response is the model's answer.
type Response struct {
	Content      string
	ToolCalls    []ToolCall
	FinishReason string
	Usage        Usage
	// UsageEstimated is true when the provider sent no usage and Usage was
	// estimated as characters / 4.
	UsageEstimated bool
	// Attempts is how many HTTP requests this answer took (1 without
	// retries; 1 for a replayed answer).
	Attempts int
}

// Client is a chat-completions client. Implementations: the go-openai client
// (New), the cassette player (replay) and recorder (record).
type Client interface {
	Chat(ctx context.Context, req Request) (*Response, error)
}
