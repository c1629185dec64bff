package actions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// UpdateFeatureFlag is the name of the update_feature_flag action.
const UpdateFeatureFlag Name = "update_feature_flag"

// UpdateFeatureFlagParams are the params of update_feature_flag: every
// field but FlagID is a pointer, nil meaning "leave as it is". Lists have
// actions of their own.
type UpdateFeatureFlagParams struct {
	FlagID      string    `json:"flag_id" jsonschema:"id of the flag (a key or name is resolved)" ref:"feature_flag"`
	Name        *string   `json:"name,omitempty"`
	Key         *string   `json:"key,omitempty"`
	Context     *string   `json:"context,omitempty" jsonschema:"refused for a flag with lists: UpGrade would drop every list"`
	Description *string   `json:"description,omitempty"`
	Tags        *[]string `json:"tags,omitempty"`
	Status      *string   `json:"status,omitempty" jsonschema:"only the current status is accepted: status changes go through update_feature_flag_status"`
	FilterMode  *string   `json:"filter_mode,omitempty" jsonschema:"excludeAll (nobody but the included) or includeAll (everyone but the excluded)"`
}

// Action implements Params.
func (UpdateFeatureFlagParams) Action() Name { return UpdateFeatureFlag }

func (p UpdateFeatureFlagParams) canonical() UpdateFeatureFlagParams {
	c := UpdateFeatureFlagParams{FlagID: idValue(p.FlagID), Name: trimPtr(p.Name), Key: trimPtr(p.Key), Context: trimPtr(p.Context),
		Description: trimPtr(p.Description), Tags: keepList(p.Tags), FilterMode: enumPtr(p.FilterMode, upgrade.FilterModes())}
	if p.Status != nil {
		s := flagStatusValue(*p.Status)
		c.Status = &s
	}
	return c
}

// declareFlagUpdate declares this file's action in r.
func declareFlagUpdate(r *Registry) {
	Add(r, Def[UpdateFeatureFlagParams]{
		Name: UpdateFeatureFlag, Order: 120, Invalidates: []Cache{CacheFlags},
		Object:      ObjectFeatureFlag,
		Description: "Change fields of a feature flag (name, key, context, description, tags, status, filter mode); only the fields given change. Lists have their own actions.",
		Canonical:   UpdateFeatureFlagParams.canonical,
		Validate:    validateUpdateFlag,
		Plan:        planUpdateFlag,
		Execute:     executeUpdateFlag,
		Reconcile:   reconcileUpdateFlag,
		Report:      ReportAs(reportFlag("Updated")),
	})
}

func (p UpdateFeatureFlagParams) touches() bool {
	return p.Name != nil || p.Key != nil || p.Context != nil || p.Description != nil || p.Tags != nil || p.Status != nil || p.FilterMode != nil
}

// applyFlagUpdate is the flag after the update; its lists stay.
func applyFlagUpdate(f flagState, p UpdateFeatureFlagParams) flagState {
	n := f
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&n.Name, p.Name)
	set(&n.Key, p.Key)
	set(&n.Description, p.Description)
	set(&n.Status, p.Status)
	set(&n.FilterMode, p.FilterMode)
	if p.Context != nil && *p.Context != f.Context {
		n.Context = *p.Context
		n.Contexts = []string{*p.Context}
	}
	if p.Tags != nil {
		n.Tags = nonEmpty(*p.Tags)
	}
	return n
}

func validateUpdateFlag(c *Checker, p UpdateFeatureFlagParams) error {
	f, err := c.flag("flag_id", p.FlagID)
	if err != nil || f == nil {
		return err
	}
	if !p.touches() {
		c.Missing("fields", "name at least one field to change (lists have their own actions: add_feature_flag_list, update_feature_flag_list, remove_feature_flag_list)")
		return nil
	}
	n := applyFlagUpdate(*f, p)
	if n.Status != f.Status {
		// Every status change of a flag is destructive (spec/pipeline.md):
		// it goes through the action that says so, never in passing.
		c.AddValue("status", n.Status, "a status change goes through update_feature_flag_status (it needs a yes under every policy); leave status out here")
		return nil
	}
	if n.Context != f.Context && f.hasLists() {
		c.Add("context", "flag %q has %s: UpGrade drops every list of a flag whose context changes; remove the lists first, or create a new flag in context %s",
			f.Name, plural(len(f.Include)+len(f.Exclude), "list", "lists"), n.Context)
		return nil
	}
	if p.Name != nil && n.Name == "" {
		c.Add("name", "name cannot be empty")
	}
	if p.Key != nil && n.Key == "" {
		c.Add("key", "key cannot be empty")
	}
	return c.flagRules(n.Name, n.Key, n.Context, n.Status, n.FilterMode, f.ID, n.Key != f.Key || n.Context != f.Context)
}

