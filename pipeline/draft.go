package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// ---- the draft action ----

// action is the draft's action ("" when none is chosen).
func (t *turn) action() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sess.draft.name
}

// draft is the draft's bound params (nil until they bind): bound and
// hashed once per change, by setParams.
func (t *turn) draft() *actions.Bound {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sess.draft.bound
}

// draftReady: an action is chosen and its params were validated since they
// last changed, with no problem left.
func (t *turn) draftReady() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.sess.draft
	return d.name != "" && d.bound != nil && t.problems != nil && len(t.problems) == 0 && len(d.missing) == 0
}

// validateDraft validates the draft as it stands (once per change).
func (a *Agent) validateDraft(ctx context.Context, t *turn) error {
	t.mu.Lock()
	validated := t.problems != nil
	t.mu.Unlock()
	if validated {
		return nil
	}
	name := t.action()
	act, ok := a.action(name)
	if !ok {
		t.update(func(*State) {
			t.problems = []actions.Problem{{Field: "action", Message: fmt.Sprintf("%q is not an action", name)}}
		})
		return nil
	}
	b := t.draft()
	if b == nil {
		// Chosen, with no params yet: what is missing is what empty
		// params lack. They are not the draft's params: the model still
		// sets them.
		var err error
		if b, err = act.Bind(json.RawMessage("{}")); err != nil {
			t.update(func(*State) {
				t.problems = []actions.Problem{{Field: "action_params", Message: "set the params with set_action_params", Missing: true}}
			})
			return nil
		}
	}
	problems, err := b.Validate(ctx, a.env(t.api(), t.sess.cp.SessionID))
	if err != nil {
		return err
	}
	t.update(func(*State) { t.setProblems(problems) })
	return nil
}

// setProblems records the latest validation and recomputes what is missing:
// what validation finds missing, plus what the model said only the person
// can give and the params still lack.
func (t *turn) setProblems(problems []actions.Problem) {
	if problems == nil {
		problems = []actions.Problem{}
	}
	t.problems = problems
	var missing []string
	for _, pr := range problems {
		if pr.Missing && !slices.Contains(missing, pr.Field) {
			missing = append(missing, pr.Field)
		}
	}
	d := t.sess.draft
	for _, m := range d.missing {
		if !slices.Contains(missing, m) && !hasParam(d.params, m) && t.declared[m] {
			missing = append(missing, m)
		}
	}
	if missing == nil {
		missing = []string{}
	}
	t.sess.setMissing(missing)
}

// hasParam reports whether the top-level param a path starts with is set.
func hasParam(params map[string]any, path string) bool {
	key := path
	if i := strings.IndexAny(key, ".["); i >= 0 {
		key = key[:i]
	}
	v, ok := params[key]
	return ok && v != nil
}

// draftView is the draft as prompts and the responder see it.
func (t *turn) draftView() map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.sess.draft
	missing := d.missing
	if missing == nil {
		missing = []string{}
	}
	return map[string]any{"action": d.name, "params": d.params, "missing": missing}
}

// setParams binds params to the chosen action, validates them and
// recomputes what is missing: every change, however small. The tool result
// tells the model what is still missing or wrong; the state keeps the
// canonical params (or, when they cannot be bound at all, the last good
// ones).
func (t *turn) setParams(ctx context.Context, params map[string]any) (any, error) {
	name := t.action()
	if name == "" {
		return nil, inputErrorf("call set_action_needed first")
	}
	act, ok := t.a.action(name)
	if !ok {
		return nil, inputErrorf("action %q is no longer available", name)
	}
	b, err := act.Bind(json.RawMessage(compactJSON(params)))
	if err != nil {
		return nil, inputErrorf("%s params: %v", name, err)
	}
	// Models often name an experiment where its id belongs: resolve it
	// (exact id or name, any case, or a unique prefix), so the
	// confirmation shows and the executor uses the real id.
	if b, err = t.resolveRefs(ctx, act, b); err != nil {
		return nil, err
	}
	problems, err := b.Validate(ctx, t.a.env(t.api(), t.sess.cp.SessionID))
	if err != nil {
		return nil, err
	}
	var missing []string
	t.update(func(*State) {
		t.sess.setDraftParams(b)
		t.setProblems(problems)
		missing = t.sess.draft.missing
	})
	res := map[string]any{"action": name, "params": json.RawMessage(b.Params)}
	if len(problems) == 0 && len(missing) == 0 {
		res["status"] = "complete and valid"
		return res, nil
	}
	res["status"] = "incomplete or invalid: fix with update_action_params, or ask the person"
	var list []string
	for _, pr := range problems {
		list = append(list, pr.String())
	}
	res["problems"] = list
	res["missing"] = missing
	return res, nil
}

