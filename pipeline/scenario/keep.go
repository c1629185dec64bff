package scenario

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

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

// wallClock is the real clock of kept runs (a variable for tests).
var wallClock = time.Now

// keptEpoch is the clock's start for a run whose state is kept: kept state
// is handed to a person (`resume`), where a confirmation expires
// approval_ttl after it was proposed, as every other confirmation does, so
// its times must be real ones. The clock still advances a minute per step,
// and starts early enough that the last of steps steps is not later than
// now (truncated to the minute): nothing kept is dated in the future.
func keptEpoch(now time.Time, steps int) time.Time {
	return now.UTC().Truncate(time.Minute).Add(-time.Duration(steps) * time.Minute)
}
