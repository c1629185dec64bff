package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/diff"

	"github.com/upgrade-agent/upgrade-agent/internal/atomicfile"
	"github.com/upgrade-agent/upgrade-agent/internal/safefile"
)

// GoldenByDefault is the golden: value of a scenario that sets none: true
// for a file inside a folder named exactly "scenarios" (the file's folder
// or any folder above it, so scenarios/flows/x.yaml counts too), false
// elsewhere, so that a scenario a user keeps in a folder of their own runs
// without a golden transcript until they ask for one (spec/scenarios.md).
func GoldenByDefault(path string) bool {
	dir := filepath.Dir(absPath(path))
	for {
		if filepath.Base(dir) == "scenarios" {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// GoldenPath is where the golden transcript of sc lives: dir/<name>.txt,
// where dir is goldenDir or, when empty, the folder "golden" next to the
// folder holding the scenario file (scenarios/x.yaml -> golden/x.txt).
func GoldenPath(sc *Scenario, goldenDir string) string {
	if goldenDir == "" {
		dir := filepath.Dir(absPath(sc.File))
		// Next to the folder named scenarios that holds the file, however
		// deep (scenarios/reference/x.yaml -> golden/x.txt).
		for d := dir; filepath.Dir(d) != d; d = filepath.Dir(d) {
			if filepath.Base(d) == "scenarios" {
				dir = d
				break
			}
		}
		goldenDir = filepath.Join(filepath.Dir(dir), "golden")
	}
	return filepath.Join(goldenDir, sc.Name+".txt")
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// maxGoldenBytes bounds a golden transcript (the largest bundled one is a
// few KiB); a FIFO or a huge file in its place is refused before reading.
const maxGoldenBytes = 16 << 20

// compareGolden compares (or, with update, rewrites) the golden file. It
// returns the unified diff when they differ and whether the file was
// written.
func compareGolden(path string, transcript []byte, update bool) (diffText string, written bool, err error) {
	old, rerr := safefile.ReadFile(path, maxGoldenBytes)
	missing := errors.Is(rerr, fs.ErrNotExist)
	if rerr != nil && !missing {
		return "", false, fmt.Errorf("read golden file: %w", rerr)
	}
	if !missing && bytes.Equal(old, transcript) {
		return "", false, nil
	}
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", false, fmt.Errorf("write golden file: %w", err)
		}
		if err := atomicfile.WriteFile(path, transcript, 0o644); err != nil {
			return "", false, fmt.Errorf("write golden file: %w", err)
		}
		return "", true, nil
	}
	if missing {
		return "", false, fmt.Errorf("golden file %s does not exist; run with --update (go test: -update) to create it", path)
	}
	return string(diff.Diff(path, old, "transcript of this run", transcript)), false, nil
}
