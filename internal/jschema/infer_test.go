package jschema_test

import (
	"encoding/json"
	"log/slog"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/jschema"
	"github.com/upgrade-agent/upgrade-agent/internal/jschema/jschematest"
)

type inner struct {
	Code   string  `json:"code" jsonschema:"the condition's code"`
	Weight float64 `json:"weight,omitempty"`
}

type embedded struct {
	Promoted string `json:"promoted"`
	Shadowed int    `json:"shadowed,omitempty"`
}

type textKey string

func (k textKey) MarshalText() ([]byte, error) { return []byte(k), nil }

type level int

type kinds struct {
	embedded
	Shadowed   string           `json:"shadowed"`
	S          string           `json:"s"`
	SOpt       string           `json:"s_opt,omitempty"`
	SZero      string           `json:"s_zero,omitzero"`
	B          bool             `json:"b"`
	I          int              `json:"i"`
	I8         int8             `json:"i8"`
	I16        int16            `json:"i16,omitempty"`
	I32        int32            `json:"i32"`
	I64        int64            `json:"i64"`
	U          uint             `json:"u"`
	U8         uint8            `json:"u8"`
	U16        uint16           `json:"u16"`
	U32        uint32           `json:"u32,omitempty"`
	U64        uint64           `json:"u64"`
	F32        float32          `json:"f32"`
	F64        float64          `json:"f64,omitempty" jsonschema:"a share, 0..100 <all> & more"`
	Ptr        *string          `json:"ptr"`
	PtrOpt     *int             `json:"ptr_opt,omitempty"`
	PtrStruct  *inner           `json:"ptr_struct,omitempty"`
	Struct     inner            `json:"struct"`
	Slice      []string         `json:"slice"`
	SliceOpt   []inner          `json:"slice_opt,omitempty" jsonschema:"conditions"`
	SliceSlice [][]int          `json:"slice_slice"`
	SlicePtr   []*inner         `json:"slice_ptr"`
	Array      [2]string        `json:"array"`
	Map        map[string]int   `json:"map"`
	MapOpt     map[string]inner `json:"map_opt,omitempty"`
	MapAny     map[string]any   `json:"map_any"`
	MapText    map[textKey]bool `json:"map_text"`
	Any        any              `json:"any"`
	AnyOpt     any              `json:"any_opt,omitempty" jsonschema:"anything"`
	Raw        json.RawMessage  `json:"raw,omitempty"`
	Time       time.Time        `json:"time"`
	TimePtr    *time.Time       `json:"time_ptr,omitempty"`
	Big        big.Int          `json:"big"`
	Level      slog.Level       `json:"level"`
	Named      level            `json:"named"`
	NoTag      string
	Skipped    string `json:"-"`
	unexported string
	Nested     map[string][]map[string]*inner `json:"nested,omitempty"`
}

type empty struct{}

type onlyUnexported struct{ a, b int }

type cyclic struct {
	Next *cyclic `json:"next,omitempty"`
}

type badTag struct {
	A string `json:"a" jsonschema:"WORD=value"`
}

type badMap struct {
	M map[int]string `json:"m"`
}

type badFunc struct {
	F func() `json:"f"`
}

// TestForIsJSONSchemaGoTidied: For writes the bytes jsonschema-go wrote,
// tidied, for every kind of field the agent's types use (and some more).
func TestForIsJSONSchemaGoTidied(t *testing.T) {
	_ = kinds{}.unexported
	_ = onlyUnexported{}.a
	_ = onlyUnexported{}.b
	for _, typ := range []reflect.Type{
		reflect.TypeFor[kinds](), reflect.TypeFor[inner](), reflect.TypeFor[empty](),
		reflect.TypeFor[onlyUnexported](), reflect.TypeFor[struct{}](),
		reflect.TypeFor[[]string](), reflect.TypeFor[map[string]int](), reflect.TypeFor[*inner](),
		reflect.TypeFor[string](), reflect.TypeFor[any](), reflect.TypeFor[[3]int](),
	} {
		want, err := jschematest.Schema(typ)
		if err != nil {
			t.Fatalf("%s: jsonschema-go: %v", typ, err)
		}
		got, err := jschema.For(typ)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", typ, got, want)
		}
	}
}

// TestForRefusesWhatJSONSchemaGoRefused: types with no schema are errors.
func TestForRefusesWhatJSONSchemaGoRefused(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[cyclic](), reflect.TypeFor[badTag](), reflect.TypeFor[badMap](),
		reflect.TypeFor[badFunc](), reflect.TypeFor[chan int](), reflect.TypeFor[complex128](),
	} {
		if _, err := jschematest.Schema(typ); err == nil {
			t.Fatalf("%s: jsonschema-go took it", typ)
		}
		if got, err := jschema.For(typ); err == nil {
			t.Errorf("%s: no error, wrote %s", typ, got)
		}
	}
}

// TestWithEnumRoundTrip: a schema For wrote, read into a Node and written
// again, has what jsonschema-go's read and write gave (properties in
// name order).
func TestNodeRoundTripIsJSONSchemaGos(t *testing.T) {
	raw, err := jschema.For(reflect.TypeFor[kinds]())
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"s", "s_opt", "ptr"} {
		want, err := jschematest.WithEnum(raw, arg, []string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		var n jschema.Node
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatal(err)
		}
		p := n.Properties.Get(arg)
		p.Description, p.Enum = "", []any{"a", "b"}
		for _, typ := range p.Types() {
			if typ == "null" {
				p.Enum = append(p.Enum, nil)
			}
		}
		got, err := json.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", arg, got, want)
		}
	}
}
