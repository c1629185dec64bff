package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	s := newStore(t)
	cp := sample(t, "round1")
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	if cp.Seq != 1 || cp.ParentSeq != 0 || cp.FormatVersion != FormatVersion || len(cp.Checksum) != 64 {
		t.Fatalf("after Save: seq %d parent %d version %d checksum %q", cp.Seq, cp.ParentSeq, cp.FormatVersion, cp.Checksum)
	}
	got, err := s.Load("round1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cp, got); diff != "" {
		t.Errorf("Load after Save (-saved +loaded):\n%s", diff)
	}

	// A second save continues the chain from what was loaded.
	got.Status, got.Interrupt = StatusIdle, nil
	if err := s.Save(got); err != nil {
		t.Fatal(err)
	}
	again, err := s.Load("round1")
	if err != nil {
		t.Fatal(err)
	}
	if again.Seq != 2 || again.ParentSeq != 1 || !again.CreatedAt.Equal(cp.CreatedAt) || !again.UpdatedAt.After(cp.UpdatedAt) {
		t.Errorf("second save: seq %d parent %d created %v updated %v", again.Seq, again.ParentSeq, again.CreatedAt, again.UpdatedAt)
	}
}

func TestSaveFillsCreatedAtAndEmptyEffects(t *testing.T) {
	s := newStore(t)
	s.Now = fixedClock(t0)
	cp := &Checkpoint{SessionID: "fresh1", Status: StatusIdle, State: json.RawMessage(`{}`)}
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	if !cp.CreatedAt.Equal(t0) || !cp.UpdatedAt.Equal(t0) {
		t.Errorf("created %v updated %v, want both %v", cp.CreatedAt, cp.UpdatedAt, t0)
	}
	if data := readBytes(t, s.Path("fresh1")); !bytes.Contains(data, []byte(`"effects":[]`)) {
		t.Errorf("nil effects should be written as []: %s", data)
	}
}

// goldenV2 is the golden checkpoint: sample, with some effects dropped so that every
// member of the format is in the file.
func goldenV2(t *testing.T) (*FileStore, *Checkpoint) {
	t.Helper()
	s := newStore(t)
	s.Now = fixedClock(t0)
	cp := sample(t, "golden0000ab")
	cp.EffectsDropped = 3
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	return s, cp
}

func TestGoldenV2(t *testing.T) {
	s, cp := goldenV2(t)
	got := readBytes(t, s.Path("golden0000ab"))
	golden := filepath.Join("testdata", "golden-v2.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readBytes(t, golden)
	if !bytes.Equal(got, want) {
		t.Fatalf("format changed (-golden +now); if intended, bump FormatVersion, add a migration and run go test -update:\n%s",
			cmp.Diff(strings.Split(string(want), ","), strings.Split(string(got), ",")))
	}

	// The golden file itself loads, in a store of its own, to the same checkpoint.
	other := newStore(t)
	writeSession(t, other, "golden0000ab", want)
	loaded, err := other.Load("golden0000ab")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cp, loaded); diff != "" {
		t.Errorf("golden file loads differently (-saved +loaded):\n%s", diff)
	}
	// HTML-like characters stay readable: the encoding has HTML escaping off.
	if !bytes.Contains(want, []byte(`checkout <button> & color`)) {
		t.Errorf("golden file escapes <, > or &")
	}
}

