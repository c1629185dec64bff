package actions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/canonjson"
	"github.com/upgrade-agent/upgrade-agent/internal/jschema"
)

// Bound is an action's params parsed once: the typed value, its canonical
// JSON and the hash of that JSON. Params that canonicalise alike are the
// same action: an approval binds to Hash, never to the bytes a model wrote.
type Bound struct {
	act Action
	// Name is the action's name.
	Name string
	// Params is the canonical JSON: what is shown, hashed, stored and run.
	Params json.RawMessage
	// Hash is canonjson.ParamsHash of Name and Params (checkpoint.ParamsHash).
	Hash  string
	typed any
	// given is the typed params as decoded, before the action's canonical
	// form filled in what it derives (nil: Params is all there is).
	given any
}

// NewBound makes the bound value of canonical params. Adapters (MCP) call
// it from their Bind; typed is whatever their other methods need.
func NewBound(a Action, canonical json.RawMessage, typed any) (*Bound, error) {
	name := a.Spec().Name
	hash, err := canonjson.ParamsHash(name, canonical)
	if err != nil {
		return nil, err
	}
	if h := bindHook.Load(); h != nil {
		(*h)(name)
	}
	return &Bound{act: a, Name: name, Params: canonical, Hash: hash, typed: typed}, nil
}

// bindHook, when set, hears every bind (one hash each): tests count them.
var bindHook atomic.Pointer[func(string)]

// OnBind makes fn hear the name of every action bound from now on, until
// the returned function is called: for tests that count binds (one per
// change of params). Not for concurrent tests.
func OnBind(fn func(action string)) (remove func()) {
	bindHook.Store(&fn)
	return func() { bindHook.Store(nil) }
}

// Resolve resolves the references of params being bound. It gets the
// typed value binding decoded, before it is canonicalised and hashed,
// changes a name to its id in place, and reports whether it changed
// anything.
type Resolve func(refs []Ref, params RefParams) (changed bool, err error)

// BindResolved binds raw params of act with its references (Spec.Refs)
// resolved on the typed value by resolve: one decode, one bind, one hash,
// however many references resolve. An action without references, or one
// that is not built in (MCP), binds as Bind does.
func BindResolved(act Action, raw json.RawMessage, resolve Resolve) (*Bound, error) {
	if rb, ok := act.(resolvingBinder); ok {
		return rb.bindResolved(raw, act.Spec().Refs, resolve)
	}
	return act.Bind(raw)
}

type resolvingBinder interface {
	bindResolved(raw json.RawMessage, refs []Ref, resolve Resolve) (*Bound, error)
}

// Action returns the action the params belong to.
func (b *Bound) Action() Action { return b.act }

// Typed returns the parsed params (for built-in actions, the Params struct).
func (b *Bound) Typed() any { return b.typed }

// Spec is the action's declaration.
func (b *Bound) Spec() Spec { return b.act.Spec() }

// Validate, Plan, Execute and Reconcile call the action with b.

func (b *Bound) Validate(ctx context.Context, env Env) ([]Problem, error) {
	return b.act.Validate(ctx, env, b)
}

func (b *Bound) Plan(ctx context.Context, env Env) (*Plan, error) { return b.act.Plan(ctx, env, b) }

func (b *Bound) Execute(ctx context.Context, env Env, key string) (Outcome, error) {
	return b.act.Execute(ctx, env, b, key)
}

func (b *Bound) Reconcile(ctx context.Context, env Env, key string, startedAt time.Time) (Reconciliation, error) {
	return b.act.Reconcile(ctx, env, b, key, startedAt)
}

// Given is the params as they were given, in the canonical spelling but
// without the members binding derives from others (a mark's status from
// its condition, a post rule's condition): edits patch this form, so that
// a derived member is derived again from the edited params rather than
// kept stale from an earlier draft.
func (b *Bound) Given() (json.RawMessage, error) {
	if b.given == nil {
		return b.Params, nil
	}
	return json.Marshal(b.given)
}

