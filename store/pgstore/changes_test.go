package pgstore_test

import (
	"testing"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline/changetest"
)

// TestChangesConformance: the recorded changes of spec/undo.md behave in
// the PostgreSQL store as in the file store (pipeline/changetest).
func TestChangesConformance(t *testing.T) {
	changetest.Run(t, func(t *testing.T) checkpoint.SessionStore {
		_, url := newDatabase(t)
		return open(t, url)
	})
}
