package checkpoint

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLockSameProcess(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	s1, err := OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Save(sample(t, "lock1")); err != nil {
		t.Fatal(err)
	}
	unlock, err := s1.Lock("lock1")
	if err != nil {
		t.Fatal(err)
	}
	// Another store instance, and the same one, are refused at once.
	for name, s := range map[string]*FileStore{"other instance": s2, "same instance": s1} {
		_, err := s.Lock("lock1")
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("%s: got %v, want ErrLocked", name, err)
		}
		if want := "session lock1 is in use by another process"; err.Error() != want {
			t.Errorf("%s: message %q, want %q", name, err, want)
		}
	}
	// Other sessions are not affected.
	u2, err := s2.Lock("lock2")
	if err != nil {
		t.Fatalf("lock on another session: %v", err)
	}
	u2()
	unlock()
	unlock() // idempotent
	u3, err := s2.Lock("lock1")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	u3()
	if _, err := s2.Load("lock1"); err != nil {
		t.Errorf("the session suffered from locking: %v", err)
	}
}

func TestLockOnUnknownIDLeavesNothing(t *testing.T) {
	s := newStore(t)
	unlock, err := s.Lock("typo1")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Stat(filepath.Join(s.Dir(), "typo1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a lock on an id that never got a checkpoint left its folder: %v", err)
	}
	if _, err := s.Lock("../up"); err == nil {
		t.Error("Lock accepted an id that escapes the sessions folder")
	}
}

// startLockHolder re-executes the test binary as a process that holds the lock of
// session id until its stdin closes (see lockHelper in helpers_test.go).
func startLockHolder(t *testing.T, state, id string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+state+"\n"+id)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q, %v; stderr: %s", line, err, stderr.String())
	}
	return cmd, stdin
}

// lockWithin fails the test instead of hanging if Lock ever waits.
func lockWithin(t *testing.T, s *FileStore, id string) (func(), error) {
	t.Helper()
	type result struct {
		unlock func()
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		u, err := s.Lock(id)
		ch <- result{u, err}
	}()
	select {
	case r := <-ch:
		return r.unlock, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("Lock blocked instead of failing at once")
		return nil, nil
	}
}

func TestLockOtherProcess(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	s, err := OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(sample(t, "shared1")); err != nil {
		t.Fatal(err)
	}
	cmd, stdin := startLockHolder(t, state, "shared1")

	_, err = lockWithin(t, s, "shared1")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("while another process holds the lock: got %v, want ErrLocked", err)
	}
	if err := s.Remove("shared1"); !errors.Is(err, ErrLocked) {
		t.Errorf("Remove while another process holds the lock: %v", err)
	}
	// Reading stays possible (sessions show) while the session is in use.
	if _, err := s.Load("shared1"); err != nil {
		t.Errorf("Load while locked elsewhere: %v", err)
	}

	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lock holder: %v", err)
	}
	unlock, err := lockWithin(t, s, "shared1")
	if err != nil {
		t.Fatalf("after the other process released the lock: %v", err)
	}
	unlock()
}

func TestLockReleasedWhenHolderDies(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	s, err := OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(sample(t, "dies1")); err != nil {
		t.Fatal(err)
	}
	cmd, _ := startLockHolder(t, state, "dies1")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	unlock, err := lockWithin(t, s, "dies1")
	if err != nil {
		t.Fatalf("lock of a killed process was not released: %v", err)
	}
	unlock()
}
