package storetest_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/checkpoint/storetest"
)

func TestMain(m *testing.M) {
	storetest.MaybeHold(func(spec string) (checkpoint.SessionStore, error) { return checkpoint.OpenFileStore(spec) })
	os.Exit(m.Run())
}

// TestFileStoreConformance runs the suite against the file store.
func TestFileStoreConformance(t *testing.T) {
	var trails sync.Map // *checkpoint.FileStore -> its *audit.FileLog
	storetest.Run(t, storetest.Harness{
		Fresh: func(t *testing.T) string { return t.TempDir() },
		Open: func(t *testing.T, dir string, secrets ...string) checkpoint.SessionStore {
			s, err := checkpoint.OpenFileStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			s.Secrets = secrets
			l := audit.OpenFileLog(dir, nil)
			s.Ahead = l.FlushSession
			trails.Store(s, l)
			return s
		},
		Ahead: func(t *testing.T, s checkpoint.SessionStore) audit.Ahead {
			l, _ := trails.Load(s)
			return l.(*audit.FileLog)
		},
		Tamper: func(t *testing.T, dir, op string) bool {
			path := filepath.Join(dir, audit.FileName)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitAfter(string(data), "\n")
			switch op {
			case storetest.TamperEdit:
				lines[1] = strings.Replace(lines[1], `"actor":"ci@runner"`, `"actor":"mallory"`, 1)
			case storetest.TamperRemove:
				lines = append(lines[:1], lines[2:]...)
			case storetest.TamperBackdated:
				forged := `{"time":"2020-01-01T00:00:00Z","event":"approved","actor":"mallory","session_id":"s1"}` + "\n"
				lines = append(lines[:2], append([]string{forged}, lines[2:]...)...)
			}
			if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			return false
		},
		BreakAudit: func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, audit.FileName+".lock.d"), 0o700); err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(filepath.Join(dir, audit.FileName+".lock"))
			if err := os.Rename(filepath.Join(dir, audit.FileName+".lock.d"), filepath.Join(dir, audit.FileName+".lock")); err != nil {
				t.Fatal(err)
			}
		},
		Raw: func(t *testing.T, dir, id string) []byte {
			b, err := os.ReadFile(filepath.Join(dir, "sessions", id, "checkpoint.json"))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Corrupt: func(t *testing.T, dir, id string, data []byte) {
			if err := os.WriteFile(filepath.Join(dir, "sessions", id, "checkpoint.json"), data, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		Audit: func(t *testing.T, dir string) audit.Log { return audit.OpenFileLog(dir, nil) },
	})
}
