package jschema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"time"
)

// For writes the schema of t as the agent offers it to a model: json tag
// names; a field without omitempty (or omitzero) is required, every other
// one optional and nullable (a model may send null for "not given"); a
// `jsonschema:"..."` tag is the field's description; structs carry no
// "additionalProperties": false (arguments are decoded strictly anyway).
// A type that has no JSON Schema (a func, a chan, a map with other keys,
// a type that contains itself) is an error.
func For(t reflect.Type) (json.RawMessage, error) {
	n, err := Infer(t)
	if err != nil {
		return nil, err
	}
	return json.Marshal(n)
}

// Infer is For's schema before it is encoded.
func Infer(t reflect.Type) (*Node, error) {
	n, err := infer(t, map[reflect.Type]bool{})
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	return n, nil
}

// asString reports the types encoded as JSON strings by their methods.
func asString(t reflect.Type) bool {
	switch t {
	case reflect.TypeFor[time.Time](), reflect.TypeFor[big.Int](), reflect.TypeFor[big.Rat](), reflect.TypeFor[big.Float]():
		return true
	}
	return t.PkgPath() == "log/slog" && t.Name() == "Level"
}

func f64(f float64) *float64 { return &f }

// infer follows jsonschema-go's For: a pointer's type also takes null, a
// slice's too; then the tidying of the agent is applied at every struct.
func infer(t reflect.Type, seen map[reflect.Type]bool) (*Node, error) {
	null := false
	for t.Kind() == reflect.Pointer {
		null = true
		t = t.Elem()
	}
	if t.Name() != "" {
		if seen[t] {
			return nil, fmt.Errorf("cycle detected for type %v", t)
		}
		seen[t] = true
		defer delete(seen, t)
	}
	n := &Node{}
	typ := ""
	if asString(t) {
		typ = "string"
	} else {
		switch t.Kind() {
		case reflect.Bool:
			typ = "boolean"
		case reflect.Int, reflect.Int64:
			typ = "integer"
		case reflect.Uint, reflect.Uint64, reflect.Uintptr:
			typ, n.Minimum = "integer", f64(0)
		case reflect.Int8:
			typ, n.Minimum, n.Maximum = "integer", f64(math.MinInt8), f64(math.MaxInt8)
		case reflect.Uint8:
			typ, n.Minimum, n.Maximum = "integer", f64(0), f64(math.MaxUint8)
		case reflect.Int16:
			typ, n.Minimum, n.Maximum = "integer", f64(math.MinInt16), f64(math.MaxInt16)
		case reflect.Uint16:
			typ, n.Minimum, n.Maximum = "integer", f64(0), f64(math.MaxUint16)
		case reflect.Int32:
			typ, n.Minimum, n.Maximum = "integer", f64(math.MinInt32), f64(math.MaxInt32)
		case reflect.Uint32:
			typ, n.Minimum, n.Maximum = "integer", f64(0), f64(math.MaxUint32)
		case reflect.Float32, reflect.Float64:
			typ = "number"
		case reflect.String:
			typ = "string"
		case reflect.Interface:
			// any value
		case reflect.Map:
			if t.Key().Kind() != reflect.String && !t.Key().Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
				return nil, fmt.Errorf("unsupported map key type %v", t.Key().Kind())
			}
			typ = "object"
			v, err := infer(t.Elem(), seen)
			if err != nil {
				return nil, fmt.Errorf("computing map value schema: %v", err)
			}
			n.AdditionalProperties = v
		case reflect.Slice, reflect.Array:
			items, err := infer(t.Elem(), seen)
			if err != nil {
				return nil, fmt.Errorf("computing element schema: %v", err)
			}
			n.Items = items
			if t.Kind() == reflect.Slice {
				n.Type = []string{"null", "array"}
			} else {
				typ = "array"
				l := t.Len()
				n.MinItems, n.MaxItems = &l, &l
			}
		case reflect.Struct:
			typ = "object"
			if err := inferStruct(n, t, seen); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("type %v is unsupported by jsonschema", t)
		}
	}
	if typ != "" {
		n.Type = typ
		if null {
			n.Type = []string{"null", typ}
		}
	}
	return n, nil
}

func inferStruct(n *Node, t reflect.Type, seen map[reflect.Type]bool) error {
	byName := map[string]*Node{}
	var order []string
	for _, f := range reflect.VisibleFields(t) {
		if n.Properties == nil {
			n.Properties = Properties{}
		}
		if f.Anonymous {
			continue // its fields are visible in their own right
		}
		name, opts, omit := jsonField(f)
		if omit {
			continue
		}
		fs, err := infer(f.Type, seen)
		if err != nil {
			return err
		}
		if tag, ok := f.Tag.Lookup("jsonschema"); ok {
			if tag == "" {
				return fmt.Errorf("empty jsonschema tag on struct field %s.%s", t, f.Name)
			}
			if word, _, found := strings.Cut(tag, "="); found && !strings.ContainsAny(word, " \t\n") {
				return fmt.Errorf("tag must not begin with 'WORD=': %q", tag)
			}
			fs.Description = tag
		}
		byName[name] = fs
		order = append(order, name)
		if !slices.Contains(opts, "omitempty") && !slices.Contains(opts, "omitzero") {
			n.Required = append(n.Required, name)
		}
	}
	// A name given twice keeps its last field, in the last place.
	for i := len(order) - 1; i >= 0; i-- {
		if slices.Contains(order[i+1:], order[i]) {
			order = slices.Delete(order, i, i+1)
		}
	}
	for _, name := range order {
		p := byName[name]
		setNullable(p, !slices.Contains(n.Required, name))
		n.Properties = append(n.Properties, Property{Name: name, Schema: p})
	}
	return nil
}

// jsonField reads a field's json tag as jsonschema-go did.
func jsonField(f reflect.StructField) (name string, opts []string, omit bool) {
	if !f.IsExported() {
		return "", nil, true
	}
	name = f.Name
	if tag, ok := f.Tag.Lookup("json"); ok {
		n, rest, found := strings.Cut(tag, ",")
		if n == "-" && !found {
			return "", nil, true
		}
		if n != "" {
			name = n
		}
		if rest != "" {
			opts = strings.Split(rest, ",")
		}
	}
	return name, opts, false
}

// setNullable makes a property's schema take null when it is optional,
// and only then; an untyped schema takes anything already.
func setNullable(p *Node, nullable bool) {
	var kept []string
	for _, t := range p.Types() {
		if t != "null" {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		return
	}
	if nullable {
		kept = append(kept, "null")
	}
	if len(kept) == 1 {
		p.Type = kept[0]
		return
	}
	p.Type = kept
}
