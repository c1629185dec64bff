package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/safeyaml"
)

// Reply is one scripted answer of the model, with optional checks of the
// request it answers. In YAML (a scenario's `llm:` item or a script file):
//
//   - tools_offered: [analyze_user_request]   # exact set of tool names offered
//     tool_choice: analyze_user_request         # auto | required | none | a forced function
//     messages_contain: [Math Hints]            # substrings of the concatenated messages
//     call:                                     # several keys = parallel calls, in this order
//     analyze_user_request: {intent_type: needs_info, confidence: 0.9}
//   - calls:                                    # a list, for the same tool twice
//   - get_experiment_details: {experiment_id: a}
//   - get_experiment_details: {experiment_id: b}
//   - raw_call: {name: set_action_params, arguments: '{"action_params": '}
//   - reply: Done.
//   - fault: {status: 429, retry_after: "1"}    # or reset | empty_choices | length | truncated
type Reply struct {
	// Text is the assistant's message content (`reply`).
	Text string
	// Calls are the tool calls of the answer, in order (`call`, `calls`,
	// `raw_call`, in the order the keys are written).
	Calls []Call
	// Fault replaces or damages the answer.
	Fault *Fault

	// ToolsOffered, when non-nil, must equal the set of tool names offered.
	ToolsOffered []string
	// ToolChoice, when set, must equal the request's tool choice: "auto",
	// "required", "none" or the name of the forced function. A request
	// without tool_choice counts as "auto" with tools and "none" without.
	ToolChoice string
	// MessagesContain are substrings that must all occur in the request's
	// messages (contents and tool-call arguments, concatenated).
	MessagesContain []string

	// Source says where the reply was written ("file.yaml:12", "line 12"),
	// for failure messages; "" for replies built in Go.
	Source string
}

// Call is one tool call of a scripted answer. Arguments is sent verbatim,
// so it may be malformed JSON on purpose.
type Call struct {
	Name      string
	Arguments string
}

// NewCall builds a Call; args is marshalled to JSON unless it is a string,
// which is used as is.
func NewCall(name string, args any) Call {
	switch a := args.(type) {
	case string:
		return Call{Name: name, Arguments: a}
	case nil:
		return Call{Name: name, Arguments: "{}"}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return Call{Name: name, Arguments: fmt.Sprintf("%q", err.Error())}
	}
	return Call{Name: name, Arguments: string(b)}
}

// TextReply is a reply with text only.
func TextReply(text string) Reply { return Reply{Text: text} }

// CallReply is a reply with tool calls only.
func CallReply(calls ...Call) Reply { return Reply{Calls: calls} }

// FaultKind says how a scripted answer fails.
type FaultKind string

// Fault kinds.
const (
	FaultStatus       FaultKind = "status"        // an HTTP error status (Fault.Status)
	FaultReset        FaultKind = "reset"         // the connection is closed without an answer
	FaultEmptyChoices FaultKind = "empty_choices" // a 200 answer with "choices": []
	FaultLength       FaultKind = "length"        // the answer ends with finish_reason "length"
	FaultTruncated    FaultKind = "truncated"     // half the JSON body (a stream cut before its end)
)

// Fault is a scripted failure.
type Fault struct {
	Kind       FaultKind
	Status     int    // FaultStatus: 400..599
	RetryAfter string // FaultStatus: the Retry-After header, if any
	Body       string // FaultStatus: the body; "" = an OpenAI-style JSON error
}

// StatusFault is a reply failing with an HTTP status.
func StatusFault(status int) Reply {
	return Reply{Fault: &Fault{Kind: FaultStatus, Status: status}}
}

// ScriptError is a mistake in a scripted reply, with its position.
type ScriptError struct {
	File string // "" when the reply came from another document (a scenario)
	Line int
	Msg  string
}

