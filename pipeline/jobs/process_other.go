//go:build !unix

package jobs

import (
	"errors"
	"os"
	"syscall"
)

// Detached workers rely on Unix process sessions; elsewhere Start fails
// with a clear message and the CLI can still run jobs inline.
func spawnDetached(_, _ string, _, _ []string, _ string) (int, error) {
	return 0, errors.New("detached job workers need a Unix system")
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}

func signalWorker(int, syscall.Signal) error { return nil }

var sigTerm = syscall.SIGTERM
