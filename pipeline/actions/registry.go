package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Def declares an action: everything the agent knows about it, written in
// the action's one file and handed to Add, by that file's declare function
// (the built-in set, see builtins) or by a caller that builds its own
// Registry. The registry is the
// one list of actions: the gatherer's prompt, get_action_schema's enum,
// set_action_needed's enum, the job runners and docs/actions.md's table all
// read it, so nothing else names the action.
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
	// Object is what the action acts on: the gatherer is offered it only
	// when the request is about that object (or about none it could tell).
	// The zero value, ObjectNone, offers it always.
	Object Object
	// Description is one sentence for the model (get_action_schema).
	Description string
	// Note, when set, is said of the action in the gatherer's prompt
	// ("name: note"): a few words the model needs to choose it.
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

// ---- objects ----

// Object is what an action or a lookup acts on. The gatherer is offered
// the shared tools plus the tools of the object the analyzer names
// (spec/pipeline.md, "Tool scope"), so a prompt does not grow with the
// actions of other objects.
type Object string

// The objects of the built-in actions and lookups. ObjectNone is shared:
// offered in every scope.
const (
	ObjectNone        Object = ""
	ObjectExperiment  Object = "experiment"
	ObjectFeatureFlag Object = "feature_flag"
	ObjectSegment     Object = "segment"
	ObjectMetric      Object = "metric"
)

// builtinObjects are the objects the analyzer may name even before an
// action of theirs exists (metric comes with the results issue).
var builtinObjects = [...]Object{ObjectExperiment, ObjectFeatureFlag, ObjectSegment, ObjectMetric}

// foldObject is an object as models write it, folded: "Feature Flag",
// " feature-flags " and "feature_flag" all fold to "feature_flag".
func foldObject(s string) string {
	f := strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return r == ' ' || r == '_' || r == '-' || r == '\t' || r == '\n'
	}), "_")
	if strings.HasSuffix(f, "s") && !strings.HasSuffix(f, "ss") {
		f = strings.TrimSuffix(f, "s") // flags, experiments, segments, metrics
	}
	return f
}

// ---- the registry ----

// Registry is a set of actions and lookups: the agent's (pipeline.Deps),
// the job runner's and the CLI's. The built-in set is assembled from each
// action's file (its declare function, see builtins) on first use and
// handed out by Builtin as a copy; a test builds its own with
// NewRegistry and Add, and nothing it adds is seen by anyone else.
//
// Building a registry computes nothing: an action's schema and references
// are worked out when they are first asked for, once per process.
type Registry struct {
	mu      sync.RWMutex
	entries map[string]entry
	lookups map[string]LookupTool
	names   []Name // in order; nil until asked for after a change
}

type entry struct {
	act   Action
	order int
	// pc is the code address of the action's Plan: its file is read from
	// it only when asked for (File), since symbolising costs time at init.
	pc uintptr
}

var (
	builtinOnce sync.Once
	builtinSet  *Registry
)

// builtins is the built-in set: each file that declares actions has a
// function declare<File>(r *Registry) that adds them to r, and
// builtinDeclarations (builtin_list.go, written by a test from the
// package's files) lists those functions. They run once, when the set is
// first asked for: nothing runs at package init, and a declaration that
// cannot work panics then (a programming error, caught by any test that
// uses the set).
func builtins() *Registry {
	builtinOnce.Do(func() {
		r := NewRegistry()
		for _, declare := range builtinDeclarations() {
			declare(r)
		}
		builtinSet = r
	})
	return builtinSet
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{entries: map[string]entry{}, lookups: map[string]LookupTool{}}
}

// Builtin returns a copy of the built-in actions: adding to it changes no
// other copy.
func Builtin() *Registry { return builtins().Clone() }

// Clone returns a copy of r that can be added to on its own.
func (r *Registry) Clone() *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := NewRegistry()
	for k, v := range r.entries {
		c.entries[k] = v
	}
	for k, v := range r.lookups {
		c.lookups[k] = v
	}
	return c
}

