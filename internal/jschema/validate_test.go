package jschema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/internal/jschema"
	"github.com/upgrade-agent/upgrade-agent/internal/jschema/jschematest"
)

// validationCases are schemas with instances that fit and that do not:
// every keyword of the subset, alone and together.
var validationCases = []struct {
	schema    string
	instances []string
}{
	{`true`, []string{`1`, `null`, `{}`}},
	{`false`, []string{`1`, `null`}},
	{`{}`, []string{`1`, `"a"`, `[]`}},
	{`{"type":"string"}`, []string{`"a"`, `1`, `null`, `true`, `[]`, `{}`}},
	{`{"type":"integer"}`, []string{`1`, `1.0`, `1.5`, `-3`, `"1"`, `1e3`}},
	{`{"type":"number"}`, []string{`1`, `1.5`, `"1"`, `null`}},
	{`{"type":"boolean"}`, []string{`true`, `false`, `0`}},
	{`{"type":"null"}`, []string{`null`, `0`, `""`}},
	{`{"type":"array"}`, []string{`[]`, `[1]`, `{}`}},
	{`{"type":"object"}`, []string{`{}`, `[]`, `null`}},
	{`{"type":["string","null"]}`, []string{`"a"`, `null`, `1`}},
	{`{"type":["number","boolean"]}`, []string{`1`, `1.5`, `true`, `"x"`}},
	{`{"type":["integer"]}`, []string{`2`, `2.5`}},
	{`{"enum":["a","b",null,1,[1,2],{"k":1}]}`, []string{`"a"`, `"c"`, `null`, `1`, `1.0`, `2`, `[1,2]`, `[2,1]`, `{"k":1}`, `{"k":1.0}`, `{"k":2}`}},
	{`{"const":{"a":[1,"x"]}}`, []string{`{"a":[1,"x"]}`, `{"a":[1]}`, `{"a":[1,"x"],"b":1}`}},
	{`{"const":null}`, []string{`null`, `0`, `false`}},
	{`{"const":0.1}`, []string{`0.1`, `0.10`, `0.2`}},
	{`{"minimum":1,"maximum":3}`, []string{`1`, `3`, `0.999`, `3.0001`, `"5"`}},
	{`{"exclusiveMinimum":1,"exclusiveMaximum":3}`, []string{`1`, `1.5`, `3`, `2`}},
	{`{"multipleOf":0.5}`, []string{`1`, `1.5`, `1.25`}},
	{`{"multipleOf":3}`, []string{`9`, `10`}},
	{`{"minLength":2,"maxLength":3}`, []string{`"a"`, `"ab"`, `"abc"`, `"abcd"`, `"éé"`, `"日本語"`, `"日本語x"`, `5`}},
	{`{"pattern":"^[a-z]+-\\d+$"}`, []string{`"abc-12"`, `"Abc-12"`, `"abc-"`, `3`}},
	{`{"pattern":"b"}`, []string{`"abc"`, `"xyz"`}},
	{`{"items":{"type":"integer"}}`, []string{`[]`, `[1,2]`, `[1,"a"]`, `"x"`}},
	{`{"minItems":1,"maxItems":2}`, []string{`[]`, `[1]`, `[1,2]`, `[1,2,3]`}},
	{`{"uniqueItems":true}`, []string{`[1,2]`, `[1,1]`, `[1,1.0]`, `[{"a":1},{"a":1}]`, `[[1],[2]]`, `["1",1]`}},
	{`{"uniqueItems":false}`, []string{`[1,1]`}},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}`,
		[]string{`["a",1]`, `["a"]`, `[1,1]`, `["a",1,2]`}},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}]}`, []string{`["a",1,2]`, `[1]`}},
	{`{"properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}`,
		[]string{`{"a":"x"}`, `{"a":"x","b":1}`, `{"b":1}`, `{"a":1}`, `{"a":"x","b":"y"}`, `{"a":"x","c":null}`, `[]`}},
	{`{"properties":{"a":{}},"additionalProperties":false}`, []string{`{"a":1}`, `{"a":1,"b":2}`, `{}`}},
	{`{"properties":{"a":{}},"additionalProperties":{"type":"integer"}}`, []string{`{"a":"x","b":2}`, `{"b":"y"}`}},
	{`{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`, []string{`{"x-a":"s"}`, `{"x-a":1}`, `{"y":1}`}},
	{`{"minProperties":1,"maxProperties":2}`, []string{`{}`, `{"a":1}`, `{"a":1,"b":2,"c":3}`}},
	{`{"anyOf":[{"type":"string"},{"minimum":5}]}`, []string{`"a"`, `7`, `3`, `null`}},
	{`{"oneOf":[{"type":"integer"},{"minimum":5}]}`, []string{`3`, `7`, `7.5`, `2.5`}},
	{`{"allOf":[{"type":"integer"},{"minimum":5}]}`, []string{`7`, `3`, `7.5`}},
	{`{"not":{"type":"string"}}`, []string{`1`, `"a"`}},
	{`{"if":{"properties":{"k":{"const":"a"}}},"then":{"required":["a"]},"else":{"required":["b"]}}`,
		[]string{`{"k":"a","a":1}`, `{"k":"a"}`, `{"k":"z","b":1}`, `{"k":"z"}`}},
	{`{"$defs":{"id":{"type":"string","minLength":1}},"properties":{"id":{"$ref":"#/$defs/id"}}}`, []string{`{"id":"x"}`, `{"id":""}`, `{"id":3}`}},
	{`{"definitions":{"n":{"type":"integer"}},"items":{"$ref":"#/definitions/n"}}`, []string{`[1,2]`, `[1,"a"]`}},
	{`{"properties":{"next":{"$ref":"#"},"v":{"type":"integer"}}}`, []string{`{"v":1,"next":{"v":2,"next":{"v":3}}}`, `{"v":1,"next":{"v":"x"}}`}},
	{`{"$defs":{"a b":{"type":"string"},"c/d":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/a%20b"},"y":{"$ref":"#/$defs/c~1d"}}}`,
		[]string{`{"x":"s","y":1}`, `{"x":1}`, `{"y":"s"}`}},
	{`{"$ref":"#/$defs/s","$defs":{"s":{"type":"string"}},"minLength":2}`, []string{`"ab"`, `"a"`, `1`}},
	{`{"type":"object","format":"whatever","title":"t","description":"d","x-extension":{"type":"string"},"properties":{"d":{"type":"string","format":"date-time"}}}`,
		[]string{`{"d":"not a date"}`, `{"d":1}`}},
	// an MCP tool's input schema as servers send them
	{`{"type":"object","properties":{"filters":{"type":"array","items":{"type":"object","properties":{"status":{"type":"string","enum":["open","closed"]},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["status"],"additionalProperties":false}},"query":{"type":"string"}},"required":["query"]}`,
		[]string{`{"query":"q"}`, `{"query":"q","filters":[{"status":"open","limit":10}]}`, `{"query":"q","filters":[{"status":"bogus"}]}`,
			`{"query":"q","filters":[{"status":"open","limit":0}]}`, `{"query":"q","filters":[{"limit":5}]}`, `{"filters":[]}`,
			`{"query":"q","filters":[{"status":"open","extra":1}]}`, `{"query":1}`}},
}