// TestGoldenV1 loads the version 1 golden file, written by the previous format, as
// every session saved before version 2 is loaded: migrated in memory, the file
// untouched, and saved in the current format.
func TestGoldenV1(t *testing.T) {
	v1 := readBytes(t, filepath.Join("testdata", "golden-v1.json"))
	if !bytes.HasPrefix(v1, []byte(`{"format_version":1,`)) {
		t.Fatalf("golden-v1.json is not a version 1 file: %.30s", v1)
	}
	s := newStore(t)
	path := writeSession(t, s, "golden0000ab", v1)
	got, err := s.Load("golden0000ab")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readBytes(t, path), v1) {
		t.Errorf("Load rewrote the version 1 file")
	}
	if got.Checksum != checksumOf(v1) {
		t.Errorf("checksum %q, want the file's", got.Checksum)
	}
	// The same checkpoint as sample saved now, byte for byte in its opaque members
	// (the migration keeps the bytes of the members it does not touch).
	ref := newStore(t)
	ref.Now = fixedClock(t0)
	want := sample(t, "golden0000ab")
	if err := ref.Save(want); err != nil {
		t.Fatal(err)
	}
	got.Checksum = want.Checksum
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version 1 golden file (-sample saved now +migrated):\n%s", diff)
	}
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].Status != StatusAwaitingConfirmation {
		t.Errorf("List of a version 1 session: %+v, %v", list, err)
	}

	// Saved, it is a current file that takes the fast decode; the old one is history.
	if err := s.Save(got); err != nil {
		t.Fatal(err)
	}
	saved := readBytes(t, path)
	if !bytes.HasPrefix(saved, []byte(`{`+versionMember)) {
		t.Errorf("after Save: %.40s", saved)
	}
	if cp, ok := decodeFast(saved); !ok || cp.Seq != 2 {
		t.Errorf("the saved file does not take the fast decode")
	}
	if h := readBytes(t, filepath.Join(filepath.Dir(path), historyDir, "1.json")); !bytes.Equal(h, v1) {
		t.Errorf("history/1.json is not the version 1 file")
	}

	// effects_dropped is not a member of version 1.
	bad := reseal(bytes.Replace(v1, []byte(`"effects":[`), []byte(`"effects_dropped":4,"effects":[`), 1))
	badPath := writeSession(t, s, "golden0000ab", bad)
	var ce *CorruptError
	if _, err := s.Load("golden0000ab"); !errors.As(err, &ce) || ce.Path != badPath ||
		!strings.Contains(ce.Reason, "migrating format_version 1 to 2: effects_dropped: not a member of format_version 1") {
		t.Errorf("version 1 file with effects_dropped: %v", err)
	}
}

func TestChecksumRule(t *testing.T) {
	// The documented rule, recomputed independently: the bytes with the checksum's
	// value emptied and without the final newline.
	s := newStore(t)
	cp := sample(t, "rule1")
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	data := readBytes(t, s.Path("rule1"))
	if !bytes.HasSuffix(data, []byte(`"checksum":"`+cp.Checksum+`"}`+"\n")) {
		t.Fatalf("file does not end with its checksum member: ...%s", data[len(data)-90:])
	}
	if bytes.Count(data, []byte("\n")) != 1 {
		t.Errorf("file should be one line of compact JSON")
	}
	emptied := bytes.Replace(bytes.TrimSuffix(data, []byte("\n")), []byte(cp.Checksum), nil, 1)
	if got := checksumHex(emptied); got != cp.Checksum {
		t.Errorf("sha256 of the emptied document = %s, file says %s", got, cp.Checksum)
	}
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format_version", "session_id", "seq", "parent_seq", "created_at", "updated_at", "status", "next_node", "interrupt", "state", "effects", "counters", "usage", "mcp", "checksum"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("member %q missing from the file", k)
		}
	}
}

func TestHistoryKeepsTwenty(t *testing.T) {
	s := newStore(t)
	cp := sample(t, "hist1")
	for i := 0; i < 30; i++ {
		cp.Counters.Turns = i
		if err := s.Save(cp); err != nil {
			t.Fatalf("save %d: %v", i+1, err)
		}
	}
	seqs, err := s.History("hist1")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int, 0, 20)
	for i := 10; i < 30; i++ {
		want = append(want, i)
	}
	if diff := cmp.Diff(want, seqs); diff != "" {
		t.Errorf("history seqs (-want +got):\n%s", diff)
	}
	old, err := s.LoadHistory("hist1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if old.Seq != 10 || old.Counters.Turns != 9 {
		t.Errorf("history/10.json: seq %d turns %d, want 10 and 9", old.Seq, old.Counters.Turns)
	}
	if _, err := s.LoadHistory("hist1", 9); !errors.Is(err, ErrNotFound) {
		t.Errorf("pruned history entry: got %v, want ErrNotFound", err)
	}
	cur, err := s.Load("hist1")
	if err != nil || cur.Seq != 30 {
		t.Fatalf("latest: %v seq %d", err, cur.Seq)
	}
}

