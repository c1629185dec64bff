// Package storetest is the one conformance suite every session store runs
// (docs/teams.md): the file store and the PostgreSQL store give the same
// guarantees because the same tests hold them to them.
package storetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
)

// Harness says how to reach one kind of store. A spec names one store (a
// state dir, a database URL); every Open of it is another handle, as
// another process or machine would have.
type Harness struct {
	// Fresh makes a new, empty store and returns its spec.
	Fresh func(t *testing.T) string
	// Open returns a new handle on the store, with secrets it must refuse.
	Open func(t *testing.T, spec string, secrets ...string) checkpoint.SessionStore
	// Raw reads the stored bytes of the session's latest checkpoint behind
	// the store's back; Corrupt overwrites them.
	Raw     func(t *testing.T, spec, id string) []byte
	Corrupt func(t *testing.T, spec, id string, data []byte)
	// Audit is the store's audit trail. (Job records on the store are
	// pipeline/jobs/jobstest's: checkpoint knows nothing of the pipeline.)
	Audit func(t *testing.T, spec string) audit.Log
	// Ahead is the trail whose held-back entries s's saves store.
	Ahead func(t *testing.T, s checkpoint.SessionStore) audit.Ahead
	// Tamper changes the trail behind its back (TamperEdit, ...) as a
	// role that may; it reports whether the store prevented the change.
	Tamper func(t *testing.T, spec, op string) (prevented bool)
	// BreakAudit makes every later append to the trail fail.
	BreakAudit func(t *testing.T, spec string)
	// LoseLocks gives a store and a function that makes every lock
	// holder's connection drop (LoseRestart, LoseIdleTimeout); nil when
	// the store's lock cannot be lost while its process lives.
	LoseLocks func(t *testing.T, variant string) (spec string, lose func())
}

// holdEnv makes a test binary hold a session lock for the suite (MaybeHold).
const holdEnv = "UPGRADE_AGENT_STORETEST_HOLD"

// MaybeHold, called first in TestMain, turns the test binary into the
// "other process" of the lock tests: it opens the store, takes the lock,
// prints "locked" and waits to be killed.
func MaybeHold(open func(spec string) (checkpoint.SessionStore, error)) {
	v := os.Getenv(holdEnv)
	if v == "" {
		return
	}
	spec, id, _ := strings.Cut(v, "\n")
	s, err := open(spec)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if _, err := s.Lock(id); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	for {
		time.Sleep(time.Hour)
	}
}

// sample is a checkpoint of a new session.
func sample(id string, turn int) *checkpoint.Checkpoint {
	return &checkpoint.Checkpoint{SessionID: id, Status: checkpoint.StatusIdle,
		Counters: checkpoint.Counters{Turns: turn},
		State:    json.RawMessage(fmt.Sprintf(`{"turn":%d,"text":"hello"}`, turn))}
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("LoadSaveConflicts", func(t *testing.T) { testLoadSave(t, h) })
	t.Run("History", func(t *testing.T) { testHistory(t, h) })
	t.Run("RecordsTheServerOnce", func(t *testing.T) { testServer(t, h) })
	t.Run("CorruptRowUntouched", func(t *testing.T) { testCorrupt(t, h) })
	t.Run("Secrets", func(t *testing.T) { testSecrets(t, h) })
	t.Run("LockExclusive", func(t *testing.T) { testLock(t, h) })
	t.Run("LockAcrossProcessesDiesWithHolder", func(t *testing.T) { testLockProcess(t, h) })
	t.Run("ImportExport", func(t *testing.T) { testImportExport(t, h) })
	t.Run("ListLatestRemove", func(t *testing.T) { testListRemove(t, h) })
	t.Run("AuditOrderAndContents", func(t *testing.T) { testAudit(t, h) })
	runFaults(t, h)
}

