package checkpoint

import (
	"testing"
)

// The target (quality.md): a 1,000-turn session loads and saves in <= 10 ms. Save
// includes both fsyncs (file and folder), so its figure depends on the disk.

func longCheckpoint(b *testing.B) *Checkpoint {
	cp := sample(b, "bench1")
	cp.State = longState(b, 1000, 200)
	return cp
}

func reportMS(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/op")
}

func BenchmarkSave1000Turns(b *testing.B) {
	s := newStore(b)
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
}

func BenchmarkLoad1000Turns(b *testing.B) {
	s := newStore(b)
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
}

// BenchmarkList50Sessions is what `resume` without an id and `ask --continue` pay
// (Latest lists the store): a hash and a header decode per session, not a full decode.
func BenchmarkList50Sessions(b *testing.B) {
	s := newStore(b)
	cp := longCheckpoint(b)
	for range 50 {
		c := *cp
		c.SessionID = NewSessionID()
		if err := s.Save(&c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		list, err := s.List()
		if err != nil || len(list) != 50 {
			b.Fatal(len(list), err)
		}
	}
	reportMS(b)
}
