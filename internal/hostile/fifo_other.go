//go:build !unix

package hostile

import "testing"

// FIFO skips the test: there are no named pipes in the file system here.
func FIFO(t testing.TB, path string) {
	t.Helper()
	t.Skip("no named pipes on this system")
}
