// Package changetest is the conformance suite of recorded changes
// (spec/undo.md) that every session store runs: the changes a session
// keeps are found, listed, linked and exported the same way in the file
// store and in the PostgreSQL store.
package changetest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// Run runs the suite; fresh returns a handle on a new, empty store.
func Run(t *testing.T, fresh func(t *testing.T) checkpoint.SessionStore) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	flag := actions.Target{Kind: actions.KindFeatureFlag, ID: "f-1", Name: "Math hints"}
	a := actions.Change{ID: "aa11aa11aa11", SessionID: "s1", Action: "update_feature_flag_status", Params: json.RawMessage(`{"flag_id":"f-1","status":"enabled"}`),
		Target: flag, Before: json.RawMessage(`{"key":"MATH_HINTS","status":"disabled"}`), After: json.RawMessage(`{"key":"MATH_HINTS","status":"enabled"}`),
		ExecutedAt: t0, ApprovedBy: "human", Undoable: true, EffectID: "e1"}
	job := actions.Change{ID: "aa22bb22cc22", SessionID: "s1", Action: "test_condition_balance", ExecutedAt: t0.Add(time.Minute), EffectID: "e2"}
	inFlight := actions.Change{ID: "dd33dd33dd33", SessionID: "s1", Action: "delete_segment", Undoable: true, EffectID: "e3"}
	u := actions.Change{ID: "ee44ee44ee44", SessionID: "s2", Action: "undo_change", Params: json.RawMessage(`{"change_id":"aa11aa11aa11"}`),
		Target: flag, Before: a.After, After: a.Before, ExecutedAt: t0.Add(2 * time.Minute), ApprovedBy: "human", Undoable: true, Undoes: a.ID, EffectID: "e4"}

	s := fresh(t)
	save(t, s, "s1", a, job, inFlight)
	save(t, s, "s2", u)

	t.Run("ListNewestFirstLinked", func(t *testing.T) {
		got, err := pipeline.ListChanges(s, pipeline.ChangeFilter{})
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		if want := []string{u.ID, job.ID, a.ID}; !equal(ids, want) {
			t.Fatalf("changes %v, want %v (newest first, the one in flight left out)", ids, want)
		}
		if got[2].UndoneBy != u.ID || got[0].Undoes != a.ID {
			t.Errorf("undone_by %q, undoes %q: the undo is not linked both ways", got[2].UndoneBy, got[0].Undoes)
		}
		if !json.Valid(got[2].Before) || string(got[2].Before) != string(a.Before) {
			t.Errorf("before %s, want %s", got[2].Before, a.Before)
		}
	})
	t.Run("Filters", func(t *testing.T) {
		for _, tc := range []struct {
			f    pipeline.ChangeFilter
			want int
		}{
			{pipeline.ChangeFilter{SessionID: "s1"}, 2},
			{pipeline.ChangeFilter{Target: "math_hints"}, 2},
			{pipeline.ChangeFilter{Target: "Math Hints"}, 2},
			{pipeline.ChangeFilter{Since: t0.Add(90 * time.Second)}, 1},
		} {
			got, err := pipeline.ListChanges(s, tc.f)
			if err != nil || len(got) != tc.want {
				t.Errorf("%+v: %d changes, %v; want %d", tc.f, len(got), err, tc.want)
			}
		}
	})
	t.Run("FindByPrefixAndLast", func(t *testing.T) {
		if c, err := pipeline.FindChange(s, "ee44"); err != nil || c.ID != u.ID {
			t.Errorf("prefix: %+v, %v", c, err)
		}
		if _, err := pipeline.FindChange(s, "aa"); !errors.Is(err, pipeline.ErrChangeNotFound) {
			t.Errorf("an ambiguous prefix: %v, want ErrChangeNotFound", err)
		}
		if _, err := pipeline.FindChange(s, "dd33"); !errors.Is(err, pipeline.ErrChangeNotFound) {
			t.Errorf("a change in flight: %v, want ErrChangeNotFound", err)
		}
		if c, err := pipeline.FindChange(s, "last"); err != nil || c.ID != u.ID {
			t.Errorf("last: %+v, %v; want the undo (a redo undoes it)", c, err)
		}
	})
	t.Run("TravelWithExport", func(t *testing.T) {
		data, err := s.Export("s1")
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "s1.json")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		other := fresh(t)
		if _, err := other.Import(file); err != nil {
			t.Fatal(err)
		}
		c, err := pipeline.FindChange(other, a.ID)
		if err != nil || string(c.After) != string(a.After) || c.UndoneBy != "" {
			t.Errorf("imported change %+v, %v", c, err)
		}
	})
}

// save stores a session whose state holds changes.
func save(t *testing.T, s checkpoint.SessionStore, id string, cs ...actions.Change) {
	t.Helper()
	st := pipeline.NewState()
	st.Changes = cs
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&checkpoint.Checkpoint{SessionID: id, Status: checkpoint.StatusIdle, State: raw}); err != nil {
		t.Fatal(err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