// Restore binds canonical params read back from storage (a checkpoint's
// draft or confirmation). Storage keeps the canonical form only, so the
// members binding derived are found again: a member is left out of the
// given form when the params bind to the same action without it. That is a
// bind per top-level member, once per load, so that the next edit derives
// them again as it would have in the process that bound them.
func Restore(act Action, canonical json.RawMessage) (*Bound, error) {
	b, err := act.Bind(canonical)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := decodeNumbers(b.Params, &m); err != nil {
		return b, nil // params that are no object have no members to leave out
	}
	for _, k := range sortedKeys(m) {
		v := m[k]
		delete(m, k)
		raw, err := json.Marshal(m)
		if err == nil {
			if again, err := act.Bind(raw); err == nil && again.Hash == b.Hash {
				continue
			}
		}
		m[k] = v
	}
	b.given = m
	return b, nil
}

func decodeNumbers(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// Patch binds the params that a JSON merge patch (RFC 7386) makes of
// Given: one bind per change.
func (b *Bound) Patch(patch json.RawMessage) (*Bound, error) {
	doc, err := b.Given()
	if err != nil {
		return nil, err
	}
	merged, err := MergePatch(doc, patch)
	if err != nil {
		return nil, err
	}
	return b.act.Bind(merged)
}

// ParseError lists everything wrong with the shape of an action's params:
// unknown fields, wrong types, broken JSON. Each Problem names the field by
// its path (conditions[1].weight) so that the model can fix exactly that.
type ParseError struct {
	Action   string
	Problems []Problem
}

func (e *ParseError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// Params are the typed, parsed parameters of one built-in action. The JSON
// field names are the contract of spec/pipeline.md (snake_case).
type Params interface {
	Action() Name
}

// builtin is a registered action: its Def, and the generic plumbing
// (binding, the plan's frame, result encoding) that lives here once.
type builtin[P any] struct {
	// self is the registered action (a jobBuiltin for a job action):
	// bound params must lead back to it.
	self Action
	spec Spec
	def  Def[P]
}

func (a *builtin[P]) Spec() Spec { return a.spec }

func (a *builtin[P]) Bind(raw json.RawMessage) (*Bound, error) { return a.bindResolved(raw, nil, nil) }

// bindResolved is the one bind of raw params: decode, resolve the
// references in refs on the decoded value (when resolve is set),
// canonicalise, hash.
func (a *builtin[P]) bindResolved(raw json.RawMessage, refs []Ref, resolve Resolve) (*Bound, error) {
	p, err := decodeParams[P](a.spec.Name, raw)
	if err != nil {
		return nil, err
	}
	if resolve != nil && len(refs) > 0 {
		if _, err := resolve(refs, refParamsOf(&p)); err != nil {
			return nil, err
		}
	}
	given := p
	if a.def.Canonical != nil {
		p = a.def.Canonical(p)
	}
	canon, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%s params: %w", a.spec.Name, err)
	}
	b, err := NewBound(a.self, canon, p)
	if err != nil {
		return nil, err
	}
	b.given = given
	return b, nil
}

func (a *builtin[P]) typed(b *Bound) (P, error) {
	p, ok := b.typed.(P)
	if !ok || b.Name != a.spec.Name {
		var zero P
		return zero, fmt.Errorf("%s: params bound to another action (%s)", a.spec.Name, b.Name)
	}
	return p, nil
}

func (a *builtin[P]) Validate(ctx context.Context, env Env, b *Bound) ([]Problem, error) {
	p, err := a.typed(b)
	if err != nil {
		return nil, err
	}
	c := &Checker{ctx: ctx, api: env.API, changes: env.Changes}
	if err := a.def.Validate(c, p); err != nil {
		return nil, err
	}
	return c.problems, nil
}

func (a *builtin[P]) Plan(ctx context.Context, env Env, b *Bound) (*Plan, error) {
	p, err := a.typed(b)
	if err != nil {
		return nil, err
	}
	pb := &Planner{ctx: ctx, api: env.API, changes: env.Changes, plan: &Plan{Action: Name(a.spec.Name), Params: b.Params, Destructive: a.spec.Destructive}}
	if a.spec.Destructive {
		pb.text.WriteString(DestructiveMarker)
	}
	if err := a.def.Plan(pb, p); err != nil {
		return nil, fmt.Errorf("build plan for %s: %w", a.spec.Name, err)
	}
	for _, w := range pb.plan.Warnings {
		pb.Line("Warning: %s", w)
	}
	pb.text.WriteString(ConfirmPrompt)
	pb.plan.Message = pb.text.String()
	return pb.plan, nil
}

func (a *builtin[P]) Execute(ctx context.Context, env Env, b *Bound, key string) (Outcome, error) {
	p, err := a.typed(b)
	if err != nil {
		return Outcome{}, err
	}
	if a.spec.LongRunning {
		return a.startJob(ctx, env, b, p, key)
	}
	return a.def.Execute(ctx, env, p, key)
}

func (a *builtin[P]) Reconcile(ctx context.Context, env Env, b *Bound, key string, startedAt time.Time) (Reconciliation, error) {
	p, err := a.typed(b)
	if err != nil {
		return Reconciliation{}, err
	}
	if a.spec.LongRunning {
		return Reconciliation{Outcome: OutcomeRepeat,
			Note: "the job's id derives from the confirmation: starting it again re-attaches to the running job"}, nil
	}
	return a.def.Reconcile(ctx, env, p, key, startedAt)
}

// Result encodes an action's result value as its Outcome.
func Result(v any) (Outcome, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return Outcome{}, fmt.Errorf("encoding the result: %w", err)
	}
	return Outcome{Result: raw}, nil
}

