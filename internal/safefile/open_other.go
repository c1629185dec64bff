//go:build !unix

package safefile

import "os"

// openNonBlocking opens path for reading; without Unix named pipes a plain
// open cannot wait for a writer.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY, 0)
}
