package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/internal/tracing"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// Changes (spec/undo.md): every write the executor carries out is kept in
// the session's state as a change, with the server's object before and
// after it. The change is written with the started effect (before state,
// no executed_at) in the save that precedes the write, and finished with
// the effect's outcome in the same save: a process killed between the
// write and that save leaves the started change, and crash recovery
// finishes it with the effect (the effect id ties them), so each write is
// recorded once.

// beginChange reads the object p writes and records the change as started.
// A read that fails records the change without its before state (it cannot
// be undone): the write itself goes on.
func (a *Agent) beginChange(ctx context.Context, t *turn, p *Pending, effectID string) {
	b := p.Bound
	env := a.env(t.api(), t.sess.cp.SessionID)
	target, before, undoable, err := actions.BeforeWrite(ctx, env, b)
	if err != nil {
		a.logger().Warn("reading the object before the write failed: the change cannot be undone", "action", b.Name, "err", err)
		undoable = false
	}
	c := actions.Change{ID: changeID(t.sess.cp.SessionID, effectID), SessionID: t.sess.cp.SessionID, Action: b.Name, Params: b.Params,
		Target: target, Before: before, ProposedBy: "agent", ApprovedBy: t.approvedBy, Undoable: undoable,
		TraceID: tracing.TraceID(ctx), EffectID: effectID}
	if p.NeedsHuman && c.ApprovedBy == "" {
		c.ApprovedBy = "human"
	}
	if b.Name == string(actions.UndoChange) {
		if u, err := actions.PrepareUndo(ctx, env, undoParam(b.Params)); err == nil && u.Change != nil {
			c.Undoes = u.Change.ID
		}
	}
	t.st.Changes = append(t.st.Changes, c)
}

func undoParam(params json.RawMessage) string {
	var p actions.UndoChangeParams
	_ = json.Unmarshal(params, &p)
	return p.ChangeID
}

// changeID is a short id (12 hex digits, like a session id) derived from
// the session's and the effect's ids: it takes nothing from the agent's id
// source, so the other ids of a run stay what they were.
func changeID(sessionID, effectID string) string {
	sum := sha256.Sum256([]byte("change:" + sessionID + ":" + effectID))
	return hex.EncodeToString(sum[:6])
}

// finishChange completes the started change of effectID: the object after
// the write, or, for a failed write, the change is dropped. It returns the
// change (nil: none).
func (a *Agent) finishChange(ctx context.Context, t *turn, effectID string, result json.RawMessage, execErr error) *actions.Change {
	i := slices.IndexFunc(t.st.Changes, func(c actions.Change) bool { return c.EffectID == effectID && c.ExecutedAt.IsZero() })
	if i < 0 {
		return nil
	}
	if execErr != nil {
		t.st.Changes = slices.Delete(t.st.Changes, i, i+1)
		return nil
	}
	c := &t.st.Changes[i]
	c.ExecutedAt = a.now()
	if c.TraceID == "" {
		c.TraceID = tracing.TraceID(ctx)
	}
	if c.Undoable {
		env := a.env(t.api(), t.sess.cp.SessionID)
		target, after, err := actions.AfterWrite(ctx, env, c.Action, c.Target, result)
		if err != nil {
			a.logger().Warn("reading the object after the write failed", "action", c.Action, "err", err)
		}
		if c.Target.Name != "" && target.Name == "" {
			target.Name = c.Target.Name
		}
		c.Target, c.After = target, after
	}
	out := *c
	return &out
}

// ---- finding changes ----

// SessionLister is a store that lists its sessions (both session stores).
type SessionLister interface {
	checkpoint.Store
	List() ([]checkpoint.Summary, error)
}

// ErrChangeNotFound: no change has that id or prefix.
var ErrChangeNotFound = errors.New("change not found")

// ChangeFilter selects changes; zero fields select all.
type ChangeFilter struct {
	SessionID string
	// Target matches the target's id, name or kind:name (case-insensitive).
	Target string
	Since  time.Time
}

