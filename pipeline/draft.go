package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// ---- the draft action ----

// gathering is what the gatherer's tools record about the draft in a turn.
type gathering struct {
	toolResults []namedResult     // read results of this turn, for the responder's report
	problems    []actions.Problem // the latest validation of the draft action (nil: not validated since it changed)
	declared    map[string]bool   // params the model said only the person can give
	// stop ends the gatherer's loop after the current round: the model
	// named params only the person can give, or gave a full set whose
	// values only the person can correct. A partial set goes on.
	stop bool
}

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
		if !slices.Contains(missing, m) && t.declared[m] && !hasParam(d.params(), m) {
			missing = append(missing, m)
		}
	}
	if missing == nil {
		missing = []string{}
	}
	t.sess.setMissing(missing)
}

// hasParam reports whether the top-level param a path starts with is set.
func hasParam(params json.RawMessage, path string) bool {
	key := path
	if i := strings.IndexAny(key, ".["); i >= 0 {
		key = key[:i]
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		return false
	}
	v, ok := top[key]
	return ok && string(v) != "null"
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
	return map[string]any{"action": d.name, "params": d.params(), "missing": missing}
}

// setParams binds params (JSON) to the chosen action, validates them
// and recomputes what is missing: every change, however small, is one
// bind. The tool result tells the model what is still missing or wrong;
// the draft keeps the bound params (or, when they cannot be bound at all,
// the last good ones).
func (t *turn) setParams(ctx context.Context, params json.RawMessage) (any, error) {
	act, err := t.draftAction()
	if err != nil {
		return nil, err
	}
	return t.bindParams(ctx, act, params)
}

// draftAction is the action the draft's params are for.
func (t *turn) draftAction() (actions.Action, error) {
	name := t.action()
	if name == "" {
		return nil, inputErrorf("call set_action_needed first")
	}
	act, ok := t.a.action(name)
	if !ok {
		return nil, inputErrorf("action %q is no longer available", name)
	}
	return act, nil
}

// patchParams applies update_action_params to the draft: the member at
// path set to value (nil removes it), as a JSON merge patch of the params
// as given, then one bind.
func (t *turn) patchParams(ctx context.Context, path string, value any) (any, error) {
	act, err := t.draftAction()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	d := t.sess.draft
	t.mu.Unlock()
	doc := d.unbound
	if d.bound != nil {
		if doc, err = d.bound.Given(); err != nil {
			return nil, err
		}
	}
	patch, err := actions.PathPatch(doc, path, value)
	if err != nil {
		return nil, inputErrorf("key: got %q: %v", path, err)
	}
	merged, err := actions.MergePatch(doc, patch)
	if err != nil {
		return nil, inputErrorf("%s params: %v", act.Spec().Name, err)
	}
	return t.bindParams(ctx, act, merged)
}

// bindParams binds the draft's new params (one bind, one hash), with the
// references they name resolved on the way, and validates them.
func (t *turn) bindParams(ctx context.Context, act actions.Action, raw json.RawMessage) (any, error) {
	name := act.Spec().Name
	// Models often name an experiment where its id belongs: resolve it
	// (exact id or name, any case, or a unique prefix), so the
	// confirmation shows and the executor uses the real id. Experiments
	// by name or prefix, flags by key or name, segments by name: the one
	// resolver the CLI uses too.
	var refErr error
	b, err := actions.BindResolved(act, raw, func(refs []actions.Ref, params actions.RefParams) (bool, error) {
		changed, err := actions.ResolveRefs(ctx, t.api(), refs, params)
		refErr = err
		return changed, err
	})
	switch {
	case refErr != nil:
		return nil, inputErrorf("%v", refErr)
	case err != nil:
		return nil, inputErrorf("%s params: %v", name, err)
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
