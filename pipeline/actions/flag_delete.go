package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// DeleteFeatureFlag is the name of the delete_feature_flag action.
const DeleteFeatureFlag Name = "delete_feature_flag"

// DeleteFeatureFlagParams are the params of delete_feature_flag.
type DeleteFeatureFlagParams struct {
	FlagID string `json:"flag_id" jsonschema:"id of the flag to delete (a key or name is resolved)" ref:"feature_flag"`
}

// Action implements Params.
func (DeleteFeatureFlagParams) Action() Name { return DeleteFeatureFlag }

func (p DeleteFeatureFlagParams) canonical() DeleteFeatureFlagParams {
	return DeleteFeatureFlagParams{FlagID: idValue(p.FlagID)}
}

// declareFlagDelete declares this file's action in r.
func declareFlagDelete(r *Registry) {
	Add(r, Def[DeleteFeatureFlagParams]{
		Name: DeleteFeatureFlag, Order: 140, Destructive: true, Invalidates: []Cache{CacheFlags},
		Object:      ObjectFeatureFlag,
		Description: "Delete a feature flag and its lists for good.",
		Canonical:   DeleteFeatureFlagParams.canonical,
		Validate: func(c *Checker, p DeleteFeatureFlagParams) error {
			_, err := c.flag("flag_id", p.FlagID)
			return err
		},
		Plan:      planDeleteFlag,
		Execute:   executeDeleteFlag,
		Reconcile: reconcileDeleteFlag,
		Report: ReportAs(func(r flagDeleteResult) string {
			return fmt.Sprintf("Deleted feature flag %q (key %s, id %s) with its lists. Clients asking for %s no longer get it.", r.Name, r.Key, r.ID, r.Key)
		}),
	})
}

func planDeleteFlag(b *Planner, p DeleteFeatureFlagParams) error {
	f, d, err := b.flagAndSegments(p.FlagID)
	if err != nil {
		return err
	}
	b.Line("delete feature flag %s, with its lists:", flagHeader(f))
	listLines(b, "Include lists", f.Include, d)
	listLines(b, "Exclude lists", f.Exclude, d)
	b.Line("Who gets it now: %s. After the delete: nobody; clients asking for key %s get nothing.", reach(f, d), quote(f.Key))
	b.Line("Public segments in its lists are kept.")
	if f.Status == FlagEnabled {
		b.Warn("the flag is enabled: everyone it reaches loses the feature at their next request")
	}
	return nil
}

type flagDeleteResult struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Key     string `json:"key"`
	Deleted bool   `json:"deleted"`
}

func executeDeleteFlag(ctx context.Context, env Env, p DeleteFeatureFlagParams, _ string) (Outcome, error) {
	cur, err := readFlag(ctx, env.API, p.FlagID)
	if err != nil {
		return Outcome{}, err
	}
	if _, err := env.API.DeleteFlag(ctx, p.FlagID); err != nil {
		return Outcome{}, err
	}
	// Read after write: the flag must be gone.
	if _, err := env.API.Flag(ctx, p.FlagID); err == nil {
		return Outcome{}, fmt.Errorf("feature flag %q: the server answered the delete, but still has the flag", cur.Name)
	} else if !isNotFound(err) {
		return Outcome{}, fmt.Errorf("feature flag %q was deleted, but reading it back failed: %w", cur.Name, err)
	}
	return Result(flagDeleteResult{ID: cur.ID, Name: cur.Name, Key: cur.Key, Deleted: true})
}

func reconcileDeleteFlag(ctx context.Context, env Env, p DeleteFeatureFlagParams, _ string, _ time.Time) (Reconciliation, error) {
	f, err := env.API.Flag(ctx, p.FlagID)
	if err != nil {
		if isNotFound(err) {
			raw, _ := json.Marshal(flagDeleteResult{ID: p.FlagID, Deleted: true})
			return Reconciliation{Outcome: OutcomeDone, Result: raw,
				Note: fmt.Sprintf("feature flag %s no longer exists: the delete happened", p.FlagID)}, nil
		}
		return Reconciliation{}, fmt.Errorf("reconcile delete_feature_flag: reading flag %s: %w", p.FlagID, err)
	}
	return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("feature flag %q still exists: the delete did not happen", f.Name)}, nil
}
