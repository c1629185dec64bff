package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/internal/retry"
)

// DefaultModel is used when neither Options.Model nor Request.Model is set.
const DefaultModel = "gpt-4o-mini"

// Retry bounds. An agent turn should fail within a couple of minutes rather
// than hang; a Retry-After beyond maxRetryAfter is clamped so a confused
// proxy cannot park the agent for an hour.
const (
	defaultTimeout      = 120 * time.Second
	defaultMaxRetries   = 3
	defaultMaxRetryTime = 2 * time.Minute
	maxRetryAfter       = 30 * time.Second
	backoffInitial      = 500 * time.Millisecond
	backoffMax          = 8 * time.Second
	maxMessageLen       = 500 // of a provider's error text kept in an Error
)

// Options configure the go-openai client.
type Options struct {
	// BaseURL of an OpenAI-compatible API, e.g. https://api.openai.com/v1,
	// http://localhost:11434/v1 (Ollama). "" = OpenAI. For Azure, the
	// resource endpoint (https://NAME.openai.azure.com).
	BaseURL string
	// APIKey is sent as a bearer token (api-key header for Azure). It is
	// never logged and never kept in an error or a cassette.
	APIKey string
	// Model when the request names none; "" = DefaultModel. For Azure, the
	// deployment name.
	Model string
	// AzureAPIVersion switches to Azure OpenAI (e.g. "2024-10-21").
	AzureAPIVersion string
	// Timeout bounds one attempt, streaming included; 0 = 120s.
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt;
	// 0 = 3, negative = no retry.
	MaxRetries int
	// MaxRetryTime bounds the whole call, waits between attempts included,
	// once a retry is being considered; 0 = 2m.
	MaxRetryTime time.Duration
	// HTTPClient to send requests with; nil = a private keep-alive client.
	// Its Transport is wrapped, never modified.
	HTTPClient *http.Client
	// Logger receives one debug record per attempt and a warning per retry;
	// nil = discard.
	Logger *slog.Logger
	// Sleep waits between attempts; nil = a timer. Tests inject one so
	// retries cost no wall time. It must return early when ctx ends.
	Sleep func(ctx context.Context, d time.Duration) error
	// ProviderName names the endpoint in errors and logs; "" = the base
	// URL's host.
	ProviderName string
}

// OpenAI is a Client for any OpenAI-compatible chat-completions endpoint.
type OpenAI struct {
	client   *openai.Client
	model    string
	provider string
	timing   retry.Settings
	secret   redact.Redactor
}

var _ Client = (*OpenAI)(nil)

// New builds a client. It sends nothing: a wrong key shows on the first call.
func New(opts Options) (*OpenAI, error) {
	provider := opts.ProviderName
	base := strings.TrimRight(opts.BaseURL, "/")
	if base != "" {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("LLM base URL %q: want http(s)://host[:port][/path]", opts.BaseURL)
		}
		if u.User != nil {
			return nil, fmt.Errorf("LLM base URL: credentials in the URL are not supported; use OPENAI_API_KEY")
		}
		if provider == "" {
			provider = u.Host
		}
	}
	var cfg openai.ClientConfig
	switch {
	case opts.AzureAPIVersion != "":
		if base == "" {
			return nil, fmt.Errorf("LLM: Azure needs the resource endpoint as base URL (OPENAI_BASE_URL)")
		}
		cfg = openai.DefaultAzureConfig(opts.APIKey, base)
		cfg.APIVersion = opts.AzureAPIVersion
	default:
		cfg = openai.DefaultConfig(opts.APIKey)
		if base != "" {
			cfg.BaseURL = base
		}
	}
	if provider == "" {
		provider = "api.openai.com"
	}

	hc := &http.Client{}
	if opts.HTTPClient != nil {
		*hc = *opts.HTTPClient // shallow copy: the caller's client keeps its transport
	}
	rt := hc.Transport
	if rt == nil {
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			rt = dt.Clone()
		} else {
			rt = http.DefaultTransport
		}
	}
	hc.Transport = &transport{base: rt}
	cfg.HTTPClient = hc

	c := &OpenAI{
		client:   openai.NewClientWithConfig(cfg),
		model:    opts.Model,
		provider: provider,
		timing: retry.Settings{Timeout: opts.Timeout, MaxRetries: opts.MaxRetries, MaxRetryTime: opts.MaxRetryTime,
			Sleep: opts.Sleep, Log: opts.Logger}.WithDefaults(retry.Settings{
			Timeout: defaultTimeout, MaxRetries: defaultMaxRetries, MaxRetryTime: defaultMaxRetryTime}),
		secret: redact.New(opts.APIKey),
	}
	if c.model == "" {
		c.model = DefaultModel
	}
	return c, nil
}

