package jschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Schema is a compiled schema document, ready to validate values.
type Schema struct {
	root *schema
	doc  *document
}

// document is what the schemas of one document share: the schemas by
// JSON pointer, for $ref.
type document struct {
	at     map[string]*schema
	draft7 bool
}

// schema is one compiled (sub)schema.
type schema struct {
	always *bool // true or false: a boolean schema
	ref    string
	refTo  *schema

	types []string
	enum  []any
	cnst  *any // const (a pointer to nil for null)

	multipleOf, minimum, maximum, exclMin, exclMax *float64

	minLength, maxLength *int
	pattern              *regexp.Regexp

	items           *schema
	tuple           []*schema // draft-07 items as a list
	additionalItems *schema
	minItems        *int
	maxItems        *int
	uniqueItems     bool

	properties        map[string]*schema
	patternProperties []patternSchema
	additional        *schema
	required          []string
	minProps          *int
	maxProps          *int

	allOf, anyOf, oneOf []*schema
	not                 *schema
	ifS, thenS, elseS   *schema
}

type patternSchema struct {
	re *regexp.Regexp
	s  *schema
}

// maxDepth bounds how deep validation goes into schemas (through $ref and
// the combinators) and into the value: a hostile schema that refers to
// itself fails instead of recursing for ever.
const maxDepth = 500

// Compile reads a schema document. It understands type (a name or a list;
// integer is a number without a fraction), enum, const, multipleOf,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength and
// maxLength (in runes), pattern, items (a schema; a list, with
// additionalItems, under draft-07), minItems, maxItems, uniqueItems,
// properties, patternProperties, additionalProperties (a boolean or a
// schema), required, minProperties, maxProperties, allOf, anyOf, oneOf,
// not, if/then/else, and $ref to a place in the same document (#,
// #/$defs/..., #/definitions/..., any JSON pointer to a schema). Other
// keywords (format, title, $id, ...) are ignored. A known keyword of the
// wrong shape, a pattern that does not compile and a $ref elsewhere are
// errors.
func Compile(data []byte) (*Schema, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the schema")
	}
	d := &document{at: map[string]*schema{}}
	if m, ok := v.(map[string]any); ok {
		if s, _ := m["$schema"].(string); strings.Contains(s, "draft-07") {
			d.draft7 = true
		}
	}
	root, err := d.compile(v, "", 0)
	if err != nil {
		return nil, err
	}
	for _, s := range d.at {
		if s.ref == "" {
			continue
		}
		target, err := d.resolve(s.ref)
		if err != nil {
			return nil, err
		}
		s.refTo = target
	}
	return &Schema{root: root, doc: d}, nil
}

func (d *document) resolve(ref string) (*schema, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("$ref %q: only references inside the document (#...) are supported", ref)
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		return nil, fmt.Errorf("$ref %q: anchors are not supported", ref)
	}
	s, ok := d.at[frag]
	if !ok {
		return nil, fmt.Errorf("$ref %q: no schema there", ref)
	}
	return s, nil
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func (d *document) compile(v any, at string, depth int) (*schema, error) {
	if depth > 10000 {
		return nil, fmt.Errorf("%s: schema nested too deep", at)
	}
	s := &schema{}
	d.at[at] = s
	switch x := v.(type) {
	case bool:
		s.always = &x
		return s, nil
	case map[string]any:
		return s, d.compileObject(s, x, at, depth)
	}
	return nil, fmt.Errorf("%s: a schema must be an object or a boolean", orRoot(at))
}

func orRoot(at string) string {
	if at == "" {
		return "/"
	}
	return at
}

