package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
	"github.com/upgrade-agent/upgrade-agent/internal/safeyaml"
	"github.com/upgrade-agent/upgrade-agent/internal/textdist"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// ParseError is a mistake in a scenario file, with its position.
type ParseError struct {
	File string
	Line int // 0 when unknown
	Col  int // 0 when unknown
	Msg  string
}

func (e *ParseError) Error() string { return safeyaml.At(e.File, e.Line, e.Col, e.Msg) }

// ErrInvalid marks every error of Parse and Load (errors.Is), so callers
// can tell an invalid file (exit 2) from a failed run.
var ErrInvalid = errors.New("invalid scenario")

func (e *ParseError) Unwrap() []error { return []error{ErrInvalid, pipeline.ErrBadInput} }

// limits bound every scenario file: the defaults of internal/safeyaml
// (1 MiB, 262,144 values once aliases are expanded, aliases nested at most
// 10 deep; the largest bundled scenario is 6 KiB). Parsing takes no
// context: within these bounds it ends within a few seconds at worst. The
// text is parsed twice, into the checked tree and by the strict decoder, as
// the config file is: the densest document within the limits (262,144
// one-letter values, 0.5 MiB) takes 2.3 s where one parse took 1.6 s.
var limits = safeyaml.Limits{}

// ParseOptions loosen what Parse accepts. The zero value is the strict
// default of spec/scenarios.md.
type ParseOptions struct {
	// AllowOutsidePaths accepts cassette and output-schema paths that are
	// absolute or lead out of the scenario's folder (`scenario run|check
	// --allow-outside-paths`). Without it they are errors naming file:line.
	AllowOutsidePaths bool
}

// Load reads and parses one scenario file with the default options.
func Load(path string) (*Scenario, error) { return ParseOptions{}.Load(path) }

// Parse decodes a scenario with the default options; see ParseOptions.Parse.
func Parse(data []byte, path string) (*Scenario, error) { return ParseOptions{}.Parse(data, path) }

// Load reads and parses one scenario file, which must be a regular file of
// at most 1 MiB.
func (o ParseOptions) Load(path string) (*Scenario, error) {
	data, err := safeyaml.ReadFile(path, limits)
	if err != nil {
		return nil, &ParseError{File: path, Msg: fmt.Sprintf("cannot read: %v", errors.Unwrap(err))}
	}
	return o.Parse(data, path)
}

// Parse decodes a scenario strictly: unknown keys, wrong types, a step
// without (or with two of) say/answer/resume, a document past the limits
// (an alias bomb), a path that leaves the scenario's folder are errors
// naming path:line:col. path is used in messages, to resolve relative paths and
// to choose the golden default (GoldenByDefault).
//
// It goes in three steps: internal/safeyaml reads the document into a
// yaml.Node tree within the limits (syntax errors, alias bombs); yaml.v3
// decodes the same text with KnownFields into the structs of decode.go
// (unknown, repeated and misplaced keys); decode.go converts their values
// into a Scenario (types, enums, required keys, paths). The tree of the
// first step gives every error of the other two its column and its place
// ("step 2.expect").
func (o ParseOptions) Parse(data []byte, path string) (*Scenario, error) {
	d := &decoder{file: path, dir: filepath.Dir(path), opts: o}
	var f fileYAML
	if err := d.decodeFile(data, &f, "a scenario needs at least name and steps", "the scenario"); err != nil {
		return nil, err
	}
	return d.scenario(&f)
}

