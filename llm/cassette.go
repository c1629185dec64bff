package llm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/upgrade-agent/upgrade-agent/internal/atomicfile"
	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
)

// cassetteVersion is the format version written in every cassette.
const cassetteVersion = 1

// cassette is the file written by record: and read by replay:.
type cassette struct {
	Version      int           `json:"version"`
	Interactions []interaction `json:"interactions"`
}

// interaction is one recorded call. The request is kept as a summary (tool
// schemas as a hash) for people reading the file and for the nearest-miss
// report; the fingerprint decides the match.
type interaction struct {
	Fingerprint string           `json:"fingerprint"`
	Node        string           `json:"node,omitempty"`
	Model       string           `json:"model,omitempty"`
	Request     requestSummary   `json:"request"`
	Response    recordedResponse `json:"response"`
}

type requestSummary struct {
	Messages    []Message `json:"messages"`
	Tools       []string  `json:"tools,omitempty"`
	ToolsSHA256 string    `json:"tools_sha256,omitempty"`
	ToolChoice  string    `json:"tool_choice,omitempty"`
}

type recordedResponse struct {
	Content      string     `json:"content,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	Usage        Usage      `json:"usage"`
}

// canonicalTool is a tool as it enters the fingerprint: parameters
// re-encoded with sorted keys, so formatting never changes the match.
type canonicalTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// Fingerprint identifies a request by what the model sees, apart from the
// model name and sampling settings: the messages, the tools and the tool
// choice. It is "sha256:" and the hex digest of their canonical JSON.
func Fingerprint(req Request) string {
	canon := struct {
		Messages   []Message       `json:"messages"`
		Tools      []canonicalTool `json:"tools,omitempty"`
		ToolChoice string          `json:"tool_choice,omitempty"`
	}{Messages: req.Messages, Tools: canonicalTools(req.Tools), ToolChoice: toolChoiceName(req)}
	b, _ := json.Marshal(canon) // plain strings and valid raw JSON: cannot fail
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func canonicalTools(tools []Tool) []canonicalTool {
	out := make([]canonicalTool, 0, len(tools))
	for _, t := range tools {
		ct := canonicalTool{Name: t.Name, Description: t.Description, Strict: t.Strict}
		var v any
		if len(t.Parameters) > 0 && json.Unmarshal(t.Parameters, &v) == nil {
			ct.Parameters, _ = json.Marshal(v)
		} else if len(t.Parameters) > 0 {
			ct.Parameters, _ = json.Marshal(string(t.Parameters))
		}
		out = append(out, ct)
	}
	return out
}

// toolChoiceName is the tool choice as one word, the way the wire sees it.
func toolChoiceName(req Request) string {
	if len(req.Tools) == 0 && req.ToolChoice.Mode == "" {
		return ""
	}
	switch req.ToolChoice.Mode {
	case "", ToolChoiceAuto:
		return "auto"
	case ToolChoiceFunction:
		return "function:" + req.ToolChoice.Function
	}
	return string(req.ToolChoice.Mode)
}

func summarize(req Request) requestSummary {
	s := requestSummary{Messages: req.Messages, ToolChoice: toolChoiceName(req)}
	if len(req.Tools) > 0 {
		for _, t := range req.Tools {
			s.Tools = append(s.Tools, t.Name)
		}
		b, _ := json.Marshal(canonicalTools(req.Tools))
		sum := sha256.Sum256(b)
		s.ToolsSHA256 = hex.EncodeToString(sum[:])
	}
	return s
}

// recorder runs calls on a live client and keeps what it answered.
type recorder struct {
	inner  Client
	model  string // the inner client's default, recorded when a request names none
	path   string
	secret redact.Redactor

	mu     sync.Mutex
	items  []interaction
	closed bool
}

func (r *recorder) Chat(ctx context.Context, req Request) (*Response, error) {
	resp, err := r.inner.Chat(ctx, req)
	if err != nil || resp == nil {
		return resp, err
	}
	node := req.Node
	if node == "" {
		node = nodeFrom(ctx)
	}
	model := req.Model
	if model == "" {
		model = r.model
	}
	it := interaction{
		Fingerprint: Fingerprint(req), Node: node, Model: model, Request: summarize(req),
		Response: recordedResponse{Content: resp.Content, ToolCalls: resp.ToolCalls,
			FinishReason: resp.FinishReason, Usage: resp.Usage},
	}
	r.mu.Lock()
	r.items = append(r.items, it)
	r.mu.Unlock()
	return resp, nil
}

// Close writes the cassette (temp file, fsync, rename): a crash never leaves
// half a cassette. The API key is scrubbed from the bytes as a last line of
// defence, in case a message quoted it.
func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	data, err := json.MarshalIndent(cassette{Version: cassetteVersion, Interactions: r.items}, "", "  ")
	if err != nil {
		return fmt.Errorf("cassette %s: %w", r.path, err)
	}
	data = r.secret.Bytes(data)
	data = append(data, '\n')
	if err := atomicfile.WriteFile(r.path, data, 0o600); err != nil {
		return fmt.Errorf("writing cassette %s: %w", r.path, err)
	}
	return nil
}

// player answers from a cassette.
type player struct {
	path     string
	provider string
	items    []interaction
	byFP     map[string][]int

	mu   sync.Mutex
	used map[string]int
}

// MaxCassetteBytes bounds the cassette replay: reads. A recorded request
// keeps its messages, so a cassette grows with prompts and calls; 32 MiB
// is far beyond any scenario's. JSON has no aliases to expand and the
// decoder needs a small multiple of the file's size, so the byte limit
// bounds both time and memory (and loading takes no context).
const MaxCassetteBytes = 32 << 20

// loadCassette reads and checks a cassette file: a regular file (a FIFO is
// refused without blocking) of at most MaxCassetteBytes.
func loadCassette(path string) (*player, error) {
	data, err := safefile.ReadFile(path, MaxCassetteBytes)
	if err != nil {
		return nil, fmt.Errorf("cassette: %w", err)
	}
	c, err := parseCassette(data)
	if err != nil {
		var le *lineError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("cassette %s:%d: %w", path, le.line, le.err)
		}
		return nil, fmt.Errorf("cassette %s: %w", path, err)
	}
	p := &player{path: path, provider: "replay:" + path, items: c.Interactions,
		byFP: map[string][]int{}, used: map[string]int{}}
	for i, it := range c.Interactions {
		p.byFP[it.Fingerprint] = append(p.byFP[it.Fingerprint], i)
	}
	return p, nil
}

// parseCassette decodes strictly: an unknown field is a typo or a file from
// a newer version, and either way replaying it would mislead.
func parseCassette(data []byte) (*cassette, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c cassette
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &lineError{lineOf(data, se.Offset), err}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &lineError{lineOf(data, te.Offset), fmt.Errorf("field %s: %w", te.Field, err)}
		}
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("extra data after the cassette object")
	}
	if c.Version != cassetteVersion {
		return nil, fmt.Errorf("version %d is not supported (want %d)", c.Version, cassetteVersion)
	}
	for i, it := range c.Interactions {
		if !strings.HasPrefix(it.Fingerprint, "sha256:") || len(it.Fingerprint) != len("sha256:")+64 {
			return nil, fmt.Errorf("interaction %d: fingerprint %q is not sha256:<64 hex digits>", i+1, it.Fingerprint)
		}
	}
	return &c, nil
}

// lineError places a decoding error on a line of the file.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

func lineOf(data []byte, offset int64) int {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	return 1 + bytes.Count(data[:offset], []byte("\n"))
}

// Chat serves the recorded answer for the request's fingerprint. A request
// recorded several times gets the recordings in order, then the last one
// again.
func (p *player) Chat(ctx context.Context, req Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Kind: KindCanceled, Provider: p.provider, Message: err.Error(), Err: err}
	}
	fp := Fingerprint(req)
	p.mu.Lock()
	idxs := p.byFP[fp]
	if len(idxs) == 0 {
		p.mu.Unlock()
		return nil, &Error{Kind: KindBadRequest, Provider: p.provider, Err: ErrReplayMiss,
			Message: p.missMessage(req, fp, nodeFrom(ctx))}
	}
	n := p.used[fp]
	p.used[fp] = n + 1
	it := p.items[idxs[min(n, len(idxs)-1)]]
	p.mu.Unlock()

	resp := &Response{
		Content: it.Response.Content, ToolCalls: append([]ToolCall(nil), it.Response.ToolCalls...),
		FinishReason: it.Response.FinishReason, Usage: it.Response.Usage, Attempts: 1,
	}
	if req.Stream && req.OnText != nil && resp.Content != "" {
		req.OnText(resp.Content)
	}
	return resp, nil
}

func (p *player) Close() error { return nil }

// missMessage explains a miss by the recorded request closest to this one:
// the most leading lines in common, then the longest common prefix of the
// first differing line.
func (p *player) missMessage(req Request, fp, ctxNode string) string {
	node := req.Node
	if node == "" {
		node = ctxNode
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no recorded answer for this request (%s", fp[:len("sha256:")+12])
	if node != "" {
		fmt.Fprintf(&b, ", node %s", node)
	}
	b.WriteString(")")
	if len(p.items) == 0 {
		b.WriteString("; the cassette is empty")
		return b.String()
	}
	got := summaryLines(summarize(req))
	best, bestLines, bestPrefix := -1, -1, -1
	var bestRec []string
	for i, it := range p.items {
		rec := summaryLines(it.Request)
		lines, prefix := similarity(got, rec)
		if lines > bestLines || (lines == bestLines && prefix > bestPrefix) {
			best, bestLines, bestPrefix, bestRec = i, lines, prefix, rec
		}
	}
	it := p.items[best]
	fmt.Fprintf(&b, "; nearest recorded request: interaction %d", best+1)
	if it.Node != "" {
		fmt.Fprintf(&b, " (node %s)", it.Node)
	}
	k := bestLines
	switch {
	case k < len(got) && k < len(bestRec):
		fmt.Fprintf(&b, ", first difference:\n  recorded: %s\n  got:      %s",
			excerpt(bestRec[k], bestPrefix), excerpt(got[k], bestPrefix))
	case k < len(got):
		fmt.Fprintf(&b, ", which ends before:\n  got:      %s", excerpt(got[k], 0))
	case k < len(bestRec):
		fmt.Fprintf(&b, ", which goes on with:\n  recorded: %s", excerpt(bestRec[k], 0))
	}
	return b.String()
}

// summaryLines renders a request as comparable lines, one per part.
func summaryLines(s requestSummary) []string {
	lines := []string{
		"tool_choice: " + s.ToolChoice,
		fmt.Sprintf("tools: %s (sha256 %.12s)", strings.Join(s.Tools, ", "), s.ToolsSHA256),
	}
	for i, m := range s.Messages {
		content, _ := json.Marshal(m.Content)
		line := fmt.Sprintf("message %d %s: %s", i+1, m.Role, content)
		for _, tc := range m.ToolCalls {
			line += fmt.Sprintf(" call %s %s(%s)", tc.ID, tc.Name, tc.Arguments)
		}
		if m.ToolCallID != "" {
			line += " for " + m.ToolCallID
		}
		lines = append(lines, line)
	}
	return lines
}

func similarity(a, b []string) (lines, prefix int) {
	for lines < len(a) && lines < len(b) && a[lines] == b[lines] {
		lines++
	}
	if lines < len(a) && lines < len(b) {
		x, y := a[lines], b[lines]
		for prefix < len(x) && prefix < len(y) && x[prefix] == y[prefix] {
			prefix++
		}
	}
	return lines, prefix
}

// excerpt shows a long line around position at.
func excerpt(line string, at int) string {
	const before, after = 40, 80
	start := max(0, at-before)
	end := min(len(line), at+after)
	if at == 0 {
		end = min(len(line), before+after)
	}
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end++
	}
	out := line[start:end]
	if start > 0 {
		out = "..." + out
	}
	if end < len(line) {
		out += "..."
	}
	return out
}