// flagFieldChanges lists "field: old -> new" for every field that differs.
func flagFieldChanges(cur, next flagState) []string {
	var out []string
	add := func(name, o, n string) {
		if o != n {
			out = append(out, fmt.Sprintf("%s: %s -> %s", name, o, n))
		}
	}
	add("name", quoteOrNone(cur.Name), quoteOrNone(next.Name))
	add("key", quoteOrNone(cur.Key), quoteOrNone(next.Key))
	add("context", identOrNone(cur.Context), identOrNone(next.Context))
	add("description", quoteOrNone(cur.Description), quoteOrNone(next.Description))
	add("tags", fmtUsers(cur.Tags), fmtUsers(next.Tags))
	add("status", identOrNone(cur.Status), identOrNone(next.Status))
	add("filter_mode", identOrNone(cur.FilterMode), identOrNone(next.FilterMode))
	return out
}

func planUpdateFlag(b *Planner, p UpdateFeatureFlagParams) error {
	f, d, err := b.flagAndSegments(p.FlagID)
	if err != nil {
		return err
	}
	n := applyFlagUpdate(f, p)
	b.Line("Update feature flag %s:", flagHeader(f))
	changes := flagFieldChanges(f, n)
	for _, c := range changes {
		b.Line("  %s", c)
	}
	if len(changes) == 0 {
		b.Line("  (no change: every value given equals the current one)")
		b.Warn("nothing would change")
	}
	reachChange(b, f, n, d)
	if n.Key != f.Key {
		b.Warn("clients that ask for key %s stop getting the flag; they must ask for %s", quote(f.Key), quote(n.Key))
	}
	if n.Key != f.Key || n.Context != f.Context {
		return keyCaseWarning(b, n.Key, n.Context, f.ID)
	}
	return nil
}

func executeUpdateFlag(ctx context.Context, env Env, p UpdateFeatureFlagParams, _ string) (Outcome, error) {
	cur, err := readFlag(ctx, env.API, p.FlagID)
	if err != nil {
		return Outcome{}, err
	}
	want := applyFlagUpdate(cur, p)
	if err := writeFlagFields(ctx, env.API, cur, want); err != nil {
		return Outcome{}, err
	}
	held, err := holdFlag(ctx, env.API, want)
	if err != nil {
		return Outcome{}, fmt.Errorf("feature flag %q was updated, but %w", want.Name, err)
	}
	return Result(flagResult(held))
}

// writeFlagFields sends the fields that differ: a filter mode alone
// through its own route (as the web UI does), anything else with a PUT of
// the whole flag.
func writeFlagFields(ctx context.Context, api FlagAPI, cur, want flagState) error {
	changes := flagFieldChanges(cur, want)
	only := func(field string) bool {
		return len(changes) == 1 && strings.HasPrefix(changes[0], field+":")
	}
	switch {
	case len(changes) == 0:
		return nil
	case only("filter_mode"):
		_, err := api.SetFlagFilterMode(ctx, want.ID, want.FilterMode)
		return err
	}
	_, err := api.UpdateFlag(ctx, flagBodyOf(want))
	return err
}

func reconcileUpdateFlag(ctx context.Context, env Env, p UpdateFeatureFlagParams, _ string, _ time.Time) (Reconciliation, error) {
	return reconcileFlagFields(ctx, env, p.FlagID, func(f flagState) flagState { return applyFlagUpdate(f, p) }, "update")
}

// reconcileFlagFields reads the flag and tells whether it already has the
// values the action sets.
func reconcileFlagFields(ctx context.Context, env Env, id string, apply func(flagState) flagState, what string) (Reconciliation, error) {
	f, gone, err := reconcileFlag(ctx, env, id, what)
	if err != nil || gone != nil {
		return derefRec(gone), err
	}
	if changes := flagFieldChanges(f, apply(f)); len(changes) > 0 {
		return Reconciliation{Outcome: OutcomeNotDone,
			Note: fmt.Sprintf("feature flag %q does not have the new values yet (%s): the %s did not happen", f.Name, strings.Join(changes, "; "), what)}, nil
	}
	raw, err := Result(flagResult(f))
	return Reconciliation{Outcome: OutcomeDone, Result: raw.Result,
		Note: fmt.Sprintf("feature flag %q already has every value of the %s", f.Name, what)}, err
}