// decodeFile is the decoding scenarios and eval cases share: the document
// read within the limits (syntax errors at the line to fix, alias bombs), a
// mapping of plain keys at the top, decoded with KnownFields into f (a
// pointer to the file's struct), and no null where a value belongs. empty
// completes the message for an empty file; top names the document.
func (d *decoder) decodeFile(data []byte, f any, empty, top string) error {
	doc, err := safeyaml.Decode(data, d.file, limits)
	if err != nil {
		var le *safeyaml.Error
		if errors.As(err, &le) {
			return &ParseError{File: d.file, Line: le.Line, Col: le.Col, Msg: le.Msg}
		}
		return syntaxError(d.file, data, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &ParseError{File: d.file, Msg: "empty file: " + empty}
	}
	d.root = resolve(doc.Content[0])
	if d.root.Kind != yaml.MappingNode {
		return d.errf(d.root, "%s: want a mapping (key: value), got %s", top, kindName(d.root))
	}
	if err := d.plainKeys(d.root); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil {
		return d.decodeError(err)
	}
	return d.nulls(d.root, reflect.ValueOf(f).Elem(), nil)
}

var yamlLineRE = lazyre.Of(`^(?:yaml: )?line (\d+): `)

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: ...") into a
// ParseError with the line in its place.
func yamlError(path string, err error) error {
	msg := err.Error()
	if m := yamlLineRE.Get().FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &ParseError{File: path, Line: n, Msg: msg[len(m[0]):]}
	}
	return &ParseError{File: path, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// syntaxError is yamlError at the line where the file stops being YAML.
// yaml.v3 names the line where the construct that failed began, and for
// most syntax errors counts it from 0: an unclosed brace on line 5 comes
// as "line 4", a mis-indented key on line 6 as the line before the list
// that holds it. The line a person must fix is the first from which every
// longer part of the file fails to parse: up to the line before it, the
// text is YAML.
func syntaxError(path string, data []byte, err error) error {
	perr := yamlError(path, err)
	var pe *ParseError
	if !errors.As(perr, &pe) || pe.Line == 0 {
		return perr
	}
	if n := syntaxLine(data); n > 0 {
		pe.Line, pe.Col = n, 0
	}
	return pe
}

// maxSyntaxScan bounds the lines syntaxLine re-parses (each prefix once).
const maxSyntaxScan = 4000

func syntaxLine(data []byte) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxSyntaxScan {
		return 0
	}
	for k := len(lines) - 1; k >= 1; k-- {
		var n yaml.Node
		if yaml.Unmarshal(bytes.Join(lines[:k], nil), &n) == nil {
			return min(k+1, len(lines))
		}
	}
	return 1
}

type decoder struct {
	file string
	dir  string // the scenario's folder: relative paths start there and must stay inside
	opts ParseOptions
	root *yaml.Node // the document's mapping, checked by safeyaml
	err  error      // the first error of the conversion (set)
}

func (d *decoder) errf(n *yaml.Node, format string, args ...any) error {
	return &ParseError{File: d.file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)}
}

// The messages of yaml.v3's strict decoder, which name a line but no
// column and a Go type rather than a place in the file.
var (
	unknownFieldRE = lazyre.Of(`^line (\d+): field (.*) not found in type (\S+)$`)
	repeatedRE     = lazyre.Of(`^line (\d+): (?:field (.*) already set in type \S+|mapping key (".*") already defined at line \d+)$`)
	mismatchRE     = lazyre.Of("^line (\\d+): cannot unmarshal !!(\\w+)(?: `.*`)? into (.+)$")
)

// decodeError turns the first error of the strict decoder into a
// ParseError at the key or value it is about, found in the checked tree.
func (d *decoder) decodeError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return yamlError(d.file, err)
	}
	msg := te.Errors[0]
	if m := unknownFieldRE.Get().FindStringSubmatch(msg); m != nil {
		if k, path := d.findKey(atoi(m[1]), named(m[2])); k != nil {
			known := yamlKeys(yamlTypes.Get()[strings.TrimPrefix(m[3], "*")])
			hint := ""
			if s := textdist.Closest(k.Value, known, 3); s != "" {
				hint = fmt.Sprintf("; did you mean %q?", s)
			}
			return d.errf(k, "unknown key %q in %s%s (known: %s)", k.Value, label(path), hint, strings.Join(known, ", "))
		}
	}
	if m := repeatedRE.Get().FindStringSubmatch(msg); m != nil {
		name := m[2]
		if m[3] != "" {
			name, _ = strconv.Unquote(m[3])
		}
		if k, path := d.findKey(atoi(m[1]), named(name)); k != nil {
			return d.errf(k, "key %q appears twice in %s", k.Value, label(path))
		}
	}
	if m := mismatchRE.Get().FindStringSubmatch(msg); m != nil {
		if n, path := d.findValue(atoi(m[1]), tagged("!!"+m[2])); n != nil {
			want := "a mapping (key: value)"
			if strings.HasPrefix(m[3], "[]") {
				want = wantList(m[3])
			}
			return d.errf(n, "%s: want %s, got %s", label(path), want, kindName(n))
		}
	}
	line, rest, _ := strings.Cut(strings.TrimPrefix(msg, "line "), ": ")
	return &ParseError{File: d.file, Line: atoi(line), Msg: rest}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// findKey is the first mapping key on line that match accepts, and the
// path of the mapping that holds it.
func (d *decoder) findKey(line int, match func(k *yaml.Node) bool) (key *yaml.Node, parent []any) {
	walk(d.root, nil, func(path []any, k, _ *yaml.Node) bool {
		if k != nil && k.Line == line && match(k) {
			key, parent = k, path[:len(path)-1]
			return true
		}
		return false
	})
	return key, parent
}

// named matches a key by its text, tagged a value by its tag (!!seq).
func named(name string) func(*yaml.Node) bool {
	return func(k *yaml.Node) bool { return k.Value == name }
}
func tagged(tag string) func(*yaml.Node) bool {
	return func(n *yaml.Node) bool { return n.ShortTag() == tag }
}

