package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
)

// callRecorder is an MCP whose Call records the arguments and fails, so
// that a read-only tool's run stops right after it.
type callRecorder struct {
	MCP
	args []string
}

var errRecorded = errors.New("recorded")

func (c *callRecorder) Call(_ context.Context, _ string, args json.RawMessage, _ string) (*mcpclient.CallResult, error) {
	c.args = append(c.args, string(args))
	return nil, errRecorded
}

// TestMCPReadToolChecksArgumentsAgainstItsSchema: a read-only MCP tool's
// arguments are checked against its input schema before the call, numbers
// as numbers, and a problem names the argument.
func TestMCPReadToolChecksArgumentsAgainstItsSchema(t *testing.T) {
	m := &callRecorder{}
	tl := mcpclient.Tool{Server: "srv", Name: "count", QualifiedName: "mcp__srv__count", ReadOnly: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"enum":["a","b"]}}},"required":["n"],"additionalProperties":false}`)}
	d, err := mcpToolDef(m, tl)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args, problem string }{
		{`{"n": 5, "tags": ["a"]}`, ""},
		{`{"n": 5, "tags": null}`, ""}, // null is "not given"
		{`{"n": "5"}`, `/n: "5" is a string, want integer`},
		{`{"n": 0}`, `/n: 0 is less than the minimum 1`},
		{`{"n": 2.5}`, `/n: 2.5 is a number, want integer`},
		{`{"n": 1, "tags": ["c"]}`, `/tags/0: "c" is not one of "a", "b"`},
		{`{"n": 1, "other": true}`, `unexpected property "other"`},
		{`{}`, `missing required property "n"`},
	} {
		before := len(m.args)
		_, err := d.run(context.Background(), nil, json.RawMessage(c.args))
		if c.problem == "" {
			if !errors.Is(err, errRecorded) || len(m.args) != before+1 {
				t.Errorf("%s: not called (%v)", c.args, err)
			}
			continue
		}
		var ie *toolInputError
		if !errors.As(err, &ie) || !strings.Contains(ie.msg, c.problem) || len(m.args) != before {
			t.Errorf("%s: got %v (calls %d), want an input error with %q", c.args, err, len(m.args)-before, c.problem)
		}
	}
}

// TestMCPToolWithABrokenSchemaIsNotOffered: a schema the validator cannot
// compile (a reference outside the document, a pattern that does not
// compile) makes the tool unavailable rather than unchecked.
func TestMCPToolWithABrokenSchemaIsNotOffered(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`,
		`{"type":7}`,
	} {
		tl := mcpclient.Tool{Server: "srv", Name: "x", QualifiedName: "mcp__srv__x", ReadOnly: true, InputSchema: json.RawMessage(schema)}
		if _, err := mcpToolDef(&callRecorder{}, tl); err == nil {
			t.Errorf("%s: offered", schema)
		}
	}
}