// resolveRefs resolves the params the action declares as references (a
// `ref` tag on its params type) that hold a name instead of an id.
func (t *turn) resolveRefs(ctx context.Context, act actions.Action, b *actions.Bound) (*actions.Bound, error) {
	m := b.Map()
	changed := false
	for _, ref := range act.Spec().Refs {
		if ref.Kind != actions.RefExperiment {
			continue
		}
		ch, err := ref.Resolve(m, func(v string) (string, error) {
			if v == "" || upgrade.IsUUID(v) {
				return v, nil
			}
			return t.resolveID(ctx, v)
		})
		if err != nil {
			return nil, inputErrorf("%s: %v", ref.Path, err)
		}
		changed = changed || ch
	}
	// Flags named by key or name, segments by name (the flag and segment refs).
	if c, err := actions.ResolveFlagRefs(ctx, t.api(), act.Spec().Refs, m); err != nil {
		return nil, inputErrorf("%v", err)
	} else if c {
		changed = true
	}
	if !changed {
		return b, nil
	}
	return act.Bind(json.RawMessage(compactJSON(m)))
}

// setPath sets (or, for a nil value, removes) the param at a path such as
// name, post_experiment_rule.rule or conditions[0].weight.
func setPath(params map[string]any, path string, value any) error {
	if path == "" {
		return errors.New("empty key")
	}
	keys, idx, err := splitPath(path)
	if err != nil {
		return err
	}
	var cur any = params
	for i := range keys {
		last := i == len(keys)-1
		obj, ok := cur.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is not an object", strings.Join(keys[:i], "."))
		}
		k := existingKey(obj, keys[i])
		if idx[i] < 0 {
			if last {
				if value == nil {
					delete(obj, k)
				} else {
					obj[k] = value
				}
				return nil
			}
			next, ok := obj[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				obj[k] = next
			}
			cur = next
			continue
		}
		list, _ := obj[k].([]any)
		if idx[i] > len(list) {
			return fmt.Errorf("%s[%d]: the list has %d items", k, idx[i], len(list))
		}
		if idx[i] == len(list) {
			list = append(list, map[string]any{})
			obj[k] = list
		}
		if last {
			list[idx[i]] = value
			return nil
		}
		next, ok := list[idx[i]].(map[string]any)
		if !ok {
			next = map[string]any{}
			list[idx[i]] = next
		}
		cur = next
	}
	return nil
}

// existingKey is the key of obj that k names in another case or spelling
// (Conditions, experimentId), or k itself.
func existingKey(obj map[string]any, k string) string {
	if _, ok := obj[k]; ok {
		return k
	}
	fold := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	}
	for ek := range obj {
		if fold(ek) == fold(k) {
			return ek
		}
	}
	return k
}

// splitPath splits a.b[2].c into keys and list indexes (-1: none).
func splitPath(path string) ([]string, []int, error) {
	var keys []string
	var idx []int
	for _, part := range strings.Split(path, ".") {
		k, rest, hasIdx := strings.Cut(part, "[")
		n := -1
		if hasIdx {
			num, ok := strings.CutSuffix(rest, "]")
			v, err := strconv.Atoi(num)
			if !ok || err != nil || v < 0 {
				return nil, nil, fmt.Errorf("bad index in %q", part)
			}
			n = v
		}
		if k == "" {
			return nil, nil, fmt.Errorf("empty name in %q", path)
		}
		keys = append(keys, k)
		idx = append(idx, n)
	}
	return keys, idx, nil
}

func deepCopy(m map[string]any) map[string]any {
	out := map[string]any{}
	if m == nil {
		return out
	}
	raw, err := json.Marshal(m)
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		_ = dec.Decode(&out)
	}
	return out
}
