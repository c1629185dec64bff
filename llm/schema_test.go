package llm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/upgrade-agent/upgrade-agent/llm"
)

type point struct {
	Site   string `json:"site"`
	Target string `json:"target,omitempty"`
}

type strictParams struct {
	Name        string   `json:"name" jsonschema:"the experiment name"`
	Weight      *int     `json:"weight"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags"`
	Labels      []string `json:"labels,omitempty"`
	Point       *point   `json:"point,omitempty"`
	Points      []point  `json:"points"`
	internal    int
	Skipped     string `json:"-"`
}

func decode(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

func TestStrictSchema(t *testing.T) {
	got, err := llm.StrictSchema(strictParams{})
	if err != nil {
		t.Fatal(err)
	}
	pointSchema := func(typ any) string {
		return `{"type":` + mustJSON(typ) + `,"properties":{"site":{"type":"string"},"target":{"type":["string","null"]}},
			"required":["site","target"],"additionalProperties":false}`
	}
	want := `{
		"type":"object",
		"properties":{
			"name":{"type":"string","description":"the experiment name"},
			"weight":{"type":["null","integer"]},
			"description":{"type":["string","null"]},
			"tags":{"type":"array","items":{"type":"string"}},
			"labels":{"type":["null","array"],"items":{"type":"string"}},
			"point":` + pointSchema([]string{"null", "object"}) + `,
			"points":{"type":"array","items":` + pointSchema("object") + `}
		},
		"required":["name","weight","description","tags","labels","point","points"],
		"additionalProperties":false
	}`
	if diff := cmp.Diff(decode(t, json.RawMessage(want)), decode(t, got)); diff != "" {
		t.Errorf("StrictSchema (-want +got):\n%s", diff)
	}
	// Properties keep the field order: models fill arguments in that order.
	if s := string(got); strings.Index(s, `"name"`) > strings.Index(s, `"weight"`) {
		t.Errorf("property order lost: %s", s)
	}
	// A pointer to the struct gives the same schema.
	again, err := llm.StrictSchema(&strictParams{})
	if err != nil || string(again) != string(got) {
		t.Errorf("pointer: %s, %v", again, err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestLooseSchema(t *testing.T) {
	got, err := llm.LooseSchema(struct {
		A string            `json:"a"`
		B string            `json:"b,omitempty"`
		M map[string]string `json:"m,omitempty"`
	}{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},
		"m":{"type":"object","additionalProperties":{"type":"string"}}},"required":["a"],"additionalProperties":false}`
	if diff := cmp.Diff(decode(t, json.RawMessage(want)), decode(t, got)); diff != "" {
		t.Errorf("LooseSchema (-want +got):\n%s", diff)
	}
}

func TestStrictSchemaErrors(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"map field", struct {
			P struct {
				M map[string]int `json:"m"`
			} `json:"p"`
		}{}, "p.m: a map (free-form keys) cannot be described in strict mode"},
		{"any field", struct {
			V any `json:"value"`
		}{}, "value: a value of any type cannot be described in strict mode"},
		{"not a struct", 3, "want a struct"},
		{"nil", nil, "want a struct value"},
		{"func field", struct{ F func() }{}, "unsupported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := llm.StrictSchema(tt.v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}