// TestValidateAgreesWithJSONSchemaGo: the same verdict as jsonschema-go's
// Resolved.Validate for every schema and instance of the table.
func TestValidateAgreesWithJSONSchemaGo(t *testing.T) {
	for _, c := range validationCases {
		s, err := jschema.Compile([]byte(c.schema))
		refErr, _ := jschematest.Validate([]byte(c.schema), nil)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%s: compile error %v, jsonschema-go's %v", c.schema, err, refErr)
		}
		for _, in := range c.instances {
			var v any
			if err := json.Unmarshal([]byte(in), &v); err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			_, want := jschematest.Validate([]byte(c.schema), v)
			got := s.Validate(v)
			if (got == nil) != (want == nil) {
				t.Errorf("schema %s, value %s: got %v, jsonschema-go %v", c.schema, in, got, want)
			}
		}
	}
}

// TestCompileRefusesWhatJSONSchemaGoRefused: documents neither can check
// against are errors (and a tool with one is not offered).
func TestCompileRefusesWhatJSONSchemaGoRefused(t *testing.T) {
	for _, doc := range []string{
		`[]`, `1`, `"x"`, `{`,
		`{"type":5}`, `{"type":[1]}`, `{"minimum":"1"}`, `{"minLength":"2"}`, `{"pattern":"("}`,
		`{"required":"a"}`, `{"properties":[]}`, `{"items":5}`, `{"anyOf":{}}`, `{"enum":3}`,
		`{"$ref":"#/$defs/missing"}`, `{"$ref":"http://example.com/s.json"}`, `{"$ref":"other.json#/x"}`,
	} {
		refErr, _ := jschematest.Validate([]byte(doc), nil)
		if refErr == nil {
			t.Errorf("%s: jsonschema-go took it", doc)
		}
		if _, err := jschema.Compile([]byte(doc)); err == nil {
			t.Errorf("%s: compiled", doc)
		}
	}
}