func TestCrashLeavesOldOrNew(t *testing.T) {
	s := newStore(t)
	cp := sample(t, "crash1")
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	path := s.Path("crash1")
	before := readBytes(t, path)
	dir := filepath.Dir(path)

	// A crash in the middle of writing the temp file: a torn stray file beside the
	// checkpoint, which Load must not look at.
	stray := filepath.Join(dir, tempPrefix+"123456"+tempSuffix)
	if err := os.WriteFile(stray, before[:len(before)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("crash1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 1 {
		t.Errorf("Load with a stray temp file: seq %d, want 1", got.Seq)
	}
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].Status == StatusCorrupt {
		t.Errorf("List with a stray temp file: %+v, %v", list, err)
	}

	// A crash after the new file is complete, before the rename.
	crash := errors.New("simulated crash")
	s.beforeRename = func() error { return crash }
	got.Counters.Turns = 99
	if err := s.Save(got); !errors.Is(err, crash) {
		t.Fatalf("Save with crash hook: %v", err)
	}
	if got.Seq != 1 {
		t.Errorf("a failed Save changed the checkpoint in memory: seq %d", got.Seq)
	}
	if after := readBytes(t, path); !bytes.Equal(after, before) {
		t.Errorf("checkpoint.json changed although the save crashed before its rename")
	}
	reloaded, err := s.Load("crash1")
	if err != nil || reloaded.Seq != 1 || reloaded.Counters.Turns == 99 {
		t.Fatalf("after the crash: %v, %+v", err, reloaded)
	}

	// A restarted process saves normally and clears the leftovers.
	s.beforeRename = nil
	if err := s.Save(reloaded); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), tempSuffix) {
			t.Errorf("temp file %s left after a successful save", e.Name())
		}
	}
	if h, err := s.LoadHistory("crash1", 1); err != nil || h.Seq != 1 {
		t.Errorf("history/1.json: %v", err)
	}
}

func TestStaleHistoryEntryIsReplaced(t *testing.T) {
	// A crash between linking the old checkpoint into history and the rename leaves
	// history/<seq>.json behind; the next save must replace it, not fail.
	s := newStore(t)
	cp := sample(t, "hist2")
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	hd := filepath.Join(s.Dir(), "hist2", historyDir)
	if err := os.MkdirAll(hd, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hd, "1.json"), []byte("leftover"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := readBytes(t, s.Path("hist2"))
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	if got := readBytes(t, filepath.Join(hd, "1.json")); !bytes.Equal(got, want) {
		t.Errorf("history/1.json is not the replaced checkpoint")
	}
}

func TestSaveConflict(t *testing.T) {
	s := newStore(t)
	if err := s.Save(sample(t, "conf1")); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Load("conf1")
	b, _ := s.Load("conf1")
	if err := s.Save(a); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(b); !errors.Is(err, ErrConflict) {
		t.Errorf("saving over a newer checkpoint: got %v, want ErrConflict", err)
	}
	if err := s.Save(sample(t, "conf1")); !errors.Is(err, ErrConflict) {
		t.Errorf("a new checkpoint (seq 0) over an existing session: got %v, want ErrConflict", err)
	}
	lost := sample(t, "conf2")
	lost.Seq = 5
	if err := s.Save(lost); !errors.Is(err, ErrConflict) {
		t.Errorf("seq 5 for a session with no file: got %v, want ErrConflict", err)
	}
	if cur, _ := s.Load("conf1"); cur.Seq != 2 {
		t.Errorf("on disk: seq %d, want 2", cur.Seq)
	}
}

func TestSaveRefusesInvalid(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Checkpoint)
		want   string
	}{
		{"bad id", func(cp *Checkpoint) { cp.SessionID = "../escape" }, "session_id"},
		{"unknown status", func(cp *Checkpoint) { cp.Status = "sleeping" }, "status"},
		{"awaiting without interrupt", func(cp *Checkpoint) { cp.Interrupt = nil }, "needs a confirmation interrupt"},
		{"waiting job with confirmation", func(cp *Checkpoint) { cp.Status = StatusWaitingJob }, "needs a job interrupt"},
		{"interrupt kind", func(cp *Checkpoint) { cp.Interrupt.Kind = "nap" }, "interrupt.kind"},
		{"effect state", func(cp *Checkpoint) { cp.Effects[0].State = "maybe" }, "effects[0].state"},
		{"duplicate effect", func(cp *Checkpoint) { cp.Effects[1].EffectID = cp.Effects[0].EffectID }, "effects[1].effect_id"},
		{"state not JSON", func(cp *Checkpoint) { cp.State = json.RawMessage(`{"a":`) }, "encode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			cp := sample(t, "inv1")
			tt.mutate(cp)
			err := s.Save(cp)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Save: got %v, want an error mentioning %q", err, tt.want)
			}
			if cp.Seq != 0 {
				t.Errorf("refused save changed seq to %d", cp.Seq)
			}
			if ValidID(cp.SessionID) {
				if _, err := os.Stat(s.Path(cp.SessionID)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("refused save wrote a file: %v", err)
				}
			}
		})
	}
}

