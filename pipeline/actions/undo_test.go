package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// memChanges is a ChangeSource over a slice, linking undos as the
// session stores do.
type memChanges struct{ list []*Change }

func (m *memChanges) Change(_ context.Context, id string) (*Change, error) {
	for _, c := range m.list {
		if strings.HasPrefix(c.ID, id) {
			out := *c
			out.UndoneBy = ""
			for _, u := range m.list {
				if u.Undoes == c.ID && !m.undone(u.ID) {
					out.UndoneBy = u.ID
				}
			}
			return &out, nil
		}
	}
	return nil, fmt.Errorf("no change %s", id)
}

func (m *memChanges) undone(id string) bool {
	for _, u := range m.list {
		if u.Undoes == id && !m.undone(u.ID) {
			return true
		}
	}
	return false
}

// undoHarness runs actions as the executor does: the object is read before
// and after each write and the change is recorded.
type undoHarness struct {
	t   *testing.T
	ctx context.Context
	api API
	src *memChanges
	n   int
}

func (h *undoHarness) env() Env { return Env{API: h.api, Changes: h.src} }

func (h *undoHarness) do(p Params) (*Change, json.RawMessage) {
	h.t.Helper()
	h.n++
	b := mustBound(p)
	env := h.env()
	if probs, err := b.Validate(h.ctx, env); err != nil || len(probs) > 0 {
		h.t.Fatalf("%s: problems %v, err %v", b.Name, probs, err)
	}
	if _, err := b.Plan(h.ctx, env); err != nil {
		h.t.Fatalf("%s: plan: %v", b.Name, err)
	}
	target, before, undoable, err := BeforeWrite(h.ctx, env, b)
	if err != nil {
		h.t.Fatalf("%s: before: %v", b.Name, err)
	}
	out, err := b.Execute(h.ctx, env, fmt.Sprintf("undo-test-%d", h.n))
	if err != nil {
		h.t.Fatalf("%s: execute: %v", b.Name, err)
	}
	target, after, err := AfterWrite(h.ctx, env, b.Name, target, out.Result)
	if err != nil {
		h.t.Fatalf("%s: after: %v", b.Name, err)
	}
	c := &Change{ID: fmt.Sprintf("c%03d", h.n), Action: b.Name, Params: b.Params, Target: target, Before: before, After: after,
		ExecutedAt: time.Now(), Undoable: undoable}
	if b.Name == string(UndoChange) {
		c.Undoes = decode[UndoChangeParams](h.t, b.Params).ChangeID
	}
	h.src.list = append(h.src.list, c)
	return c, out.Result
}

// undo undoes c and checks the server's object is c's before state again.
func (h *undoHarness) undo(c *Change) *Change {
	h.t.Helper()
	u, _ := h.do(UndoChangeParams{ChangeID: c.ID})
	now, err := readTarget(h.ctx, h.env(), u.Target)
	if err != nil {
		h.t.Fatal(err)
	}
	if d := Diff(normalIDs(kindNormal(c.Target.Kind, c.Before)), normalIDs(kindNormal(c.Target.Kind, now))); len(d) > 0 {
		h.t.Errorf("undo of %s (%s): the server's object differs from before:\n%+v", c.ID, c.Action, d)
	}
	return u
}

func kindNormal(kind string, raw json.RawMessage) json.RawMessage {
	if k, _ := kindOf(kind); k.Normal != nil {
		return k.Normal(raw)
	}
	return raw
}

// normalIDs drops the ids a re-created object gets anew: a flag's, and
// an experiment's conditions and decision points (UpGrade keeps only the
// experiment's own id).
func normalIDs(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	if _, isFlag := m["key"]; isFlag {
		delete(m, "id")
		for _, l := range []string{"featureFlagSegmentInclusion", "featureFlagSegmentExclusion"} {
			if ls, ok := m[l].([]any); ok {
				for _, x := range ls {
					delete(x.(map[string]any), "featureFlagId")
				}
			}
		}
	}
	for _, l := range []string{"conditions", "partitions"} {
		if ls, ok := m[l].([]any); ok {
			for _, x := range ls {
				delete(x.(map[string]any), "id")
			}
		}
	}
	out, _ := json.Marshal(m)
	return out
}

func newUndoHarness(t *testing.T) *undoHarness {
	api := upgradeAPI(t)
	return &undoHarness{t: t, ctx: context.Background(), api: api, src: &memChanges{}}
}

