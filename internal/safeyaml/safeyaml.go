// Package safeyaml is the one way the tool reads YAML from files and users
// (scenarios, LLM scripts, the config file): a bounded read, one document
// decoded into a yaml.Node, and a check, before any code walks the tree,
// that the document stays small once its aliases are expanded.
//
// Why: yaml.v3 keeps an alias as a pointer to its anchor, so a few hundred
// bytes of nested aliases (a "billion laughs" document) decode into a tiny
// tree that expands to gigabytes as soon as a walker follows the aliases.
// Its own guard against that applies only to decoding into Go values, not
// to yaml.Node walkers like ours. After Decode or Check succeeds, a walker
// that follows aliases visits at most Limits.MaxNodes nodes, so it needs no
// budget of its own and no context: the work is bounded by the limits (the
// densest 1 MiB document parses and checks in about a second).
//
// It must not know any schema: callers turn *Error into their own error
// type with the file and line.
package safeyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
)

// Default limits. Scenarios, scripts and config files are a few KiB (the
// largest bundled scenario is 6 KiB, about 700 values), so the limits leave
// more than a hundredfold room while bounding the worst case: yaml.v3 needs
// about 1 s and 120 MiB to parse 1 MiB of one-character values (the
// densest document there is), and a walker of 262,144 values needs a few
// tens of MiB at most.
const (
	// DefaultMaxBytes is the largest document read: 1 MiB.
	DefaultMaxBytes = 1 << 20
	// DefaultMaxNodes bounds the values (scalars, lists, mappings, keys
	// included) of a document once every alias is expanded: 262,144.
	DefaultMaxNodes = 1 << 18
	// DefaultMaxAliasDepth bounds aliases nested in aliased values: an
	// alias of a value holding an alias of a value holding an alias...
	DefaultMaxAliasDepth = 10
)

// Limits bound one document; zero fields take the defaults.
type Limits struct {
	MaxBytes      int64
	MaxNodes      int64
	MaxAliasDepth int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultMaxNodes
	}
	if l.MaxAliasDepth <= 0 {
		l.MaxAliasDepth = DefaultMaxAliasDepth
	}
	return l
}

// ErrLimit marks every refusal of this package (errors.Is): a document too
// large, too many values, aliases nested too deeply or an alias cycle.
// YAML syntax errors are yaml.v3's own and do not match it.
var ErrLimit = errors.New("YAML input limit exceeded")

// Error is a document refused by a limit; Line and Col are 0 when the
// problem is the document as a whole.
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
}

func (e *Error) Error() string { return At(e.File, e.Line, e.Col, e.Msg) }

// At formats a message about a place in a file as file:line:col: msg,
// leaving out a line or column of 0.
func At(file string, line, col int, msg string) string {
	switch {
	case line > 0 && col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", file, line, col, msg)
	case line > 0:
		return fmt.Sprintf("%s:%d: %s", file, line, msg)
	}
	return file + ": " + msg
}

func (e *Error) Unwrap() error { return ErrLimit }

// ReadFile reads the regular file at path, at most lim.MaxBytes of it
// (internal/safefile: a FIFO or a folder is refused at once). Errors are
// those of safefile.ReadFile.
func ReadFile(path string, lim Limits) ([]byte, error) {
	return safefile.ReadFile(path, lim.withDefaults().MaxBytes)
}

// Decode parses data, the content of file (named in errors), as exactly
// one YAML document and checks it against lim. It returns the document
// node, or a zero Node (Kind 0) when data holds no document (empty or only
// comments). A second document is an error, so that nothing in a file can
// be silently ignored. Syntax errors are yaml.v3's ("yaml: line 3: ...");
// refusals are *Error.
func Decode(data []byte, file string, lim Limits) (*yaml.Node, error) {
	lim = lim.withDefaults()
	if int64(len(data)) > lim.MaxBytes {
		return nil, &Error{File: file, Msg: fmt.Sprintf("the document is %s, more than the %s allowed",
			safefile.Size(int64(len(data))), safefile.Size(lim.MaxBytes))}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &yaml.Node{}, nil
		}
		return nil, err
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &Error{File: file, Line: extra.Line, Msg: "only one YAML document is allowed"}
	case !errors.Is(err, io.EOF):
		return nil, err
	}
	if err := Check(&doc, file, lim); err != nil {
		return nil, err
	}
	return &doc, nil
}

