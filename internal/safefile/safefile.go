// Package safefile reads the input files of the tool (scenarios, LLM
// scripts, cassettes, config files, job records) with two guarantees that
// os.ReadFile lacks: it never reads more than a stated number of bytes, and
// it never blocks on something that is not a regular file (a named pipe, a
// device, a socket), which it refuses at once.
//
// It must not be used for files the tool writes and rereads as a stream
// (logs), nor grow a notion of formats: decoding is the caller's business
// (internal/safeyaml bounds YAML on top of it).
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// Sentinels for errors.Is, always wrapped in an *fs.PathError naming the
// file, so callers that print errors.Unwrap(err) keep working.
var (
	// ErrTooLarge: the file holds more bytes than the caller's limit.
	ErrTooLarge = errors.New("file too large")
	// ErrNotRegular: the path is a folder, a named pipe, a device or a
	// socket rather than a regular file.
	ErrNotRegular = errors.New("not a regular file")
)

// LimitError is the detail of ErrTooLarge.
type LimitError struct {
	Limit int64 // the caller's limit in bytes
	Size  int64 // the size seen (at least Limit+1)
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("is %s, more than the %s allowed", Size(e.Size), Size(e.Limit))
}

func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// kindError is the detail of ErrNotRegular.
type kindError struct{ kind string }

func (e *kindError) Error() string        { return "is " + e.kind + ", not a regular file" }
func (e *kindError) Is(target error) bool { return target == ErrNotRegular }

// ReadFile returns the content of the regular file at path (symlinks
// followed) when it holds at most limit bytes. Errors are *fs.PathError:
// from the system (fs.ErrNotExist, fs.ErrPermission...) or wrapping
// ErrTooLarge or ErrNotRegular. A FIFO is opened without blocking and
// refused before any read, so a writer that never comes cannot hang us.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, info); err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: &LimitError{Limit: limit, Size: info.Size()}}
	}
	// The file may grow between Stat and the read: read one byte more than
	// allowed to notice.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: &LimitError{Limit: limit, Size: int64(len(data))}}
	}
	return data, nil
}

func checkRegular(path string, info fs.FileInfo) error {
	m := info.Mode()
	if m.IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch {
	case m.IsDir():
		kind = "a folder"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		kind = "a device"
	}
	return &fs.PathError{Op: "read", Path: path, Err: &kindError{kind}}
}

// Size renders a byte count the way limits are documented: "4 MiB",
// "512 KiB", and exactly otherwise ("1048577 bytes": a size just past a
// limit must not read as the limit itself).
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
