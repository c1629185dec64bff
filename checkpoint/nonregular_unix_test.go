//go:build unix

package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs f and fails the test, instead of hanging, if f blocks: opening a named
// pipe for reading waits for a writer, forever in a test.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked on a file that is not a regular file", what)
		var zero T
		return zero
	}
}

// wantNotRegular checks that err is a *CorruptError naming path that says what the
// file is.
func wantNotRegular(t *testing.T, what string, err error, path, kind string) {
	t.Helper()
	wantCorrupt(t, what, err, path, "not a regular file but "+kind)
}

func TestNonRegularFilesAreRefusedWithoutBlocking(t *testing.T) {
	mkfifo := func(t *testing.T, path string) {
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Skipf("no named pipes here: %v", err)
		}
	}
	symlink := func(target string) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	pipe := filepath.Join(t.TempDir(), "pipe")
	mkfifo(t, pipe)
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		kind string
	}{
		{"named pipe", mkfifo, "a named pipe (FIFO)"},
		{"link to a named pipe", symlink(pipe), "a named pipe (FIFO)"},
		// Reading /dev/zero would never end; the size cap would stop it, but a device
		// must not be opened at all.
		{"link to a device", symlink("/dev/zero"), "a character device"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if err := s.Save(sample(t, "good1")); err != nil {
				t.Fatal(err)
			}
			// Such a file is refused from its Stat: it is never opened at all.
			var opened []string
			hookOpen(t, func(path string) {
				if !strings.HasPrefix(path, filepath.Join(s.Dir(), "good1")) {
					opened = append(opened, path)
				}
			})
			t.Cleanup(func() {
				if len(opened) > 0 {
					t.Errorf("opened %v", opened)
				}
			})
			dir := filepath.Join(s.Dir(), "odd1")
			if err := os.MkdirAll(filepath.Join(dir, historyDir), 0o700); err != nil {
				t.Fatal(err)
			}
			path := s.Path("odd1")
			tt.make(t, path)
			hist := filepath.Join(dir, historyDir, "3.json")
			tt.make(t, hist)

			err := within(t, "Load", func() error { _, err := s.Load("odd1"); return err })
			wantNotRegular(t, "Load", err, path, tt.kind)
			err = within(t, "LoadHistory", func() error { _, err := s.LoadHistory("odd1", 3); return err })
			wantNotRegular(t, "LoadHistory", err, hist, tt.kind)
			err = within(t, "Import", func() error { _, err := s.Import(path); return err })
			wantNotRegular(t, "Import", err, path, tt.kind)
			cp := sample(t, "odd1")
			cp.Seq = 1
			err = within(t, "Save", func() error { return s.Save(cp) })
			wantNotRegular(t, "Save over it", err, path, tt.kind)

			// A listing shows it as corrupt and goes on; Latest never picks it.
			list := within(t, "List", func() []Summary {
				list, err := s.List()
				if err != nil {
					t.Error(err)
				}
				return list
			})
			if len(list) != 2 {
				t.Fatalf("List = %+v", list)
			}
			for _, sum := range list {
				if sum.ID == "odd1" && (sum.Status != StatusCorrupt || !strings.Contains(sum.Error, path)) {
					t.Errorf("listed as %+v", sum)
				}
			}
			latest := within(t, "Latest", func() string {
				id, err := s.Latest()
				if err != nil {
					t.Error(err)
				}
				return id
			})
			if latest != "good1" {
				t.Errorf("Latest = %q, want good1", latest)
			}
		})
	}
}

func TestDanglingLinkIsCorrupt(t *testing.T) {
	s := newStore(t)
	if err := os.MkdirAll(filepath.Join(s.Dir(), "dang1"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := s.Path("dang1")
	if err := os.Symlink(filepath.Join(t.TempDir(), "gone.json"), path); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load("dang1")
	wantCorrupt(t, "Load through a dangling link", err, path, "a symbolic link to nothing")
}

// A named pipe that takes the file's place between the Stat and the open must not make
// the open wait for a writer either.
func TestPipeSwappedInBeforeOpen(t *testing.T) {
	s := newStore(t)
	if err := s.Save(sample(t, "swap1")); err != nil {
		t.Fatal(err)
	}
	path := s.Path("swap1")
	hookOpen(t, func(p string) {
		if p != path {
			return
		}
		if err := os.Remove(p); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Error(err)
		}
	})
	err := within(t, "Load", func() error { _, err := s.Load("swap1"); return err })
	wantNotRegular(t, "Load", err, path, "a named pipe (FIFO)")
}
