package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/upgrade-agent/upgrade-agent/internal/plainjson"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// toolDef is one LLM tool: its contract (name, description, JSON schema) and
// the Go code behind it. Arguments are decoded the way models write them
// (see actions.Decode); a problem becomes a tool result that tells the
// model what to fix, never a crash.
type toolDef struct {
	name     string
	desc     string
	readOnly bool // may run concurrently with other read-only calls
	// object is what the tool is about: the gatherer is offered it in that
	// object's scope; ObjectNone (shared) in every scope.
	object actions.Object
	schema json.RawMessage
	run    func(ctx context.Context, t *turn, raw json.RawMessage) (any, error)
	// args is the arguments type of a newTool (tests compare its schema).
	args reflect.Type
}

// about sets the object a tool is about.
func (d *toolDef) about(o actions.Object) *toolDef {
	d.object = o
	return d
}

// toolInputError is an argument problem the model can correct.
type toolInputError struct{ msg string }

func (e *toolInputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &toolInputError{msg: fmt.Sprintf(format, args...)}
}

// newTool builds a tool whose arguments are the struct T. Field tags:
// `json:"name,omitempty"` makes a parameter optional (and nullable),
// `jsonschema:"..."` describes it.
func newTool[T any](name, desc string, readOnly bool, fn func(ctx context.Context, t *turn, args T) (any, error)) *toolDef {
	return &toolDef{
		name: name, desc: desc, readOnly: readOnly, schema: actions.SchemaFor[T](), args: reflect.TypeFor[T](),
		run: func(ctx context.Context, t *turn, raw json.RawMessage) (any, error) {
			args, err := actions.Decode[T](name, raw)
			if err != nil {
				return nil, &toolInputError{msg: err.Error()}
			}
			return fn(ctx, t, args)
		},
	}
}

// decodeArgs decodes the arguments of a forced tool call.
func decodeArgs[T any](call llm.ToolCall) (T, error) {
	return actions.Decode[T](call.Name, json.RawMessage(call.Arguments))
}

// decodeObject reads tool arguments as a JSON object; arguments encoded
// twice (a JSON string holding the object) are decoded once more, and
// empty arguments are {}.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if s, ok := v.(string); ok {
		return decodeObject(json.RawMessage(s))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("arguments must be a JSON object")
	}
	return obj, nil
}

// dropNulls removes members whose value is null: null means "not given".
func dropNulls(obj map[string]any) {
	for k, v := range obj {
		switch x := v.(type) {
		case nil:
			delete(obj, k)
		case map[string]any:
			dropNulls(x)
		}
	}
}

