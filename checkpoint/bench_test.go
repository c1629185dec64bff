package checkpoint

import (
	"path/filepath"
	"testing"
)

// The target (quality.md): a 1,000-turn session loads and saves in <= 10 ms. Save
// includes two fsyncs (the file, then its folder), whose cost is the disk's, so each
// benchmark runs twice: on the test temp dir ("disk") and, when /dev/shm exists, on
// tmpfs, where fsync is nearly free and what remains is this package's own work.

func longCheckpoint(b *testing.B) *Checkpoint {
	cp := sample(b, "bench1")
	cp.State = longState(b, 1000, 200)
	return cp
}

func reportMS(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/op")
}

func benchStores(b *testing.B, run func(b *testing.B, s *FileStore)) {
	for _, where := range []string{"disk", "tmpfs"} {
		b.Run(where, func(b *testing.B) {
			dir := b.TempDir()
			if where == "tmpfs" {
				if dir = scratchDir(b); dir == "" {
					b.Skip("no tmpfs")
				}
			}
			s, err := OpenFileStore(filepath.Join(dir, "state"))
			if err != nil {
				b.Fatal(err)
			}
			run(b, s)
		})
	}
}

func BenchmarkSave1000Turns(b *testing.B) {
	benchStores(b, func(b *testing.B, s *FileStore) {
		cp := longCheckpoint(b)
		if err := s.Save(cp); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(readBytes(b, s.Path("bench1")))))
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Save(cp); err != nil {
				b.Fatal(err)
			}
		}
		reportMS(b)
	})
}

func BenchmarkLoad1000Turns(b *testing.B) {
	benchStores(b, func(b *testing.B, s *FileStore) {
		cp := longCheckpoint(b)
		if err := s.Save(cp); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(readBytes(b, s.Path("bench1")))))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Load("bench1"); err != nil {
				b.Fatal(err)
			}
		}
		reportMS(b)
	})
}

// BenchmarkLoadSave1000Turns is one turn's worth of checkpointing: load, then save.
func BenchmarkLoadSave1000Turns(b *testing.B) {
	benchStores(b, func(b *testing.B, s *FileStore) {
		if err := s.Save(longCheckpoint(b)); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			cp, err := s.Load("bench1")
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Save(cp); err != nil {
				b.Fatal(err)
			}
		}
		reportMS(b)
	})
}

// BenchmarkList50Sessions: `sessions list` verifies every checkpoint (a hash each);
// BenchmarkLatest50Sessions, run before `resume` and `ask --continue`, hashes one.
func BenchmarkList50Sessions(b *testing.B) {
	s := fiftySessions(b)
	b.ReportAllocs()
	for b.Loop() {
		if list, err := s.List(); err != nil || len(list) != 50 {
			b.Fatal(len(list), err)
		}
	}
	reportMS(b)
}

func BenchmarkLatest50Sessions(b *testing.B) {
	s := fiftySessions(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Latest(StatusAwaitingConfirmation); err != nil {
			b.Fatal(err)
		}
	}
	reportMS(b)
}

func fiftySessions(b *testing.B) *FileStore {
	s, err := OpenFileStore(filepath.Join(scratchDir(b), "state"))
	if err != nil {
		b.Fatal(err)
	}
	cp := longCheckpoint(b)
	for range 50 {
		c := *cp
		c.SessionID = NewSessionID()
		if err := s.Save(&c); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// A hostile file of 100,000 started effects (issue 15: 14 s to load, then a
// reconciliation per entry on resume) is refused after the first 101 are decoded.
// Both benchmarks load from tmpfs; the file is 10 to 14 MB, under the size cap.
func BenchmarkLoad100kStartedEffects(b *testing.B) {
	benchHugeEffects(b, EffectStarted, false)
}

// 100,000 finished effects are valid (a version 1 session could have grown them):
// loaded in full, then compacted by the next save.
func BenchmarkLoad100kFinishedEffects(b *testing.B) {
	benchHugeEffects(b, EffectDone, true)
}

func benchHugeEffects(b *testing.B, state string, valid bool) {
	s, err := OpenFileStore(filepath.Join(scratchDir(b), "state"))
	if err != nil {
		b.Fatal(err)
	}
	data := hugeEffects(b, state)
	writeSession(b, s, "huge1", data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := s.Load("huge1"); (err == nil) != valid {
			b.Fatal(err)
		}
	}
	reportMS(b)
}
