package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// effectLog is n effects in the given state, with short ids: as many as fit.
func effectLog(n int, state string) []Effect {
	effs := make([]Effect, n)
	for i := range effs {
		effs[i] = Effect{EffectID: fmt.Sprintf("e%d", i), Action: "create_experiment", ParamsHash: "h", State: state, StartedAt: t0}
		if state != EffectStarted {
			at := t0.Add(time.Duration(i) * time.Millisecond)
			effs[i].FinishedAt = &at
		}
	}
	return effs
}

func TestEffectsDroppedIsValidated(t *testing.T) {
	for n, want := range map[int]string{-1: "effects_dropped: -1 is out of range", MaxSeq + 1: "effects_dropped: " + fmt.Sprint(MaxSeq+1)} {
		s := newStore(t)
		path := writeSession(t, s, "drop1", fileOf(t, "drop1", func(cp *Checkpoint) { cp.EffectsDropped = n }))
		_, err := s.Load("drop1")
		wantCorrupt(t, fmt.Sprintf("effects_dropped %d", n), err, path, want)
	}
	// It saturates rather than overflows.
	effs, dropped := compactEffects(effectLog(5, EffectDone), MaxSeq-2, 1)
	if len(effs) != 1 || dropped != MaxSeq {
		t.Errorf("compacting near the limit: %d effects, %d dropped", len(effs), dropped)
	}
}

func TestStartedEffectsAreCapped(t *testing.T) {
	cp := &Checkpoint{SessionID: "cap2", Status: StatusRunning}
	for i := range MaxStartedEffects {
		if err := cp.StartEffect(fmt.Sprint("e", i), "a", "h", t0); err != nil {
			t.Fatal(err)
		}
	}
	err := cp.StartEffect("one-more", "a", "h", t0)
	if err == nil || !strings.Contains(err.Error(), "100 effects are already started without an outcome") {
		t.Fatalf("StartEffect over the cap: %v", err)
	}
	if err := cp.FinishEffect("e0", nil, "", t0); err != nil {
		t.Fatal(err)
	}
	if err := cp.StartEffect("one-more", "a", "h", t0); err != nil {
		t.Fatalf("StartEffect once one finished: %v", err)
	}
	s := newStore(t)
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	cp.Effects = append(cp.Effects, Effect{EffectID: "sneaked-in", State: EffectStarted, StartedAt: t0})
	if err := s.Save(cp); err == nil || !strings.Contains(err.Error(), "effects[101]: more than 100 effects started without an outcome") {
		t.Errorf("Save over the cap: %v", err)
	}
}

// hugeEffects is a file of 100,000 effects in the given state (10 to 14 MB, under the
// size cap), which the decode must not take 100,000 times the cost of one effect to
// refuse, nor any reconciliation time at all.
func hugeEffects(tb testing.TB, state string) []byte {
	tb.Helper()
	data := fileOf(tb, "huge1", func(cp *Checkpoint) { cp.Effects = effectLog(100_000, state) })
	if len(data) > maxFileSize {
		tb.Fatalf("test setup: %d bytes, over the size cap", len(data))
	}
	return data
}

