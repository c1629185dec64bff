// Package atomicfile writes files so that a crash at any instant leaves
// either the old or the new content, never a torn file: a temp file in the
// same folder, fsync, rename, fsync the folder (terraform's replacefile
// idea). Job records, simulator data, cassettes and golden files use it; the
// checkpoint store has its own variant because it also rotates history.
//
// It must not be used for files that are appended to or shared by handle.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, created with mode perm.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a rename in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
