package inittrace

import (
	"context"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	out := []byte("init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs\n" +
		"init runtime @0.71 ms, 0.23 ms clock, 0 bytes, 0 allocs\n" +
		"something else on stderr\n" +
		"init github.com/x/y @25 ms, 7.1 ms clock, 1049848 bytes, 6104 allocs\n")
	got := Parse(out)
	want := []Init{{"internal/bytealg", 0}, {"runtime", 0.23}, {"github.com/x/y", 7.1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Parse (-want +got):\n%s", diff)
	}
	if s := Sum(got); s < 7.329 || s > 7.331 {
		t.Fatalf("Sum = %v, want 7.33", s)
	}
	r := Report{Best: got}
	if w := r.Without("github.com/x/y"); w < 0.229 || w > 0.231 {
		t.Fatalf("Without = %v, want 0.23", w)
	}
}

func TestReportMedian(t *testing.T) {
	for _, tc := range []struct {
		name   string
		totals []float64
		want   float64
	}{
		{"no runs", nil, 0},
		{"one run", []float64{2.5}, 2.5},
		{"odd, unsorted", []float64{6.8, 5.4, 9.1, 6.1, 7.0}, 6.8},
		{"even: the lower middle", []float64{3.0, 2.4, 4.2, 2.9}, 2.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Report{Totals: slices.Clone(tc.totals)}
			if got := r.Median(); got != tc.want {
				t.Errorf("Median of %v = %v, want %v", tc.totals, got, tc.want)
			}
			if diff := cmp.Diff(tc.totals, r.Totals); diff != "" {
				t.Errorf("Median reordered Totals (-before +after):\n%s", diff)
			}
		})
	}
}

// TestFloorSourcesImportRequirements reads the imports of the two floors:
// the chosen floor links the standard library an HTTPS and JSON client
// needs and exactly the libraries the brief chose, all of them also in the
// dependency floor; every library either floor imports is one of go.mod's
// direct requirements, so both build with the binary's versions.
func TestFloorSourcesImportRequirements(t *testing.T) {
	direct := directRequirements(t, filepath.Join("..", "..", "go.mod"))
	chosen := imports(t, ChosenFloorSource)
	want := []string{
		"crypto/tls", "encoding/json", "fmt",
		"github.com/sashabaranov/go-openai", "github.com/spf13/cobra", "go.yaml.in/yaml/v3",
		"net/http",
	}
	if diff := cmp.Diff(want, chosen); diff != "" {
		t.Errorf("ChosenFloorSource's imports (-want +got):\n%s", diff)
	}
	floor := imports(t, FloorSource)
	for _, p := range chosen {
		if !slices.Contains(floor, p) {
			t.Errorf("ChosenFloorSource imports %s, which FloorSource does not", p)
		}
	}
	for _, p := range slices.Concat(chosen, floor) {
		if !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
			continue // standard library
		}
		if !slices.ContainsFunc(direct, func(m string) bool { return p == m || strings.HasPrefix(p, m+"/") }) {
			t.Errorf("%s is in no direct requirement of go.mod", p)
		}
	}
}

// imports lists the import paths of the Go file src, sorted.
func imports(t *testing.T, src string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range f.Imports {
		p, err := strconv.Unquote(i.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// directRequirements lists the module paths a go.mod requires without
// "// indirect", from both the one-line and the block form.
func directRequirements(t *testing.T, gomod string) []string {
	t.Helper()
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inBlock := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "require (":
			inBlock = true
			continue
		case inBlock && l == ")":
			inBlock = false
			continue
		case strings.HasPrefix(l, "require "):
			l = strings.TrimPrefix(l, "require ")
		case !inBlock:
			continue
		}
		if f := strings.Fields(l); len(f) >= 2 && !strings.Contains(l, "// indirect") {
			out = append(out, f[0])
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no direct requirements read", gomod)
	}
	return out
}

// TestChosenFloorBuildsAndMeasures builds the chosen floor against this
// module's go.mod and reads its inits three times: one total per run, and
// the median among them.
func TestChosenFloorBuildsAndMeasures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command in PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := BuildChosenFloor(ctx, t.TempDir(), root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Measure(ctx, bin, nil, []string{"PATH=" + os.Getenv("PATH")}, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Runs != 3 || len(r.Totals) != 3 {
		t.Fatalf("Runs %d, Totals %v: want 3 of each", r.Runs, r.Totals)
	}
	if m := r.Median(); m < slices.Min(r.Totals) || m > slices.Max(r.Totals) || r.Total() != slices.Min(r.Totals) {
		t.Errorf("Median %v, best %v, totals %v", m, r.Total(), r.Totals)
	}
	for _, pkg := range []string{"github.com/spf13/cobra", "github.com/sashabaranov/go-openai", "go.yaml.in/yaml/v3"} {
		if !slices.ContainsFunc(r.Least, func(i Init) bool { return i.Package == pkg }) {
			t.Errorf("no init of %s in the chosen floor:\n%s", pkg, r.Top(len(r.Least)))
		}
	}
}