// Add adds an action to r. It panics on a declaration that cannot work (a
// name taken, a function missing): a programming error.
func Add[P any](r *Registry, d Def[P]) {
	add(r, d)
}

func add[P any](r *Registry, d Def[P]) {
	name := string(d.Name)
	job := d.Run != nil || d.Total != nil
	switch {
	case name == "" || strings.TrimSpace(name) != name || strings.ToLower(name) != name:
		panic(fmt.Sprintf("actions: action name %q: use lower-case snake_case", name))
	case d.Object != ObjectNone && foldObject(string(d.Object)) != string(d.Object):
		panic(fmt.Sprintf("actions: %s: object %q: use lower-case snake_case, singular", name, d.Object))
	case d.Validate == nil || d.Plan == nil:
		panic("actions: " + name + ": Validate and Plan are required")
	case job && (d.Run == nil || d.Total == nil):
		panic("actions: " + name + ": a job action needs both Total and Run")
	case job && (d.Execute != nil || d.Reconcile != nil):
		panic("actions: " + name + ": a job action has Total and Run instead of Execute and Reconcile")
	case !job && (d.Execute == nil || d.Reconcile == nil):
		panic("actions: " + name + ": Execute and Reconcile are required")
	}
	// What is cheap is declared now; the schema and the references (a
	// walk over the params type) wait until the first Spec call.
	spec := Spec{Name: name, Object: d.Object, Description: d.Description, Note: d.Note, Destructive: d.Destructive,
		LongRunning: job, Invalidates: d.Invalidates}
	b := &builtin[P]{spec: spec, def: d}
	reg := &registered{decl: spec, spec: sync.OnceValue(func() Spec {
		var zero P
		s := spec
		s.Schema, s.Refs = SchemaFor[P](), refsOf(reflect.TypeOf(zero), "")
		return s
	})}
	var act Action = reg
	if job {
		reg.inner = jobBuiltin[P]{b}
		act = registeredJob{reg}
	} else {
		reg.inner = b
	}
	b.self = act
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[name]; dup {
		panic("actions: duplicate action " + name)
	}
	if _, dup := r.lookups[name]; dup {
		panic("actions: action " + name + " has the name of a lookup")
	}
	// The file is found from the Plan function's code address when it is
	// asked for (File): walking the stack here, at every registration,
	// cost the binary's start-up more than everything else registration
	// does.
	r.entries[name] = entry{act: act, order: d.Order, pc: reflect.ValueOf(d.Plan).Pointer()}
	r.names = nil
}

// registered is an action of a registry: the declaration's plumbing
// (inner), with its Spec worked out on first use; decl is what needs no
// work (name, object, note).
type registered struct {
	inner Action
	decl  Spec
	spec  func() Spec
}

func (a *registered) Spec() Spec { return a.spec() }

func (a *registered) Bind(raw json.RawMessage) (*Bound, error) { return a.inner.Bind(raw) }

func (a *registered) bindResolved(raw json.RawMessage, refs []Ref, resolve Resolve) (*Bound, error) {
	if rb, ok := a.inner.(resolvingBinder); ok {
		return rb.bindResolved(raw, refs, resolve)
	}
	return a.inner.Bind(raw)
}

func (a *registered) Validate(ctx context.Context, env Env, b *Bound) ([]Problem, error) {
	return a.inner.Validate(ctx, env, b)
}

func (a *registered) Plan(ctx context.Context, env Env, b *Bound) (*Plan, error) {
	return a.inner.Plan(ctx, env, b)
}

func (a *registered) Execute(ctx context.Context, env Env, b *Bound, key string) (Outcome, error) {
	return a.inner.Execute(ctx, env, b, key)
}

func (a *registered) Reconcile(ctx context.Context, env Env, b *Bound, key string, startedAt time.Time) (Reconciliation, error) {
	return a.inner.Reconcile(ctx, env, b, key, startedAt)
}

