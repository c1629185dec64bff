package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// Def declares an action: everything the agent knows about it, written in
// the action's one file and handed to Register from that file's init. The
// registry is the one list of actions: the gatherer's prompt, its
// get_<action>_schema tools, set_action_needed's enum, the job runners and
// docs/actions.md's table all read it, so nothing else names the action.
//
// P is the params type. Its JSON field names are the contract the model
// writes; fields without omitempty are required in the schema; a field
// tagged `ref:"experiment"` names an experiment by id (RefKind), so that
// the gatherer resolves a name written there to the id; a list field
// tagged `keyed:"code,weight"` also accepts the map form {"control": 50}.
type Def[P any] struct {
	// Name is the tool-level name (snake_case): the model names it,
	// checkpoints store it.
	Name Name
	// Order places the action in every list of actions: ascending, ties
	// by name. The built-in experiment and user actions use 10..90; leave
	// gaps for what comes between.
	Order int
	// Description is one sentence for the model (get_<name>_schema).
	Description string
	// Note, when set, follows the name in the gatherer's list of actions,
	// in parentheses: a few words the model needs to choose it.
	Note string
	// Destructive actions need a yes even under --confirm destructive.
	Destructive bool
	// Invalidates lists the cached data that is stale once it ran.
	Invalidates []Cache
	// Canonical folds decoded params to their one canonical form (blanks
	// trimmed, spellings folded, defaults filled in); nil keeps them as
	// decoded.
	Canonical func(p P) P
	// Validate checks the params against the server's rules, recording
	// each problem on c; the error is for a check that could not be made.
	Validate func(c *Checker, p P) error
	// Plan writes the confirmation text: deterministic for the same params
	// and server data.
	Plan func(pl *Planner, p P) error
	// Execute runs the approved action (not for jobs). key derives from
	// the approved confirmation: executing it twice must not write twice.
	Execute func(ctx context.Context, env Env, p P, key string) (Outcome, error)
	// Reconcile finds out, without writing, what became of an execution
	// interrupted by a crash (required with Execute).
	Reconcile func(ctx context.Context, env Env, p P, key string, startedAt time.Time) (Reconciliation, error)
	// Report words a result for the reply (nil: none); ReportAs decodes it.
	Report func(result json.RawMessage) string

	// Total and Run make the action long-running (instead of Execute and
	// Reconcile): Execute starts a job under an id derived from the key,
	// a job runner runs it (pipeline/jobs in a detached worker, inline
	// without one), and a start repeated after a crash re-attaches.
	// Total is the job's units of work (progress.total).
	Total func(p P) int
	// Run does the work, in batches, from run.Tally; see JobRun.
	Run func(ctx context.Context, run JobRun, p P) (json.RawMessage, error)
}

// Job is the body of a long-running action's job, as a job runner drives
// it: the runner knows no concrete action, only this.
type Job interface {
	// Total is the job's units of work (progress.total).
	Total() int
	// Run works from run.Tally to the end, calling run.Commit after every
	// batch, and returns the result.
	Run(ctx context.Context, run JobRun) (json.RawMessage, error)
}

// JobRun is what one run of a job gets from its runner.
type JobRun struct {
	API API
	// Key names what the job writes: the same for every run of one job,
	// so that a restarted run continues under the same names (the balance
	// job's synthetic users are Key-0, Key-1, ...).
	Key string
	// Tally is the last committed tally (nil: from the start).
	Tally json.RawMessage
	// Commit saves progress after a batch: units done and the tally that
	// resumes from there. Nil commits nothing; an error stops the run.
	Commit func(done int, tally json.RawMessage) error
	// Concurrency and BatchSize tune the run (0: the job's defaults).
	Concurrency int
	BatchSize   int
}

// CommitTally encodes tally and commits it with done (a no-op without
// Commit).
func (r JobRun) CommitTally(done int, tally any) error {
	if r.Commit == nil {
		return nil
	}
	raw, err := json.Marshal(tally)
	if err != nil {
		return fmt.Errorf("encoding the tally: %w", err)
	}
	return r.Commit(done, raw)
}

// StartTally decodes the committed tally into v; without one, v is left
// as it is.
func (r JobRun) StartTally(v any) error {
	if len(r.Tally) == 0 || string(r.Tally) == "null" {
		return nil
	}
	if err := json.Unmarshal(r.Tally, v); err != nil {
		return fmt.Errorf("reading the saved tally: %w", err)
	}
	return nil
}

// RefKind names what kind of server object a param refers to by id.
type RefKind string

// Kinds of reference.
const (
	RefExperiment RefKind = "experiment"
	// RefFeatureFlag: a flag's id; its key (any case) or name is resolved.
	RefFeatureFlag RefKind = "feature_flag"
	// RefSegment: a public segment's id; its name is resolved (in the
	// context the params are about).
	RefSegment RefKind = "segment"
)

