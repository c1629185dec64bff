//go:build unix

package checkpoint

import (
	"os"
	"syscall"
)

// openFlags opens a file for reading without waiting: opening a named pipe with
// O_RDONLY alone blocks until a writer appears (see openRegular).
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