// Check refuses a tree that expands (following aliases) to more than
// lim.MaxNodes nodes, whose aliases nest more than lim.MaxAliasDepth deep,
// or whose aliases form a cycle (yaml.v3 accepts "&a [*a]" into a Node).
// It visits each node once (sizes of anchored values are memoised), so the
// check itself is linear in the size of the tree as parsed. Use it on a
// node handed over by someone else's decoder (an UnmarshalYAML method)
// before walking it.
func Check(n *yaml.Node, file string, lim Limits) error {
	if n == nil {
		return nil
	}
	c := &checker{file: file, lim: lim.withDefaults(), memo: map[*yaml.Node]measure{}, open: map[*yaml.Node]bool{}}
	m, err := c.measure(n)
	if err != nil {
		return err
	}
	if m.size <= c.lim.MaxNodes {
		return nil
	}
	// Too large: name the alias that takes the running count (in document
	// order) past the limit, or the node itself when there is no alias.
	var total int64
	if at := c.overflow(n, &total); at != nil {
		return at
	}
	return &Error{File: file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf("the document has more than %d values", c.lim.MaxNodes)}
}

// measure is a node's expanded size (saturated at MaxNodes+1) and alias
// depth (how many aliases deep its expansion goes).
type measure struct {
	size  int64
	depth int
}

type checker struct {
	file string
	lim  Limits
	memo map[*yaml.Node]measure // anchored nodes already measured
	open map[*yaml.Node]bool    // anchored nodes being measured: reaching one again is a cycle
}

func (c *checker) add(a, b int64) int64 {
	if s := a + b; s <= c.lim.MaxNodes {
		return s
	}
	return c.lim.MaxNodes + 1
}

func (c *checker) measure(n *yaml.Node) (measure, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return measure{size: 1}, nil
		}
		if c.open[n.Alias] {
			return measure{}, &Error{File: c.file, Line: n.Line, Col: n.Column,
				Msg: fmt.Sprintf("alias *%s refers to a value that contains it", n.Value)}
		}
		m, err := c.shared(n.Alias)
		if err != nil {
			return m, err
		}
		m.depth++
		if m.depth > c.lim.MaxAliasDepth {
			return m, &Error{File: c.file, Line: n.Line, Col: n.Column,
				Msg: fmt.Sprintf("alias *%s nests aliases more than %d deep (aliases of values that hold aliases)", n.Value, c.lim.MaxAliasDepth)}
		}
		return m, nil
	}
	if n.Anchor != "" {
		return c.shared(n)
	}
	return c.children(n)
}

// shared measures a node that aliases may reach (an anchored one) once,
// and is where a cycle is noticed.
func (c *checker) shared(n *yaml.Node) (measure, error) {
	if m, ok := c.memo[n]; ok {
		return m, nil
	}
	c.open[n] = true
	m, err := c.children(n)
	delete(c.open, n)
	if err == nil {
		c.memo[n] = m
	}
	return m, err
}

func (c *checker) children(n *yaml.Node) (measure, error) {
	m := measure{size: 1}
	for _, child := range n.Content {
		cm, err := c.measure(child)
		if err != nil {
			return m, err
		}
		m.size = c.add(m.size, cm.size)
		m.depth = max(m.depth, cm.depth)
	}
	return m, nil
}

// overflow walks in document order without expanding aliases, adding the
// memoised size of each alias, and returns the error for the node where
// the total first passes the limit.
func (c *checker) overflow(n *yaml.Node, total *int64) *Error {
	if n.Kind == yaml.AliasNode {
		size := int64(1)
		if n.Alias != nil {
			size = c.memo[n.Alias].size
		}
		*total = c.add(*total, size)
		if *total > c.lim.MaxNodes {
			return &Error{File: c.file, Line: n.Line, Col: n.Column,
				Msg: fmt.Sprintf("alias *%s expands the document past %d values (aliases are bounded so that a few bytes cannot expand to gigabytes)", n.Value, c.lim.MaxNodes)}
		}
		return nil
	}
	*total = c.add(*total, 1)
	if *total > c.lim.MaxNodes {
		return &Error{File: c.file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf("the document has more than %d values", c.lim.MaxNodes)}
	}
	for _, child := range n.Content {
		if err := c.overflow(child, total); err != nil {
			return err
		}
	}
	return nil
}
