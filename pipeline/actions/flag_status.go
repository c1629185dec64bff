package actions

import (
	"context"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// UpdateFeatureFlagStatus is the name of the update_feature_flag_status action.
const UpdateFeatureFlagStatus Name = "update_feature_flag_status"

// UpdateFeatureFlagStatusParams are the params of update_feature_flag_status.
type UpdateFeatureFlagStatusParams struct {
	FlagID string `json:"flag_id" jsonschema:"id of the flag (a key or name is resolved)" ref:"feature_flag"`
	Status string `json:"status" jsonschema:"enabled (served), disabled or archived (served to nobody)"`
}

// Action implements Params.
func (UpdateFeatureFlagStatusParams) Action() Name { return UpdateFeatureFlagStatus }

func (p UpdateFeatureFlagStatusParams) canonical() UpdateFeatureFlagStatusParams {
	return UpdateFeatureFlagStatusParams{FlagID: idValue(p.FlagID), Status: flagStatusValue(p.Status)}
}

// declareFlagStatus declares this file's action in r.
func declareFlagStatus(r *Registry) {
	Add(r, Def[UpdateFeatureFlagStatusParams]{
		Name: UpdateFeatureFlagStatus, Order: 130, Destructive: true, Invalidates: []Cache{CacheFlags},
		Object:      ObjectFeatureFlag,
		Description: "Turn a feature flag on (enabled) or off (disabled, archived).",
		Note:        "enabled = on, disabled = off, archived",
		Canonical:   UpdateFeatureFlagStatusParams.canonical,
		Validate: func(c *Checker, p UpdateFeatureFlagStatusParams) error {
			f, err := c.flag("flag_id", p.FlagID)
			if err != nil || f == nil {
				return err
			}
			switch {
			case p.Status == "":
				c.Missing("status", "status is required (enabled, disabled or archived)")
			case !contains(upgrade.FlagStatuses(), p.Status):
				c.AddValue("status", p.Status, "unknown status; use enabled, disabled or archived")
			case f.Status == p.Status:
				c.Add("status", "feature flag %q is already %s", f.Name, p.Status)
			}
			return nil
		},
		Plan:    planFlagStatus,
		Execute: executeFlagStatus,
		Reconcile: func(ctx context.Context, env Env, p UpdateFeatureFlagStatusParams, _ string, _ time.Time) (Reconciliation, error) {
			return reconcileFlagFields(ctx, env, p.FlagID, func(f flagState) flagState { f.Status = p.Status; return f }, "status change")
		},
		Report: ReportAs(func(r flagStatusResult) string {
			s := fmt.Sprintf("Feature flag %q (key %s) is now %s (it was %s).", r.Name, r.Key, r.Status, r.PreviousStatus)
			if r.Status == FlagEnabled {
				s += " Who gets it: " + r.Reach + "."
			} else {
				s += " Nobody gets it."
			}
			return s
		}),
	})
}

func planFlagStatus(b *Planner, p UpdateFeatureFlagStatusParams) error {
	f, d, err := b.flagAndSegments(p.FlagID)
	if err != nil {
		return err
	}
	n := f
	n.Status = p.Status
	b.Line("change the status of feature flag %s: %s -> %s.", flagHeader(f), identOrNone(f.Status), p.Status)
	listLines(b, "Include lists", f.Include, d)
	listLines(b, "Exclude lists", f.Exclude, d)
	b.Line("Who gets it now: %s.", reach(f, d))
	b.Line("After the change: %s.", reach(n, d))
	reachWarnings(b, n)
	return nil
}

type flagStatusResult struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Key            string `json:"key"`
	PreviousStatus string `json:"previous_status"`
	Status         string `json:"status"`
	Reach          string `json:"reach"`
}

func executeFlagStatus(ctx context.Context, env Env, p UpdateFeatureFlagStatusParams, _ string) (Outcome, error) {
	cur, err := readFlag(ctx, env.API, p.FlagID)
	if err != nil {
		return Outcome{}, err
	}
	want := cur
	want.Status = p.Status
	if cur.Status != p.Status {
		if _, err := env.API.SetFlagStatus(ctx, p.FlagID, p.Status); err != nil {
			return Outcome{}, err
		}
	}
	held, err := holdFlag(ctx, env.API, want)
	if err != nil {
		return Outcome{}, fmt.Errorf("feature flag %q: the status was sent, but %w", cur.Name, err)
	}
	d, err := readSegments(ctx, env.API)
	if err != nil {
		d = &segDir{} // the result is still true; the names are a nicety
	}
	return Result(flagStatusResult{ID: held.ID, Name: held.Name, Key: held.Key, PreviousStatus: cur.Status, Status: held.Status, Reach: reach(held, d)})
}
