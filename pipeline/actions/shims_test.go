package actions

import (
	"context"
	"encoding/json"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Test shims over the Action interface, in the shape the table tests of
// this package were written in: typed params in, one call out.

func Parse(name string, raw json.RawMessage) (Params, error) {
	b, err := Bind(name, raw)
	if err != nil {
		return nil, err
	}
	return b.Typed().(Params), nil
}

func mustBound(p Params) *Bound {
	b, err := BindParams(p)
	if err != nil {
		panic(err)
	}
	return b
}

func Canonical(p Params) (json.RawMessage, error) {
	b, err := BindParams(p)
	if err != nil {
		return nil, err
	}
	return b.Params, nil
}

func Validate(ctx context.Context, api API, p Params) ([]Problem, error) {
	return mustBound(p).Validate(ctx, Env{API: api})
}

func BuildPlan(ctx context.Context, api API, p Params) (*Plan, error) {
	b, err := BindParams(p)
	if err != nil {
		return nil, err
	}
	return b.Plan(ctx, Env{API: api})
}

func Execute(ctx context.Context, api API, p Params) (json.RawMessage, error) {
	return Run(ctx, api, p)
}

func Reconcile(ctx context.Context, api API, p Params, startedAt time.Time) (Reconciliation, error) {
	return mustBound(p).Reconcile(ctx, Env{API: api}, "", startedAt)
}

// IsStale renders plan's params again and compares, as the pipeline does
// before it executes an approval given in an earlier turn.
func IsStale(ctx context.Context, api API, plan *Plan) (bool, error) {
	b, err := Bind(string(plan.Action), plan.Params)
	if err != nil {
		return false, err
	}
	fresh, err := b.Plan(ctx, Env{API: api})
	if err != nil {
		if upgrade.CategoryOf(err) == upgrade.CategoryNotFound {
			return true, nil
		}
		return false, err
	}
	return !fresh.Same(plan), nil
}
