//go:build !unix

package checkpoint

import "os"

// openFlags: outside Unix there are no named pipes in the file system to wait on.
const openFlags = os.O_RDONLY
