package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/diff"
)

// GoldenPath is where the golden transcript of sc lives: dir/<name>.txt,
// where dir is goldenDir or, when empty, the folder "golden" next to the
// folder holding the scenario file (scenarios/x.yaml -> golden/x.txt).
func GoldenPath(sc *Scenario, goldenDir string) string {
	if goldenDir == "" {
		goldenDir = filepath.Join(filepath.Dir(filepath.Dir(absPath(sc.File))), "golden")
	}
	return filepath.Join(goldenDir, sc.Name+".txt")
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// compareGolden compares (or, with update, rewrites) the golden file. It
// returns the unified diff when they differ and whether the file was
// written.
func compareGolden(path string, transcript []byte, update bool) (diffText string, written bool, err error) {
	old, rerr := os.ReadFile(path)
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
		if err := writeFileAtomic(path, transcript); err != nil {
			return "", false, fmt.Errorf("write golden file: %w", err)
		}
		return "", true, nil
	}
	if missing {
		return "", false, fmt.Errorf("golden file %s does not exist; run with --update (go test: -update) to create it", path)
	}
	return string(diff.Diff(path, old, "transcript of this run", transcript)), false, nil
}

func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".golden-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
