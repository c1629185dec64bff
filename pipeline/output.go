package pipeline

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

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
	path     string
	raw      map[string]any
	compiled *jsonschema.Schema
	custom   []string
	hasRM    bool
	tool     llm.Tool
}

// OutputConfig turns the output node on: it runs only when Enabled and the
// schema has at least one custom field.
type OutputConfig struct {
	Schema  *OutputSchema
	Enabled bool
}

// LoadOutputSchema reads and checks a JSON Schema file.
func LoadOutputSchema(path string) (*OutputSchema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w: %w", err, ErrBadInput)
	}
	return ParseOutputSchema(data, path)
}

// ParseOutputSchema checks a JSON Schema document: an object schema at the
// top, compilable, with properties.
func ParseOutputSchema(data []byte, name string) (*OutputSchema, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("output schema %s: %s: %w", name, fmt.Sprintf(format, args...), ErrBadInput)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, bad("not valid JSON: %v", err)
	}
	raw, ok := doc.(map[string]any)
	if !ok {
		return nil, bad("the top level must be a JSON object")
	}
	if t, ok := raw["type"]; ok && t != "object" {
		return nil, bad(`"type" must be "object" at the top, got %v`, t)
	}
	props, ok := raw["properties"].(map[string]any)
	if !ok {
		return nil, bad(`the top level needs "properties"`)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output-schema.json", doc); err != nil {
		return nil, bad("%v", err)
	}
	compiled, err := c.Compile("output-schema.json")
	if err != nil {
		return nil, bad("%v", err)
	}
	s := &OutputSchema{path: name, raw: raw, compiled: compiled}
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

func (a *Agent) outputEnabled() bool {
	return a.Output != nil && a.Output.Enabled && a.Output.Schema != nil && len(a.Output.Schema.custom) > 0
}

// outputNode makes one forced call with only set_conversational_output
// bound. Its messages and arguments never enter the stored history: the
// instruction exists only in this request, the result only in Result.Output.
// Failures become per-field validation errors; the reply was already
// delivered.
func (a *Agent) outputNode(ctx context.Context, t *turn) (string, error) {
	s := a.Output.Schema
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

func (a *Agent) validateOutput(t *turn, out map[string]any) {
	// Round-trip through the validator's own decoder so numbers compare right.
	b, _ := json.Marshal(out)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.outputProblem("", err.Error())
		return
	}
	err = a.Output.Schema.compiled.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return
	}
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		field := strings.TrimPrefix(u.InstanceLocation, "/")
		t.outputProblem(field, u.Error.String())
	}
}

func (t *turn) outputProblem(field, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if field != "" {
		msg = field + ": " + msg
	}
	t.st.Errors = append(t.st.Errors, ErrorEntry{Type: ErrTypeValidation, Field: field, Message: msg})
}