// upgradeAPI is the simulator, or a real UpGrade 6.5 with UPGRADE_REAL_URL.
func upgradeAPI(t *testing.T) API {
	if url := os.Getenv("UPGRADE_REAL_URL"); url != "" {
		c, err := upgrade.New(upgrade.Config{BaseURL: url, Token: os.Getenv("UPGRADE_REAL_TOKEN")})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return startSim(t, "6.5.0")
}

func TestUndoFlagsAndSegments(t *testing.T) {
	h := newUndoHarness(t)
	var seg SegmentResult
	c, raw := h.do(CreateSegmentParams{Name: "undo pilot", Context: "assign-prog", Users: []string{"u1", "u2"}})
	seg = decode[SegmentResult](t, raw)
	// On a real server whatever is left (by a failure half-way) goes, so
	// that the test runs again (cleanups run last first: flags, then the
	// segment).
	t.Cleanup(func() { _, _ = h.api.DeleteSegment(h.ctx, seg.ID) })
	segCreate := c
	fc, raw := h.do(CreateFeatureFlagParams{Name: "Undo hints", Key: "UNDO_HINTS", Context: "assign-prog",
		IncludeLists: []FlagListParam{{SegmentIDs: []string{seg.ID}}}, ExcludeLists: []FlagListParam{{Users: []string{"u9"}}}})
	fl := decode[FlagResult](t, raw)
	t.Cleanup(func() { deleteFlagKey(h, "UNDO_HINTS") })

	steps := []Params{
		UpdateFeatureFlagStatusParams{FlagID: fl.ID, Status: "enabled"},
		UpdateFeatureFlagParams{FlagID: fl.ID, Name: ptr("Undo hints 2"), Description: ptr("new words"), FilterMode: ptr("includeAll")},
		AddFeatureFlagListParams{FlagID: fl.ID, Kind: "include", Users: []string{"u3"}},
		UpdateSegmentParams{SegmentID: seg.ID, AddUsers: []string{"u4"}, Description: ptr("more")},
	}
	for _, p := range steps {
		c, _ := h.do(p)
		h.undo(c)
	}
	f := readFlagT(t, h, fl.ID)
	list := f.Exclude[0]
	for _, p := range []Params{
		UpdateFeatureFlagListParams{FlagID: fl.ID, Kind: "exclude", ListID: list.ID, Users: &[]string{"u9", "u10"}},
		RemoveFeatureFlagListParams{FlagID: fl.ID, Kind: "exclude", ListID: list.ID},
	} {
		c, _ := h.do(p)
		h.undo(c)
	}

	// A deleted segment comes back with its members and into the flag's
	// include list.
	c, _ = h.do(DeleteSegmentParams{SegmentID: seg.ID})
	h.undo(c)
	if f := readFlagT(t, h, fl.ID); len(f.Include) != 1 || len(f.Include[0].Members.Segments) != 1 {
		t.Errorf("the segment is not back in the flag's include list: %+v", f.Include)
	}

	// A deleted flag comes back with its lists (and status); undoing the
	// undo deletes it again (redo).
	c, _ = h.do(DeleteFeatureFlagParams{FlagID: fl.ID})
	u := h.undo(c)
	if _, err := h.src.Change(h.ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	again, _ := h.src.Change(h.ctx, c.ID)
	if again.UndoneBy != u.ID {
		t.Errorf("undone_by = %q, want %q", again.UndoneBy, u.ID)
	}
	h.undo(u) // redo: the flag is deleted again
	if now, _ := readFlagSnap(h.ctx, h.env(), u.Target.ID); now != nil {
		t.Errorf("redo left the flag: %s", now)
	}

	// The flag the first change created is gone: its undo says so.
	if pu, err := PrepareUndo(h.ctx, h.env(), fc.ID); err != nil || !strings.Contains(pu.Refusal, "gone") {
		t.Errorf("undo of a create whose object is gone: %+v, %v", pu, err)
	}
	// Creates are undone by deleting.
	h.undo(segCreate)

	// Already undone: refused, nothing proposed.
	pu, err := PrepareUndo(h.ctx, h.env(), segCreate.ID)
	if err != nil || !strings.Contains(pu.Refusal, "already undone") {
		t.Errorf("second undo: %+v, %v; want refused as already undone", pu, err)
	}
}

// deleteFlagKey deletes every flag with the key (an undone delete comes
// back under a new id).
func deleteFlagKey(h *undoHarness, key string) {
	flags, err := h.api.Flags(h.ctx)
	if err != nil {
		return
	}
	for _, f := range flags {
		if f.Key == key {
			_, _ = h.api.DeleteFlag(h.ctx, f.ID)
		}
	}
}

func readFlagT(t *testing.T, h *undoHarness, id string) flagState {
	t.Helper()
	f, err := readFlag(h.ctx, h.api, id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestUndoExperiments(t *testing.T) {
	h := newUndoHarness(t)
	create, raw := h.do(CreateExperimentParams{Name: "Undo exp", Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}},
		ExclusionUsers: []string{"x1"}})
	id := decode[ExperimentResult](t, raw).ID
	// The undo of the delete re-creates it under its id: delete it again
	// at the end, so that a real server is left as it was.
	t.Cleanup(func() { _, _ = h.api.DeleteExperiment(h.ctx, id) })

	c, _ := h.do(UpdateExperimentParams{ExperimentID: id, Description: ptr("changed"), ExclusionUsers: &[]string{"x1", "x2"}})
	h.undo(c)

	// inactive -> enrolling cannot go back: refused with the reason.
	start, _ := h.do(UpdateExperimentStatusParams{ExperimentID: id, Status: "enrolling"})
	pu, err := PrepareUndo(h.ctx, h.env(), start.ID)
	if err != nil || !strings.Contains(pu.Refusal, "does not move") {
		t.Errorf("undo of a start: %+v, %v; want a refusal", pu, err)
	}
	// enrolling -> enrollmentComplete goes back by a restart.
	stop, _ := h.do(UpdateExperimentStatusParams{ExperimentID: id, Status: "enrollmentComplete"})
	h.undo(stop)

	// A deleted experiment comes back under its own id, lists and status.
	del, _ := h.do(DeleteExperimentParams{ExperimentID: id})
	u := h.undo(del)
	if u.Target.ID != id {
		t.Errorf("re-created under %s, want %s", u.Target.ID, id)
	}
	_ = create
}

func TestUndoDrift(t *testing.T) {
	h := newUndoHarness(t)
	_, raw := h.do(CreateFeatureFlagParams{Name: "Drift", Key: "DRIFT", Context: "assign-prog"})
	fl := decode[FlagResult](t, raw)
	t.Cleanup(func() { _, _ = h.api.DeleteFlag(h.ctx, fl.ID) })
	c, _ := h.do(UpdateFeatureFlagParams{FlagID: fl.ID, Description: ptr("ours")})
	// Someone else changes the flag since.
	f, err := h.api.Flag(h.ctx, fl.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.Name = "Drift renamed"
	if _, err := h.api.UpdateFlag(h.ctx, f); err != nil {
		t.Fatal(err)
	}
	b := mustBound(UndoChangeParams{ChangeID: c.ID})
	plan, err := b.Plan(h.ctx, h.env())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Changed on the server since the change", `name: "Drift" -> "Drift renamed"`, "overwrites", "Cannot come back"} {
		if !strings.Contains(plan.Message, want) {
			t.Errorf("drift plan lacks %q:\n%s", want, plan.Message)
		}
	}
	if !plan.Destructive {
		t.Error("an undo is not destructive")
	}
}

// TestUndoPlanGolden: the confirmation of an undo, with drift, against the
// simulator (seeded: its ids repeat).
func TestUndoPlanGolden(t *testing.T) {
	h := &undoHarness{t: t, ctx: context.Background(), api: startSim(t, "6.5.0"), src: &memChanges{}}
	_, raw := h.do(CreateFeatureFlagParams{Name: "Golden", Key: "GOLDEN", Context: "assign-prog",
		IncludeLists: []FlagListParam{{Users: []string{"u1"}}}})
	fl := decode[FlagResult](t, raw)
	c, _ := h.do(UpdateFeatureFlagStatusParams{FlagID: fl.ID, Status: "enabled"})
	c.ExecutedAt, c.ApprovedBy = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), "human"
	if _, err := h.api.SetFlagFilterMode(h.ctx, fl.ID, "includeAll"); err != nil {
		t.Fatal(err)
	}
	plan, err := mustBound(UndoChangeParams{ChangeID: c.ID}).Plan(h.ctx, h.env())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "plan", "undo_change_drift.txt")
	if *update {
		if err := os.WriteFile(path, []byte(plan.Message+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), plan.Message+"\n"); diff != "" {
		t.Errorf("message differs from %s (-want +got):\n%s", path, diff)
	}
}
