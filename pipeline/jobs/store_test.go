package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/internal/hostile"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

func newTestStore(t *testing.T, now func() time.Time) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	s.Now = now
	return s
}

func fixedNow() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

func TestStoreCreateLoadUpdate(t *testing.T) {
	s := newTestStore(t, fixedNow)
	rec := &Record{ID: "job1", SessionID: "s1", Action: "test_condition_balance", Params: json.RawMessage(`{"num_users":3}`),
		State: actions.JobQueued, Progress: actions.Progress{Total: 3}}
	got, created, err := s.Create(rec)
	if err != nil || !created {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	if !got.CreatedAt.Equal(fixedNow()) || !got.UpdatedAt.Equal(fixedNow()) {
		t.Errorf("timestamps %v %v", got.CreatedAt, got.UpdatedAt)
	}
	again, created, err := s.Create(&Record{ID: "job1", Action: "other", State: actions.JobQueued})
	if err != nil || created || again.Action != "test_condition_balance" {
		t.Fatalf("second create must return the existing record: %+v created=%v err=%v", again, created, err)
	}
	if _, err := s.Update("job1", func(r *Record) error {
		r.State, r.Progress.Done = actions.JobRunning, 2
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.Load("job1")
	if err != nil {
		t.Fatal(err)
	}
	want := *rec
	want.State, want.Progress.Done = actions.JobRunning, 2
	var compact bytes.Buffer // records are indented, params included
	if err := json.Compact(&compact, loaded.Params); err != nil {
		t.Fatal(err)
	}
	loaded.Params = compact.Bytes()
	if d := cmp.Diff(&want, loaded); d != "" {
		t.Errorf("loaded record (-want +got):\n%s", d)
	}
	// An aborted update leaves the file alone and returns the error.
	boom := errors.New("boom")
	if _, err := s.Update("job1", func(r *Record) error { r.State = actions.JobFailed; return boom }); !errors.Is(err, boom) {
		t.Errorf("update error = %v", err)
	}
	if r, _ := s.Load("job1"); r.State != actions.JobRunning {
		t.Errorf("aborted update was written: %s", r.State)
	}

	fi, err := os.Stat(s.Path("job1"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("record mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("jobs dir mode %v, want 0700", di.Mode().Perm())
	}
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

func TestStoreTightensExistingDir(t *testing.T) {
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "jobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(s.Dir()); fi.Mode().Perm() != 0o700 {
		t.Errorf("jobs dir mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestStoreBadRecords(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"broken json", "{\n  \"id\": \"j\",\n  \"state\": \n}", "line 4"},
		{"unknown field", `{"id":"j","action":"a","state":"running","colour":1}`, `unknown field "colour"`},
		{"id mismatch", `{"id":"other","action":"a","state":"running"}`, "does not match the file name"},
		{"unknown state", `{"id":"j","action":"a","state":"paused"}`, `unknown state "paused"`},
		{"progress beyond total", `{"id":"j","action":"a","state":"running","progress":{"done":5,"total":3}}`, "field progress"},
		{"trailing data", `{"id":"j","action":"a","state":"running"} {}`, "data after"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, fixedNow)
			if err := os.WriteFile(s.Path("j"), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Load("j")
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), s.Path("j")) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %v; want ErrCorrupt naming the file and %q", err, tc.want)
			}
			if _, err := s.Update("j", func(*Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Update of a corrupt record = %v", err)
			}
			if b, _ := os.ReadFile(s.Path("j")); string(b) != tc.content {
				t.Errorf("corrupt record was rewritten")
			}
		})
	}
}

func TestStoreIDs(t *testing.T) {
	s := newTestStore(t, fixedNow)
	for _, id := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("a", 65), "a b"} {
		if _, err := s.Load(id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Load(%q) = %v, want ErrInvalidID", id, err)
		}
	}
	if _, err := s.Load("nothere"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load of a missing job = %v, want ErrNotFound", err)
	}
}

func TestStoreList(t *testing.T) {
	now := fixedNow()
	s := newTestStore(t, func() time.Time { return now })
	for i, id := range []string{"old", "mid", "new"} {
		if _, _, err := s.Create(&Record{ID: id, Action: "a", State: actions.JobQueued, CreatedAt: now.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.Path("bad"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	var ids []string
	for _, r := range list {
		ids = append(ids, r.ID)
	}
	if d := cmp.Diff([]string{"new", "mid", "old"}, ids); d != "" {
		t.Errorf("list order (-want +got):\n%s", d)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("List must report the corrupt record, got %v", err)
	}
}

// TestStoreRefusesHostileRecords: a named pipe or an oversized file under a
// job's name is reported as a corrupt record at once; Load and List never
// block on a pipe nobody writes to.
func TestStoreRefusesHostileRecords(t *testing.T) {
	s := newTestStore(t, fixedNow)
	f, err := os.Create(s.Path("big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxRecordSize + 1); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	if _, err := s.Load("big"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "more than the 16 MiB allowed") {
		t.Errorf("oversized record: %v", err)
	}
	hostile.FIFO(t, s.Path("pipe"))
	err = hostile.Within(t, 10*time.Second, func() error { _, err := s.Load("pipe"); return err })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("pipe: %v", err)
	}
	err = hostile.Within(t, 10*time.Second, func() error { _, err := s.List(); return err })
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("List: %v", err)
	}
}

// FuzzDecodeRecord: whatever sits in a job file, decodeRecord returns a
// record or an ErrCorrupt naming the file, never a panic. Load bounds the
// file at maxRecordSize before decodeRecord sees it.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"id":"j1","session_id":"s","action":"test_condition_balance","params":{},"state":"queued","progress":{"done":0,"total":3},"attempts":0,"created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00Z"}`))
	f.Add([]byte(`{"id":"j1","action":"a","state":"running","progress":{"done":5,"total":3}}`))
	f.Add([]byte(`{"id":"j1","action":"a","state":"done"}`))
	f.Add([]byte(`{"id":"j1","action":"a","state":"queued","params":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`))
	f.Add([]byte(`{"id":"j1","action":"a","state":"failed","error":"` + strings.Repeat("x", 1<<20) + `"}`))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeRecord("jobs/j1.json", "j1", data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "jobs/j1.json") {
				t.Fatalf("error is not an ErrCorrupt naming the file: %v", err)
			}
			return
		}
		if r.ID != "j1" || r.Action == "" {
			t.Fatalf("accepted %+v", r)
		}
	})
}
