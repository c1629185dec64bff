package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const fuzzID = "fuzz0001"

// fuzzSeeds are the seed corpus of FuzzLoad, kept in testdata/fuzz/FuzzLoad/ (written by
// go test -update). reseal asks the target to fix the checksum up, so that mutations
// get past it to the JSON, version, field and validity checks.
func fuzzSeeds(t testing.TB) map[string]struct {
	data   []byte
	reseal bool
	valid  bool
} {
	s := newStore(t)
	if err := s.Save(sample(t, fuzzID)); err != nil {
		t.Fatal(err)
	}
	good := readBytes(t, s.Path(fuzzID))
	v1 := readBytes(t, filepath.Join("testdata", "golden-v1.json"))
	seqs := func(seq, parent string) []byte {
		return bytes.Replace(good, []byte(`"seq":1,"parent_seq":0,`), []byte(`"seq":`+seq+`,"parent_seq":`+parent+`,`), 1)
	}
	withEffects := func(effs []Effect) []byte {
		return fileOf(t, fuzzID, func(cp *Checkpoint) { cp.Effects = append(cp.Effects, effs...) })
	}
	return map[string]struct {
		data   []byte
		reseal bool
		valid  bool
	}{
		"valid":           {good, false, true},
		"valid-resealed":  {good, true, true},
		"broken-json":     {good[:len(good)/3], false, false},
		"bad-checksum":    {bytes.Replace(good, []byte(`"hello"`), []byte(`"jello"`), 1), false, false},
		"unknown-version": {bytes.Replace(good, []byte(versionMember), fmt.Appendf(nil, `"format_version":%d,`, FormatVersion+1), 1), true, false},
		"empty":           {nil, false, false},
		// The previous format, migrated on load.
		"format-v1": {bytes.Replace(v1, []byte("golden0000ab"), []byte(fuzzID), 1), true, true},
		// The effect log: one started effect more than a checkpoint may hold (the
		// tests make the 100,000 of a hostile file), and more finished ones than Save
		// keeps, which the save compacts.
		"effects-over-cap":  {withEffects(effectLog(MaxStartedEffects+1, EffectStarted)), false, false},
		"effects-many-done": {withEffects(effectLog(FinishedEffectsKept+10, EffectDone)), false, true},
		// seq: past the int64 range, at its maximum (overflowed on save before it was
		// validated), with a parent that does not precede it, and at MaxSeq (valid, but
		// no save follows it).
		"seq-past-int64":  {seqs("9223372036854775808", "9223372036854775807"), true, false},
		"seq-int64-max":   {seqs("9223372036854775807", "9223372036854775806"), true, false},
		"seq-bad-parent":  {seqs("1", "7"), true, false},
		"seq-at-max":      {seqs(fmt.Sprint(MaxSeq), fmt.Sprint(MaxSeq-1)), true, true},
		"effects-dropped": {bytes.Replace(good, []byte(`"effects":[`), []byte(`"effects_dropped":-5,"effects":[`), 1), true, false},
	}
}

func corpusFile(data []byte, reseal bool) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\nbool(%t)\n", strconv.Quote(string(data)), reseal)
}

// TestFuzzSeeds keeps the seed corpus in step with the format and checks that each
// seed means what its name says.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzLoad")
	for name, seed := range fuzzSeeds(t) {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, corpusFile(seed.data, seed.reseal), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := readBytes(t, path); !bytes.Equal(got, corpusFile(seed.data, seed.reseal)) {
			t.Errorf("%s is out of date: run go test -run TestFuzzSeeds -update", path)
		}
		_, err := loadFuzzInput(t, seed.data, seed.reseal)
		if seed.valid != (err == nil) {
			t.Errorf("seed %s: Load error %v, want valid=%v", name, err, seed.valid)
		}
	}
}

func loadFuzzInput(t *testing.T, data []byte, fix bool) (*Checkpoint, error) {
	s, err := OpenFileStore(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return loadInStore(t, s, data, fix)
}

func loadInStore(t *testing.T, s *FileStore, data []byte, fix bool) (*Checkpoint, error) {
	if fix {
		data = reseal(data)
	}
	path := writeSession(t, s, fuzzID, data)
	cp, err := s.Load(fuzzID)
	checkLoadOutcome(t, s, path, data, cp, err)
	return cp, err
}

// checkLoadOutcome is the property: Load gives either a valid checkpoint that can be
// saved and read back unchanged, or ErrCorrupt naming the file; the file is untouched.
func checkLoadOutcome(t *testing.T, s *FileStore, path string, data []byte, cp *Checkpoint, err error) {
	t.Helper()
	if got := readBytes(t, path); !bytes.Equal(got, data) {
		t.Fatalf("Load modified the file")
	}
	if err != nil {
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), path) {
			t.Fatalf("Load error is not a CorruptError naming %s: %v", path, err)
		}
		return
	}
	if cp.SessionID != fuzzID || cp.FormatVersion != FormatVersion {
		t.Fatalf("loaded session %q version %d", cp.SessionID, cp.FormatVersion)
	}
	if verr := cp.Validate(); verr != nil {
		t.Fatalf("Load returned an invalid checkpoint: %v", verr)
	}
	if serr := s.Save(cp); serr != nil {
		// The one checkpoint that loads but has no successor: seq at its maximum.
		if cp.Seq == MaxSeq && errors.Is(serr, ErrCorrupt) {
			return
		}
		t.Fatalf("a loaded checkpoint cannot be saved again: %v", serr)
	}
	again, lerr := s.Load(fuzzID)
	if lerr != nil {
		t.Fatalf("reloading what was saved: %v", lerr)
	}
	// Opaque members are compared as JSON: Save writes them compactly, and an absent
	// one as null. Nil effects are written as [].
	sameJSON := cmp.Comparer(func(a, b json.RawMessage) bool {
		norm := func(m json.RawMessage) []byte {
			if len(m) == 0 {
				return []byte("null")
			}
			var c bytes.Buffer
			if err := json.Compact(&c, m); err != nil {
				return m
			}
			return c.Bytes()
		}
		return bytes.Equal(norm(a), norm(b))
	})
	if cp.Effects == nil {
		cp.Effects = []Effect{}
	}
	if diff := cmp.Diff(cp, again, sameJSON); diff != "" {
		t.Fatalf("save and reload changed the checkpoint (-saved +reloaded):\n%s", diff)
	}
}

func FuzzLoad(f *testing.F) {
	// One folder per worker, on tmpfs when there is one: creating a temp dir per input
	// costs more than the Load under test.
	state := filepath.Join(scratchDir(f), "state")
	if _, err := OpenFileStore(state); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		s, err := OpenFileStore(state) // fresh, so nothing is remembered from the last input
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(s.Dir(), fuzzID)); err != nil {
			t.Fatal(err)
		}
		_, _ = loadInStore(t, s, data, fix)
	})
}