// ListChanges returns the finished changes of every session in store (or
// of f.SessionID), newest first, with UndoneBy filled in.
func ListChanges(store checkpoint.Store, f ChangeFilter) ([]actions.Change, error) {
	all, err := allChanges(store, f.SessionID)
	if err != nil {
		return nil, err
	}
	var out []actions.Change
	for _, c := range all {
		if f.SessionID != "" && c.SessionID != f.SessionID {
			continue
		}
		if !f.Since.IsZero() && c.ExecutedAt.Before(f.Since) {
			continue
		}
		if f.Target != "" && !matchTarget(c, f.Target) {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// matchTarget reports whether ref names c's target: its id (or a prefix
// of 4 or more), name, kind:name, or a flag's key.
func matchTarget(c actions.Change, ref string) bool {
	t := c.Target
	ref = strings.ToLower(strings.TrimSpace(ref))
	if ref == strings.ToLower(t.ID) || ref == strings.ToLower(t.Name) || ref == strings.ToLower(t.Kind+":"+t.Name) ||
		(len(ref) >= 4 && strings.HasPrefix(strings.ToLower(t.ID), ref)) {
		return true
	}
	for _, obj := range []json.RawMessage{c.After, c.Before} {
		var o struct {
			Key string `json:"key"`
		}
		if json.Unmarshal(obj, &o) == nil && o.Key != "" && strings.ToLower(o.Key) == ref {
			return true
		}
	}
	return false
}

// allChanges reads the finished changes of the sessions, newest first,
// and links undo and undone.
func allChanges(store checkpoint.Store, sessionID string) ([]actions.Change, error) {
	var ids []string
	l, listable := store.(SessionLister)
	switch {
	case store == nil:
		return nil, nil
	case listable:
		sums, err := l.List()
		if err != nil {
			return nil, err
		}
		for _, s := range sums {
			ids = append(ids, s.ID)
		}
	case sessionID != "":
		ids = []string{sessionID}
	}
	var out []actions.Change
	for _, id := range ids {
		cs, err := sessionChanges(store, id)
		if err != nil {
			if listable {
				continue // a corrupt session does not hide the others' changes
			}
			return nil, err
		}
		out = append(out, cs...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].ExecutedAt.Equal(out[j].ExecutedAt) {
			return out[i].ExecutedAt.After(out[j].ExecutedAt)
		}
		return out[i].ID > out[j].ID
	})
	linkUndos(out)
	return out, nil
}

// linkUndos fills in UndoneBy: a change is undone by a change that undoes
// it and is not itself undone (a redo brings it back). cs is newest first,
// and an undo is always newer than what it undoes, so a change's own
// state is settled before it is looked at.
func linkUndos(cs []actions.Change) {
	idx := map[string]int{}
	for i := range cs {
		idx[cs[i].ID] = i
	}
	for i := range cs {
		if cs[i].UndoneBy != "" || cs[i].Undoes == "" {
			continue
		}
		if j, ok := idx[cs[i].Undoes]; ok && cs[j].UndoneBy == "" {
			cs[j].UndoneBy = cs[i].ID
		}
	}
}

func sessionChanges(store checkpoint.Store, id string) ([]actions.Change, error) {
	cp, err := store.Load(id)
	if err != nil {
		return nil, err
	}
	var st struct {
		Changes []actions.Change `json:"changes"`
	}
	if len(cp.State) > 0 {
		if err := json.Unmarshal(cp.State, &st); err != nil {
			return nil, fmt.Errorf("session %s: reading its changes: %w", id, err)
		}
	}
	out := st.Changes[:0]
	for _, c := range st.Changes {
		if !c.ExecutedAt.IsZero() {
			out = append(out, c)
		}
	}
	return out, nil
}

// LastChange names the newest change that can be undone and is not yet
// ("undo that").
const LastChange = "last"

// FindChange returns the change whose id is id or starts with it; "last"
// is the newest change that can be undone and is not yet.
func FindChange(store checkpoint.Store, id string) (*actions.Change, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, fmt.Errorf("%w: no id given", ErrChangeNotFound)
	}
	all, err := allChanges(store, "")
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(id, LastChange) {
		for _, c := range all {
			if c.Undoable && c.UndoneBy == "" {
				return &c, nil
			}
		}
		return nil, fmt.Errorf("%w: no change can be undone", ErrChangeNotFound)
	}
	var found []actions.Change
	for _, c := range all {
		if c.ID == id {
			return &c, nil
		}
		if strings.HasPrefix(c.ID, id) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%w: no change %s", ErrChangeNotFound, id)
	case 1:
		return &found[0], nil
	}
	return nil, fmt.Errorf("%w: %s is the start of %d change ids; give more of it", ErrChangeNotFound, id, len(found))
}

// storeChanges is the actions' view of the changes in a store.
type storeChanges struct{ store checkpoint.Store }

func (s storeChanges) Change(_ context.Context, id string) (*actions.Change, error) {
	return FindChange(s.store, id)
}