func TestCorruptFiles(t *testing.T) {
	s := newStore(t)
	if err := s.Save(sample(t, "good1")); err != nil {
		t.Fatal(err)
	}
	good := readBytes(t, s.Path("good1"))
	replace := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("test setup: %q not in the file", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name string
		data []byte
		want string // in the reason
	}{
		{"checksum mismatch", replace(`"hello"`, `"hellp"`), "checksum mismatch"},
		{"truncated", good[:len(good)/2], "broken JSON"},
		{"empty", nil, "empty file"},
		{"blank", []byte("\n  \n"), "empty file"},
		{"newer format", reseal(replace(versionMember, `"format_version":99,`)), "newer upgrade-agent"},
		{"unknown older format", reseal(replace(versionMember, `"format_version":0,`)), "unknown format_version 0"},
		{"no format version", reseal(replace(versionMember, ``)), "unknown format_version 0"},
		{"checksum removed", replace(`,"checksum":"`, `,"checksun":"`), "no checksum"},
		{"checksum not hex", bytes.Replace(good, good[len(good)-67:len(good)-3], bytes.Repeat([]byte("Z"), 64), 1), "not 64 lowercase hex"},
		{"unknown field", reseal(replace(`{`+versionMember, `{`+versionMember+`"extra":true,`)), `unknown field "extra"`},
		{"wrong type", reseal(replace(`"seq":1,`, `"seq":"one",`)), "field seq"},
		{"bad time", reseal(replace(`"updated_at":"`, `"updated_at":"yesterday`)), "field updated_at: bad time"},
		{"bad status", reseal(replace(`"status":"awaiting_confirmation"`, `"status":"asleep"`)), `status: unknown value "asleep"`},
		// Under a valid checksum (only a hand-crafted file has one), an invalid effect
		// is seen by Load and Save but not by List, which reads the header only.
		{"bad effect", reseal(replace(`"state":"done"`, `"state":"perhaps"`)), "effects[0].state"},
		{"trailing data", reseal(append([]byte(`{} `), good...)), "broken JSON"},
		{"not an object", reseal([]byte(`[1,2,"checksum":""}`)), "broken JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			path := writeSession(t, s, "good1", tt.data)
			assertCorrupt(t, s, "good1", path, tt.data, tt.want, tt.name != "bad effect")
		})
	}

	t.Run("session id of another folder", func(t *testing.T) {
		s := newStore(t)
		path := writeSession(t, s, "other1", good)
		assertCorrupt(t, s, "other1", path, good, `session_id "good1" does not match its folder "other1"`, true)
	})
	t.Run("a folder instead of a file", func(t *testing.T) {
		s := newStore(t)
		if err := os.MkdirAll(s.Path("dir1"), 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := s.Load("dir1")
		var ce *CorruptError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "not a regular file") {
			t.Errorf("got %v", err)
		}
	})
}

// assertCorrupt checks that every way of reading the file reports it, names it, and
// leaves it byte-identical (and unmoved: no history entry appears).
func assertCorrupt(t *testing.T, s *FileStore, id, path string, data []byte, want string, listSees bool) {
	t.Helper()
	_, err := s.Load(id)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load: got %v, want ErrCorrupt", err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Path != path {
		t.Fatalf("Load: error %v does not carry the path %s", err, path)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(ce.Reason, want) {
		t.Errorf("Load: %q should name %s and say %q", err, path, want)
	}
	// Saving over it is refused too, and nothing is moved or rewritten.
	cp := sample(t, id)
	cp.Seq = 1
	if err := s.Save(cp); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Save over a corrupt file: got %v, want ErrCorrupt", err)
	}
	if list, err := s.List(); listSees && (err != nil || len(list) != 1 || list[0].Status != StatusCorrupt || !strings.Contains(list[0].Error, path)) {
		t.Errorf("List: %+v, %v", list, err)
	}
	if got := readBytes(t, path); !bytes.Equal(got, data) {
		t.Errorf("the corrupt file was modified")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), historyDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a history folder appeared: %v", err)
	}
}

func TestUnknownSession(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"nosuch", "../etc", "", "-rf", strings.Repeat("a", 65)} {
		_, err := s.Load(id)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Load(%q): got %v, want ErrNotFound", id, err)
			continue
		}
		if want := "unknown session " + id; err.Error() != want {
			t.Errorf("Load(%q): message %q, want %q", id, err, want)
		}
	}
	if err := s.Remove("nosuch"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove: got %v, want ErrNotFound", err)
	}
	if _, err := s.LoadHistory("nosuch", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("LoadHistory: got %v, want ErrNotFound", err)
	}
}

