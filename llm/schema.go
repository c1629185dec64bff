package llm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// StrictSchema returns the JSON schema of v's type (a struct or a pointer
// to one), in the form OpenAI's strict mode accepts: see MakeStrict. Field
// descriptions come from `jsonschema:"..."` struct tags.
func StrictSchema(v any) (json.RawMessage, error) {
	s, err := inferSchema(v)
	if err != nil {
		return nil, err
	}
	if err := MakeStrict(s); err != nil {
		return nil, fmt.Errorf("strict schema of %T: %w", v, err)
	}
	return marshalSchema(s, v)
}

// LooseSchema returns the JSON schema of v's type as inferred, without the
// strict-mode rewrite: optional fields stay optional, maps are allowed. It
// suits non-strict tools and validating arguments.
func LooseSchema(v any) (json.RawMessage, error) {
	s, err := inferSchema(v)
	if err != nil {
		return nil, err
	}
	return marshalSchema(s, v)
}

func inferSchema(v any) (*jsonschema.Schema, error) {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil, fmt.Errorf("schema of nil: want a struct value")
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("schema of %s: want a struct (tool parameters are an object)", t)
	}
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	return s, nil
}

func marshalSchema(s *jsonschema.Schema, v any) (json.RawMessage, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schema of %T: %w", v, err)
	}
	return b, nil
}

// MakeStrict rewrites an inferred schema in place for OpenAI strict mode
// (structured outputs), at every depth:
//   - every object lists all its properties in "required" and has
//     "additionalProperties": false;
//   - a property that was optional (omitempty, omitzero) becomes a union
//     with null, which is how strict mode spells "may be absent";
//   - a required slice is an array, not array-or-null: Go's nil slice
//     marshals as null, but a model should send [] for "none".
//
// Shapes strict mode cannot express are errors naming the property: maps
// (free-form keys) and fields of interface type (any value).
func MakeStrict(s *jsonschema.Schema) error {
	return strictify(s, "")
}

func strictify(s *jsonschema.Schema, path string) error {
	if s == nil {
		return nil
	}
	where := path
	if where == "" {
		where = "the top level"
	}
	if isEmptySchema(s) {
		return fmt.Errorf("%s: a value of any type cannot be described in strict mode; use a concrete type or LooseSchema", where)
	}
	if isType(s, "object") {
		if s.AdditionalProperties != nil && !isFalseSchema(s.AdditionalProperties) {
			return fmt.Errorf("%s: a map (free-form keys) cannot be described in strict mode; use a struct or LooseSchema", where)
		}
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		names := orderedProperties(s)
		for _, name := range names {
			p := s.Properties[name]
			if err := strictify(p, join(path, name)); err != nil {
				return err
			}
			if required[name] {
				if slices.Equal(p.Types, []string{"null", "array"}) {
					p.Types, p.Type = nil, "array"
				}
			} else {
				addNull(p)
			}
		}
		s.Required = names
		s.AdditionalProperties = &jsonschema.Schema{Not: &jsonschema.Schema{}}
		if s.Properties == nil {
			s.Properties = map[string]*jsonschema.Schema{}
		}
	}
	if s.Items != nil {
		if err := strictify(s.Items, path+"[]"); err != nil {
			return err
		}
	}
	for i, sub := range s.AnyOf {
		if err := strictify(sub, fmt.Sprintf("%s(anyOf %d)", path, i)); err != nil {
			return err
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// orderedProperties lists property names in field order, then any others.
func orderedProperties(s *jsonschema.Schema) []string {
	names := make([]string, 0, len(s.Properties))
	seen := map[string]bool{}
	for _, n := range s.PropertyOrder {
		if _, ok := s.Properties[n]; ok && !seen[n] {
			names = append(names, n)
			seen[n] = true
		}
	}
	var rest []string
	for n := range s.Properties {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

func isType(s *jsonschema.Schema, t string) bool {
	return s.Type == t || slices.Contains(s.Types, t)
}

func isEmptySchema(s *jsonschema.Schema) bool {
	return s.Type == "" && len(s.Types) == 0 && s.Ref == "" && len(s.AnyOf) == 0 &&
		len(s.OneOf) == 0 && len(s.AllOf) == 0 && s.Enum == nil && s.Const == nil && s.Not == nil
}

// isFalseSchema recognises the schema jsonschema-go writes as false.
func isFalseSchema(s *jsonschema.Schema) bool {
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}

// addNull widens a schema to also accept null.
func addNull(s *jsonschema.Schema) {
	switch {
	case s.Type != "":
		if s.Type != "null" {
			s.Types = []string{s.Type, "null"}
			s.Type = ""
		}
	case len(s.Types) > 0:
		if !slices.Contains(s.Types, "null") {
			s.Types = append(s.Types, "null")
		}
	case len(s.AnyOf) > 0:
		s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: "null"})
	}
	if s.Enum != nil && !slices.Contains(s.Enum, nil) {
		s.Enum = append(s.Enum, nil)
	}
}
