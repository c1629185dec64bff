package jschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Node is a schema as For writes it: the keywords it uses, encoded in
// the order jsonschema-go's encoder wrote them (so that the bytes in
// prompts stay the same).
type Node struct {
	// Type is a string, or a list of strings for a nullable type.
	Type        any        `json:"type,omitempty"`
	Properties  Properties `json:"properties,omitempty"`
	Items       *Node      `json:"items,omitempty"`
	Description string     `json:"description,omitempty"`
	Enum        []any      `json:"enum,omitempty"`
	Minimum     *float64   `json:"minimum,omitempty"`
	Maximum     *float64   `json:"maximum,omitempty"`
	MinItems    *int       `json:"minItems,omitempty"`
	MaxItems    *int       `json:"maxItems,omitempty"`
	Required    []string   `json:"required,omitempty"`
	// AdditionalProperties is a map's value schema.
	AdditionalProperties *Node `json:"additionalProperties,omitempty"`
}

// Property is one named property of an object schema.
type Property struct {
	Name   string
	Schema *Node
}

// Properties are an object's properties in the order they are written.
type Properties []Property

// Get returns the property of that name, or nil.
func (ps Properties) Get(name string) *Node {
	for _, p := range ps {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

// Types is the node's type as a list ("" type: none).
func (n *Node) Types() []string {
	switch t := n.Type.(type) {
	case string:
		return []string{t}
	case []string:
		return t
	}
	return nil
}

type plainNode Node // without the methods

// MarshalJSON writes the node; a node with no keyword is written as true,
// as jsonschema-go wrote the empty schema. Properties are written when
// not nil, even empty (a struct with no exported field).
func (n Node) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	first := true
	field := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if first {
			buf.WriteByte('{')
		} else {
			buf.WriteByte(',')
		}
		first = false
		buf.WriteString(`"` + name + `":`)
		buf.Write(b)
		return nil
	}
	var err error
	set := func(ok bool, name string, v any) {
		if ok && err == nil {
			err = field(name, v)
		}
	}
	set(n.Type != nil, "type", n.Type)
	set(n.Properties != nil, "properties", n.Properties)
	set(n.Items != nil, "items", n.Items)
	set(n.Description != "", "description", n.Description)
	set(len(n.Enum) > 0, "enum", n.Enum)
	set(n.Minimum != nil, "minimum", n.Minimum)
	set(n.Maximum != nil, "maximum", n.Maximum)
	set(n.MinItems != nil, "minItems", n.MinItems)
	set(n.MaxItems != nil, "maxItems", n.MaxItems)
	set(len(n.Required) > 0, "required", n.Required)
	set(n.AdditionalProperties != nil, "additionalProperties", n.AdditionalProperties)
	if err != nil {
		return nil, err
	}
	if first {
		return []byte("true"), nil
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads a node For wrote (true is the empty schema).
// Properties read back are in name order, as jsonschema-go read them
// (it kept no order for decoded schemas). Keywords For does not write are
// an error: the node is for the project's own schemas.
func (n *Node) UnmarshalJSON(data []byte) error {
	if t := bytes.TrimSpace(data); string(t) == "true" {
		*n = Node{}
		return nil
	}
	var raw struct {
		plainNode
		Type json.RawMessage `json:"type,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*n = Node(raw.plainNode)
	n.Type = nil
	if len(raw.Type) > 0 {
		var s string
		var list []string
		if err := json.Unmarshal(raw.Type, &s); err == nil {
			n.Type = s
		} else if err := json.Unmarshal(raw.Type, &list); err == nil {
			n.Type = list
		} else {
			return fmt.Errorf(`invalid value for "type": %s`, raw.Type)
		}
	}
	return nil
}

// MarshalJSON writes the properties in their order ({} when empty).
func (ps Properties) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(p.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.Schema)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads properties, in name order.
func (ps *Properties) UnmarshalJSON(data []byte) error {
	var m map[string]*Node
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(Properties, 0, len(names))
	for _, k := range names {
		out = append(out, Property{Name: k, Schema: m[k]})
	}
	*ps = out
	return nil
}
