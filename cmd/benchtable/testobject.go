package main

import (
	"context"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// How many actions and lookups the growth row adds on its test object.
const (
	testObjectActions = 10
	testObjectLookups = 5
	testObject        = actions.Object("bench_object")
)

// benchParams are the params of the test object's actions: a few fields,
// as a real action has.
type benchParams struct {
	ObjectID string `json:"object_id" jsonschema:"the test object's id"`
	Label    string `json:"label,omitempty" jsonschema:"a label for the change"`
	Count    int    `json:"count,omitempty" jsonschema:"how many (1..100)"`
}

// benchAction is a test action of object o: it changes nothing.
func benchAction(name actions.Name, order int, o actions.Object) actions.Def[benchParams] {
	return actions.Def[benchParams]{
		Name: name, Order: order, Object: o,
		Description: "Change the test object, one of the growth row's actions.",
		Note:        "a test action",
		Validate:    func(*actions.Checker, benchParams) error { return nil },
		Plan: func(pl *actions.Planner, p benchParams) error {
			pl.Line("Change %s.", p.ObjectID)
			return nil
		},
		Execute: func(context.Context, actions.Env, benchParams, string) (actions.Outcome, error) {
			return actions.Result(map[string]bool{"ok": true})
		},
		Reconcile: func(context.Context, actions.Env, benchParams, string, time.Time) (actions.Reconciliation, error) {
			return actions.Reconciliation{Outcome: actions.OutcomeRepeat}, nil
		},
	}
}

// withTestObject adds the growth row's actions and lookups to reg and
// returns it.
func withTestObject(reg *actions.Registry) *actions.Registry {
	for i := 1; i <= testObjectActions; i++ {
		actions.Add(reg, benchAction(actions.Name(fmt.Sprintf("bench_change_%02d", i)), 10_000+i, testObject))
	}
	for i := 1; i <= testObjectLookups; i++ {
		actions.AddLookup(reg, actions.LookupDef[benchParams]{
			Name: fmt.Sprintf("bench_lookup_%02d", i), Object: testObject,
			Description: "Read the test object, one of the growth row's lookups.",
			Run: func(_ context.Context, _ actions.Env, p benchParams) (any, error) {
				return map[string]string{"object_id": p.ObjectID}, nil
			},
		})
	}
	return reg
}