func TestHugeStartedEffectLogIsRefused(t *testing.T) {
	data := hugeEffects(t, EffectStarted)
	s := newStore(t)
	path := writeSession(t, s, "huge1", data)
	const reason = "effects[100]: more than 100 effects started without an outcome"
	_, err := s.Load("huge1")
	wantCorrupt(t, "Load", err, path, reason)
	art := filepath.Join(t.TempDir(), "huge.json")
	if err := os.WriteFile(art, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = newStore(t).Import(art)
	wantCorrupt(t, "Import", err, art, reason)
	// The decode stopped at the first started effect too many.
	cp, ok := decodeFast(data)
	if !ok || len(cp.Effects) != MaxStartedEffects+1 {
		t.Errorf("decodeFast: ok %v, %d effects decoded; want %d", ok, len(cp.Effects), MaxStartedEffects+1)
	}
	// The same file in version 1 (migrated on load) is refused the same way.
	v1 := reseal(bytes.Replace(data, []byte(`{`+versionMember), []byte(`{"format_version":1,`), 1))
	writeSession(t, s, "huge1", v1)
	_, err = s.Load("huge1")
	wantCorrupt(t, "Load of version 1", err, path, reason)
}

// A log of 100,000 finished effects is valid (a version 1 session could grow one), and
// its first save leaves 20.
func TestHugeFinishedEffectLogIsCompacted(t *testing.T) {
	s := newStore(t)
	writeSession(t, s, "huge1", hugeEffects(t, EffectDone))
	cp, err := s.Load("huge1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.PendingEffects()) != 0 {
		t.Fatal("pending effects in a log of finished ones")
	}
	if err := s.Save(cp); err != nil {
		t.Fatal(err)
	}
	if len(cp.Effects) != FinishedEffectsKept || cp.EffectsDropped != 100_000-FinishedEffectsKept || cp.Effects[0].EffectID != "e99980" {
		t.Errorf("after Save: %d effects from %s, %d dropped", len(cp.Effects), cp.Effects[0].EffectID, cp.EffectsDropped)
	}
	if n := len(readBytes(t, s.Path("huge1"))); n > 10_000 {
		t.Errorf("compacted file: %d bytes", n)
	}
}

func TestEffectLogCompaction(t *testing.T) {
	s := newStore(t)
	s.Now = fixedClock(t0)
	cp := &Checkpoint{SessionID: "comp1", Status: StatusRunning, State: json.RawMessage(`{}`)}
	save := func() {
		t.Helper()
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
	}
	// A call whose outcome is in doubt, then 50 actions the executor's way: started
	// and saved, then finished and saved.
	if err := cp.StartEffect("stuck", "delete_experiment", "h", t0); err != nil {
		t.Fatal(err)
	}
	save()
	at := t0
	for i := range 50 {
		id := fmt.Sprint("a", i)
		if err := cp.StartEffect(id, "update_experiment_status", "h", at); err != nil {
			t.Fatal(err)
		}
		save()
		at = at.Add(time.Second)
		errMsg := ""
		if i%2 == 1 {
			errMsg = "api: 500"
		}
		if err := cp.FinishEffect(id, json.RawMessage(`{"ok":true}`), errMsg, at); err != nil {
			t.Fatal(err)
		}
		save()
	}
	ids := func(effs []Effect) []string {
		var out []string
		for _, e := range effs {
			out = append(out, e.EffectID)
		}
		return out
	}
	want := []string{"stuck"}
	for i := 30; i < 50; i++ {
		want = append(want, fmt.Sprint("a", i))
	}
	got, err := s.Load("comp1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, ids(got.Effects)); diff != "" || got.EffectsDropped != 30 {
		t.Errorf("effects after 50 actions (-want +got):\n%s\ndropped %d, want 30", diff, got.EffectsDropped)
	}
	if p := got.PendingEffects(); len(p) != 1 || p[0].EffectID != "stuck" {
		t.Errorf("the effect in doubt was dropped: pending %v", ids(p))
	}

	// Reconciled now, it is the most recently finished: it stays, a30 goes.
	if err := got.FinishEffect("stuck", nil, "outcome unknown", at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(got); err != nil {
		t.Fatal(err)
	}
	if ids := ids(got.Effects); len(ids) != 20 || ids[0] != "stuck" || ids[1] != "a31" || got.EffectsDropped != 31 {
		t.Errorf("after reconciling: %v, dropped %d", ids, got.EffectsDropped)
	}

	// A save that fails leaves the caller's log as it was.
	before := slices.Clone(got.Effects)
	got.Effects = append(got.Effects, effectLog(5, EffectDone)...)
	before = append(before, effectLog(5, EffectDone)...)
	s.beforeRename = func() error { return errors.New("simulated crash") }
	if err := s.Save(got); err == nil {
		t.Fatal("the crash hook did not fire")
	}
	if diff := cmp.Diff(before, got.Effects); diff != "" || got.EffectsDropped != 31 {
		t.Errorf("a failed save compacted the caller's log (-before +after):\n%s", diff)
	}
}

// The file of a long session does not grow with its number of actions.
func TestEffectLogDoesNotGrowTheFile(t *testing.T) {
	size := func(actions int) int {
		s := newStore(t)
		s.Now = fixedClock(t0)
		cp := &Checkpoint{SessionID: "size2", Status: StatusIdle, State: longState(t, 1000, 200)}
		result := json.RawMessage(`{"id":"b3c1f2a0-0001-4e1f-9a2b-0c1d2e3f4a5b","name":"experiment 12","state":"enrolling","context":["assign-prog"],"updatedAt":"2026-01-02T03:04:05.000Z","versionNumber":3}`)
		for i := range actions {
			id := fmt.Sprintf("0b4c3d2e-%04d-4e1f-9a2b-0c1d2e3f4a5b", i)
			if err := cp.StartEffect(id, "update_experiment_status", strings.Repeat("8a", 32), t0); err != nil {
				t.Fatal(err)
			}
			if err := cp.FinishEffect(id, result, "", t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Save(cp); err != nil {
			t.Fatal(err)
		}
		return len(readBytes(t, s.Path("size2")))
	}
	s20, s1000, s5000 := size(FinishedEffectsKept), size(1000), size(5000)
	// Only effects_dropped differs: a member of up to 25 bytes.
	if s1000-s20 > 25 || s5000-s1000 > 1 {
		t.Errorf("file size with 20, 1,000 and 5,000 actions: %d, %d, %d bytes", s20, s1000, s5000)
	}
}
