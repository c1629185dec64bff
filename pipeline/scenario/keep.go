package scenario

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// keptStateDir makes root/name for a scenario's state. A folder that
// already holds something is refused rather than mixed with (or replaced
// by) this run: it may be an earlier run's artifact someone still needs.
func keptStateDir(root, name string) (string, error) {
	dir := filepath.Join(root, name)
	f, err := os.Open(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("--keep-state: %w", err)
	default:
		_, rerr := f.Readdirnames(1)
		f.Close()
		if rerr == nil {
			return "", fmt.Errorf("--keep-state: %s is not empty (kept from an earlier run?); remove it or keep the state elsewhere: %w", dir, pipeline.ErrBadInput)
		}
		if !errors.Is(rerr, io.EOF) {
			return "", fmt.Errorf("--keep-state: %s: %w", dir, rerr)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("--keep-state: %w", err)
	}
	return dir, nil
}
