package scenario

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// Discover expands files and folders into scenario files: a folder gives
// every *.yaml and *.yml below it (hidden folders and testdata skipped),
// sorted; a file is taken as it is. A path that does not exist is an error.
func Discover(paths []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, &ParseError{File: p, Msg: "no such file or folder"}
		}
		if !info.IsDir() {
			add(p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				name := d.Name()
				if path != p && (strings.HasPrefix(name, ".") || name == "testdata") {
					return filepath.SkipDir
				}
				return nil
			}
			if ext := filepath.Ext(path); ext == ".yaml" || ext == ".yml" {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		sort.Strings(found)
		for _, f := range found {
			add(f)
		}
	}
	return out, nil
}

// LoadAll discovers and parses scenarios with the default options; see
// ParseOptions.LoadAll.
func LoadAll(paths []string) ([]*Scenario, error) { return ParseOptions{}.LoadAll(paths) }

// LoadAll discovers and parses scenarios. Every invalid file is reported
// (joined errors, each naming file:line), and two scenarios with one name
// (they would share a golden file) are an error too.
func (o ParseOptions) LoadAll(paths []string) ([]*Scenario, error) {
	files, err := Discover(paths)
	if err != nil {
		return nil, err
	}
	var errs []error
	var out []*Scenario
	byName := map[string]string{}
	for _, f := range files {
		sc, err := o.Load(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := byName[sc.Name]; dup {
			errs = append(errs, &ParseError{File: f, Msg: fmt.Sprintf("name %q is also used by %s (each scenario names its own golden file)", sc.Name, other)})
			continue
		}
		byName[sc.Name] = f
		out = append(out, sc)
	}
	if len(files) == 0 && len(errs) == 0 {
		errs = append(errs, &ParseError{File: strings.Join(paths, " "), Msg: "no scenario files (*.yaml, *.yml) found"})
	}
	return out, errors.Join(errs...)
}

// RunAll runs scenarios with up to parallel at once (at least 1) and
// returns their reports in the order given. emit, when not nil, receives
// each report in that same order as soon as it and every report before it
// are done, so a caller can print progress that reads the same whatever
// the parallelism. A scenario that cannot run has its error in Report.Err.
func RunAll(ctx context.Context, scs []*Scenario, opts RunOptions, parallel int, emit func(*Report)) []*Report {
	if parallel < 1 {
		parallel = 1
	}
	reports := make([]*Report, len(scs))
	var (
		mu   sync.Mutex
		next int
	)
	flush := func() {
		for next < len(reports) && reports[next] != nil {
			if emit != nil {
				emit(reports[next])
			}
			next++
		}
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, sc := range scs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rep, _ := Run(ctx, sc, opts)
			mu.Lock()
			reports[i] = rep
			flush()
			mu.Unlock()
		}()
	}
	wg.Wait()
	return reports
}

// Check validates what a scenario refers to without running it: the output
// schema loads and a replayed cassette exists.
func Check(sc *Scenario) error {
	dir := filepath.Dir(sc.File)
	rel := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if p := sc.Options.OutputSchema; p != "" {
		if _, err := pipeline.LoadOutputSchema(rel(p)); err != nil {
			return &ParseError{File: sc.File, Msg: fmt.Sprintf("options.output_schema: %v", err)}
		}
	}
	if sc.LLM.Mode == LLMReplay {
		if _, err := os.Stat(rel(sc.LLM.File)); err != nil {
			return &ParseError{File: sc.File, Msg: fmt.Sprintf("llm: replay: cassette %s: %v", rel(sc.LLM.File), errors.Unwrap(err))}
		}
	}
	return nil
}
