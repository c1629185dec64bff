package actions

import (
	"context"
	"encoding/json"
	"fmt"
)

// BindCreate binds the params that create one object of kind object (as
// spec/pipeline.md names objects: "experiment", "feature_flag", "segment") with
// the action the agent uses for it, found in the registry by its name,
// create_<object> (or add_<object> for a part of another object, such as
// "experiment_query"). Setup and the agent so agree on defaults, spellings
// and validation, and a caller that sets up a backend names no action.
func BindCreate(object string, raw json.RawMessage) (*Bound, error) {
	a, ok := builtins.Lookup("create_" + object)
	if !ok {
		a, ok = builtins.Lookup("add_" + object)
	}
	if !ok {
		return nil, fmt.Errorf("%w: no action creates a %q", ErrUnknownAction, object)
	}
	return a.Bind(raw)
}

// ResolveBound resolves the references of a bound action that hold a name
// (ResolveRefs) and binds again when one changed.
func ResolveBound(ctx context.Context, api CatalogAPI, b *Bound) (*Bound, error) {
	a, ok := builtins.Lookup(b.Name)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownAction, b.Name)
	}
	given, err := b.Given()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := decodeNumbers(given, &m); err != nil {
		return b, nil // params that are no object hold no references
	}
	changed, err := ResolveRefs(ctx, api, a.Spec().Refs, m)
	if err != nil || !changed {
		return b, err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return a.Bind(raw)
}
