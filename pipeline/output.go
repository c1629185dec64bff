package pipeline

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/jschema"
	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
	"github.com/upgrade-agent/upgrade-agent/llm"
)

//go:embed prompts/output.md
var outputPrompt string

// ResponseMessagesField is the framework's own property of an output
// schema: the assistant messages of the turn.
const ResponseMessagesField = "response_messages"

// OutputToolName is the only tool bound in the output node.
const OutputToolName = "set_conversational_output"

// OutputSchema is a loaded, validated structured-output schema.
type OutputSchema struct {
	path   string
	raw    map[string]any
	schema *jschema.Schema
	custom []string
	hasRM  bool
	tool   llm.Tool
}

// OutputConfig turns the output node on: it runs only when Enabled and the
// schema has at least one custom field.
type OutputConfig struct {
	Schema  *OutputSchema
	Enabled bool
}

// MaxOutputSchemaBytes bounds an output schema file: a real one is a few
// KiB, and its text goes into a prompt.
const MaxOutputSchemaBytes = 256 << 10

// LoadOutputSchema reads and checks a JSON Schema file: a regular file of
// at most MaxOutputSchemaBytes (a FIFO or a huge file is refused before it
// is read).
func LoadOutputSchema(path string) (*OutputSchema, error) {
	data, err := safefile.ReadFile(path, MaxOutputSchemaBytes)
	if err != nil {
		return nil, badInput("output schema: %w", err)
	}
	return ParseOutputSchema(data, path)
}

// ParseOutputSchema checks a JSON Schema document: an object schema at the
// top, compilable, with properties.
func ParseOutputSchema(data []byte, name string) (*OutputSchema, error) {
	bad := func(format string, args ...any) error {
		return badInput("output schema %s: %s", name, fmt.Sprintf(format, args...))
	}
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, bad("the top level must be a JSON object")
		}
		return nil, bad("not valid JSON: %v", err)
	}
	if t, ok := raw["type"]; ok && t != "object" {
		return nil, bad(`"type" must be "object" at the top, got %v`, t)
	}
	props, ok := raw["properties"].(map[string]any)
	if !ok {
		return nil, bad(`the top level needs "properties"`)
	}
	if err := checkTypes(raw, ""); err != nil {
		return nil, bad("%v", err)
	}
	schema, err := jschema.Compile(data)
	if err != nil {
		return nil, bad("%v", err)
	}
	s := &OutputSchema{path: name, raw: raw, schema: schema}
	for k := range props {
		if k == ResponseMessagesField {
			s.hasRM = true
			continue
		}
		s.custom = append(s.custom, k)
	}
	sort.Strings(s.custom)
	s.tool, err = s.toolDef()
	if err != nil {
		return nil, bad("%v", err)
	}
	return s, nil
}

// CustomFields lists every property but response_messages.
func (s *OutputSchema) CustomFields() []string { return s.custom }

// toolDef is the schema minus response_messages, as the tool's parameters.
func (s *OutputSchema) toolDef() (llm.Tool, error) {
	params := map[string]any{}
	for k, v := range s.raw {
		if k == "$schema" || k == "$id" || k == "title" {
			continue
		}
		params[k] = v
	}
	props := map[string]any{}
	for k, v := range s.raw["properties"].(map[string]any) {
		if k != ResponseMessagesField {
			props[k] = v
		}
	}
	params["properties"] = props
	params["type"] = "object"
	if req, ok := s.raw["required"].([]any); ok {
		var kept []any
		for _, r := range req {
			if r != ResponseMessagesField {
				kept = append(kept, r)
			}
		}
		params["required"] = kept
	}
	b, err := json.Marshal(params)
	if err != nil {
		return llm.Tool{}, err
	}
	return llm.Tool{Name: OutputToolName, Description: "Set the structured output fields of this turn.", Parameters: b}, nil
}