func TestListAndLatest(t *testing.T) {
	s := newStore(t)
	save := func(id string, status Status, kind string) {
		t.Helper()
		cp := sample(t, id)
		cp.Status = status
		switch kind {
		case "":
			cp.Interrupt = nil
		case KindJob:
			cp.Interrupt = &Interrupt{ID: "i", Kind: KindJob, CreatedAt: t0, Job: &JobRef{ID: "job-1", Action: "test_condition_balance"}}
		}
		cp.Summary = &SessionSummary{LastMessage: "message of " + id}
		cp.Counters.Turns = len(id)
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
	}
	// Latest with no sessions at all.
	if _, err := s.Latest(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest on an empty store: %v", err)
	}
	save("idle1", StatusIdle, "")
	save("confirm1", StatusAwaitingConfirmation, KindConfirmation)
	save("job1", StatusWaitingJob, KindJob)
	save("term1", StatusTerminated, "")
	// Newest of all, but corrupt: listed, never chosen.
	corruptPath := writeSession(t, s, "broken1", []byte(`{`+versionMember))
	// Locked and never saved: not a session yet.
	unlock, err := s.Lock("pending1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	// Clutter that is not a session.
	if err := os.WriteFile(filepath.Join(s.Dir(), "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sum := range list {
		ids = append(ids, sum.ID)
	}
	// broken1's mtime is the wall clock (now), the others' updated_at are in 2026 from
	// the step clock; order among the good ones is their save order, newest first.
	if !slices.Contains(ids, "broken1") || len(ids) != 5 {
		t.Fatalf("List ids = %v", ids)
	}
	good := slices.DeleteFunc(slices.Clone(list), func(s Summary) bool { return s.Status == StatusCorrupt })
	wantOrder := []string{"term1", "job1", "confirm1", "idle1"}
	for i, sum := range good {
		if sum.ID != wantOrder[i] {
			t.Errorf("List order: position %d is %s, want %s", i, sum.ID, wantOrder[i])
		}
	}
	first := good[3]
	want := Summary{ID: "idle1", Status: StatusIdle, Seq: 1, Turns: 5, LastMessage: "message of idle1",
		CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0.Add(time.Second),
		Usage: Usage{LLMCalls: 7, PromptTokens: 5400, CompletionTokens: 610, CachedTokens: 2048}}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("summary of idle1 (-want +got):\n%s", diff)
	}
	for _, sum := range list {
		if sum.ID == "broken1" && (sum.Status != StatusCorrupt || !strings.Contains(sum.Error, corruptPath)) {
			t.Errorf("corrupt session listed as %+v", sum)
		}
	}

	tests := []struct {
		statuses []Status
		want     string
	}{
		{nil, "term1"},
		{[]Status{StatusAwaitingConfirmation, StatusWaitingJob}, "job1"},
		{[]Status{StatusAwaitingConfirmation}, "confirm1"},
		{[]Status{StatusIdle, StatusAwaitingConfirmation}, "confirm1"},
		{[]Status{StatusRunning}, ""},
		{[]Status{StatusCorrupt}, ""},
	}
	for _, tt := range tests {
		got, err := s.Latest(tt.statuses...)
		if tt.want == "" {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Latest(%v) = %q, %v; want ErrNotFound", tt.statuses, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Latest(%v) = %q, %v; want %q", tt.statuses, got, err, tt.want)
		}
	}
	if _, err := s.Latest(StatusRunning); err == nil || err.Error() != "no stored session is running" {
		t.Errorf("Latest(running) message: %v", err)
	}
}

func TestListTurnsFallBackToCounters(t *testing.T) {
	s := newStore(t)
	cp := sample(t, "nosum1")
	cp.Summary = nil
	cp.Counters.Turns = 12
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Turns != 12 || list[0].LastMessage != "" {
		t.Errorf("List = %+v, %v", list, err)
	}
}

