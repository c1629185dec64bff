//go:build !unix

package main

import "os"

// maxRSSKiB is unknown off Unix.
func maxRSSKiB(*os.ProcessState) int64 { return 0 }
