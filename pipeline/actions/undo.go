package actions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Change is one write the executor carried out (spec/undo.md): the
// server's object read just before it (null for a create) and just after
// it (null for a delete), enough to put the object back.
type Change struct {
	ID        string          `json:"id"`
	SessionID string          `json:"session_id"`
	Action    string          `json:"action"`
	Params    json.RawMessage `json:"params"`
	Target    Target          `json:"target"`
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
	// ExecutedAt is zero while the write is in flight (recorded with the
	// started effect, finished with its outcome).
	ExecutedAt time.Time `json:"executed_at"`
	ProposedBy string    `json:"proposed_by"`
	ApprovedBy string    `json:"approved_by"`
	Undoable   bool      `json:"undoable"`
	Undoes     string    `json:"undoes,omitempty"`
	// UndoneBy is filled in by a ChangeSource from the change that undoes
	// this one (never stored).
	UndoneBy string `json:"undone_by,omitempty"`
	TraceID  string `json:"trace_id,omitempty"`
	EffectID string `json:"effect_id,omitempty"`
}

// Target is the server object a change wrote.
type Target struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name"`
}

func (t Target) String() string {
	what := strings.ReplaceAll(t.Kind, "_", " ")
	switch {
	case t.Name != "":
		return fmt.Sprintf("%s %s", what, quote(t.Name))
	case t.ID != "":
		return fmt.Sprintf("%s %s", what, t.ID)
	}
	return what
}

// ChangeSource finds recorded changes.
type ChangeSource interface {
	// Change returns the change whose id is id or starts with it (a unique
	// prefix), with UndoneBy filled in.
	Change(ctx context.Context, id string) (*Change, error)
}

// Kind is how undo reads and writes back one kind of server object. Each
// object's file registers its own (RegisterKind), so that actions landing
// later add theirs in their own file.
type Kind struct {
	// Read returns the object as the server has it, in full (lists,
	// members, conditions); null (nil, nil) when it does not exist.
	Read func(ctx context.Context, env Env, id string) (json.RawMessage, error)
	// Name names the object from what Read returned.
	Name func(obj json.RawMessage) string
	// Restore writes want back over now (either may be nil: a create or a
	// delete) and returns the object's id after (a re-created object may
	// get a new one).
	Restore func(ctx context.Context, env Env, id string, want, now json.RawMessage) (string, error)
	// Refuse says why want cannot be written over now ("" = it can).
	Refuse func(want, now json.RawMessage) string
	// Normal, when set, folds what the server fills in by itself out of an
	// object before two states are compared.
	Normal func(obj json.RawMessage) json.RawMessage
	// Recreated, when set, is the plan's line on what a re-created object
	// keeps and gets anew.
	Recreated string
	// Lost, when set, is what this kind's undo cannot bring back besides
	// CannotComeBack.
	Lost string
}

// diff is Diff of a and b folded by k.Normal.
func (k Kind) diff(a, b json.RawMessage) []FieldDiff {
	if k.Normal != nil {
		a, b = k.Normal(a), k.Normal(b)
	}
	return Diff(a, b)
}

func (k Kind) same(a, b json.RawMessage) bool { return len(k.diff(a, b)) == 0 }

// Tracking says which object an action writes: the kind, and the param
// naming it by id ("" for a create, whose id is the result's id).
type Tracking struct {
	Kind    string
	IDParam string
	// IDOf, when set, names the object from the params instead of IDParam
	// (a create whose result has no id: a metric's key or group).
	IDOf func(params json.RawMessage) string
	// ResultID, when set, names the object from the result instead of its
	// id member (an import's created experiments).
	ResultID func(result json.RawMessage) string
}

// undoReg is filled by the declare functions of the undo files, which run
// with those of the built-in set (builtins): kindOf and trackingOf make
// sure they ran.
var undoReg struct {
	sync.RWMutex
	kinds   map[string]Kind
	tracked map[Name]Tracking
}

// RegisterKind registers how undo reads and restores a kind of object.
func RegisterKind(name string, k Kind) {
	undoReg.Lock()
	defer undoReg.Unlock()
	if undoReg.kinds == nil {
		undoReg.kinds = map[string]Kind{}
	}
	undoReg.kinds[name] = k
}

// Track registers the object an action writes: its changes are undoable.
// An action without tracking is recorded as a change that is not.
func Track(name Name, t Tracking) {
	undoReg.Lock()
	defer undoReg.Unlock()
	if undoReg.tracked == nil {
		undoReg.tracked = map[Name]Tracking{}
	}
	undoReg.tracked[name] = t
}

func kindOf(name string) (Kind, bool) {
	builtins()
	undoReg.RLock()
	defer undoReg.RUnlock()
	k, ok := undoReg.kinds[name]
	return k, ok
}

func trackingOf(name Name) (Tracking, bool) {
	builtins()
	undoReg.RLock()
	defer undoReg.RUnlock()
	t, ok := undoReg.tracked[name]
	return t, ok
}