func TestRemove(t *testing.T) {
	s := newStore(t)
	if err := s.Save(sample(t, "rm1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(sample(t, "rm2")); err != nil {
		t.Fatal(err)
	}
	unlock, err := s.Lock("rm1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("rm1"); !errors.Is(err, ErrLocked) {
		t.Errorf("Remove of a locked session: got %v, want ErrLocked", err)
	}
	unlock()
	if err := s.Remove("rm1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("rm1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load after Remove: %v", err)
	}
	// A corrupt session can be removed.
	writeSession(t, s, "rm3", []byte("garbage"))
	if err := s.Remove("rm3"); err != nil {
		t.Errorf("Remove of a corrupt session: %v", err)
	}
	if list, _ := s.List(); len(list) != 1 || list[0].ID != "rm2" {
		t.Errorf("List after removals: %+v", list)
	}
}

func TestImport(t *testing.T) {
	a := newStore(t)
	b := newStore(t)
	cp := sample(t, "imp1")
	for range 2 {
		if err := a.Save(cp); err != nil {
			t.Fatal(err)
		}
	}
	// From anywhere: copy the artifact out of the store first.
	artifact := filepath.Join(t.TempDir(), "artifact.json")
	if err := os.WriteFile(artifact, readBytes(t, a.Path("imp1")), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := b.Import(artifact)
	if err != nil || id != "imp1" {
		t.Fatalf("Import = %q, %v", id, err)
	}
	got, err := b.Load("imp1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cp, got); diff != "" {
		t.Errorf("imported checkpoint (-original +imported):\n%s", diff)
	}
	if st, _ := os.Stat(b.Path("imp1")); st.Mode().Perm() != 0o600 {
		t.Errorf("imported file mode %v, want 0600", st.Mode().Perm())
	}
	// Twice is a no-op.
	if id, err := b.Import(artifact); err != nil || id != "imp1" {
		t.Errorf("second Import = %q, %v", id, err)
	}
	if seqs, _ := b.History("imp1"); len(seqs) != 0 {
		t.Errorf("a no-op import made history: %v", seqs)
	}

	// A corrupt artifact is named and left alone.
	bad := filepath.Join(t.TempDir(), "bad.json")
	badData := bytes.Replace(readBytes(t, artifact), []byte("hello"), []byte("HELLO"), 1)
	if err := os.WriteFile(bad, badData, 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := b.Import(bad); !errors.As(err, &ce) || ce.Path != bad {
		t.Errorf("Import of a corrupt file: %v", err)
	}
	if _, err := b.Import(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Import of a missing file: %v", err)
	}
	// A locked session cannot be imported into.
	c := newStore(t)
	unlock, err := c.Lock("imp1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := c.Import(artifact); !errors.Is(err, ErrLocked) {
		t.Errorf("Import into a locked session: %v", err)
	}
}

// An import never replaces a session the store holds with other content, whether the
// file is older, of the same seq or newer: the local session may hold work the file
// does not, and the person decides (sessions rm) rather than the import.
func TestImportNeverReplaces(t *testing.T) {
	tests := []struct {
		name     string
		localSeq int // saves of the local copy
		fileSeq  int // saves of the file's copy
	}{
		{"file older", 3, 2},
		{"same seq, other content", 2, 2},
		{"file newer", 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, remote := newStore(t), newStore(t)
			remote.Now = stepClock(t0.Add(time.Hour)) // other updated_at: other content
			for st, n := range map[*FileStore]int{local: tt.localSeq, remote: tt.fileSeq} {
				cp := sample(t, "imp2")
				for range n {
					if err := st.Save(cp); err != nil {
						t.Fatal(err)
					}
				}
			}
			file := remote.Path("imp2")
			before := readBytes(t, local.Path("imp2"))
			_, err := local.Import(file)
			if !errors.Is(err, ErrExists) || errors.Is(err, ErrConflict) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("Import over a different local session: got %v, want ErrExists only", err)
			}
			for _, want := range []string{"session imp2", file, fmt.Sprintf("at seq %d", tt.localSeq),
				fmt.Sprintf("(seq %d)", tt.fileSeq), "upgrade-agent sessions rm imp2"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
			if !bytes.Equal(readBytes(t, local.Path("imp2")), before) {
				t.Error("the local session was changed")
			}
			if seqs, _ := local.History("imp2"); slices.Contains(seqs, tt.localSeq) {
				t.Errorf("the local checkpoint was moved to history: %v", seqs)
			}
			// Once the person removed the local session, the file is taken in.
			if err := local.Remove("imp2"); err != nil {
				t.Fatal(err)
			}
			if _, err := local.Import(file); err != nil {
				t.Fatalf("Import after sessions rm: %v", err)
			}
			if got, err := local.Load("imp2"); err != nil || got.Seq != tt.fileSeq {
				t.Errorf("after import: %v, seq %v", err, got)
			}
		})
	}
}

func TestMigration(t *testing.T) {
	s := newStore(t)
	cp := sample(t, "mig1")
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	// A made-up version 0 kept the turn count at the top level.
	var raw map[string]any
	if err := json.Unmarshal(readBytes(t, s.Path("mig1")), &raw); err != nil {
		t.Fatal(err)
	}
	raw["format_version"] = 0
	delete(raw, "counters")
	raw["turns"] = 7
	v0 := sealMap(t, raw)
	path := writeSession(t, s, "mig1", v0)

	// Without a migration, version 0 is unknown.
	_, err := s.Load("mig1")
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "unknown format_version 0") {
		t.Fatalf("v0 without a migration: %v", err)
	}

	migrations[0] = func(doc map[string]json.RawMessage) error {
		var turns json.Number
		if err := json.Unmarshal(doc["turns"], &turns); err != nil {
			return errors.New("turns: not a number")
		}
		delete(doc, "turns")
		doc["counters"] = json.RawMessage(`{"consecutive_auto_replies":0,"turns":` + turns + `}`)
		return nil
	}
	t.Cleanup(func() { migrations[0] = nil })

	got, err := s.Load("mig1")
	if err != nil {
		t.Fatal(err)
	}
	if got.FormatVersion != FormatVersion || got.Counters.Turns != 7 || got.Seq != 1 {
		t.Errorf("migrated: version %d turns %d seq %d", got.FormatVersion, got.Counters.Turns, got.Seq)
	}
	if !bytes.Equal(readBytes(t, path), v0) {
		t.Errorf("Load rewrote the v0 file")
	}
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].Turns != 3 /* summary.turns */ || list[0].Status != StatusAwaitingConfirmation {
		t.Errorf("List of a v0 session: %+v, %v", list, err)
	}
	// The next save writes the current format, over the v0 file (kept in history).
	if err := s.Save(got); err != nil {
		t.Fatal(err)
	}
	if data := readBytes(t, path); !bytes.HasPrefix(data, []byte(`{`+versionMember)) {
		t.Errorf("after Save: %.40s", data)
	}
	if h := readBytes(t, filepath.Join(filepath.Dir(path), historyDir, "1.json")); !bytes.Equal(h, v0) {
		t.Errorf("history/1.json is not the v0 file")
	}

	// Import converts too.
	art := filepath.Join(t.TempDir(), "v0.json")
	if err := os.WriteFile(art, v0, 0o600); err != nil {
		t.Fatal(err)
	}
	other := newStore(t)
	if _, err := other.Import(art); err != nil {
		t.Fatal(err)
	}
	if data := readBytes(t, other.Path("mig1")); !bytes.HasPrefix(data, []byte(`{`+versionMember)) {
		t.Errorf("imported v0 stored as: %.40s", data)
	}

	// A failing migration is a corrupt file, named.
	raw["turns"] = "seven"
	bad := writeSession(t, s, "mig2", sealMap(t, func() map[string]any { raw["session_id"] = "mig2"; return raw }()))
	if _, err := s.Load("mig2"); !errors.As(err, &ce) || ce.Path != bad || !strings.Contains(ce.Reason, "migrating format_version 0 to 1: turns") {
		t.Errorf("failing migration: %v", err)
	}
}