// SchemaFor is the one schema generator of the project (jschema.For):
// tool arguments and action params alike. Required fields are the ones
// without omitempty; every optional field is nullable (a model may send
// null for "not given"), and "additionalProperties": false is left out to
// save tokens (arguments are still decoded strictly).
func SchemaFor[T any]() json.RawMessage {
	raw, err := jschema.For(reflect.TypeFor[T]())
	if err != nil {
		panic(fmt.Sprintf("actions: %v", err)) // programming error, caught by tests
	}
	return raw
}

// Decode decodes tool arguments into T with the leniency and the located
// errors of params binding (see decodeParams).
func Decode[T any](what string, raw json.RawMessage) (T, error) { return decodeParams[T](what, raw) }

// ---- decoding params as models write them ----

// decodeParams decodes raw into P. It is strict about what it cannot
// understand (unknown fields, a list where a number belongs) and lenient
// about what has one meaning: keys in another case or camelCase, numbers
// and booleans written as strings, a value encoded as a JSON string twice,
// a single value where a list belongs, null for "not given". Every problem
// names its field.
func decodeParams[P any](action string, raw json.RawMessage) (P, error) {
	var zero P
	perr := &ParseError{Action: action}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	tree, err := decodeJSON(trimmed)
	if err != nil {
		perr.Problems = append(perr.Problems, Problem{Message: "arguments are not valid JSON: " + err.Error()})
		return zero, perr
	}
	if s, ok := tree.(string); ok {
		if inner, err := decodeJSON([]byte(s)); err == nil {
			tree = inner // the whole object encoded twice
		}
	}
	fixed := coerce(tree, reflect.TypeOf(zero), "", &perr.Problems)
	if len(perr.Problems) > 0 {
		return zero, perr
	}
	b, err := json.Marshal(fixed)
	if err == nil {
		err = json.Unmarshal(b, &zero)
	}
	if err != nil {
		// coerce accepts only what Unmarshal accepts; a safety net.
		perr.Problems = append(perr.Problems, Problem{Message: jsonErrorText(err)})
		return zero, perr
	}
	return zero, nil
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New(jsonErrorText(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the value")
	}
	return v, nil
}

// isItem reports whether every key of obj names a field of the list's
// element type: then it is one item where a list belongs, not a keyed list.
func isItem(obj map[string]any, list reflect.Type) bool {
	for list.Kind() == reflect.Pointer || list.Kind() == reflect.Slice {
		list = list.Elem()
	}
	if list.Kind() != reflect.Struct || len(obj) == 0 {
		return false
	}
	fields := jsonFields(list)
	for k := range obj {
		if _, _, ok := matchField(fields, k); !ok {
			return false
		}
	}
	return true
}

// keyedList reads an object written where a list of objects belongs as
// that list, when the field declares the object's form with a `keyed`
// tag ("code,weight"): {"variant": 50, "control": 50} is
// [{code: control, weight: 50}, {code: variant, weight: 50}], and
// {"control": {"weight": 50}} is [{code: control, weight: 50}]. The items
// come sorted by key: the params reach Bind as a Go map on the agent's
// way (set_action_params, update_action_params), which keeps no order, so
// no order written could be kept anyway. An object whose keys are all
// fields of the item ({"code": "c", "weight": 100}) stays one item.
func keyedList(v any, f reflect.StructField) any {
	keyField, valField, ok := strings.Cut(f.Tag.Get("keyed"), ",")
	obj, isObj := asObject(v)
	if !ok || !isObj || isItem(obj, f.Type) {
		return v
	}
	list := make([]any, 0, len(obj))
	for _, k := range sortedKeys(obj) {
		item := map[string]any{}
		if inner, ok := asObject(obj[k]); ok {
			for ik, iv := range inner {
				item[ik] = iv
			}
		} else {
			item[valField] = obj[k]
		}
		item[keyField] = strings.TrimSpace(k)
		list = append(list, item)
	}
	return list
}

func jsonErrorText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "the JSON ends too early"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// coerce walks the decoded JSON against the Go type, returns the value in
// the shape the type wants, and records every mismatch with its path.
// encoding/json stops at the first error and does not name the path of an
// unknown field; the model deserves both.
func coerce(v any, t reflect.Type, path string, out *[]Problem) any {
	if v == nil {
		return nil // "not given": the field keeps its zero value
	}
	switch t.Kind() {
	case reflect.Pointer:
		return coerce(v, t.Elem(), path, out)
	case reflect.Struct:
		if t == reflect.TypeFor[GroupParam]() {
			v = groupShorthand(v) // "classId:c7", {"classId": "c7"}
		}
		if t == reflect.TypeFor[LevelParam]() {
			v = levelShorthand(v) // "Red"
		}
		obj, ok := asObject(v)
		if !ok {
			addShape(out, path, "an object", v)
			return nil
		}
		fields := jsonFields(t)
		res := map[string]any{}
		from := map[string]string{}
		for _, k := range sortedKeys(obj) {
			name, f, ok := matchField(fields, k)
			if !ok {
				*out = append(*out, Problem{Field: join(path, k), Value: describe(obj[k]),
					Message: fmt.Sprintf("unknown field; the fields are %s", strings.Join(fieldNames(t), ", "))})
				continue
			}
			if prev, dup := from[name]; dup {
				*out = append(*out, Problem{Field: join(path, name),
					Message: fmt.Sprintf("given twice (as %q and %q)", prev, k)})
				continue
			}
			from[name] = k
			if f.Tag.Get("bind") == "jsontext" {
				// A JSON document pasted as an object or array, not as a
				// string of it (an export file's content).
				if _, isStr := obj[k].(string); !isStr && obj[k] != nil {
					if b, err := json.Marshal(obj[k]); err == nil {
						res[name] = string(b)
						continue
					}
				}
			}
			res[name] = coerce(keyedList(obj[k], f), f.Type, join(path, name), out)
		}
		return res
	case reflect.Map:
		obj, ok := asObject(v)
		if !ok {
			addShape(out, path, "an object", v)
			return nil
		}
		res := make(map[string]any, len(obj))
		for _, k := range sortedKeys(obj) {
			res[strings.TrimSpace(k)] = coerce(obj[k], t.Elem(), join(path, k), out)
		}
		return res
	case reflect.Slice:
		arr, ok := asList(v)
		if !ok {
			// One value where a list belongs is a list of one.
			arr = []any{v}
		}
		res := make([]any, 0, len(arr))
		for i, item := range arr {
			res = append(res, coerce(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out))
		}
		return res
	case reflect.String:
		switch x := v.(type) {
		case string:
			return x
		case json.Number:
			return x.String() // an id written as a number
		}
		addShape(out, path, "a string", v)
		return nil
	case reflect.Bool:
		switch x := v.(type) {
		case bool:
			return x
		case string:
			switch strings.ToLower(strings.TrimSpace(x)) {
			case "true", "yes":
				return true
			case "false", "no":
				return false
			}
		}
		addShape(out, path, "true or false", v)
		return nil
	case reflect.Float64, reflect.Int:
		n, ok := asNumber(v)
		if !ok {
			want := "a number"
			if t.Kind() == reflect.Int {
				want = "a whole number"
			}
			addShape(out, path, want, v)
			return nil
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			*out = append(*out, Problem{Field: path, Value: n.String(), Message: "number out of range"})
			return nil
		}
		if t.Kind() == reflect.Int {
			if f != math.Trunc(f) {
				*out = append(*out, Problem{Field: path, Value: n.String(), Message: "expected a whole number"})
				return nil
			}
			if f > math.MaxInt32 || f < math.MinInt32 {
				*out = append(*out, Problem{Field: path, Value: n.String(), Message: "number out of range"})
				return nil
			}
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
		return n
	}
	return v
}

// asObject accepts an object, or a JSON string holding one (encoded twice).
func asObject(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case string:
		if inner, err := decodeJSON([]byte(x)); err == nil {
			m, ok := inner.(map[string]any)
			return m, ok
		}
	}
	return nil, false
}

// asList accepts a list, or a JSON string holding one (encoded twice).
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case string:
		s := strings.TrimSpace(x)
		if strings.HasPrefix(s, "[") {
			if inner, err := decodeJSON([]byte(s)); err == nil {
				l, ok := inner.([]any)
				return l, ok
			}
		}
	}
	return nil, false
}