func testLoadSave(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	a, b := h.Open(t, spec), h.Open(t, spec)
	if _, err := a.Load("nosuch"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Load of an unknown id: %v, want ErrNotFound", err)
	}
	cp := sample("s1", 1)
	if err := a.Save(cp); err != nil {
		t.Fatal(err)
	}
	if cp.Seq != 1 || cp.ParentSeq != 0 || cp.Checksum == "" {
		t.Fatalf("after the first save: seq %d parent %d checksum %q", cp.Seq, cp.ParentSeq, cp.Checksum)
	}
	got, err := b.Load("s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 1 || string(got.State) != string(cp.State) || got.Checksum != cp.Checksum {
		t.Fatalf("loaded %+v, want what was saved", got)
	}
	// b saves on top; a's copy is now stale.
	got.Counters.Turns = 2
	if err := b.Save(got); err != nil {
		t.Fatal(err)
	}
	cp.Counters.Turns = 3
	if err := a.Save(cp); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("save of a stale checkpoint: %v, want ErrConflict", err)
	}
	ghost := sample("s2", 1)
	ghost.Seq = 4
	if err := a.Save(ghost); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("save following a seq the store never had: %v, want ErrConflict", err)
	}
	cur, err := a.Load("s1")
	if err != nil || cur.Seq != 2 || cur.Counters.Turns != 2 {
		t.Fatalf("after the conflict: %+v %v, want b's seq 2", cur, err)
	}
	// The bytes are the file store's JSON: they decode as a checkpoint file.
	if _, _, err := checkpoint.Decode("raw", h.Raw(t, spec, "s1"), "s1"); err != nil {
		t.Fatalf("stored bytes are not a checkpoint file: %v", err)
	}
}

// testServer: SetServer's UpGrade is recorded as upgrade_server by the
// first save and kept by every later one, whoever saves.
func testServer(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	a, b := h.Open(t, spec), h.Open(t, spec)
	a.SetServer("http://a.example/api")
	b.SetServer("embedded-simulator:00ff")
	if err := a.Save(sample("srv", 1)); err != nil {
		t.Fatal(err)
	}
	got, err := b.Load("srv")
	if err != nil {
		t.Fatal(err)
	}
	if got.UpgradeServer != "http://a.example/api" {
		t.Fatalf("after the first save: upgrade_server %q, want http://a.example/api", got.UpgradeServer)
	}
	if err := b.Save(got); err != nil {
		t.Fatal(err)
	}
	if again, err := a.Load("srv"); err != nil || again.UpgradeServer != "http://a.example/api" {
		t.Fatalf("after another server's save: %+v %v, want the first server kept", again, err)
	}
	c := h.Open(t, spec) // no server: records nothing
	if err := c.Save(sample("none", 1)); err != nil {
		t.Fatal(err)
	}
	if cp, err := c.Load("none"); err != nil || cp.UpgradeServer != "" {
		t.Fatalf("a store without a server: %+v %v, want no upgrade_server", cp, err)
	}
}

func testHistory(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	s := h.Open(t, spec)
	cp := sample("h1", 0)
	for i := 0; i < checkpoint.HistoryLimit+5; i++ {
		cp.Counters.Turns = i
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
	}
	seqs, err := s.History("h1")
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != checkpoint.HistoryLimit || seqs[len(seqs)-1] != cp.Seq-1 {
		t.Fatalf("history %v, want the last %d seqs before %d", seqs, checkpoint.HistoryLimit, cp.Seq)
	}
	old, err := s.LoadHistory("h1", cp.Seq-1)
	if err != nil || old.Seq != cp.Seq-1 || old.Counters.Turns != cp.Counters.Turns-1 {
		t.Fatalf("LoadHistory: %+v %v", old, err)
	}
	if _, err := s.LoadHistory("h1", 1); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("LoadHistory of a pruned seq: %v, want ErrNotFound", err)
	}
}