// Model is the model used when a request names none.
func (c *OpenAI) Model() string { return c.model }

// Provider names the endpoint, as errors do.
func (c *OpenAI) Provider() string { return c.provider }

// Chat sends one chat-completions request, retrying transient failures
// within the configured budget. On finish_reason "length" it returns the
// partial Response together with a KindLength error.
func (c *OpenAI) Chat(ctx context.Context, req Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.fail(KindCanceled, 0, err.Error(), err)
	}
	model := req.Model
	if model == "" {
		model = c.model
	}
	creq, err := buildRequest(req, model)
	if err != nil {
		return nil, c.fail(KindBadRequest, 0, err.Error(), err)
	}
	node := req.Node
	if node == "" {
		node = nodeFrom(ctx)
	}
	zeroTemp := req.Temperature != nil && *req.Temperature == 0

	var resp *Response
	var last *Error
	policy := c.timing.Policy(backoffInitial, backoffMax)
	r := retry.Do(ctx, policy, func(n int) (retry.Verdict, error) {
		a := &attempt{node: node, zeroTemp: zeroTemp}
		t0 := time.Now()
		got, res := c.once(ctx, a, creq, req)
		resp = got
		if res.err == nil {
			resp.Attempts = n
			c.timing.Log.DebugContext(ctx, "llm call", "provider", c.provider, "node", node, "model", model,
				"attempt", n, "messages", len(req.Messages), "tools", len(req.Tools), "stream", req.Stream,
				"duration", time.Since(t0), "prompt_tokens", resp.Usage.PromptTokens,
				"completion_tokens", resp.Usage.CompletionTokens, "cached_tokens", resp.Usage.CachedTokens,
				"usage_estimated", resp.UsageEstimated, "tool_calls", len(resp.ToolCalls))
			return retry.Verdict{}, nil
		}
		last = res.err
		last.Attempts = n
		c.timing.Log.DebugContext(ctx, "llm call failed", "provider", c.provider, "node", node, "model", model,
			"attempt", n, "duration", time.Since(t0), "kind", last.Kind, "status", last.Status)
		return retry.Verdict{Retry: res.retryable, After: res.retryAfter}, last
	}, func(n int, wait time.Duration, _ error) {
		c.timing.Log.WarnContext(ctx, "llm retry", "provider", c.provider, "node", node, "attempt", n,
			"kind", last.Kind, "status", last.Status, "wait", wait)
	})
	switch {
	case r.Err == nil:
		return resp, nil
	case r.Canceled != nil:
		return nil, &Error{Kind: KindCanceled, Provider: c.provider, Attempts: r.Attempts,
			Message: "canceled while waiting to retry after: " + last.Message, Err: errors.Join(r.Canceled, last)}
	case r.Budget:
		last.Message = strings.TrimSpace(last.Message + " (retry time budget of " + c.timing.MaxRetryTime.String() + " spent)")
	}
	return resp, last
}

// result is one attempt as the retry loop sees it.
type result struct {
	err        *Error
	retryable  bool
	retryAfter time.Duration
}

