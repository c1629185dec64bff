package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/upgrade-agent/upgrade-agent/llm"
)

// toolDef is one LLM tool: its contract (name, description, JSON schema) and
// the Go code behind it. Arguments are validated against the schema and then
// decoded strictly; a failure becomes a tool result that tells the model what
// to fix, never a crash.
type toolDef struct {
	name     string
	desc     string
	readOnly bool // may run concurrently with other read-only calls
	schema   json.RawMessage
	resolved *jsonschema.Resolved
	run      func(ctx context.Context, t *turn, raw json.RawMessage) (any, error)
}

// toolInputError is an argument problem the model can correct.
type toolInputError struct{ msg string }

func (e *toolInputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &toolInputError{msg: fmt.Sprintf(format, args...)}
}

// newTool builds a tool whose arguments are the struct T. Field tags:
// `json:"name,omitempty"` makes a parameter optional, `jsonschema:"..."`
// describes it.
func newTool[T any](name, desc string, readOnly bool, fn func(ctx context.Context, t *turn, args T) (any, error)) *toolDef {
	schema, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: schema: %v", name, err)) // programming error, caught by tests
	}
	tidySchema(schema)
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: resolve: %v", name, err))
	}
	raw, err := json.Marshal(wireSchema(schema))
	if err != nil {
		panic(fmt.Sprintf("tool %s: marshal: %v", name, err))
	}
	return &toolDef{
		name: name, desc: desc, readOnly: readOnly, schema: raw, resolved: resolved,
		run: func(ctx context.Context, t *turn, raw json.RawMessage) (any, error) {
			var args T
			if err := decodeStrict(raw, &args); err != nil {
				return nil, &toolInputError{msg: err.Error()}
			}
			return fn(ctx, t, args)
		},
	}
}

// tidySchema drops the "null" member that slices get by default: the model
// should send a list or leave the field out.
func tidySchema(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" && s.Types[1] == "array" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		tidySchema(p)
	}
	tidySchema(s.Items)
	if s.AdditionalProperties != nil && s.AdditionalProperties.Type != "" {
		tidySchema(s.AdditionalProperties)
	}
}

// wireSchema is the schema as sent to the model: without
// "additionalProperties": false (the arguments are still validated against
// the full schema and decoded strictly), which saves tokens on every call.
func wireSchema(s *jsonschema.Schema) *jsonschema.Schema {
	c := s.CloneSchemas()
	var strip func(*jsonschema.Schema)
	strip = func(x *jsonschema.Schema) {
		if x == nil {
			return
		}
		if ap := x.AdditionalProperties; ap != nil && ap.Not != nil {
			x.AdditionalProperties = nil
		}
		for _, p := range x.Properties {
			strip(p)
		}
		strip(x.Items)
	}
	strip(c)
	return c
}

// decodeStrict decodes JSON into v rejecting unknown fields and trailing data.
func decodeStrict(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("field %q: expected %s, got %s", field, te.Type.String(), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("arguments are not valid JSON (offset %d): %v", se.Offset, err)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return fmt.Errorf("unknown parameter %s", strings.TrimPrefix(msg, "json: unknown field "))
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

// toolSet is an ordered set of tools offered to one node. The order and the
// bytes of the definitions never change between calls, so provider prompt
// caches hit.
type toolSet struct {
	list   []*toolDef
	byName map[string]*toolDef
	llm    []llm.Tool
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
		d := ts.byName[calls[i].Name]
		if d == nil || !d.readOnly {
			out[i] = ts.one(ctx, t, calls[i])
			i++
			continue
		}
		j := i
		for j < len(calls) {
			dj := ts.byName[calls[j].Name]
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

func (ts *toolSet) one(ctx context.Context, t *turn, call llm.ToolCall) toolOutcome {
	d := ts.byName[call.Name]
	if d == nil {
		return toolOutcome{call: call, failed: true,
			content: errorResult(fmt.Sprintf("unknown tool %q; available tools: %s", call.Name, strings.Join(ts.names(), ", ")))}
	}
	raw := json.RawMessage(call.Arguments)
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var inst any
	if err := json.Unmarshal(raw, &inst); err != nil {
		return toolOutcome{call: call, failed: true, content: errorResult("arguments are not valid JSON: " + err.Error())}
	}
	if err := d.resolved.Validate(inst); err != nil {
		return toolOutcome{call: call, failed: true, content: errorResult("invalid arguments: " + err.Error())}
	}
	res, err := d.run(ctx, t, raw)
	if err != nil {
		var ie *toolInputError
		if !errors.As(err, &ie) {
			t.recordError(err)
		}
		return toolOutcome{call: call, failed: true, content: errorResult(err.Error())}
	}
	t.noteToolResult(call.Name, res)
	return toolOutcome{call: call, content: compactJSON(res)}
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
		b, _ := marshalNoEscape(map[string]string{"result": s})
		return string(b)
	}
	b, err := marshalNoEscape(v)
	if err != nil {
		return errorResult("result could not be encoded: " + err.Error())
	}
	return string(b)
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// isNil reports whether v is nil or a nil pointer/map/slice.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