// TestValidationErrorsNameTheLocation: the error names the part of the
// value that does not fit, as a JSON pointer, and why.
func TestValidationErrorsNameTheLocation(t *testing.T) {
	schema := validationCases[len(validationCases)-1].schema
	s, err := jschema.Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		`{"query":"q","filters":[{"status":"open"},{"status":"bogus"}]}`: `/filters/1/status: "bogus" is not one of "open", "closed"`,
		`{"query":"q","filters":[{"status":"open","limit":0}]}`:          `/filters/0/limit: 0 is less than the minimum 1`,
		`{"query":"q","filters":[{"limit":5}]}`:                          `/filters/0: missing required property "status"`,
		`{"query":"q","filters":[{"status":"open","extra":1}]}`:          `/filters/0: unexpected property "extra"`,
		`{"query":1}`:   `/query: 1 is an integer, want string`,
		`{"filters":2}`: `/filters: 2 is an integer, want array`,
		`{}`:            `missing required property "query"`,
	} {
		var v any
		_ = json.Unmarshal([]byte(in), &v)
		err := s.Validate(v)
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", in, err, want)
		}
	}
}

// TestValidateTakesJSONNumbers: values decoded with UseNumber check as
// numbers (arguments of read-only MCP tools are decoded so).
func TestValidateTakesJSONNumbers(t *testing.T) {
	s, err := jschema.Compile([]byte(`{"properties":{"n":{"type":"integer","maximum":5},"f":{"enum":[0.1]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"n": json.Number("3"), "f": json.Number("0.1")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"n": json.Number("6")}); err == nil {
		t.Fatal("6 passed a maximum of 5")
	}
	if err := s.Validate(map[string]any{"n": json.Number("1.5")}); err == nil {
		t.Fatal("1.5 passed as an integer")
	}
}

// TestRefCyclesFailWithoutRecursingForEver: a schema that refers to
// itself without consuming the value stops at the depth bound.
func TestRefCyclesFailWithoutRecursingForEver(t *testing.T) {
	for _, doc := range []string{
		`{"$ref":"#"}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"allOf":[{"$ref":"#"}]}`,
		`{"not":{"$ref":"#"}}`,
	} {
		s, err := jschema.Compile([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if err := s.Validate(map[string]any{}); err == nil || !strings.Contains(err.Error(), "too deep") {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// FuzzCompileValidate: no schema document and no value makes Compile or
// Validate panic or recurse without bound.
func FuzzCompileValidate(f *testing.F) {
	for _, c := range validationCases {
		for _, in := range c.instances {
			f.Add(c.schema, in)
		}
	}
	f.Add(`{"$ref":"#"}`, `{}`)
	f.Add(strings.Repeat(`{"items":`, 3000)+`true`+strings.Repeat(`}`, 3000), strings.Repeat(`[`, 3000)+strings.Repeat(`]`, 3000))
	f.Add(`{"properties":{"a":{"$ref":"#/properties/a"}}}`, `{"a":1}`)
	f.Fuzz(func(t *testing.T, schema, instance string) {
		s, err := jschema.Compile([]byte(schema))
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal([]byte(instance), &v) != nil {
			return
		}
		_ = s.Validate(v)
	})
}

// TestSelfReferringCombinatorsStop: a schema that branches into itself
// twice at every level is refused in bounded time.
func TestSelfReferringCombinatorsStop(t *testing.T) {
	for _, doc := range []string{
		`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`,
		`{"$defs":{"a":{"oneOf":[{"not":{"$ref":"#/$defs/a"}},{"not":{"$ref":"#/$defs/a"}}]}},"$ref":"#/$defs/a"}`,
	} {
		s, err := jschema.Compile([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(1); err == nil {
			t.Errorf("%s: no error", doc)
		}
	}
}