// once runs a single attempt.
func (c *OpenAI) once(ctx context.Context, a *attempt, creq openai.ChatCompletionRequest, req Request) (*Response, result) {
	actx, cancel := context.WithTimeout(ctx, c.timing.Timeout)
	defer cancel()
	actx = context.WithValue(actx, attemptKey, a)
	if req.Stream {
		return c.stream(ctx, actx, a, creq, req)
	}
	out, err := c.client.CreateChatCompletion(actx, creq)
	if err != nil {
		return nil, c.classify(ctx, actx, a, err)
	}
	if len(out.Choices) == 0 {
		return nil, result{err: c.fail(KindEmpty, a.status, "the provider answered without any choice", nil)}
	}
	ch := out.Choices[0]
	resp := &Response{
		Content:      ch.Message.Content,
		FinishReason: string(ch.FinishReason),
	}
	for _, tc := range ch.Message.ToolCalls {
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	resp.Usage = fromWireUsage(&out.Usage)
	c.fillUsage(resp, req)
	if ch.FinishReason == openai.FinishReasonLength {
		return resp, result{err: c.fail(KindLength, a.status, lengthHint(req), nil)}
	}
	return resp, result{}
}

func lengthHint(req Request) string {
	if req.MaxTokens > 0 {
		return fmt.Sprintf("the reply exceeded max_tokens=%d", req.MaxTokens)
	}
	return "the reply exceeded the model's output limit"
}

// fillUsage estimates usage when the provider sent none (some local servers
// do not), so per-turn token figures are never silently zero.
func (c *OpenAI) fillUsage(resp *Response, req Request) {
	if resp.Usage.PromptTokens != 0 || resp.Usage.CompletionTokens != 0 {
		return
	}
	resp.Usage = EstimateUsage(req, resp)
	resp.UsageEstimated = true
}

func fromWireUsage(u *openai.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// EstimateUsage approximates token counts as characters / 4 of what was sent
// (messages and tool definitions) and received.
func EstimateUsage(req Request, resp *Response) Usage {
	var in int
	for _, m := range req.Messages {
		in += len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			in += len(tc.Name) + len(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	var out int
	if resp != nil {
		out = len(resp.Content)
		for _, tc := range resp.ToolCalls {
			out += len(tc.Name) + len(tc.Arguments)
		}
	}
	return Usage{PromptTokens: ceilDiv(in, 4), CompletionTokens: ceilDiv(out, 4)}
}

func ceilDiv(n, d int) int { return (n + d - 1) / d }

// fail builds an *Error with the provider name and redaction applied.
func (c *OpenAI) fail(kind ErrorKind, status int, msg string, err error) *Error {
	msg = c.secret.String(strings.TrimSpace(msg))
	if len(msg) > maxMessageLen {
		msg = msg[:maxMessageLen] + "..."
	}
	return &Error{Kind: kind, Status: status, Provider: c.provider, Message: msg, Err: err}
}

// classify turns what go-openai returned into a kind, and decides whether
// another attempt may succeed.
func (c *OpenAI) classify(ctx, actx context.Context, a *attempt, err error) result {
	if ctx.Err() != nil {
		return result{err: c.fail(KindCanceled, 0, context.Cause(ctx).Error(), err)}
	}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode > 0:
		r := c.statusResult(apiErr.HTTPStatusCode, apiErr.Message, a.header, err)
		// OpenAI answers 429 for an exhausted quota too; waiting cannot fix that.
		if code, _ := apiErr.Code.(string); code == "insufficient_quota" {
			r.retryable = false
		}
		return r
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode > 0:
		return c.statusResult(reqErr.HTTPStatusCode, bodyMessage(reqErr.Body), a.header, err)
	case a.status >= 400:
		// The error body could not be read at all.
		return c.statusResult(a.status, err.Error(), a.header, err)
	}
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return result{err: c.fail(KindNetwork, 0, fmt.Sprintf("no complete answer within %s", c.timing.Timeout), err), retryable: true}
	}
	if a.status != 0 {
		// An answer started but its body could not be read to the end or
		// is not the JSON it should be.
		return result{err: c.fail(KindTruncated, a.status, "the body ended early or is not the expected JSON: "+err.Error(), err), retryable: true}
	}
	return result{err: c.fail(KindNetwork, 0, networkMessage(err), err), retryable: true}
}

// statusResult maps an HTTP error status to a kind. 500/502/503/504 and 429
// are worth another attempt; other statuses describe a request that will
// fail again the same way.
func (c *OpenAI) statusResult(status int, msg string, h http.Header, err error) result {
	r := result{}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		r.err = c.fail(KindAuth, status, msg, err)
	case status == http.StatusTooManyRequests:
		r.err = c.fail(KindRateLimit, status, msg, err)
		r.retryable = true
		r.retryAfter = retry.After(h, time.Now(), maxRetryAfter)
	case status == http.StatusRequestTimeout:
		r.err = c.fail(KindNetwork, status, msg, err)
		r.retryable = true
	case status >= 500:
		r.err = c.fail(KindServer, status, msg, err)
		switch status {
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			r.retryable = true
			r.retryAfter = retry.After(h, time.Now(), maxRetryAfter)
		}
	default:
		r.err = c.fail(KindBadRequest, status, msg, err)
	}
	return r
}

// bodyMessage makes a non-JSON error body (an HTML page from a proxy, plain
// text) readable in one line.
func bodyMessage(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "empty error body"
	}
	if strings.HasPrefix(s, "<") {
		return "the server answered with an HTML page instead of JSON"
	}
	s = strings.Join(strings.Fields(s), " ")
	return s
}

