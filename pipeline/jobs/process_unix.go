//go:build unix

package jobs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// spawnDetached starts path with args in a process session of its own, so
// that the worker outlives the CLI that started it and a Ctrl-C in that
// terminal does not reach it. stdin is /dev/null; stdout and stderr go to
// logPath (appended, 0600). The child is reaped by a goroutine when it ends
// while this process still runs.
func spawnDetached(path, arg0 string, args, env []string, logPath string) (int, error) {
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, filePerm)
	if err != nil {
		return 0, fmt.Errorf("worker log: %w", err)
	}
	defer log.Close() // the child has its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Args[0] = arg0
	cmd.Env = env
	cmd.Stdin = nil
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start worker %s: %w", path, err)
	}
	pid := cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	return pid, nil
}

// processAlive reports whether pid is a running process. A zombie (ended,
// not yet reaped by its parent) counts as gone.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false
	}
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// Linux only: the state letter follows the command name in
	// /proc/PID/stat. Elsewhere the file is missing and kill's answer stands.
	b, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if rerr != nil {
		return true
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		switch b[i+2] {
		case 'Z', 'X':
			return false
		}
	}
	return true
}

// signalWorker sends sig to the worker's process group (the worker leads
// its own session), or to the process alone when that fails. It never
// signals this process's own group.
func signalWorker(pid int, sig syscall.Signal) error {
	if pid <= 0 || pid == os.Getpid() {
		return nil
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid && pgid != syscall.Getpgrp() {
		if err := syscall.Kill(-pid, sig); err == nil {
			return nil
		}
	}
	return syscall.Kill(pid, sig)
}

var sigTerm = syscall.SIGTERM
