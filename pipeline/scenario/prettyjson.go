package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/plainjson"
)

// jnode is a JSON value that keeps the order of object keys, so that the
// transcript shows params in the order the action defines them.
type jnode struct {
	scalar string // encoded scalar; "" for objects and arrays
	object bool
	array  bool
	keys   []string
	items  []*jnode
}

func parseJSON(raw []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := readNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data")
	}
	return n, nil
}

func readNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &jnode{object: t == '{', array: t == '['}
		for dec.More() {
			if n.object {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				n.keys = append(n.keys, k)
			}
			child, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, child)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case json.Number:
		return &jnode{scalar: roundNumber(t)}, nil
	default:
		b, err := plainjson.Marshal(t)
		if err != nil {
			return nil, err
		}
		return &jnode{scalar: string(b)}, nil
	}
}

// roundNumber shows fractions with at most six decimals: a p-value's last
// digits depend on the CPU's floating-point contraction (arm64 fuses
// multiply-adds), and a golden file must not.
func roundNumber(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return s
	}
	return strconv.FormatFloat(math.Round(f*1e6)/1e6, 'f', -1, 64)
}

func (n *jnode) compact() string {
	if !n.object && !n.array {
		return n.scalar
	}
	var b strings.Builder
	open, close := "[", "]"
	if n.object {
		open, close = "{", "}"
	}
	b.WriteString(open)
	for i, it := range n.items {
		if i > 0 {
			b.WriteString(", ")
		}
		if n.object {
			k, _ := plainjson.Marshal(n.keys[i])
			b.Write(k)
			b.WriteString(": ")
		}
		b.WriteString(it.compact())
	}
	b.WriteString(close)
	return b.String()
}

// pretty lays a value out with width columns: what fits on the rest of a
// line stays inline, the rest breaks one member per line.
func (n *jnode) pretty(b *strings.Builder, indent string, used, width int) {
	c := n.compact()
	if used+len(c) <= width || (!n.object && !n.array) || len(n.items) == 0 {
		b.WriteString(c)
		return
	}
	open, close := "[", "]"
	if n.object {
		open, close = "{", "}"
	}
	inner := indent + "  "
	b.WriteString(open + "\n")
	for i, it := range n.items {
		b.WriteString(inner)
		col := len(inner)
		if n.object {
			k, _ := plainjson.Marshal(n.keys[i])
			b.Write(k)
			b.WriteString(": ")
			col += len(k) + 2
		}
		it.pretty(b, inner, col, width)
		if i < len(n.items)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(indent + close)
}