// networkMessage drops go-openai's and net/http's wrapping down to the cause.
func networkMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		if strings.Contains(op.Err.Error(), "connection refused") {
			return "connection refused (is the server running?)"
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		return "the connection was closed before an answer arrived"
	case errors.Is(err, syscall.ECONNRESET):
		return "the connection was reset before an answer arrived"
	}
	return err.Error()
}

// buildRequest converts our request to go-openai's.
func buildRequest(req Request, model string) (openai.ChatCompletionRequest, error) {
	creq := openai.ChatCompletionRequest{Model: model}
	if len(req.Messages) == 0 {
		return creq, errors.New("the request has no message")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return creq, fmt.Errorf("message %d: unknown role %q", i+1, m.Role)
		}
		if m.Role == RoleTool && m.ToolCallID == "" {
			return creq, fmt.Errorf("message %d: a tool message needs tool_call_id", i+1)
		}
		cm := openai.ChatCompletionMessage{
			Role:       string(m.Role),
			Content:    m.Content,
			Name:       m.Name,
			ToolCallID: m.ToolCallID,
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if args == "" {
				// go-openai omits an empty string, and providers reject an
				// assistant tool call without arguments.
				args = "{}"
			}
			cm.ToolCalls = append(cm.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: args},
			})
		}
		creq.Messages = append(creq.Messages, cm)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !json.Valid(params) {
			return creq, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
		}
		creq.Tools = append(creq.Tools, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name: t.Name, Description: t.Description, Strict: t.Strict, Parameters: params,
			},
		})
	}
	if len(req.Tools) > 0 {
		// Providers reject tool_choice and parallel_tool_calls without tools.
		switch req.ToolChoice.Mode {
		case "", ToolChoiceAuto:
			creq.ToolChoice = "auto"
		case ToolChoiceNone:
			creq.ToolChoice = "none"
		case ToolChoiceRequired:
			creq.ToolChoice = "required"
		case ToolChoiceFunction:
			if !hasTool(req.Tools, req.ToolChoice.Function) {
				return creq, fmt.Errorf("tool_choice forces %q, which is not among the tools offered", req.ToolChoice.Function)
			}
			creq.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: req.ToolChoice.Function}}
		default:
			return creq, fmt.Errorf("unknown tool_choice mode %q", req.ToolChoice.Mode)
		}
		if req.ParallelToolCalls != nil {
			creq.ParallelToolCalls = *req.ParallelToolCalls
		}
	} else if req.ToolChoice.Mode == ToolChoiceFunction || req.ToolChoice.Mode == ToolChoiceRequired {
		return creq, fmt.Errorf("tool_choice %q without any tool", req.ToolChoice.Mode)
	}
	if req.Temperature != nil {
		creq.Temperature = *req.Temperature // 0 is added on the wire by the transport
	}
	if req.MaxTokens > 0 {
		if reasoningModel(model) {
			creq.MaxCompletionTokens = req.MaxTokens
		} else {
			//lint:ignore SA1019 OpenAI-compatible servers (Ollama, vLLM, LiteLLM) take max_tokens; only OpenAI's reasoning models need the newer name.
			creq.MaxTokens = req.MaxTokens
		}
	}
	return creq, nil
}

func hasTool(tools []Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// reasoningModel reports the OpenAI models that refuse max_tokens and want
// max_completion_tokens (go-openai rejects the request locally otherwise).
// Other endpoints (Ollama, vLLM, older Azure API versions) know only
// max_tokens, so it stays the default.
func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}
