package pipeline

import (
	"encoding/json"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/internal/jschema/jschematest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// TestToolSchemasAreJSONSchemaGos: the arguments schema of every tool the
// analyzer, the gatherer and the responder are offered is, byte for byte,
// what jsonschema-go wrote, and so is a schema given an enum (withEnum).
func TestToolSchemasAreJSONSchemaGos(t *testing.T) {
	var defs []*toolDef
	defs = append(defs, lookupTools()...)
	defs = append(defs, stateTools()...)
	defs = append(defs, changeTools()...)
	defs = append(defs, flagTools()...)
	defs = append(defs, metricTools()...)
	defs = append(defs, responderTools().list...)
	defs = append(defs, analyzeTool())
	seen := 0
	for _, d := range defs {
		if d.args == nil {
			continue
		}
		seen++
		want, err := jschematest.Schema(d.args)
		if err != nil {
			t.Fatalf("%s: jsonschema-go: %v", d.name, err)
		}
		if string(d.schema) != string(want) {
			t.Errorf("%s (%s):\n got %s\nwant %s", d.name, d.args, d.schema, want)
		}
	}
	if seen < 30 {
		t.Fatalf("only %d tools compared", seen)
	}

	reg := actions.Builtin()
	var names, objects []string
	for _, n := range reg.Names() {
		names = append(names, string(n))
	}
	for _, o := range reg.Objects() {
		objects = append(objects, string(o))
	}
	for _, c := range []struct {
		plain  *toolDef
		arg    string
		values []string
	}{
		{analyzeTool(), "object", objects},
		{actionSchemaTool(nil), "action", names}, // no values: the plain tool
	} {
		orig := append(json.RawMessage(nil), c.plain.schema...)
		want, err := jschematest.WithEnum(orig, c.arg, c.values)
		if err != nil {
			t.Fatal(err)
		}
		got := withEnum(c.values, c.arg, c.plain).schema
		if string(got) != string(want) {
			t.Errorf("%s with an enum:\n got %s\nwant %s", c.plain.name, got, want)
		}
	}
}