// asNumber accepts a number, or a string holding one ("50", " 33.3 ", "50%").
func asNumber(v any) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		return x, true
	case string:
		s := strings.TrimSuffix(strings.TrimSpace(x), "%")
		s = strings.TrimSpace(s)
		if _, err := strconv.ParseFloat(s, 64); err == nil && s != "" {
			return json.Number(s), true
		}
	}
	return "", false
}

// Problem is one reason the params cannot be executed as they are. Field is
// the param's path (conditions[1].code).
type Problem struct {
	Field string `json:"field,omitempty"`
	// Value is the value received, as the model can recognise it.
	Value   string `json:"value,omitempty"`
	Message string `json:"message"`
	// Missing: a required param is absent; it goes on missing_params.
	Missing bool `json:"missing,omitempty"`
	// NotFound: the param names something the server does not have.
	NotFound bool `json:"not_found,omitempty"`
}

// Type is the state's error type for the problem: not_found or validation.
func (p Problem) Type() string {
	if p.NotFound {
		return "not_found"
	}
	return "validation"
}

// String names the field, the value received and what is wrong, once: a
// message that starts with its field ("status is required") is not
// prefixed with it again.
func (p Problem) String() string {
	d := p.Detail()
	if p.Field == "" || strings.HasPrefix(d, p.Field+" ") {
		return d
	}
	return p.Field + ": " + d
}