// outputNode makes one forced call with only set_conversational_output
// bound. Its messages and arguments never enter the stored history: the
// instruction exists only in this request, the result only in Result.Output.
// Failures become per-field validation errors; the reply was already
// delivered.
func (a *Agent) outputNode(ctx context.Context, t *turn) (string, error) {
	s := a.set.Output.Schema
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: outputPrompt}}
	if n := len(t.messages); n > 1 {
		msgs = append(msgs, t.messages[:n-1]...)
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: t.input},
		llm.Message{Role: llm.RoleAssistant, Content: t.st.FinalResponse})
	req := llm.Request{Messages: msgs, Tools: []llm.Tool{s.tool}, ToolChoice: llm.Force(OutputToolName), ParallelToolCalls: boolPtr(false)}
	resp, err := t.chat(ctx, NodeOutput, req)
	if errors.Is(err, errBudget) {
		return nodeEnd, err
	}
	var args map[string]any
	switch {
	case err != nil:
		t.outputProblem("", "structured output unavailable: "+err.Error())
	default:
		call, ok := findCall(resp.ToolCalls, OutputToolName)
		if !ok {
			for _, f := range s.custom {
				t.outputProblem(f, "no value: the model did not call "+OutputToolName)
			}
			break
		}
		dec := json.NewDecoder(strings.NewReader(call.Arguments))
		dec.UseNumber()
		if derr := dec.Decode(&args); derr != nil {
			t.outputProblem("", "arguments of "+OutputToolName+" are not a JSON object: "+derr.Error())
			args = nil
		}
	}
	out := map[string]any{}
	for k, v := range args {
		out[k] = v
	}
	if s.hasRM {
		out[ResponseMessagesField] = []any{t.st.FinalResponse} // the framework field wins
	}
	if args != nil {
		a.validateOutput(t, out)
	}
	t.output = out
	return nodeEnd, nil
}

// validateOutput checks the merged output against the whole schema and
// reports problems per field: each property against its own subschema (in
// the whole document, so references resolve), then required and unknown
// fields; a failure none of those explains is reported for the whole object.
func (a *Agent) validateOutput(t *turn, out map[string]any) {
	s := a.set.Output.Schema
	var inst any
	if b, err := json.Marshal(out); err == nil {
		_ = json.Unmarshal(b, &inst)
	}
	err := s.schema.Validate(inst)
	if err == nil {
		return
	}
	found := false
	for _, name := range s.propertyNames() {
		v, present := out[name]
		sub := s.schema.Property(name)
		if !present || sub == nil {
			continue
		}
		var fv any
		if b, merr := json.Marshal(v); merr == nil {
			_ = json.Unmarshal(b, &fv)
		}
		if verr := sub.Validate(fv); verr != nil {
			t.outputProblem(name, verr.Error())
			found = true
		}
	}
	for _, r := range s.schema.Required() {
		if _, ok := out[r]; !ok {
			t.outputProblem(r, "required, but no value was given")
			found = true
		}
	}
	if s.schema.ClosedObject() {
		for k := range out {
			if !s.schema.HasProperty(k) {
				t.outputProblem(k, "not a property of the output schema")
				found = true
			}
		}
	}
	if !found {
		t.outputProblem("", err.Error())
	}
}

func (s *OutputSchema) propertyNames() []string {
	props, _ := s.raw["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (t *turn) outputProblem(field, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if field != "" {
		msg = field + ": " + msg
	}
	t.st.Errors = append(t.st.Errors, ErrorEntry{Type: ErrTypeValidation, Field: field, Message: msg})
}

// jsonType reports whether name is one of JSON Schema's seven type names
// (a switch rather than a map: a map literal is work at package init).
func jsonType(name string) bool {
	switch name {
	case "null", "boolean", "object", "array", "number", "string", "integer":
		return true
	}
	return false
}

// checkTypes rejects unknown "type" names anywhere in a schema document,
// which the resolver accepts silently.
func checkTypes(v any, path string) error {
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			at := path + "/" + k
			if k == "type" {
				switch t := sub.(type) {
				case string:
					if !jsonType(t) {
						return fmt.Errorf("%s: unknown type %q", at, t)
					}
					continue
				case []any:
					for _, e := range t {
						if name, ok := e.(string); !ok || !jsonType(name) {
							return fmt.Errorf("%s: unknown type %v", at, e)
						}
					}
					continue
				}
			}
			if err := checkTypes(sub, at); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := checkTypes(e, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
