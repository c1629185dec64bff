package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/audit"
	"github.com/upgrade-agent/upgrade-agent/checkpoint"
)

// Tampering with a trail behind its back (Harness.Tamper).
const (
	TamperEdit      = "edit"      // change the second entry's actor
	TamperRemove    = "remove"    // delete the second entry
	TamperBackdated = "backdated" // add an entry dated 2020-01-01, as the app could
	LoseRestart     = "restart"   // the database restarts
	LoseIdleTimeout = "idle"      // idle_session_timeout ends the lock's connection
)

// hostile is text no field may lose: a NUL, bytes that are not UTF-8,
// ESC sequences and other control characters, a backslash.
const hostile = "mallory\x00evil \xff\xfe \x1b[2K\r\a\ttab \\x00 end"

// runFaults runs the cases of issue 27.
func runFaults(t *testing.T, h Harness) {
	t.Run("AuditAnyText", func(t *testing.T) { testAuditAnyText(t, h) })
	t.Run("AuditVerify", func(t *testing.T) { testAuditVerify(t, h) })
	t.Run("ApprovalWrittenAhead", func(t *testing.T) { testWrittenAhead(t, h) })
	for _, v := range []string{LoseRestart, LoseIdleTimeout} {
		t.Run("LockLostDuringHeldWrite/"+v, func(t *testing.T) { testLockLost(t, h, v) })
	}
}

// Every field of an entry takes any text: stored escaped, read back as
// audit.Escape of what was given, never dropped.
func testAuditAnyText(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	l := h.Audit(t, spec)
	e := audit.Entry{Event: audit.Approved + hostile, Actor: hostile, SessionID: "s" + hostile, ConfirmationID: hostile,
		Action: hostile, Target: hostile, TargetID: hostile, ParamsHash: hostile, Outcome: hostile, JobID: hostile, Message: hostile,
		Answer: json.RawMessage(`{"name":"a\u0000b","id":"x\u001b[2K"}`)}
	if err := l.Append(e); err != nil {
		t.Fatalf("append of hostile text: %v", err)
	}
	got, err := h.Audit(t, spec).Read(audit.Filter{})
	if err != nil || len(got) != 1 {
		t.Fatalf("read back: %d entries, %v", len(got), err)
	}
	g, want := got[0], audit.Escape(hostile)
	for name, v := range map[string]string{"event": strings.TrimPrefix(g.Event, audit.Approved), "actor": g.Actor,
		"session_id": strings.TrimPrefix(g.SessionID, "s"), "confirmation_id": g.ConfirmationID, "action": g.Action,
		"target": g.Target, "target_id": g.TargetID, "params_hash": g.ParamsHash, "outcome": g.Outcome, "job_id": g.JobID, "message": g.Message} {
		if v != want {
			t.Errorf("%s read back as %q, want %q", name, v, want)
		}
	}
	var ans map[string]string
	if err := json.Unmarshal(g.Answer, &ans); err != nil || ans["name"] != `a\x00b` || ans["id"] != "x\x1b[2K" {
		t.Errorf("answer read back as %s (%v)", g.Answer, err)
	}
	// A filter names the text as the trail shows it.
	if m, err := h.Audit(t, spec).Read(audit.Filter{Actor: want}); err != nil || len(m) != 1 {
		t.Errorf("--actor with the escaped text: %d entries, %v", len(m), err)
	}
	if r, err := l.Verify(); err != nil || r.Problem != nil || r.Entries != 1 {
		t.Errorf("verify after hostile text: %+v, %v", r, err)
	}
}

// audit verify: a clean trail passes; an edited row, a removed row and an
// entry inserted out of place are found, the first one named.
func testAuditVerify(t *testing.T, h Harness) {
	fill := func(t *testing.T) (string, audit.Log) {
		spec := h.Fresh(t)
		l := h.Audit(t, spec)
		for i, ev := range []string{audit.Proposed, audit.Approved, audit.Executed, audit.Proposed} {
			if err := l.Append(audit.Entry{Event: ev, Actor: "ci@runner", SessionID: "s1", ConfirmationID: "c" + string(rune('1'+i)), Action: "delete_experiment", Target: "Doomed"}); err != nil {
				t.Fatal(err)
			}
		}
		return spec, l
	}
	t.Run("clean", func(t *testing.T) {
		_, l := fill(t)
		r, err := l.Verify()
		if err != nil || r.Problem != nil || r.Entries != 4 || r.Head == "" {
			t.Fatalf("verify of a clean trail: %+v, %v", r, err)
		}
	})
	for _, tc := range []struct {
		op   string
		kind []string
	}{
		{TamperEdit, []string{audit.BreakChanged}},
		{TamperRemove, []string{audit.BreakRemoved, audit.BreakChanged}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			spec, _ := fill(t)
			h.Tamper(t, spec, tc.op)
			r, err := h.Audit(t, spec).Verify()
			if err != nil {
				t.Fatal(err)
			}
			if r.Problem == nil || !slicesContain(tc.kind, r.Problem.Kind) || r.Problem.Where == "" {
				t.Fatalf("verify after %s: %+v, want a %v break", tc.op, r, tc.kind)
			}
			if r.Entries > 2 {
				t.Errorf("verify after %s counted %d sound entries before the break, want at most 2", tc.op, r.Entries)
			}
		})
	}
	t.Run(TamperBackdated, func(t *testing.T) {
		spec, _ := fill(t)
		prevented := h.Tamper(t, spec, TamperBackdated)
		r, err := h.Audit(t, spec).Verify()
		if err != nil {
			t.Fatal(err)
		}
		entries, err := h.Audit(t, spec).Read(audit.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		old := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
		backdated := false
		for _, e := range entries {
			backdated = backdated || e.Time.Before(old)
		}
		switch {
		case prevented && (backdated || r.Problem != nil):
			t.Fatalf("a backdated insert the store prevents: backdated entry listed %v, verify %+v", backdated, r)
		case !prevented && r.Problem == nil:
			t.Fatalf("a backdated insert was neither prevented nor found: %+v", r)
		}
	})
}

