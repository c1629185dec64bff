//go:build unix

package checkpoint

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestPermissions(t *testing.T) {
	// With umask 0 nothing is narrowed for us: the modes must come from the code.
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	cp := sample(t, "perm1")
	for range 2 {
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
	}
	unlock, err := s.Lock("perm1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	session := filepath.Join(state, "sessions", "perm1")
	want := map[string]os.FileMode{
		state:                                  0o700,
		filepath.Join(state, "sessions"):       0o700,
		session:                                0o700,
		filepath.Join(session, historyDir):     0o700,
		filepath.Join(session, checkpointFile): 0o600,
		filepath.Join(session, historyDir, "1.json"): 0o600,
		filepath.Join(session, lockFile):             0o600,
	}
	for p, mode := range want {
		st, err := os.Stat(p)
		if err != nil {
			t.Error(err)
			continue
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), mode)
		}
	}
}
