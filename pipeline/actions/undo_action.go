package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// UndoChange puts the object of a recorded change back as it was before
// the change (spec/undo.md). Every scope offers it.
const UndoChange Name = "undo_change"

// UndoChangeParams are the params of undo_change.
type UndoChangeParams struct {
	ChangeID string `json:"change_id" jsonschema:"id (or unique prefix) of the change to undo, from get_recent_changes; last: the newest one not undone"`
}

// Action names the action the params are for.
func (UndoChangeParams) Action() Name { return UndoChange }

func (p UndoChangeParams) canonical() UndoChangeParams {
	p.ChangeID = strings.TrimSpace(p.ChangeID)
	return p
}

// declareUndoAction declares this file's action in r.
func declareUndoAction(r *Registry) {
	Add(r, Def[UndoChangeParams]{
		Name: UndoChange, Order: 900, Destructive: true,
		Invalidates: []Cache{CacheExperiments, CacheFlags, CacheEnrollment},
		Description: "Undo a recorded change: put its object back as it was before it.",
		Canonical:   UndoChangeParams.canonical,
		Validate: func(c *Checker, p UndoChangeParams) error {
			u, err := PrepareUndo(c.ctx, Env{API: c.api, Changes: c.changes}, p.ChangeID)
			if err != nil {
				return err
			}
			if u.Refusal != "" {
				c.Add("change_id", "%s", u.Refusal)
			}
			return nil
		},
		Plan:      planUndo,
		Execute:   executeUndo,
		Reconcile: reconcileUndo,
		Report: ReportAs(func(r undoResult) string {
			return fmt.Sprintf("Undid change %s: %s is back as it was before it.", r.ChangeID, r.Target)
		}),
	})
}

// Undo is an undo worked out against the server as it is now.
type Undo struct {
	Change *Change
	// Refusal says why nothing is proposed ("" = the undo can run).
	Refusal string
	// Now is the object as the server has it now (nil: gone).
	Now json.RawMessage
	// Restores are the fields the undo writes, from now to before.
	Restores []FieldDiff
	// Drift are the fields changed since the change, from after to now.
	Drift []FieldDiff
	kind  Kind
}

// ErrNoChanges: no change source (a library use without a store).
var ErrNoChanges = errors.New("no changes are recorded here")

// PrepareUndo finds the change and compares the server's object now with
// the change's before and after states.
func PrepareUndo(ctx context.Context, env Env, id string) (*Undo, error) {
	if env.Changes == nil {
		return nil, ErrNoChanges
	}
	c, err := env.Changes.Change(ctx, id)
	if err != nil {
		return &Undo{Refusal: err.Error()}, nil
	}
	u := &Undo{Change: c}
	k, ok := kindOf(c.Target.Kind)
	switch {
	case c.ExecutedAt.IsZero():
		u.Refusal = fmt.Sprintf("change %s never finished: its outcome is unknown", c.ID)
	case !c.Undoable || !ok:
		u.Refusal = fmt.Sprintf("change %s (%s) cannot be undone: UpGrade cannot take back what jobs, user inits, marks and visits did", c.ID, c.Action)
	case c.UndoneBy != "":
		u.Refusal = fmt.Sprintf("change %s was already undone by change %s (undo that one to redo it)", c.ID, c.UndoneBy)
	}
	if u.Refusal != "" {
		return u, nil
	}
	u.kind = k
	if u.Now, err = readTarget(ctx, env, c.Target); err != nil {
		return nil, err
	}
	switch {
	case c.After != nil && u.Now == nil:
		u.Refusal = fmt.Sprintf("%s is gone from the server: nothing to put back", c.Target)
	case c.After == nil && u.Now != nil:
		u.Refusal = fmt.Sprintf("%s exists again: nothing to put back", c.Target)
	case c.Before == nil && u.Now == nil:
		u.Refusal = fmt.Sprintf("%s is gone already: nothing to undo", c.Target)
	case c.Before != nil && u.Now != nil && k.same(u.Now, c.Before):
		u.Refusal = fmt.Sprintf("%s is already as it was before change %s: nothing to undo", c.Target, c.ID)
	default:
		u.Refusal = k.Refuse(c.Before, u.Now)
	}
	if u.Refusal != "" {
		return u, nil
	}
	u.Restores = k.diff(u.Now, c.Before)
	if c.After != nil && !k.same(c.After, u.Now) {
		u.Drift = k.diff(c.After, u.Now)
	}
	return u, nil
}

