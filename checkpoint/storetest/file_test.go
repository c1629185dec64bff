package storetest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/checkpoint/storetest"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
)

func TestMain(m *testing.M) {
	storetest.MaybeHold(func(spec string) (checkpoint.SessionStore, error) { return checkpoint.OpenFileStore(spec) })
	os.Exit(m.Run())
}

// TestFileStoreConformance runs the suite against the file store.
func TestFileStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Fresh: func(t *testing.T) string { return t.TempDir() },
		Open: func(t *testing.T, dir string, secrets ...string) checkpoint.SessionStore {
			s, err := checkpoint.OpenFileStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			s.Secrets = secrets
			return s
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
		Jobs: func(t *testing.T, dir string) *jobs.Store {
			s, err := jobs.OpenStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Audit: func(t *testing.T, dir string) audit.Log { return audit.OpenFileLog(dir, nil) },
	})
}