func TestSecretsAreRefused(t *testing.T) {
	const apiKey = "sk-test-0123456789abcdef"
	const token = `tok"en/with\quote`
	tests := []struct {
		name   string
		state  string
		refuse bool
	}{
		{"api key in state", `{"note":"my key is ` + apiKey + `"}`, true},
		{"token, JSON-escaped", `{"note":` + strconv.Quote(token) + `}`, true},
		{"short secret ignored", `{"note":"abc"}`, false},
		{"clean", `{"note":"nothing to see"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			s.Secrets = []string{apiKey, token, "abc"}
			cp := sample(t, "sec1")
			cp.State = json.RawMessage(tt.state)
			err := s.Save(cp)
			if !tt.refuse {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrSecret) {
				t.Fatalf("Save: got %v, want ErrSecret", err)
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(err.Error(), "en/with") {
				t.Errorf("the error shows the secret: %v", err)
			}
			entries, _ := os.ReadDir(filepath.Join(s.Dir(), "sec1"))
			for _, e := range entries {
				t.Errorf("refused save left %s", e.Name())
			}
		})
	}
	t.Run("import", func(t *testing.T) {
		src := newStore(t)
		cp := sample(t, "sec2")
		cp.State = json.RawMessage(`{"k":"` + apiKey + `"}`)
		if err := src.Save(cp); err != nil {
			t.Fatal(err)
		}
		dst := newStore(t)
		dst.Secrets = []string{apiKey}
		if _, err := dst.Import(src.Path("sec2")); !errors.Is(err, ErrSecret) {
			t.Errorf("Import: got %v, want ErrSecret", err)
		}
	})
}

func TestParamsHash(t *testing.T) {
	base := `{"name":"exp","weights":[50,50],"opts":{"b":true,"a":null}}`
	h0, err := ParamsHash("create_experiment", json.RawMessage(base))
	if err != nil {
		t.Fatal(err)
	}
	// The documented definition, computed by hand.
	canonical := `{"action":"create_experiment","params":{"name":"exp","opts":{"a":null,"b":true},"weights":[50,50]}}`
	if want := checksumHex([]byte(canonical)); h0 != want {
		t.Errorf("ParamsHash = %s, want sha256(%s) = %s", h0, canonical, want)
	}
	tests := []struct {
		name   string
		action string
		params string
		same   bool
	}{
		{"key order and whitespace", "create_experiment", "{ \"weights\": [50, 50],\n \"opts\": {\"a\": null, \"b\": true}, \"name\": \"exp\" }", true},
		{"number spelled differently", "create_experiment", `{"name":"exp","weights":[50.0,50],"opts":{"b":true,"a":null}}`, false},
		{"value changed", "create_experiment", `{"name":"exp2","weights":[50,50],"opts":{"b":true,"a":null}}`, false},
		{"other action", "update_experiment", base, false},
		{"escapes normalised", "create_experiment", `{"name":"\u0065xp","weights":[50,50],"opts":{"b":true,"a":null}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParamsHash(tt.action, json.RawMessage(tt.params))
			if err != nil {
				t.Fatal(err)
			}
			if (h == h0) != tt.same {
				t.Errorf("hash equal to base = %v, want %v", h == h0, tt.same)
			}
		})
	}
	empty, _ := ParamsHash("list", nil)
	null, _ := ParamsHash("list", json.RawMessage("null"))
	if empty != null {
		t.Errorf("empty params should hash like null")
	}
	big, _ := ParamsHash("a", json.RawMessage(`{"n":12345678901234567890}`))
	big2, _ := ParamsHash("a", json.RawMessage(`{"n":12345678901234567891}`))
	if big == big2 {
		t.Errorf("large integers were rounded")
	}
	for _, bad := range []string{`{"a":`, `{"a":1} {}`, `nope`} {
		if _, err := ParamsHash("x", json.RawMessage(bad)); err == nil {
			t.Errorf("ParamsHash(%q): no error", bad)
		}
	}
	got, err := CanonicalJSON([]byte(` {"b":"<&>","a":[1, 2.50]} `))
	if err != nil || string(got) != `{"a":[1,2.50],"b":"<&>"}` {
		t.Errorf("CanonicalJSON = %s, %v", got, err)
	}
}

