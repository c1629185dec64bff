package pgstore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/internal/pgtest"
)

// longCheckpoint is about the size of a 1,000-turn session's checkpoint
// (some 270 KB: a window of exchanges and the compacted logs).
func longCheckpoint(id string) *checkpoint.Checkpoint {
	var b strings.Builder
	b.WriteString(`{"history":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"turn":%d,"user":"list the experiments of assign-prog please","assistant":"There are %d experiments running; the newest is Math Hints %d.","t":"2026-11-26T10:00:00Z"}`, i, i%7, i)
	}
	b.WriteString(`]}`)
	return &checkpoint.Checkpoint{SessionID: id, Status: checkpoint.StatusIdle, Counters: checkpoint.Counters{Turns: 1000},
		State: json.RawMessage(b.String())}
}

// BenchmarkLoadLongSession compares loading a 1,000-turn-sized checkpoint
// from files and from PostgreSQL on loopback (docs/teams.md).
func BenchmarkLoadLongSession(b *testing.B) {
	for name, s := range bothStores(b) {
		if err := s.Save(longCheckpoint("long")); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Load("long"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSaveLongSession is the same for a save (history kept).
func BenchmarkSaveLongSession(b *testing.B) {
	for name, s := range bothStores(b) {
		cp := longCheckpoint("long")
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := s.Save(cp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// bothStores is a fresh file store and a fresh PostgreSQL store.
func bothStores(b *testing.B) map[string]checkpoint.SessionStore {
	files, err := checkpoint.OpenFileStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	url, err := pgtest.Need(b).NewDatabase()
	if err != nil {
		b.Fatal(err)
	}
	return map[string]checkpoint.SessionStore{"files": files, "postgres": open(b, url)}
}
