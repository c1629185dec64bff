//go:build unix

package hostile

import (
	"syscall"
	"testing"
)

// FIFO makes a named pipe at path that nobody writes to: opening it for
// reading the ordinary way blocks for good. It skips the test where named
// pipes cannot be made.
func FIFO(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}