// Detail is String without the field.
func (p Problem) Detail() string {
	if p.Value != "" {
		return fmt.Sprintf("got %s: %s", p.Value, p.Message)
	}
	return p.Message
}

func addShape(out *[]Problem, path, want string, got any) {
	*out = append(*out, Problem{Field: path, Value: describe(got), Message: "expected " + want})
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		s := x
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return strconv.Quote(s)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	m := make(map[string]reflect.StructField, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.IsExported() && f.Tag.Get("json") != "-" {
			m[jsonName(f)] = f
		}
	}
	return m
}

// matchField finds the field a key names: exactly, or ignoring case,
// underscores, dashes and blanks (experimentId, Experiment_ID).
func matchField(fields map[string]reflect.StructField, key string) (string, reflect.StructField, bool) {
	if f, ok := fields[key]; ok {
		return key, f, true
	}
	k := foldKey(key)
	for name, f := range fields {
		if foldKey(name) == k {
			return name, f, true
		}
	}
	return "", reflect.StructField{}, false
}

func foldKey(s string) string {
	r := strings.NewReplacer("_", "", "-", "", " ", "")
	return strings.ToLower(r.Replace(s))
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.IsExported() && f.Tag.Get("json") != "-" {
			names = append(names, jsonName(f))
		}
	}
	return names
}

// paramsType is the params type (tests compare its schema).
func (a *builtin[P]) paramsType() reflect.Type { return reflect.TypeFor[P]() }
