package jobs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// A CLI killed after Start wrote the record and before it launched the
// worker leaves a queued record no worker will ever claim. The next Start
// of the same id (resume re-attaching after the crash) launches it at
// once instead of waiting StaleAfter for a heartbeat that cannot come; the
// job then runs once, to the end.
func TestStartLaunchesARecordItsStarterNeverLaunched(t *testing.T) {
	h := newHarness(t)
	h.runner.StaleAfter = time.Hour // a stale heartbeat cannot be what restarts it
	rec := &Record{ID: "j1", SessionID: "sess", Action: "test_condition_balance", Params: h.params(120),
		State: actions.JobQueued, Progress: actions.Progress{Total: 120}}
	if _, created, err := h.store.Create(rec); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if err := h.runner.Start(context.Background(), "j1", "sess", "test_condition_balance", h.params(120)); err != nil {
		t.Fatal(err)
	}
	if n := h.spawnCount(); n != 1 {
		t.Fatalf("%d workers launched, want 1", n)
	}
	h.checkBalance("j1", h.waitEnd("j1"), 120)
	// Once launched, a second Start re-attaches and launches nothing.
	if err := h.runner.Start(context.Background(), "j1", "sess", "test_condition_balance", h.params(120)); err != nil {
		t.Fatal(err)
	}
	if n := h.spawnCount(); n != 1 {
		t.Errorf("%d workers launched after a second Start, want 1", n)
	}
}

// A process killed in the middle of writing a record leaves the temp file
// of its atomic write; the next write of that record removes it, and
// leaves the temp files of other records alone.
func TestWriteRemovesStrayTempFiles(t *testing.T) {
	s := newTestStore(t, fixedNow)
	if _, _, err := s.Create(&Record{ID: "j1", Action: "test_condition_balance", State: actions.JobQueued}); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(s.Dir(), ".j1.json.tmp-123456")
	other := filepath.Join(s.Dir(), ".j2.json.tmp-123456")
	for _, f := range []string{stray, other} {
		if err := os.WriteFile(f, []byte(`{"id": "j1", "sta`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Update("j1", func(r *Record) error { r.State = actions.JobRunning; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("the stray temp file of j1 is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the temp file of another record was removed: %v", err)
	}
	if rec, err := s.Load("j1"); err != nil || rec.State != actions.JobRunning {
		t.Errorf("record after the write: %+v, %v", rec, err)
	}
}