func TestEffects(t *testing.T) {
	cp := &Checkpoint{SessionID: "eff1", Status: StatusRunning}
	if err := cp.StartEffect("e1", "create_experiment", "h1", t0); err != nil {
		t.Fatal(err)
	}
	if err := cp.StartEffect("e1", "create_experiment", "h1", t0); err == nil {
		t.Error("starting the same effect twice: no error")
	}
	if err := cp.StartEffect("e2", "delete_experiment", "h2", t0); err != nil {
		t.Fatal(err)
	}
	if err := cp.FinishEffect("e1", json.RawMessage(`{"id":"x"}`), "", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := cp.FinishEffect("e1", nil, "again", t0); err == nil {
		t.Error("finishing an effect twice: no error")
	}
	if err := cp.FinishEffect("nope", nil, "", t0); err == nil {
		t.Error("finishing an unknown effect: no error")
	}
	pending := cp.PendingEffects()
	if len(pending) != 1 || pending[0].EffectID != "e2" {
		t.Errorf("PendingEffects = %+v", pending)
	}
	// Persisted and read back: the started one is still pending for reconciliation.
	s := newStore(t)
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("eff1")
	if err != nil {
		t.Fatal(err)
	}
	if e := got.Effect("e1"); e == nil || e.State != EffectDone || string(e.Result) != `{"id":"x"}` || e.FinishedAt == nil {
		t.Errorf("e1 after reload: %+v", e)
	}
	if err := got.FinishEffect("e2", nil, "not_found: gone", t0); err != nil {
		t.Fatal(err)
	}
	if e := got.Effect("e2"); e.State != EffectFailed || e.Error != "not_found: gone" {
		t.Errorf("e2: %+v", e)
	}
	if got.Effect("e3") != nil {
		t.Error("Effect of an unknown id is not nil")
	}
}

func TestNewSessionID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewSessionID()
		if len(id) != 12 || !ValidID(id) || strings.ToLower(id) != id {
			t.Fatalf("NewSessionID() = %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

func TestSizeGrowsLinearly(t *testing.T) {
	size := func(turns int) int {
		s := newStore(t)
		cp := &Checkpoint{SessionID: "size1", Status: StatusIdle, State: longState(t, turns, 200)}
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
		return len(readBytes(t, s.Path("size1")))
	}
	s1, s2 := size(1000), size(2000)
	if s2 > 2*s1 {
		t.Errorf("1,000 turns: %d bytes, 2,000 turns: %d bytes: more than linear", s1, s2)
	}
}

// The package must stay below the pipeline: importing it from here would be a cycle,
// and the state must stay opaque. The internal/ helpers know no domain (canonjson, the
// hash a confirmation is bound to, is shared with pipeline/actions that way).
func TestNoProjectImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/upgrade-agent/upgrade-agent/") && !strings.HasPrefix(p, "github.com/upgrade-agent/upgrade-agent/internal/") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
