package changetest_test

import (
	"testing"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline/changetest"
)

func TestFileStoreChanges(t *testing.T) {
	changetest.Run(t, func(t *testing.T) checkpoint.SessionStore {
		s, err := checkpoint.OpenFileStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
