package safeyaml

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/hostile"
	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
)

func bomb(levels, width int) string { return "a: " + hostile.AliasBomb(levels, width) + "\n" }

func TestDecodeRefuses(t *testing.T) {
	deep := "a0: &a0 x\n"
	for i := 1; i <= 11; i++ {
		deep += fmt.Sprintf("a%d: &a%d [*a%d]\n", i, i, i-1)
	}
	tests := []struct {
		name, doc string
		lim       Limits
		want      string
	}{
		{"billion laughs", bomb(9, 9), Limits{}, `bomb.yaml:1:304: alias *l5 expands the document past 262144 values`},
		{"beyond int64", bomb(40, 9), Limits{MaxAliasDepth: 100}, `bomb.yaml:1:304: alias *l5 expands the document past`},
		{"alias depth", deep, Limits{}, `bomb.yaml:12:12: alias *a10 nests aliases more than 10 deep`},
		{"cycle", "a: &x [1, {b: *x}]\n", Limits{}, `bomb.yaml:1:15: alias *x refers to a value that contains it`},
		{"self", "&a [*a]\n", Limits{}, `bomb.yaml:1:5: alias *a refers to a value that contains it`},
		{"too many values", "[1, 2, 3, 4, 5]\n", Limits{MaxNodes: 4}, `bomb.yaml:1:8: the document has more than 4 values`},
		{"too large", "a: 12345\n", Limits{MaxBytes: 8}, `bomb.yaml: the document is 9 bytes, more than the 8 bytes allowed`},
		{"two documents", "a: 1\n---\nb: 2\n", Limits{}, `bomb.yaml:2: only one YAML document is allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := hostile.Within(t, 10*time.Second, func() error {
				_, err := Decode([]byte(tt.doc), "bomb.yaml", tt.lim)
				return err
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			var le *Error
			if !errors.Is(err, ErrLimit) || !errors.As(err, &le) {
				t.Errorf("error %T is not an *Error wrapping ErrLimit", err)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	reuse := "base: &b {name: x, tags: [a, b]}\nitems:\n"
	for range 100 {
		reuse += "  - *b\n"
	}
	for name, doc := range map[string]string{
		"plain":         "name: x\nsteps:\n  - say: hi\n",
		"reused anchor": reuse,
		"small bomb":    bomb(4, 9),  // 9^4 = 6561 values: fine
		"alias chain":   bomb(10, 1), // ten aliases deep, one wide
		"merge key":     "a: &a {x: 1}\nb:\n  <<: *a\n  y: 2\n",
		"empty":         "",
	} {
		t.Run(name, func(t *testing.T) {
			doc, err := Decode([]byte(doc), "ok.yaml", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if name == "empty" && doc.Kind != 0 {
				t.Errorf("empty document: kind %v", doc.Kind)
			}
		})
	}
}

func TestDecodeSyntaxErrorIsYAMLs(t *testing.T) {
	_, err := Decode([]byte("a: [\n"), "x.yaml", Limits{})
	if err == nil || errors.Is(err, ErrLimit) || !strings.HasPrefix(err.Error(), "yaml: line") {
		t.Fatalf("error %v: want yaml.v3's own syntax error", err)
	}
}

// TestCheckIsLinear: sixty levels of two aliases each would take 2^60 steps
// to expand; with memoised sizes the check takes sixty.
func TestCheckIsLinear(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(bomb(60, 2)), &n); err != nil {
		t.Fatal(err)
	}
	lim := Limits{MaxNodes: 1 << 62, MaxAliasDepth: 1000}
	err := hostile.Within(t, 10*time.Second, func() error { return Check(&n, "x.yaml", lim) })
	if err == nil || !strings.Contains(err.Error(), "expands the document past") {
		t.Fatalf("error %v", err)
	}
}

func TestCheckNode(t *testing.T) {
	// A node handed to an UnmarshalYAML method: the check sees its aliases.
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(bomb(9, 9)), &n); err != nil {
		t.Fatal(err)
	}
	if err := Check(n.Content[0], "", Limits{}); !errors.Is(err, ErrLimit) {
		t.Fatalf("Check = %v", err)
	}
	if err := Check(nil, "", Limits{}); err != nil {
		t.Fatalf("Check(nil) = %v", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(ok, Limits{}); err != nil || string(b) != "a: 1\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if _, err := ReadFile(ok, Limits{MaxBytes: 4}); !errors.Is(err, safefile.ErrTooLarge) ||
		!strings.Contains(err.Error(), "is 5 bytes, more than the 4 bytes allowed") {
		t.Fatalf("too large: %v", err)
	}
	if _, err := ReadFile(dir, Limits{}); !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), "is a folder") {
		t.Fatalf("folder: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), Limits{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	hostile.FIFO(t, fifo)
	// Nobody ever writes to the FIFO: a plain open would block for good.
	err := hostile.Within(t, 10*time.Second, func() error { _, err := ReadFile(fifo, Limits{}); return err })
	if !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("fifo: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"", "a: 1\n", "&a [*a]\n", bomb(9, 9), bomb(3, 3), "a: &x {b: *x}\n", "a: 1\n---\nb: 2\n",
		"a: &a {x: 1}\nb: {<<: *a}\n", "[" + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "]\n", hostile.Huge(DefaultMaxBytes),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxNodes: 5000}
		doc, err := Decode(data, "f.yaml", lim)
		if err != nil {
			return
		}
		// What Decode accepts expands to at most MaxNodes nodes.
		var count func(n *yaml.Node) int
		count = func(n *yaml.Node) int {
			if n.Kind == yaml.AliasNode && n.Alias != nil {
				return count(n.Alias)
			}
			c := 1
			for _, ch := range n.Content {
				c += count(ch)
			}
			return c
		}
		if c := count(doc); doc.Kind != 0 && c > 5000 {
			t.Fatalf("accepted a document of %d expanded nodes", c)
		}
	})
}