func (a *registered) Report(result json.RawMessage) string {
	if r, ok := a.inner.(Reporter); ok {
		return r.Report(result)
	}
	return ""
}

// registeredJob is a registered long-running action.
type registeredJob struct{ *registered }

var _ JobAction = registeredJob{}

func (a registeredJob) Poll(ctx context.Context, env Env, ref JobRef, wait time.Duration) (JobStatus, error) {
	return a.inner.(JobAction).Poll(ctx, env, ref, wait)
}

func (a registeredJob) Fetch(ctx context.Context, env Env, ref JobRef, st JobStatus) (json.RawMessage, error) {
	return a.inner.(JobAction).Fetch(ctx, env, ref, st)
}

func (a registeredJob) job(b *Bound) (Job, bool) {
	j, ok := a.inner.(interface{ job(*Bound) (Job, bool) })
	if !ok {
		return nil, false
	}
	return j.job(b)
}

// Names lists the actions in their declared order.
func (r *Registry) Names() []Name {
	r.mu.RLock()
	names := r.names
	r.mu.RUnlock()
	if names != nil {
		return slices.Clone(names)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	names = make([]Name, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, Name(n))
	}
	sort.Slice(names, func(i, j int) bool {
		oi, oj := r.entries[string(names[i])].order, r.entries[string(names[j])].order
		if oi != oj {
			return oi < oj
		}
		return names[i] < names[j]
	})
	r.names = names
	return slices.Clone(names)
}

// Lookup returns the action of that name.
func (r *Registry) Lookup(name string) (Action, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.entries[name]
	return e.act, ok
}

// File is the file that declares the action (docs/actions.md lists it):
// where its Plan function is, which each action keeps in its own file.
func (r *Registry) File(name string) string {
	r.mu.RLock()
	e, ok := r.entries[name]
	r.mu.RUnlock()
	if !ok || e.pc == 0 {
		return ""
	}
	fn := runtime.FuncForPC(e.pc)
	if fn == nil {
		return ""
	}
	file, _ := fn.FileLine(e.pc)
	return filepath.Base(file)
}

// InScope lists, in order, the actions offered when a request is about
// object o: those of o and the shared ones. ObjectNone (not known) lists
// every action.
func (r *Registry) InScope(o Object) []Name {
	names := r.Names()
	if o == ObjectNone {
		return names
	}
	return slices.DeleteFunc(names, func(n Name) bool {
		obj := r.objectOf(string(n))
		return obj != ObjectNone && obj != o
	})
}

// objectOf is the object an action declared, without working out its
// schema.
func (r *Registry) objectOf(name string) Object {
	a, ok := r.Lookup(name)
	if !ok {
		return ObjectNone
	}
	return declaration(a).Object
}

// declaration is what an action declared, without the parts that take
// work (schema, references) for a registered one.
func declaration(a Action) Spec {
	switch x := a.(type) {
	case *registered:
		return x.decl
	case registeredJob:
		return x.decl
	}
	return a.Spec()
}

