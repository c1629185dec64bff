// Package jschematest holds, for tests only, the library that package
// jschema replaced (github.com/google/jsonschema-go): what the agent's
// schemas and verdicts were, to compare with. It must not be imported by
// anything but tests: it would link the library into the binary again.
package jschematest

import (
	"encoding/json"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is the schema of t as the agent wrote it with jsonschema-go:
// jsonschema.ForType, then the tidying (no "additionalProperties": false,
// optional properties nullable, required ones not).
func Schema(t reflect.Type) (json.RawMessage, error) {
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	tidy(s)
	return json.Marshal(s)
}

func tidy(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Not != nil {
		s.AdditionalProperties = nil
	}
	for name, p := range s.Properties {
		setNullable(p, !slices.Contains(s.Required, name))
		tidy(p)
	}
	tidy(s.Items)
	if ap := s.AdditionalProperties; ap != nil {
		tidy(ap)
	}
}

func setNullable(p *jsonschema.Schema, nullable bool) {
	types := p.Types
	if p.Type != "" {
		types = []string{p.Type}
	}
	var kept []string
	for _, t := range types {
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
		p.Type, p.Types = kept[0], nil
		return
	}
	p.Type, p.Types = "", kept
}

// WithEnum is what the agent's withEnum wrote with jsonschema-go: schema
// read into a jsonschema.Schema, the property arg given the values (and
// null when it took null) in place of its description, written again.
func WithEnum(schema json.RawMessage, arg string, values []string) (json.RawMessage, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	p := s.Properties[arg]
	p.Description, p.Enum = "", nil
	for _, v := range values {
		p.Enum = append(p.Enum, v)
	}
	if slices.Contains(p.Types, "null") {
		p.Enum = append(p.Enum, nil)
	}
	return json.Marshal(&s)
}

// Validate is jsonschema-go's verdict: the schema document resolved (an
// error there is compileErr) and v validated against it.
func Validate(schema []byte, v any) (compileErr, validateErr error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return err, nil
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return err, nil
	}
	return nil, r.Validate(v)
}
