package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// BindCreate binds the params that create one object of kind object (as
// spec/pipeline.md names objects: "experiment", "feature_flag", "segment") with
// the action the agent uses for it, found in the registry by its name,
// create_<object> (or add_<object> for a part of another object, such as
// "experiment_query"). Setup and the agent so agree on defaults, spellings
// and validation, and a caller that sets up a backend names no action.
func BindCreate(object string, raw json.RawMessage) (*Bound, error) {
	a, ok := builtins().Lookup("create_" + object)
	if !ok {
		a, ok = builtins().Lookup("add_" + object)
	}
	if !ok {
		return nil, fmt.Errorf("%w: no action creates a %q", ErrUnknownAction, object)
	}
	return a.Bind(raw)
}

// ResolveBound resolves the references of a bound action that hold a name
// (ResolveRefs) on its params as given, and binds them again when one
// changed; when none did, b is returned and nothing is bound.
func ResolveBound(ctx context.Context, api CatalogAPI, b *Bound) (*Bound, error) {
	a, ok := builtins().Lookup(b.Name)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownAction, b.Name)
	}
	if len(a.Spec().Refs) == 0 {
		return b, nil
	}
	given, err := b.Given()
	if err != nil {
		return nil, err
	}
	nb, err := BindResolved(a, given, func(refs []Ref, params RefParams) (bool, error) {
		changed, err := ResolveRefs(ctx, api, refs, params)
		if err == nil && !changed {
			err = errRefsUnchanged
		}
		return changed, err
	})
	if errors.Is(err, errRefsUnchanged) {
		return b, nil
	}
	if err != nil {
		return b, err
	}
	return nb, nil
}

// errRefsUnchanged stops a bind whose references all held ids already.
var errRefsUnchanged = errors.New("no reference changed")