func slicesContain(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The approval of a write is stored by the save that precedes the write;
// when it cannot be stored, the save fails and the checkpoint is unchanged.
func testWrittenAhead(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	s := h.Open(t, spec)
	cp := sample("wa1", 1)
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	ahead := h.Ahead(t, s)
	ahead.Stage(audit.Entry{Event: audit.Approved, Actor: "alice@laptop", SessionID: "wa1", ConfirmationID: "c1", Message: "by human"})
	if got, _ := h.Audit(t, spec).Read(audit.Filter{SessionID: "wa1"}); len(got) != 0 {
		t.Fatalf("a staged approval is stored before its save: %+v", got)
	}
	cp.Effects = append(cp.Effects, checkpoint.Effect{EffectID: "e1", Action: "delete_experiment", ParamsHash: "ph", State: checkpoint.EffectStarted, StartedAt: time.Now().UTC()})
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	got, err := h.Audit(t, spec).Read(audit.Filter{SessionID: "wa1"})
	if err != nil || len(got) != 1 || got[0].Event != audit.Approved {
		t.Fatalf("after the save that announces the write: %+v, %v", got, err)
	}

	// The trail refuses the next entry: the save fails, nothing changes.
	h.BreakAudit(t, spec)
	ahead.Stage(audit.Entry{Event: audit.Approved, Actor: "alice@laptop", SessionID: "wa1", ConfirmationID: "c2"})
	seq := cp.Seq
	next := *cp
	if err := s.Save(&next); err == nil {
		t.Fatal("a save whose approval could not be stored succeeded")
	}
	if back, err := h.Open(t, spec).Load("wa1"); err != nil || back.Seq != seq {
		t.Fatalf("after the failed save: seq %v, %v; want %d (unchanged)", back, err, seq)
	}
}

// A holder whose lock connection drops in the middle of a write: another
// machine waits until the write can no longer land before it holds the
// session; the first holder's save after that is refused (ErrLocked), so
// it learns it lost the session before any further write.
func testLockLost(t *testing.T, h Harness, variant string) {
	if h.LoseLocks == nil {
		t.Skip("this store's lock cannot be lost while its process lives (a local file lock)")
	}
	spec, lose := h.LoseLocks(t, variant)
	a := h.Open(t, spec)
	unlock, err := a.Lock("ll1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cp := sample("ll1", 1)
	if err := a.Save(cp); err != nil {
		t.Fatal(err)
	}
	cp.Effects = append(cp.Effects, checkpoint.Effect{EffectID: "e1", Action: "delete_experiment", ParamsHash: "ph", State: checkpoint.EffectStarted, StartedAt: time.Now().UTC()})
	if err := a.Save(cp); err != nil { // announces the write: the lease starts
		t.Fatal(err)
	}
	announced := time.Now()
	var deadline time.Time
	if d := cp.Effects[len(cp.Effects)-1].Deadline; d != nil {
		deadline = *d
	}
	lose()

	b := h.Open(t, spec)
	type held struct {
		unlock func()
		err    error
		at     time.Time
	}
	got := make(chan held, 1)
	go func() {
		u, err := b.Lock("ll1")
		got <- held{u, err, time.Now()}
	}()
	hb := <-got
	if hb.err != nil {
		t.Fatalf("the other machine could not take the session after the lease: %v", hb.err)
	}
	defer hb.unlock()
	if !deadline.IsZero() && hb.at.Before(deadline) {
		t.Fatalf("the other machine held the session %v after the write was announced, before the write's deadline %v", hb.at.Sub(announced), deadline)
	}
	// The write landed meanwhile; the first holder records it: refused.
	cp.Effects[len(cp.Effects)-1].State = checkpoint.EffectDone
	if err := a.Save(cp); !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("the first holder's save after losing the session: %v, want ErrLocked", err)
	}
	back, err := b.Load("ll1")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(back.PendingEffects()); n != 1 {
		t.Fatalf("the other machine sees %d started writes, want the one to reconcile", n)
	}
}
