package pipeline

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fileArrows reads the package's own (non-test) files and returns, for
// each file, the files whose functions and methods it names. Imports are
// not followed: only the package's own functions count, and they resolve
// without the packages it imports.
func fileArrows(dir string) (map[string]map[string]bool, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: emptyImporter{importer.Default()}, Error: func(error) {}}
	pkg, _ := conf.Check("pipeline", fset, files, info)
	arrows := map[string]map[string]bool{}
	for id, obj := range info.Uses {
		fn, ok := obj.(*types.Func)
		if !ok || fn.Pkg() != pkg {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(fn.Pos()).Filename)
		if from == to {
			continue
		}
		if arrows[from] == nil {
			arrows[from] = map[string]bool{}
		}
		arrows[from][to] = true
		if os.Getenv("ARROWS_DETAIL") != "" {
			fmt.Println("ARROW", from, to, fn.Name())
		}
	}
	return arrows, nil
}

// emptyImporter gives the standard library's packages and an empty
// package for the rest: enough to resolve the package's own names.
type emptyImporter struct{ std types.Importer }

func (e emptyImporter) Import(path string) (*types.Package, error) {
	name := path[strings.LastIndex(path, "/")+1:]
	p := types.NewPackage(path, name)
	p.MarkComplete()
	return p, nil
}

// backArrows are the pairs of files that name each other's functions:
// one of the two arrows runs back up.
func backArrows(arrows map[string]map[string]bool) (total int, back []string) {
	for from, tos := range arrows {
		for to := range tos {
			total++
			if from < to && arrows[to][from] {
				back = append(back, from+" <-> "+to)
			}
		}
	}
	sort.Strings(back)
	return total, back
}

// TestArrowsDown: inside the package the graph calls the nodes and the
// nodes do not call back into the graph. A pair of files that call each
// other is one arrow running back up; the count stays under the bound.
func TestArrowsDown(t *testing.T) {
	arrows, err := fileArrows(".")
	if err != nil {
		t.Fatal(err)
	}
	total, back := backArrows(arrows)
	t.Logf("in cycles: %d", inCycles(arrows))
	t.Logf("%d file-level arrows, %d pairs both ways", total, len(back))
	for _, b := range back {
		t.Log(b)
	}
	const bound = 1000
	if len(back) > bound {
		t.Errorf("%d pairs of files call each other (bound %d):\n%s", len(back), bound, strings.Join(back, "\n"))
	}
	_ = fmt.Sprint
}

func declaredAtTop(o types.Object) bool {
	if f, ok := o.(*types.Func); ok {
		_ = f
		return true
	}
	return o.Parent() == o.Pkg().Scope()
}

func inCycles(arrows map[string]map[string]bool) int {
	reach := func(a, b string) bool {
		seen := map[string]bool{a: true}
		stack := []string{a}
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if x == b {
				return true
			}
			for y := range arrows[x] {
				if !seen[y] {
					seen[y] = true
					stack = append(stack, y)
				}
			}
		}
		return false
	}
	n := 0
	for from, tos := range arrows {
		for to := range tos {
			if reach(to, from) {
				n++
			}
		}
	}
	return n
}