func testCorrupt(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	s := h.Open(t, spec)
	cp := sample("c1", 1)
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	good := sample("c2", 1)
	if err := s.Save(good); err != nil {
		t.Fatal(err)
	}
	raw := h.Raw(t, spec, "c1")
	bad := bytes.Replace(raw, []byte("hello"), []byte("HELLO"), 1)
	h.Corrupt(t, spec, "c1", bad)
	s2 := h.Open(t, spec)
	if _, err := s2.Load("c1"); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("Load of a damaged checkpoint: %v, want ErrCorrupt", err)
	}
	if err := s2.Save(cp); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("Save over a damaged checkpoint: %v, want ErrCorrupt", err)
	}
	if _, err := s2.Export("c1"); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("Export of a damaged checkpoint: %v, want ErrCorrupt", err)
	}
	if got := h.Raw(t, spec, "c1"); !bytes.Equal(got, bad) {
		t.Fatal("the damaged checkpoint was changed")
	}
	list, err := s2.List()
	if err != nil {
		t.Fatal(err)
	}
	var sawCorrupt, sawGood bool
	for _, sum := range list {
		sawCorrupt = sawCorrupt || sum.ID == "c1" && sum.Status == checkpoint.StatusCorrupt && sum.Error != ""
		sawGood = sawGood || sum.ID == "c2" && sum.Status == checkpoint.StatusIdle
	}
	if !sawCorrupt || !sawGood {
		t.Fatalf("List %+v: want c1 corrupt with a reason and c2 idle", list)
	}
	if id, err := s2.Latest(); err != nil || id != "c2" {
		t.Fatalf("Latest = %q %v, want c2 (a corrupt session never qualifies)", id, err)
	}
}

func testSecrets(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	const secret = "sk-never-written-0123456789"
	s := h.Open(t, spec, secret)
	cp := sample("x1", 1)
	cp.State = json.RawMessage(`{"note":"` + secret + `"}`)
	if err := s.Save(cp); !errors.Is(err, checkpoint.ErrSecret) {
		t.Fatalf("save with a secret: %v, want ErrSecret", err)
	}
	if _, err := s.Load("x1"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("after a refused save: %v, want nothing stored", err)
	}
}

func testLock(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	a, b := h.Open(t, spec), h.Open(t, spec)
	unlock, err := a.Lock("l1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock("l1"); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("second holder: %v, want ErrLocked", err)
	}
	if _, err := a.Lock("l1"); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("second lock of the same handle: %v, want ErrLocked", err)
	}
	u2, err := b.Lock("l2")
	if err != nil {
		t.Fatalf("another session: %v", err)
	}
	u2()
	unlock()
	u3, err := b.Lock("l1")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	u3()
}

