package pipeline

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// callArrows reads the package's own (non-test) files and returns, for
// each file, the files whose functions and methods it names, each with
// the names. Imports are not read: the package's own names resolve
// without them, and only those count.
func callArrows(dir string) (map[string]map[string][]string, error) {
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
	conf := types.Config{Importer: emptyImporter{}, Error: func(error) {}}
	pkg, _ := conf.Check("pipeline", fset, files, info)
	arrows := map[string]map[string][]string{}
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
			arrows[from] = map[string][]string{}
		}
		if !slices.Contains(arrows[from][to], fn.Name()) {
			arrows[from][to] = append(arrows[from][to], fn.Name())
		}
	}
	return arrows, nil
}

// emptyImporter gives an empty package for every import.
type emptyImporter struct{}

func (emptyImporter) Import(path string) (*types.Package, error) {
	p := types.NewPackage(path, path[strings.LastIndex(path, "/")+1:])
	p.MarkComplete()
	return p, nil
}

// TestArrowsDown: inside the package the entry (run.go) calls the reply
// chain and the graph, the graph calls the nodes, and nothing calls back
// up: no node names the graph or the entry, and few pairs of files name
// each other (a pair is one arrow running back up). Before issue 26 the
// count was 10 pairs (72 arrows), with graph.go, reply.go, executor.go,
// nodes.go and output.go calling each other both ways.
func TestArrowsDown(t *testing.T) {
	arrows, err := callArrows(".")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	var back []string
	for from, tos := range arrows {
		for to, names := range tos {
			total++
			if from < to && arrows[to][from] != nil {
				back = append(back, from+" -> "+to+" ("+strings.Join(names, ", ")+") and back ("+strings.Join(arrows[to][from], ", ")+")")
			}
		}
	}
	sort.Strings(back)
	t.Logf("%d file-level arrows, %d pairs of files calling each other", total, len(back))
	for _, b := range back {
		t.Log(b)
	}
	const bound = 3
	if len(back) > bound {
		t.Errorf("%d pairs of files call each other (at most %d):\n%s", len(back), bound, strings.Join(back, "\n"))
	}
	// Who may name the top: only the entry names the graph, and only the
	// entry and the agent's constructor name the reply chain. Propose
	// (change_propose.go) is a second entry, built on run.go's turn steps.
	callers := map[string][]string{"graph.go": {"run.go"}, "run.go": {"change_propose.go"}, "reply.go": {"run.go", "agent.go", "graph.go"}}
	for from, tos := range arrows {
		for to, names := range tos {
			if allowed, top := callers[to]; top && !slices.Contains(allowed, from) {
				t.Errorf("%s calls back up into %s (%s)", from, to, strings.Join(names, ", "))
			}
		}
	}
}