// Ref is one param that names a server object by id. Path is dotted, with
// [] for every item of a list: experiment_id,
// assigned_condition.experiment_id, segments[].id.
type Ref struct {
	Kind RefKind
	Path string
}

// Resolve replaces every string at r.Path in params (canonical params as
// a map) with fn's answer, and reports whether anything changed. An error
// names the place.
func (r Ref) Resolve(params map[string]any, fn func(value string) (string, error)) (bool, error) {
	return resolveAt(params, strings.Split(r.Path, "."), r.Path, fn)
}

func resolveAt(obj map[string]any, path []string, full string, fn func(string) (string, error)) (bool, error) {
	key, list := strings.CutSuffix(path[0], "[]")
	v, ok := obj[key]
	if !ok || v == nil {
		return false, nil
	}
	var items []any
	if list {
		items, _ = v.([]any)
	} else {
		items = []any{v}
	}
	changed := false
	for i, item := range items {
		if len(path) > 1 {
			next, ok := item.(map[string]any)
			if !ok {
				continue
			}
			ch, err := resolveAt(next, path[1:], full, fn)
			if err != nil {
				return false, err
			}
			changed = changed || ch
			continue
		}
		s, ok := item.(string)
		if !ok {
			continue
		}
		id, err := fn(s)
		if err != nil {
			return false, err
		}
		if id == s {
			continue
		}
		changed = true
		if list {
			items[i] = id
		} else {
			obj[key] = id
		}
	}
	return changed, nil
}

// refsOf reads the `ref` tags of a params type.
func refsOf(t reflect.Type, prefix string) []Ref {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []Ref
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		path := prefix + jsonName(f)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice {
			path += "[]"
			ft = ft.Elem()
		}
		if kind := f.Tag.Get("ref"); kind != "" {
			out = append(out, Ref{Kind: RefKind(kind), Path: path})
			continue
		}
		out = append(out, refsOf(ft, path+".")...)
	}
	return out
}

// ---- the registry ----

type entry struct {
	act   Action
	order int
	file  string // the file that registered it
}

var (
	regMu    sync.RWMutex
	registry = map[string]entry{}
)

// Register adds an action. It panics on a declaration that cannot work (a
// name taken, a function missing): a programming error, caught by any test
// that imports the package.
func Register[P any](d Def[P]) {
	name := string(d.Name)
	job := d.Run != nil || d.Total != nil
	switch {
	case name == "" || strings.TrimSpace(name) != name || strings.ToLower(name) != name:
		panic(fmt.Sprintf("actions: action name %q: use lower-case snake_case", name))
	case d.Validate == nil || d.Plan == nil:
		panic("actions: " + name + ": Validate and Plan are required")
	case job && (d.Run == nil || d.Total == nil):
		panic("actions: " + name + ": a job action needs both Total and Run")
	case job && (d.Execute != nil || d.Reconcile != nil):
		panic("actions: " + name + ": a job action has Total and Run instead of Execute and Reconcile")
	case !job && (d.Execute == nil || d.Reconcile == nil):
		panic("actions: " + name + ": Execute and Reconcile are required")
	}
	var zero P
	spec := Spec{Name: name, Description: d.Description, Note: d.Note, Destructive: d.Destructive, LongRunning: job,
		Invalidates: d.Invalidates, Schema: SchemaFor[P](), Refs: refsOf(reflect.TypeOf(zero), "")}
	b := &builtin[P]{spec: spec, def: d}
	var act Action = b
	if job {
		act = jobBuiltin[P]{b}
	}
	b.self = act
	_, file, _, _ := runtime.Caller(1)
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("actions: duplicate action " + name)
	}
	registry[name] = entry{act: act, order: d.Order, file: filepath.Base(file)}
}

// Names lists the registered actions in their declared order.
func Names() []Name {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]Name, 0, len(registry))
	for n := range registry {
		names = append(names, Name(n))
	}
	sort.Slice(names, func(i, j int) bool {
		oi, oj := registry[string(names[i])].order, registry[string(names[j])].order
		if oi != oj {
			return oi < oj
		}
		return names[i] < names[j]
	})
	return names
}

// Lookup returns the registered action of that name.
func Lookup(name string) (Action, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	e, ok := registry[name]
	return e.act, ok
}

// File is the file that registered the action (docs/actions.md lists it).
func File(name string) string {
	regMu.RLock()
	defer regMu.RUnlock()
	return registry[name].file
}

// PromptList is the gatherer's list of actions: every registered action
// in order, each with its note.
func PromptList() string {
	names := Names()
	parts := make([]string, len(names))
	for i, n := range names {
		a, _ := Lookup(string(n))
		parts[i] = string(n)
		if note := a.Spec().Note; note != "" {
			parts[i] += " (" + note + ")"
		}
	}
	return strings.Join(parts, ", ")
}