func testLockProcess(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+spec+"\n"+"p1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("the holder process said %q (%v)", line, err)
	}
	s := h.Open(t, spec)
	if _, err := s.Lock("p1"); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("lock held by another process: %v, want ErrLocked at once", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		unlock, err := s.Lock("p1")
		if err == nil {
			unlock()
			return
		}
		if !errors.Is(err, checkpoint.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("after SIGKILL of the holder: %v, want the lock free (no stale lock)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testImportExport(t *testing.T, h Harness) {
	src, dst := h.Fresh(t), h.Fresh(t)
	a := h.Open(t, src)
	cp := sample("e1", 1)
	cp.Status = checkpoint.StatusAwaitingConfirmation
	cp.Interrupt = &checkpoint.Interrupt{ID: "conf1", Kind: checkpoint.KindConfirmation, CreatedAt: time.Now().UTC(),
		Confirmation: &checkpoint.Confirmation{Action: "delete_experiment", Params: json.RawMessage(`{"experiment_id":"x"}`), ParamsHash: "h", Message: "Delete x?"}}
	if err := a.Save(cp); err != nil {
		t.Fatal(err)
	}
	data, err := a.Export("e1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Export("nosuch"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("export of an unknown session: %v", err)
	}
	file := filepath.Join(t.TempDir(), "e1.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b := h.Open(t, dst)
	id, err := b.Import(file)
	if err != nil || id != "e1" {
		t.Fatalf("import: %q %v", id, err)
	}
	got, err := b.Load("e1")
	if err != nil || got.Checksum != cp.Checksum || got.Interrupt == nil || got.Interrupt.ID != "conf1" {
		t.Fatalf("imported %+v %v", got, err)
	}
	if _, err := b.Import(file); err != nil {
		t.Fatalf("importing the same checkpoint again: %v, want a no-op", err)
	}
	// The session goes on in dst; the old file is now other content.
	if err := b.Save(got); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Import(file); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("import over a session that moved on: %v, want ErrExists", err)
	}
	if cur, _ := b.Load("e1"); cur == nil || cur.Seq != 2 {
		t.Fatalf("the stored session was replaced: %+v", cur)
	}
}

func testListRemove(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	s := h.Open(t, spec)
	for i, id := range []string{"r1", "r2", "r3"} {
		cp := sample(id, i)
		if id == "r2" {
			cp.Status = checkpoint.StatusAwaitingConfirmation
			cp.Interrupt = &checkpoint.Interrupt{ID: "c", Kind: checkpoint.KindConfirmation, CreatedAt: time.Now().UTC(),
				Confirmation: &checkpoint.Confirmation{Action: "create_experiment", Params: json.RawMessage(`{}`)}}
		}
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct updated_at
	}
	list, err := s.List()
	if err != nil || len(list) != 3 || list[0].ID != "r3" {
		t.Fatalf("List = %+v %v, want 3 sessions, newest first", list, err)
	}
	if id, err := s.Latest(checkpoint.StatusAwaitingConfirmation); err != nil || id != "r2" {
		t.Fatalf("Latest(awaiting) = %q %v", id, err)
	}
	if err := s.Remove("r2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("r2"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("after Remove: %v", err)
	}
	if err := s.Remove("r2"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("second Remove: %v", err)
	}
	unlock, err := s.Lock("r1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := h.Open(t, spec).Remove("r1"); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("Remove of a locked session: %v, want ErrLocked", err)
	}
}

func testAudit(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	a, b := h.Audit(t, spec), h.Audit(t, spec)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	events := []audit.Entry{
		{Event: audit.Proposed, Actor: "ci@runner", SessionID: "s1", ConfirmationID: "c1", Action: "delete_experiment", Target: "Doomed", ParamsHash: "ph"},
		{Event: audit.Approved, Actor: "alice@laptop", SessionID: "s1", ConfirmationID: "c1", Action: "delete_experiment", Target: "Doomed", ParamsHash: "ph"},
		{Event: audit.Executed, Actor: "alice@laptop", SessionID: "s1", ConfirmationID: "c1", Action: "delete_experiment", Target: "Doomed", ParamsHash: "ph",
			Outcome: audit.OutcomeSuccess, Answer: json.RawMessage(`{"id":"x","state":"deleted"}`)},
		{Event: audit.Denied, Actor: "bob@desk", SessionID: "s2", ConfirmationID: "c2", Action: "create_experiment"},
	}
	for i, e := range events {
		e.Time = t0.Add(time.Duration(i) * time.Millisecond) // the file trail keeps it; the database stamps its own
		l := a
		if i%2 == 1 {
			l = b
		}
		if err := l.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.Read(audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) {
		t.Fatalf("read %d entries, want %d", len(got), len(events))
	}
	for i, e := range got {
		w := events[i]
		if e.Event != w.Event || e.Actor != w.Actor || e.SessionID != w.SessionID || e.ConfirmationID != w.ConfirmationID ||
			e.Target != w.Target || e.Outcome != w.Outcome || e.Time.Before(t0.Add(-time.Minute)) || (i > 0 && e.Time.Before(got[i-1].Time)) {
			t.Errorf("entry %d = %+v, want %+v (oldest first)", i, e, w)
		}
		if w.Answer != nil {
			var m map[string]any
			if json.Unmarshal(e.Answer, &m) != nil || m["state"] != "deleted" {
				t.Errorf("entry %d answer %s", i, e.Answer)
			}
		}
	}
	if s1, _ := b.Read(audit.Filter{SessionID: "s1"}); len(s1) != 3 {
		t.Errorf("--session s1: %d entries, want 3", len(s1))
	}
	if al, _ := b.Read(audit.Filter{Actor: "alice@laptop"}); len(al) != 2 {
		t.Errorf("--actor alice: %d entries, want 2", len(al))
	}
	if late, _ := b.Read(audit.Filter{Since: got[2].Time}); len(late) < 2 || late[0].Event != audit.Executed {
		t.Errorf("--since: %d entries from the third, want it and the fourth", len(late))
	}
}
