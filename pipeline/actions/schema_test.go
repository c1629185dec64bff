package actions

import (
	"reflect"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/internal/jschema/jschematest"
)

// TestSchemasAreJSONSchemaGos: the schema of every built-in action's
// params and of every lookup's arguments is, byte for byte, what
// jsonschema-go wrote (with the tidying SchemaFor did): the bytes in the
// gatherer's prompts did not change with the generator.
func TestSchemasAreJSONSchemaGos(t *testing.T) {
	reg := Builtin()
	check := func(what string, typ reflect.Type, got []byte) {
		t.Helper()
		want, err := jschematest.Schema(typ)
		if err != nil {
			t.Fatalf("%s: jsonschema-go: %v", what, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s (%s):\n got %s\nwant %s", what, typ, got, want)
		}
	}
	names := reg.Names()
	if len(names) < 30 {
		t.Fatalf("%d built-in actions", len(names))
	}
	for _, n := range names {
		a, _ := reg.Lookup(string(n))
		var inner Action
		switch x := a.(type) {
		case *registered:
			inner = x.inner
		case registeredJob:
			inner = x.inner
		}
		pt, ok := inner.(interface{ paramsType() reflect.Type })
		if !ok {
			t.Fatalf("%s: no params type (%T)", n, inner)
		}
		check(string(n), pt.paramsType(), a.Spec().Schema)
	}
	lookups := reg.Lookups()
	if len(lookups) == 0 {
		t.Fatal("no lookups")
	}
	for _, l := range lookups {
		check(l.Name, l.args, l.Schema())
	}
}