// BeforeWrite reads, just before b's write, the object it writes: its
// target (no id yet for a create), its state (nil for a create) and
// whether the change can be undone.
func BeforeWrite(ctx context.Context, env Env, b *Bound) (Target, json.RawMessage, bool, error) {
	if b.Name == string(UndoChange) {
		c, err := undoneChange(ctx, env, b.Params)
		if err != nil {
			return Target{}, nil, false, err
		}
		obj, err := readTarget(ctx, env, c.Target)
		return c.Target, obj, true, err
	}
	tr, ok := trackingOf(Name(b.Name))
	if !ok {
		return Target{}, nil, false, nil
	}
	t := Target{Kind: tr.Kind}
	switch {
	case tr.IDOf != nil:
		t.ID = tr.IDOf(b.Params)
	case tr.IDParam == "":
		return t, nil, true, nil
	default:
		var m map[string]any
		if err := json.Unmarshal(b.Params, &m); err != nil {
			return t, nil, true, fmt.Errorf("reading %s's params: %w", b.Name, err)
		}
		t.ID, _ = m[tr.IDParam].(string)
	}
	obj, err := readTarget(ctx, env, t)
	if err != nil {
		return t, nil, true, err
	}
	if k, ok := kindOf(t.Kind); ok && obj != nil {
		t.Name = k.Name(obj)
	}
	return t, obj, true, nil
}

// AfterWrite reads the object again after action's write: the target
// gets the id a create (or an undo that re-created it) made, from the
// result's id, and its name.
func AfterWrite(ctx context.Context, env Env, action string, t Target, result json.RawMessage) (Target, json.RawMessage, error) {
	if t.Kind == "" {
		return t, nil, nil
	}
	if tr, ok := trackingOf(Name(action)); ok && tr.ResultID != nil && t.ID == "" {
		t.ID = tr.ResultID(result)
	}
	if t.ID == "" || action == string(UndoChange) {
		var r struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(result, &r) == nil && r.ID != "" {
			t.ID = r.ID
		}
	}
	obj, err := readTarget(ctx, env, t)
	if k, ok := kindOf(t.Kind); ok && obj != nil {
		t.Name = k.Name(obj)
	}
	return t, obj, err
}

func readTarget(ctx context.Context, env Env, t Target) (json.RawMessage, error) {
	k, ok := kindOf(t.Kind)
	if !ok || t.ID == "" {
		return nil, nil
	}
	obj, err := k.Read(ctx, env, t.ID)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t, err)
	}
	return obj, nil
}

// snapshot encodes an object as a change stores it.
func snapshot(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the object: %w", err)
	}
	return raw, nil
}

// ---- comparing ----

// volatile reports the members that differ between two copies of one
// state: timestamps, version numbers, counters the server keeps.
func volatile(member string) bool {
	switch member {
	case "createdAt", "updatedAt", "versionNumber", "featureFlagExposures", "stateTimeLogs":
		return true
	}
	return false
}

// FieldDiff is one field that differs between two states of an object.
type FieldDiff struct {
	Path string `json:"path"`
	From any    `json:"from"`
	To   any    `json:"to"`
}

// Diff lists the fields that differ from a to b (JSON objects; nil is
// null), timestamps and version numbers aside, by path, sorted.
func Diff(a, b json.RawMessage) []FieldDiff {
	fa, fb := map[string]any{}, map[string]any{}
	flatten("", decodeAny(a), fa)
	flatten("", decodeAny(b), fb)
	var out []FieldDiff
	for p, va := range fa {
		vb, ok := fb[p]
		if !ok || !equalJSON(va, vb) {
			out = append(out, FieldDiff{Path: p, From: va, To: vb})
		}
	}
	for p, vb := range fb {
		if _, ok := fa[p]; !ok {
			out = append(out, FieldDiff{Path: p, From: nil, To: vb})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Same reports whether a and b are one state, timestamps aside.
func Same(a, b json.RawMessage) bool { return len(Diff(a, b)) == 0 }

func decodeAny(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}

// flatten writes v's leaves under their paths; a list of scalars is one
// leaf, a list of objects is indexed.
func flatten(prefix string, v any, out map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if volatile(k) {
				continue
			}
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, e, out)
		}
		return
	case []any:
		scalars := true
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				scalars = false
			}
		}
		if !scalars {
			for i, e := range x {
				flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
			}
			return
		}
		if len(x) == 0 {
			v = nil // an empty list and none are the same state
		}
	case string:
		if x == "" {
			v = nil
		}
	}
	if prefix == "" {
		prefix = "."
	}
	if v != nil {
		out[prefix] = v
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// FmtValue renders a diff value for a person: "-" for none.
func FmtValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		return quote(x)
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, FmtValue(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

// CannotComeBack is what no undo restores (spec/undo.md).
const CannotComeBack = "enrollments and assignments made meanwhile, exposures, logged metric data, the exclusions UpGrade recorded when an experiment started enrolling, archived results"