func (e *ScriptError) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return e.File + ": " + e.Msg
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func errAt(n *yaml.Node, format string, args ...any) *ScriptError {
	return &ScriptError{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// scriptLimits bound a script (and each reply handed to UnmarshalYAML):
// the defaults of internal/safeyaml, 1 MiB and 262,144 values once aliases
// are expanded, aliases nested at most 10 deep. Within them parsing ends in
// about a second at worst, so it takes no context.
var scriptLimits = safeyaml.Limits{}

// ParseScript reads a YAML file holding a list of replies. Unknown keys and
// misplaced values are errors naming filename and line, and so is a
// document past the limits of internal/safeyaml (an alias bomb).
func ParseScript(data []byte, filename string) ([]Reply, error) {
	doc, err := safeyaml.Decode(data, filename, scriptLimits)
	if err != nil {
		var le *safeyaml.Error
		if errors.As(err, &le) {
			return nil, &ScriptError{File: filename, Line: le.Line, Msg: le.Msg}
		}
		return nil, fmt.Errorf("%s: %w", filename, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // an empty file: no reply scripted
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.SequenceNode {
		return nil, &ScriptError{File: filename, Line: root.Line, Msg: "a script is a list of replies (- reply: ..., - call: ...)"}
	}
	replies := make([]Reply, 0, len(root.Content))
	for _, item := range root.Content {
		r, err := decodeReply(item)
		if err != nil {
			var se *ScriptError
			if errors.As(err, &se) {
				se.File = filename
			}
			return nil, err
		}
		r.Source = fmt.Sprintf("%s:%d", filename, item.Line)
		replies = append(replies, r)
	}
	return replies, nil
}

// UnmarshalYAML decodes one reply strictly, keeping the order of parallel
// calls as written. Errors are *ScriptError with the line. The node comes
// from someone else's decoder, so its aliases are bounded here before the
// reply is walked.
func (r *Reply) UnmarshalYAML(n *yaml.Node) error {
	if err := safeyaml.Check(n, "", scriptLimits); err != nil {
		var le *safeyaml.Error
		if errors.As(err, &le) {
			return &ScriptError{Line: le.Line, Msg: le.Msg}
		}
		return err
	}
	out, err := decodeReply(n)
	if err != nil {
		return err
	}
	out.Source = fmt.Sprintf("line %d", n.Line)
	*r = out
	return nil
}

var replyKeys = []string{"call", "calls", "raw_call", "reply", "fault", "tools_offered", "tool_choice", "messages_contain"}

func decodeReply(n *yaml.Node) (Reply, error) {
	var r Reply
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return r, errAt(n, "a scripted reply is a mapping with one of: %s", strings.Join(replyKeys, ", "))
	}
	seen := map[string]bool{}
	var hasText bool
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if seen[k.Value] {
			return r, errAt(k, "key %q appears twice in this reply", k.Value)
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "call":
			var calls []Call
			calls, err = decodeCallMap(v, false)
			r.Calls = append(r.Calls, calls...)
		case "calls":
			if v.Kind != yaml.SequenceNode {
				return r, errAt(v, "calls: want a list of single-key mappings (- tool: {args})")
			}
			for _, item := range v.Content {
				var calls []Call
				if calls, err = decodeCallMap(resolve(item), true); err != nil {
					return r, err
				}
				r.Calls = append(r.Calls, calls...)
			}
		case "raw_call":
			var c Call
			c, err = decodeRawCall(v)
			r.Calls = append(r.Calls, c)
		case "reply":
			if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
				return r, errAt(v, "reply: want text")
			}
			r.Text, hasText = v.Value, true
		case "fault":
			r.Fault, err = decodeFault(v)
		case "tools_offered":
			r.ToolsOffered, err = stringList(v, "tools_offered")
			if r.ToolsOffered == nil {
				r.ToolsOffered = []string{}
			}
		case "tool_choice":
			if v.Kind != yaml.ScalarNode || v.Value == "" {
				return r, errAt(v, "tool_choice: want auto, required, none or a tool name")
			}
			r.ToolChoice = v.Value
		case "messages_contain":
			r.MessagesContain, err = stringList(v, "messages_contain")
		default:
			return r, errAt(k, "unknown key %q in a scripted reply (known: %s)", k.Value, strings.Join(replyKeys, ", "))
		}
		if err != nil {
			return r, err
		}
	}
	answers := hasText || len(r.Calls) > 0
	switch {
	case r.Fault == nil && !answers:
		return r, errAt(n, "a scripted reply needs reply, call, calls, raw_call or fault")
	case r.Fault != nil && answers && r.Fault.Kind != FaultLength && r.Fault.Kind != FaultTruncated:
		return r, errAt(n, "fault %s cannot carry reply or calls (only length and truncated can)", r.Fault.describe())
	}
	return r, nil
}

// resolve follows aliases (bounded: yaml.v3 rejects alias cycles itself).
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return resolve(n.Content[0])
	}
	return n
}