// findValue is the first value on line that match accepts, and its path.
func (d *decoder) findValue(line int, match func(v *yaml.Node) bool) (value *yaml.Node, at []any) {
	walk(d.root, nil, func(path []any, _, v *yaml.Node) bool {
		if v.Line == line && match(v) {
			value, at = v, path
			return true
		}
		return false
	})
	return value, at
}

// walk visits every value below n in document order with its path (keys
// and list indices), following aliases (safeyaml has bounded them); key
// is nil for a list item. It stops as soon as visit returns true.
func walk(n *yaml.Node, path []any, visit func(path []any, key, value *yaml.Node) bool) bool {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
			p := append(slices.Clip(path), any(k.Value))
			if visit(p, k, v) || walk(v, p, visit) {
				return true
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			c = resolve(c)
			p := append(slices.Clip(path), any(i))
			if visit(p, nil, c) || walk(c, p, visit) {
				return true
			}
		}
	}
	return false
}

// at is the value at path (keys and list indices) below the document's
// mapping, for the position of a message: a value the decoder has read is
// always there, and the document's mapping stands in should it not be.
func (d *decoder) at(path ...any) *yaml.Node {
	n := d.root
	for _, p := range path {
		switch p := p.(type) {
		case string:
			n = child(n, p)
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return d.root
			}
			n = resolve(n.Content[p])
		}
		if n == nil {
			return d.root
		}
	}
	return n
}

// child is the value of key in mapping n; nil when n has no such key.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolve(n.Content[i]); k.Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

// label names a place in messages as the scenario format speaks of it:
// "the scenario", "options.wait_jobs", "step 2.expect.actions[0]".
func label(path []any) string {
	if len(path) == 0 {
		return "the scenario"
	}
	var b strings.Builder
	if i, ok := path[0].(string); ok && i == "steps" && len(path) > 1 {
		if n, ok := path[1].(int); ok {
			fmt.Fprintf(&b, "step %d", n+1)
			path = path[2:]
		}
	}
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// plainKeys refuses, anywhere in the document, a key that is not a plain
// word: yaml.v3 would merge a merge key (<<) into the structs and skip a
// null key (~) without a word, and a scenario should say what it means.
// It visits the tree as parsed (an alias is checked where its anchor is).
func (d *decoder) plainKeys(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			switch {
			case k.Kind == yaml.ScalarNode && k.Value == "<<":
				return d.errf(k, "YAML merge keys (<<) are not supported")
			case k.Kind != yaml.ScalarNode || isNull(k):
				_, path := d.findKey(k.Line, func(x *yaml.Node) bool { return x == k })
				return d.errf(k, "%s: keys must be plain words, got %s", label(path), kindName(k))
			}
		}
	}
	for _, c := range n.Content {
		if err := d.plainKeys(c); err != nil {
			return err
		}
	}
	return nil
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported value"
}

// insideFolder refuses a path (a cassette, an output schema) that is
// absolute or leads out of the scenario's folder, after cleaning and after
// resolving the symbolic links of the part that exists, unless
// AllowOutsidePaths. A scenario shared with others must not read or write
// files of theirs outside the folder they unpacked.
func (d *decoder) insideFolder(n *yaml.Node, what, p string) error {
	if d.opts.AllowOutsidePaths {
		return nil
	}
	const hint = "paths in a scenario are relative to its file and stay inside its folder (--allow-outside-paths lifts this)"
	if isAbsolute(p) {
		return d.errf(n, "%s: %s is an absolute path; %s", what, p, hint)
	}
	clean := filepath.Clean(filepath.FromSlash(p))
	if escapes(clean) {
		return d.errf(n, "%s: %s leads out of the scenario's folder; %s", what, p, hint)
	}
	base, err := filepath.Abs(d.dir)
	if err != nil {
		return nil
	}
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return nil // the folder does not exist (a file parsed from memory): nothing to follow
	}
	target := resolveExisting(filepath.Join(base, clean))
	if rel, err := filepath.Rel(realBase, target); err != nil || escapes(rel) {
		return d.errf(n, "%s: %s leads out of the scenario's folder through a symbolic link (to %s); %s", what, p, target, hint)
	}
	return nil
}

// isAbsolute is true for /x, C:\x, \x and \\host\share: anything not
// anchored at the scenario's folder, on any system.
func isAbsolute(p string) bool {
	return filepath.IsAbs(p) || filepath.VolumeName(p) != "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`)
}

// escapes reports whether a cleaned relative path climbs out of its base.
func escapes(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolveExisting resolves the symbolic links of the longest part of p that
// exists and keeps the rest as written (a cassette that record: will
// create, in a folder that may be a link).
func resolveExisting(p string) string {
	var rest []string
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