func planUndo(b *Planner, p UndoChangeParams) error {
	u, err := PrepareUndo(b.ctx, Env{API: b.api, Changes: b.changes}, p.ChangeID)
	if err != nil {
		return err
	}
	if u.Refusal != "" {
		return errors.New(u.Refusal)
	}
	c := u.Change
	b.Line("undo change %s (%s on %s, %s, approved by %s):", c.ID, c.Action, c.Target, c.ExecutedAt.UTC().Format(time.RFC3339), orNone(c.ApprovedBy))
	switch {
	case c.Before == nil:
		b.Line("  delete %s, which the change created.", c.Target)
	case u.Now == nil:
		b.Line("  re-create %s as it was before the change.", c.Target)
		switch c.Target.Kind {
		case KindExperiment:
			b.Line("  It keeps its id %s (the same seeded assignment draws), its lists and, where UpGrade allows, its status;", c.Target.ID)
			b.Line("  UpGrade gives its conditions and decision points new ids.")
		case KindFeatureFlag:
			b.Line("  UpGrade gives it a new id (it was %s); its lists and status come back.", c.Target.ID)
		case KindSegment:
			b.Line("  It keeps its id %s and members, and goes back into the flag and experiment lists that held it.", c.Target.ID)
		}
		if u.kind.Recreated != "" {
			b.Line("  %s", u.kind.Recreated)
		}
	default:
		b.Line("  put %s back as it was before the change:", c.Target)
		for _, d := range u.Restores {
			b.Line("    %s: %s -> %s", d.Path, FmtValue(d.From), FmtValue(d.To))
		}
	}
	if len(u.Drift) > 0 {
		b.Line("  Changed on the server since the change (after -> now); the undo overwrites it:")
		for _, d := range u.Drift {
			b.Line("    %s: %s -> %s", d.Path, FmtValue(d.From), FmtValue(d.To))
		}
		b.Warn("%s was changed by someone since change %s: undoing it overwrites those changes", c.Target, c.ID)
	}
	b.Line("  Cannot come back: %s.", CannotComeBack)
	if u.kind.Lost != "" {
		b.Line("  Nor: %s.", u.kind.Lost)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type undoResult struct {
	ChangeID string `json:"change_id"`
	Target   string `json:"target"`
	ID       string `json:"id"`
}

func executeUndo(ctx context.Context, env Env, p UndoChangeParams, _ string) (Outcome, error) {
	u, err := PrepareUndo(ctx, env, p.ChangeID)
	if err != nil {
		return Outcome{}, err
	}
	if u.Refusal != "" {
		return Outcome{}, errors.New(u.Refusal)
	}
	c := u.Change
	id, err := u.kind.Restore(ctx, env, c.Target.ID, c.Before, u.Now)
	if err != nil {
		return Outcome{}, fmt.Errorf("undoing change %s: %w", c.ID, err)
	}
	return Result(undoResult{ChangeID: c.ID, Target: c.Target.String(), ID: id})
}

// reconcileUndo: the undo writes the before state over whatever is there,
// so running it again is safe; it is done once the object is back.
func reconcileUndo(ctx context.Context, env Env, p UndoChangeParams, _ string, _ time.Time) (Reconciliation, error) {
	c, err := undoneChange(ctx, env, mustSnap(p))
	if err != nil {
		return Reconciliation{}, err
	}
	now, err := readTarget(ctx, env, c.Target)
	if err != nil {
		return Reconciliation{}, err
	}
	k, _ := kindOf(c.Target.Kind)
	if (c.Before == nil && now == nil) || (c.Before != nil && now != nil && k.same(now, c.Before)) {
		raw, _ := json.Marshal(undoResult{ChangeID: c.ID, Target: c.Target.String(), ID: c.Target.ID})
		return Reconciliation{Outcome: OutcomeDone, Result: raw, Note: fmt.Sprintf("%s is back as it was: the undo happened", c.Target)}, nil
	}
	return Reconciliation{Outcome: OutcomeRepeat, Note: "the undo writes the earlier state over what is there: running it again is safe"}, nil
}

// undoneChange is the change undo_change's params name.
func undoneChange(ctx context.Context, env Env, params json.RawMessage) (*Change, error) {
	var p UndoChangeParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("reading undo_change's params: %w", err)
	}
	if env.Changes == nil {
		return nil, ErrNoChanges
	}
	return env.Changes.Change(ctx, p.ChangeID)
}