func (d *document) compileObject(s *schema, m map[string]any, at string, depth int) error {
	bad := func(k, want string) error {
		return fmt.Errorf("%s: %q must be %s", orRoot(at), k, want)
	}
	sub := func(k string, v any) (*schema, error) { return d.compile(v, at+"/"+escapePointer(k), depth+1) }
	list := func(k string) ([]*schema, error) {
		items, ok := m[k].([]any)
		if !ok {
			return nil, bad(k, "a list of schemas")
		}
		out := make([]*schema, len(items))
		for i, it := range items {
			c, err := d.compile(it, at+"/"+k+"/"+strconv.Itoa(i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	num := func(k string) (*float64, error) {
		f, ok := m[k].(float64)
		if !ok {
			return nil, bad(k, "a number")
		}
		return &f, nil
	}
	count := func(k string) (*int, error) {
		f, err := num(k)
		if err != nil || *f != math.Trunc(*f) || *f < math.MinInt32 || *f > math.MaxInt32 {
			return nil, bad(k, "an integer")
		}
		i := int(*f)
		return &i, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same error for the same document
	var err error
	for _, k := range keys {
		v := m[k]
		switch k {
		case "$ref":
			r, ok := v.(string)
			if !ok {
				return bad(k, "a string")
			}
			s.ref = r
		case "$defs", "definitions", "properties", "patternProperties":
			defs, ok := v.(map[string]any)
			if !ok {
				return bad(k, "an object of schemas")
			}
			names := make([]string, 0, len(defs))
			for name := range defs {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				c, err := d.compile(defs[name], at+"/"+k+"/"+escapePointer(name), depth+1)
				if err != nil {
					return err
				}
				switch k {
				case "properties":
					if s.properties == nil {
						s.properties = map[string]*schema{}
					}
					s.properties[name] = c
				case "patternProperties":
					re, err := regexp.Compile(name)
					if err != nil {
						return fmt.Errorf("%s: patternProperties %q: %v", orRoot(at), name, err)
					}
					s.patternProperties = append(s.patternProperties, patternSchema{re, c})
				}
			}
		case "type":
			switch t := v.(type) {
			case string:
				s.types = []string{t}
			case []any:
				s.types = []string{}
				for _, e := range t {
					name, ok := e.(string)
					if !ok {
						return bad(k, "a string or a list of strings")
					}
					s.types = append(s.types, name)
				}
			default:
				return bad(k, "a string or a list of strings")
			}
		case "enum":
			e, ok := v.([]any)
			if !ok {
				return bad(k, "a list")
			}
			s.enum = e
		case "const":
			c := v
			s.cnst = &c
		case "multipleOf":
			s.multipleOf, err = num(k)
		case "minimum":
			s.minimum, err = num(k)
		case "maximum":
			s.maximum, err = num(k)
		case "exclusiveMinimum":
			s.exclMin, err = num(k)
		case "exclusiveMaximum":
			s.exclMax, err = num(k)
		case "minLength":
			s.minLength, err = count(k)
		case "maxLength":
			s.maxLength, err = count(k)
		case "minItems":
			s.minItems, err = count(k)
		case "maxItems":
			s.maxItems, err = count(k)
		case "minProperties":
			s.minProps, err = count(k)
		case "maxProperties":
			s.maxProps, err = count(k)
		case "pattern":
			p, ok := v.(string)
			if !ok {
				return bad(k, "a string")
			}
			if s.pattern, err = regexp.Compile(p); err != nil {
				return fmt.Errorf("%s: pattern %q: %v", orRoot(at), p, err)
			}
		case "uniqueItems":
			b, ok := v.(bool)
			if !ok {
				return bad(k, "a boolean")
			}
			s.uniqueItems = b
		case "required":
			r, ok := v.([]any)
			if !ok {
				return bad(k, "a list of strings")
			}
			for _, e := range r {
				name, ok := e.(string)
				if !ok {
					return bad(k, "a list of strings")
				}
				s.required = append(s.required, name)
			}
		case "items":
			if _, ok := v.([]any); ok {
				var tuple []*schema
				if tuple, err = list(k); err == nil && d.draft7 {
					s.tuple = tuple
				}
			} else {
				s.items, err = sub(k, v)
			}
		case "additionalItems":
			s.additionalItems, err = sub(k, v)
		case "additionalProperties":
			s.additional, err = sub(k, v)
		case "not":
			s.not, err = sub(k, v)
		case "if":
			s.ifS, err = sub(k, v)
		case "then":
			s.thenS, err = sub(k, v)
		case "else":
			s.elseS, err = sub(k, v)
		case "allOf":
			s.allOf, err = list(k)
		case "anyOf":
			s.anyOf, err = list(k)
		case "oneOf":
			s.oneOf, err = list(k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ValidationError is a value that does not fit its schema: Path is the
// JSON pointer of the part that does not ("" for the whole value).
type ValidationError struct {
	Path   string
	Reason string
	// deep: the depth bound was hit; the value is refused whatever
	// combinator (not, anyOf, ...) the failure is under.
	deep bool
}

// hard is a failure no combinator turns into a success.
func hard(err error) bool {
	ve, ok := err.(*ValidationError)
	return ok && ve.deep
}

func (e *ValidationError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Validate checks v (a value as encoding/json decodes it: nil, bool,
// float64 or json.Number, string, []any, map[string]any) against the
// schema. The error is a *ValidationError for the first problem found.
func (s *Schema) Validate(v any) error {
	return (&run{document: s.doc}).validate(s.root, v, "", 0)
}

// run is one validation: its document and the schemas applied so far.
type run struct {
	*document
	steps int
}

// maxSteps bounds the schemas one validation applies: a hostile schema
// whose combinators refer to themselves twice over would otherwise take
// time exponential in maxDepth.
const maxSteps = 1 << 20

// Property is the schema of the root's property name, in the same
// document ($ref resolves as in the whole), or nil.
func (s *Schema) Property(name string) *Schema {
	if s.root.properties == nil || s.root.properties[name] == nil {
		return nil
	}
	return &Schema{root: s.root.properties[name], doc: s.doc}
}

// Required lists the root's required properties.
func (s *Schema) Required() []string { return s.root.required }

// HasProperty reports whether the root declares the property.
func (s *Schema) HasProperty(name string) bool { return s.root.properties[name] != nil }

// ClosedObject reports whether the root refuses properties it does not
// declare ("additionalProperties": false).
func (s *Schema) ClosedObject() bool {
	a := s.root.additional
	return a != nil && a.always != nil && !*a.always
}

func fail(path, format string, args ...any) error {
	return &ValidationError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// number reads a JSON number of v.
func number(v any) (*big.Rat, bool) {
	switch n := v.(type) {
	case float64:
		if math.IsInf(n, 0) || math.IsNaN(n) {
			return nil, false
		}
		return new(big.Rat).SetFloat64(n), true
	case json.Number:
		// As the float64 encoding/json would have decoded, so that 0.1
		// given either way is equal to 0.1 in the schema.
		if f, err := strconv.ParseFloat(string(n), 64); err == nil {
			return new(big.Rat).SetFloat64(f), true
		}
		r, ok := new(big.Rat).SetString(string(n))
		return r, ok
	case int:
		return new(big.Rat).SetInt64(int64(n)), true
	case int64:
		return new(big.Rat).SetInt64(n), true
	}
	return nil, false
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		if r, ok := number(x); ok {
			if r.IsInt() {
				return "integer"
			}
			return "number"
		}
	}
	return ""
}

func (d *run) validate(s *schema, v any, path string, depth int) error {
	if depth > maxDepth {
		return &ValidationError{Path: path, Reason: "the schema nests too deep (a $ref cycle?)", deep: true}
	}
	if d.steps++; d.steps > maxSteps {
		return &ValidationError{Path: path, Reason: "the schema takes too long to check", deep: true}
	}
	depth++
	if s.always != nil {
		if !*s.always {
			return fail(path, "no value is allowed here")
		}
		return nil
	}
	if s.refTo != nil {
		if err := d.validate(s.refTo, v, path, depth); err != nil {
			return err
		}
		if d.draft7 {
			return nil // draft-07 ignores what is beside a $ref
		}
	}
	got := typeOf(v)
	if got == "" {
		return fail(path, "%v of type %T is not a JSON value", v, v)
	}
	if s.types != nil && !typeAllowed(s.types, got) {
		if len(s.types) == 1 {
			return fail(path, "%s is %s, want %s", show(v), article(got), s.types[0])
		}
		return fail(path, "%s is %s, want one of %s", show(v), article(got), strings.Join(s.types, ", "))
	}
	if s.enum != nil && !containsEqual(s.enum, v) {
		return fail(path, "%s is not one of %s", show(v), showList(s.enum))
	}
	if s.cnst != nil && !equal(*s.cnst, v) {
		return fail(path, "%s is not %s", show(v), show(*s.cnst))
	}
	if err := checkNumber(s, v, path); err != nil {
		return err
	}
	if str, ok := v.(string); ok {
		n := utf8.RuneCountInString(str)
		switch {
		case s.minLength != nil && n < *s.minLength:
			return fail(path, "%q is %d characters long, shorter than %d", str, n, *s.minLength)
		case s.maxLength != nil && n > *s.maxLength:
			return fail(path, "%q is %d characters long, longer than %d", str, n, *s.maxLength)
		case s.pattern != nil && !s.pattern.MatchString(str):
			return fail(path, "%q does not match the pattern %q", str, s.pattern.String())
		}
	}
	if err := d.checkLogic(s, v, path, depth); err != nil {
		return err
	}
	switch x := v.(type) {
	case []any:
		return d.checkArray(s, x, path, depth)
	case map[string]any:
		return d.checkObject(s, x, path, depth)
	}
	return nil
}

func typeAllowed(types []string, got string) bool {
	for _, t := range types {
		if t == got || t == "number" && got == "integer" {
			return true
		}
	}
	return false
}

func article(t string) string {
	switch t {
	case "null":
		return "null"
	case "array", "integer", "object":
		return "an " + t
	}
	return "a " + t
}

func checkNumber(s *schema, v any, path string) error {
	if s.multipleOf == nil && s.minimum == nil && s.maximum == nil && s.exclMin == nil && s.exclMax == nil {
		return nil
	}
	n, ok := number(v)
	if !ok {
		return nil
	}
	if s.multipleOf != nil {
		f, _ := n.Float64()
		if _, frac := math.Modf(f / *s.multipleOf); frac != 0 {
			return fail(path, "%s is not a multiple of %s", n.RatString(), fmtFloat(*s.multipleOf))
		}
	}
	cmp := func(f float64) int { return n.Cmp(new(big.Rat).SetFloat64(f)) }
	switch {
	case s.minimum != nil && cmp(*s.minimum) < 0:
		return fail(path, "%s is less than the minimum %s", show(v), fmtFloat(*s.minimum))
	case s.maximum != nil && cmp(*s.maximum) > 0:
		return fail(path, "%s is greater than the maximum %s", show(v), fmtFloat(*s.maximum))
	case s.exclMin != nil && cmp(*s.exclMin) <= 0:
		return fail(path, "%s is not greater than %s", show(v), fmtFloat(*s.exclMin))
	case s.exclMax != nil && cmp(*s.exclMax) >= 0:
		return fail(path, "%s is not less than %s", show(v), fmtFloat(*s.exclMax))
	}
	return nil
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (d *run) checkLogic(s *schema, v any, path string, depth int) error {
	for _, a := range s.allOf {
		if err := d.validate(a, v, path, depth); err != nil {
			return err
		}
	}
	if s.anyOf != nil {
		var first error
		for _, a := range s.anyOf {
			err := d.validate(a, v, path, depth)
			if err == nil {
				first = nil
				break
			}
			if hard(err) {
				return err
			}
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return fail(path, "fits none of anyOf (the first: %s)", reason(first))
		}
	}
	if s.oneOf != nil {
		fits := -1
		for i, a := range s.oneOf {
			err := d.validate(a, v, path, depth)
			if hard(err) {
				return err
			}
			if err == nil {
				if fits >= 0 {
					return fail(path, "fits both oneOf %d and %d, want exactly one", fits, i)
				}
				fits = i
			}
		}
		if fits < 0 {
			return fail(path, "fits none of oneOf")
		}
	}
	if s.not != nil {
		err := d.validate(s.not, v, path, depth)
		if hard(err) {
			return err
		}
		if err == nil {
			return fail(path, "fits the schema under not")
		}
	}
	if s.ifS != nil {
		next := s.elseS
		err := d.validate(s.ifS, v, path, depth)
		if hard(err) {
			return err
		}
		if err == nil {
			next = s.thenS
		}
		if next != nil {
			if err := d.validate(next, v, path, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// reason is an error's text without its location.
func reason(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Error()
	}
	return err.Error()
}

func (d *run) checkArray(s *schema, a []any, path string, depth int) error {
	rest := 0
	if s.tuple != nil {
		for i, it := range a {
			if i >= len(s.tuple) {
				break
			}
			if err := d.validate(s.tuple[i], it, path+"/"+strconv.Itoa(i), depth); err != nil {
				return err
			}
		}
		rest = len(s.tuple)
		if s.additionalItems != nil {
			for i := rest; i < len(a); i++ {
				if err := d.validate(s.additionalItems, a[i], path+"/"+strconv.Itoa(i), depth); err != nil {
					return err
				}
			}
		}
	} else if s.items != nil {
		for i, it := range a {
			if err := d.validate(s.items, it, path+"/"+strconv.Itoa(i), depth); err != nil {
				return err
			}
		}
	}
	switch {
	case s.minItems != nil && len(a) < *s.minItems:
		return fail(path, "%d items, fewer than %d", len(a), *s.minItems)
	case s.maxItems != nil && len(a) > *s.maxItems:
		return fail(path, "%d items, more than %d", len(a), *s.maxItems)
	}
	if s.uniqueItems {
		for i := range a {
			for j := 0; j < i; j++ {
				if equal(a[i], a[j]) {
					return fail(path, "items %d and %d are equal", j, i)
				}
			}
		}
	}
	return nil
}

func (d *run) checkObject(s *schema, m map[string]any, path string, depth int) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first problem is the same on every run
	for _, k := range keys {
		at := path + "/" + escapePointer(k)
		known := false
		if p := s.properties[k]; p != nil {
			known = true
			if err := d.validate(p, m[k], at, depth); err != nil {
				return err
			}
		}
		for _, pp := range s.patternProperties {
			if pp.re.MatchString(k) {
				known = true
				if err := d.validate(pp.s, m[k], at, depth); err != nil {
					return err
				}
			}
		}
		if !known && s.additional != nil {
			if a := s.additional; a.always != nil && !*a.always {
				return fail(path, "unexpected property %q", k)
			}
			if err := d.validate(s.additional, m[k], at, depth); err != nil {
				return err
			}
		}
	}
	switch {
	case s.minProps != nil && len(m) < *s.minProps:
		return fail(path, "%d properties, fewer than %d", len(m), *s.minProps)
	case s.maxProps != nil && len(m) > *s.maxProps:
		return fail(path, "%d properties, more than %d", len(m), *s.maxProps)
	}
	for _, r := range s.required {
		if _, ok := m[r]; !ok {
			return fail(path, "missing required property %q", r)
		}
	}
	return nil
}

// equal is JSON equality: numbers by value (1 and 1.0 are equal), lists
// item by item, objects member by member.
func equal(a, b any) bool {
	if na, ok := number(a); ok {
		nb, ok := number(b)
		return ok && na.Cmp(nb) == 0
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

func containsEqual(list []any, v any) bool {
	for _, e := range list {
		if equal(e, v) {
			return true
		}
	}
	return false
}

// show is a value in an error: JSON, cut when long.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

func showList(list []any) string {
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = show(e)
	}
	return strings.Join(parts, ", ")
}
