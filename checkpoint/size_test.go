package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestOversizedFileIsRefusedUnread(t *testing.T) {
	s := newStore(t)
	if err := os.MkdirAll(filepath.Join(s.Dir(), "big1"), 0o700); err != nil {
		t.Fatal(err)
	}
	// 900 MiB, sparse: no disk is used, but reading it would take 900 MiB of memory.
	path := s.Path("big1")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(900 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	const reason = "943718400 bytes, larger than any checkpoint (limit 16777216)"
	opens := 0
	hookOpen(t, func(p string) {
		if p == path {
			opens++
		}
	})

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = s.Load("big1")
	runtime.ReadMemStats(&after)
	wantCorrupt(t, "Load", err, path, reason)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("Load allocated %d bytes to refuse the file by its size", n)
	}
	_, err = s.Import(path)
	wantCorrupt(t, "Import", err, path, reason)
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].Status != StatusCorrupt || !strings.Contains(list[0].Error, reason) {
		t.Errorf("List = %+v, %v", list, err)
	}
	if _, err := s.Latest(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest = %v, want ErrNotFound", err)
	}
	if opens != 0 {
		t.Errorf("the file was opened %d times; its size alone refuses it", opens)
	}
}

// endless is a file that keeps growing while it is read; past twice the cap it fails
// the read, so that a reader without a limit fails the test instead of filling memory.
type endless struct{ read int64 }

var errEndless = errors.New("read on and on past the cap")

func (e *endless) Read(p []byte) (int, error) {
	if e.read > 2*maxFileSize {
		return 0, errEndless
	}
	for i := range p {
		p[i] = ' '
	}
	e.read += int64(len(p))
	return len(p), nil
}

func TestReadStopsAtTheCap(t *testing.T) {
	r := &endless{}
	if _, err := readAtMost(r, 1000); !errors.Is(err, errTooLarge) {
		t.Fatalf("readAtMost of an endless file: %v", err)
	}
	if r.read > maxFileSize+1 {
		t.Errorf("read %d bytes, more than the cap %d + 1", r.read, maxFileSize)
	}
}

// A checkpoint of exactly the cap is saved and loaded; one byte more is not written,
// since Load would refuse it and the session would be lost.
func TestSaveStaysWithinTheCap(t *testing.T) {
	pad := func(n int) json.RawMessage { return json.RawMessage(`{"pad":"` + strings.Repeat("x", n) + `"}`) }
	probe := fileOf(t, "cap1", func(cp *Checkpoint) { cp.State = pad(0) })
	fits := maxFileSize - len(probe) // the file with this much padding is exactly the cap

	s := newStore(t)
	cp := sample(t, "cap1")
	cp.State = pad(fits)
	if err := s.Save(cp); err != nil {
		t.Fatalf("Save at the cap: %v", err)
	}
	if st, err := os.Stat(s.Path("cap1")); err != nil || st.Size() != maxFileSize {
		t.Fatalf("file size %v, %v; want %d", st.Size(), err, maxFileSize)
	}
	got, err := s.Load("cap1")
	if err != nil {
		t.Fatalf("Load at the cap: %v", err)
	}
	before := readBytes(t, s.Path("cap1"))
	got.State = pad(fits + 1)
	if err := s.Save(got); err == nil || !strings.Contains(err.Error(), "larger than a checkpoint may be") {
		t.Fatalf("Save over the cap: %v", err)
	}
	if got.Seq != 1 || !bytes.Equal(readBytes(t, s.Path("cap1")), before) {
		t.Error("a refused save changed the checkpoint")
	}
}