// Objects lists the objects a request may be about: the built-in ones,
// then any other an action or a lookup of r declares, in order.
func (r *Registry) Objects() []Object {
	out := builtinObjects[:]
	out = slices.Clone(out)
	for _, n := range r.Names() {
		if o := r.objectOf(string(n)); o != ObjectNone && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	for _, l := range r.Lookups() {
		if l.Object != ObjectNone && !slices.Contains(out, l.Object) {
			out = append(out, l.Object)
		}
	}
	return out
}

// Declares reports whether an action or a lookup of r is about o.
func (r *Registry) Declares(o Object) bool {
	if o == ObjectNone {
		return false
	}
	for _, n := range r.Names() {
		if r.objectOf(string(n)) == o {
			return true
		}
	}
	return slices.ContainsFunc(r.Lookups(), func(l LookupTool) bool { return l.Object == o })
}

// ParseObject reads an object as models write it ("Feature Flag",
// "flags", " Experiment "). ok is false for "", null-like words and
// anything r does not know: then the request is about no object it can
// tell, and every tool is offered.
func (r *Registry) ParseObject(s string) (Object, bool) {
	f := foldObject(s)
	switch f {
	case "", "none", "null", "nil", "unknown", "not_sure", "any", "all":
		return ObjectNone, false
	}
	objs := r.Objects()
	for _, o := range objs {
		if f == string(o) {
			return o, true
		}
	}
	// The last word alone: "flag" is feature_flag.
	var found []Object
	for _, o := range objs {
		if strings.HasSuffix(string(o), "_"+f) {
			found = append(found, o)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return ObjectNone, false
}

// PromptNotes is what the gatherer's prompt says of the actions of
// InScope(o): only those with a note, as "name: note", in order. The names
// themselves are listed once, in get_action_schema's enum.
func (r *Registry) PromptNotes(o Object) string {
	var parts []string
	for _, n := range r.InScope(o) {
		if a, ok := r.Lookup(string(n)); ok {
			if note := declaration(a).Note; note != "" {
				parts = append(parts, string(n)+": "+note)
			}
		}
	}
	return strings.Join(parts, "; ")
}

// Bind binds raw params of the named action of r.
func (r *Registry) Bind(name string, raw json.RawMessage) (*Bound, error) {
	a, ok := r.Lookup(name)
	if !ok {
		names := r.Names()
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = string(n)
		}
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownAction, name, strings.Join(parts, ", "))
	}
	return a.Bind(raw)
}

// ---- lookups ----

// LookupDef declares a read-only lookup of an object: a tool the gatherer
// is offered in that object's scope (and in the full set). A is its
// arguments type, read like an action's params (json tags; omitempty
// makes an argument optional and nullable; jsonschema tags describe it).
type LookupDef[A any] struct {
	Name        string
	Object      Object
	Description string
	Run         func(ctx context.Context, env Env, args A) (any, error)
}

// LookupTool is a declared lookup as the pipeline offers it.
type LookupTool struct {
	Name        string
	Object      Object
	Description string
	// Schema is the JSON schema of the arguments, worked out on first use.
	Schema func() json.RawMessage
	// args is the arguments type (tests compare its schema).
	args reflect.Type
	// Run decodes the arguments and runs the lookup; an argument error is
	// a *ParseError naming the field.
	Run func(ctx context.Context, env Env, raw json.RawMessage) (any, error)
}

// AddLookup adds a lookup to r. It panics on a declaration that cannot
// work, as Add does.
func AddLookup[A any](r *Registry, d LookupDef[A]) {
	switch {
	case d.Name == "" || strings.ToLower(strings.TrimSpace(d.Name)) != d.Name:
		panic(fmt.Sprintf("actions: lookup name %q: use lower-case snake_case", d.Name))
	case d.Object == ObjectNone || foldObject(string(d.Object)) != string(d.Object):
		panic(fmt.Sprintf("actions: lookup %s: object %q: name one, in lower-case snake_case, singular", d.Name, d.Object))
	case d.Run == nil:
		panic("actions: lookup " + d.Name + ": Run is required")
	}
	t := LookupTool{Name: d.Name, Object: d.Object, Description: d.Description,
		Schema: sync.OnceValue(SchemaFor[A]), args: reflect.TypeFor[A](),
		Run: func(ctx context.Context, env Env, raw json.RawMessage) (any, error) {
			args, err := Decode[A](d.Name, raw)
			if err != nil {
				return nil, err
			}
			return d.Run(ctx, env, args)
		}}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.lookups[d.Name]; dup {
		panic("actions: duplicate lookup " + d.Name)
	}
	if _, dup := r.entries[d.Name]; dup {
		panic("actions: lookup " + d.Name + " has the name of an action")
	}
	r.lookups[d.Name] = t
}

// Lookups lists r's declared lookups by name.
func (r *Registry) Lookups() []LookupTool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]LookupTool, 0, len(r.lookups))
	for _, l := range r.lookups {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b LookupTool) int { return strings.Compare(a.Name, b.Name) })
	return out
}