// decodeCallMap reads {tool: {args}, tool2: {args}} keeping key order.
func decodeCallMap(n *yaml.Node, single bool) ([]Call, error) {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return nil, errAt(n, "call: want a mapping of tool name to arguments (tool: {key: value})")
	}
	if single && len(n.Content) != 2 {
		return nil, errAt(n, "calls: each item names exactly one tool (write two items for two calls)")
	}
	var calls []Call
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, errAt(k, "a tool name must be a plain string")
		}
		if seen[k.Value] {
			return nil, errAt(k, "tool %q appears twice in one call mapping; use calls: (a list) to call a tool twice", k.Value)
		}
		seen[k.Value] = true
		var args []byte
		switch {
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
			args = []byte("{}")
		case v.Kind == yaml.MappingNode:
			var buf bytes.Buffer
			if err := writeJSON(&buf, v, 0); err != nil {
				return nil, err
			}
			args = buf.Bytes()
		default:
			return nil, errAt(v, "arguments of %s: want a mapping (use raw_call to send raw text)", k.Value)
		}
		calls = append(calls, Call{Name: k.Value, Arguments: string(args)})
	}
	return calls, nil
}

func decodeRawCall(n *yaml.Node) (Call, error) {
	var c Call
	if n.Kind != yaml.MappingNode {
		return c, errAt(n, "raw_call: want {name: TOOL, arguments: \"raw text\"}")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if v.Kind != yaml.ScalarNode {
			return c, errAt(v, "raw_call.%s: want text", k.Value)
		}
		switch k.Value {
		case "name":
			c.Name = v.Value
		case "arguments":
			c.Arguments = v.Value
		default:
			return c, errAt(k, "unknown key %q in raw_call (known: name, arguments)", k.Value)
		}
	}
	if c.Name == "" {
		return c, errAt(n, "raw_call: name is required")
	}
	return c, nil
}

func decodeFault(n *yaml.Node) (*Fault, error) {
	if n.Kind == yaml.ScalarNode {
		switch k := FaultKind(n.Value); k {
		case FaultReset, FaultEmptyChoices, FaultLength, FaultTruncated:
			return &Fault{Kind: k}, nil
		}
		if st, err := strconv.Atoi(n.Value); err == nil {
			return statusFault(n, st, "", "")
		}
		return nil, errAt(n, "unknown fault %q (want reset, empty_choices, length, truncated, an HTTP status, or {status, retry_after, body})", n.Value)
	}
	if n.Kind != yaml.MappingNode {
		return nil, errAt(n, "fault: want a name or {status, retry_after, body}")
	}
	var status int
	var retry, body string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if v.Kind != yaml.ScalarNode {
			return nil, errAt(v, "fault.%s: want a scalar", k.Value)
		}
		switch k.Value {
		case "status":
			st, err := strconv.Atoi(v.Value)
			if err != nil {
				return nil, errAt(v, "fault.status: want an HTTP status code, got %q", v.Value)
			}
			status = st
		case "retry_after":
			retry = v.Value
		case "body":
			body = v.Value
		default:
			return nil, errAt(k, "unknown key %q in fault (known: status, retry_after, body)", k.Value)
		}
	}
	return statusFault(n, status, retry, body)
}

func statusFault(n *yaml.Node, status int, retry, body string) (*Fault, error) {
	if status < 400 || status > 599 {
		return nil, errAt(n, "fault.status: want 400..599, got %d", status)
	}
	return &Fault{Kind: FaultStatus, Status: status, RetryAfter: retry, Body: body}, nil
}

func (f *Fault) describe() string {
	if f.Kind == FaultStatus {
		return fmt.Sprintf("HTTP %d", f.Status)
	}
	return string(f.Kind)
}

func stringList(n *yaml.Node, key string) ([]string, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return []string{n.Value}, nil
	}
	if n.Kind == yaml.ScalarNode {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, errAt(n, "%s: want a list of strings", key)
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode {
			return nil, errAt(item, "%s: want a list of strings", key)
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// writeJSON renders a YAML node as JSON, keeping mapping order, so that
// arguments reach the agent exactly in the order the script wrote them.
func writeJSON(buf *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > 64 {
		return errAt(n, "arguments nest too deeply")
	}
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				return errAt(k, "argument keys must be strings")
			}
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				return errAt(k, "YAML merge keys (<<) are not supported in arguments")
			}
			if seen[k.Value] {
				return errAt(k, "argument %q appears twice", k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k.Value)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, item, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		var v any = n.Value
		switch n.ShortTag() {
		case "!!null":
			v = nil
		case "!!bool", "!!int", "!!float":
			if err := n.Decode(&v); err != nil {
				return errAt(n, "value %q: %v", n.Value, err)
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return errAt(n, "value %q cannot be written as JSON", n.Value)
		}
		buf.Write(b)
	default:
		return errAt(n, "unsupported YAML value in arguments")
	}
	return nil
}