// toolName is a tool name as a model may write it, without the prefix some
// add ("functions.get_core_terms").
func toolName(name string) string {
	name = strings.TrimSpace(name)
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// toolSet is an ordered set of tools offered to one node. The order and the
// bytes of the definitions never change between calls, so provider prompt
// caches hit.
type toolSet struct {
	list   []*toolDef
	byName map[string]*toolDef
	llm    []llm.Tool
	// beyond answers a call of a tool this set does not offer but the
	// agent has (a model that names a tool of another scope it saw in the
	// conversation): nil for none.
	beyond *toolSet
}

func newToolSet(defs ...*toolDef) *toolSet {
	ts := &toolSet{byName: map[string]*toolDef{}}
	for _, d := range defs {
		if _, dup := ts.byName[d.name]; dup {
			panic("duplicate tool " + d.name)
		}
		ts.list = append(ts.list, d)
		ts.byName[d.name] = d
		ts.llm = append(ts.llm, llm.Tool{Name: d.name, Description: d.desc, Parameters: d.schema})
	}
	return ts
}

// toolOutcome is the result of one tool call, already encoded for the model.
type toolOutcome struct {
	call    llm.ToolCall
	content string
	failed  bool
}

// execute runs the tool calls of one model reply. Consecutive read-only
// calls run concurrently; results come back in the order of the calls.
func (ts *toolSet) execute(ctx context.Context, t *turn, calls []llm.ToolCall) []toolOutcome {
	out := make([]toolOutcome, len(calls))
	i := 0
	for i < len(calls) {
		d := ts.lookup(calls[i].Name)
		if d == nil || !d.readOnly {
			out[i] = ts.one(ctx, t, calls[i])
			i++
			continue
		}
		j := i
		for j < len(calls) {
			dj := ts.lookup(calls[j].Name)
			if dj == nil || !dj.readOnly {
				break
			}
			j++
		}
		var wg sync.WaitGroup
		for k := i; k < j; k++ {
			wg.Go(func() { out[k] = ts.one(ctx, t, calls[k]) })
		}
		wg.Wait()
		i = j
	}
	return out
}

// lookup finds a tool by name, ignoring case and a "functions." prefix;
// then among the tools beyond the set.
func (ts *toolSet) lookup(name string) *toolDef {
	if d := ts.byName[name]; d != nil {
		return d
	}
	n := toolName(name)
	for _, d := range ts.list {
		if strings.EqualFold(d.name, n) {
			return d
		}
	}
	if ts.beyond != nil {
		return ts.beyond.lookup(name)
	}
	return nil
}

func (ts *toolSet) one(ctx context.Context, t *turn, call llm.ToolCall) toolOutcome {
	d := ts.lookup(call.Name)
	if d == nil {
		ctx, span := startToolSpan(ctx, call.Name, call)
		o := toolOutcome{call: call, failed: true,
			content: errorResult(fmt.Sprintf("unknown tool %q; available tools: %s", call.Name, strings.Join(ts.names(), ", ")))}
		endToolSpan(ctx, span, o, errTypeUnknown, nil)
		return o
	}
	ctx, span := startToolSpan(ctx, d.name, call)
	res, err := d.run(ctx, t, json.RawMessage(call.Arguments))
	if err != nil {
		var ie *toolInputError
		if !errors.As(err, &ie) {
			t.recordError(err)
		}
		o := toolOutcome{call: call, failed: true, content: errorResult(modelErrorText(err))}
		endToolSpan(ctx, span, o, toolErrorType(err), err)
		return o
	}
	t.noteToolResult(d.name, res)
	o := toolOutcome{call: call, content: compactJSON(res)}
	endToolSpan(ctx, span, o, "", nil)
	return o
}

// modelErrorText is err as the model reads it: an UpGrade answer keeps its
// status and message but not the method and URL, which tell the model
// nothing it can act on and cost tokens.
func modelErrorText(err error) string {
	text := err.Error()
	var ue *upgrade.Error
	if errors.As(err, &ue) && ue.Status > 0 {
		short := fmt.Sprintf("UpGrade answered %d %s", ue.Status, http.StatusText(ue.Status))
		if ue.Message != "" {
			short += ": " + ue.Message
		}
		text = strings.Replace(text, ue.Error(), short, 1)
	}
	return text
}

// allReadOnly reports whether every call names a read-only tool.
func (ts *toolSet) allReadOnly(calls []llm.ToolCall) bool {
	for _, c := range calls {
		if d := ts.lookup(c.Name); d == nil || !d.readOnly {
			return false
		}
	}
	return len(calls) > 0
}

// keyByKey reports whether a reply set params one key at a time
// (update_action_params) and never all at once (set_action_params).
func (ts *toolSet) keyByKey(calls []llm.ToolCall) bool {
	updated := false
	for _, c := range calls {
		d := ts.lookup(c.Name)
		switch {
		case d == nil:
		case d.name == "set_action_params":
			return false
		case d.name == "update_action_params":
			updated = true
		}
	}
	return updated
}

func (ts *toolSet) names() []string {
	n := make([]string, len(ts.list))
	for i, d := range ts.list {
		n[i] = d.name
	}
	return n
}

func errorResult(msg string) string {
	return compactJSON(map[string]string{"error": msg})
}

// compactJSON encodes v without HTML escaping; tool results and prompts are
// JSON, never Go %v dumps.
func compactJSON(v any) string {
	if v == nil {
		return "null"
	}
	if s, ok := v.(string); ok {
		b, _ := plainjson.Marshal(map[string]string{"result": s})
		return string(b)
	}
	b, err := plainjson.Marshal(v)
	if err != nil {
		return errorResult("result could not be encoded: " + err.Error())
	}
	return string(b)
}
