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

// LoadAll discovers and parses scenarios. Every invalid file is reported
// (joined errors, each naming file:line), and two scenarios with one name
// (they would share a golden file) are an error too.
func LoadAll(paths []string) ([]*Scenario, error) {
	files, err := Discover(paths)
	if err != nil {
		return nil, err
	}
	var errs []error
	var out []*Scenario
	byName := map[string]string{}
	for _, f := range files {
		sc, err := Load(f)
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
// returns their reports in the order given. A scenario that cannot run has
// its error in Report.Err.
func RunAll(ctx context.Context, scs []*Scenario, opts RunOptions, parallel int) []*Report {
	if parallel < 1 {
		parallel = 1
	}
	reports := make([]*Report, len(scs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, sc := range scs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rep, _ := Run(ctx, sc, opts)
			reports[i] = rep
		}()
	}
	wg.Wait()
	return reports
}
