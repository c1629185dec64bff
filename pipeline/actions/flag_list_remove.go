package actions

import (
	"context"
	"fmt"
	"time"
)

// RemoveFeatureFlagList is the name of the remove_feature_flag_list action.
const RemoveFeatureFlagList Name = "remove_feature_flag_list"

// RemoveFeatureFlagListParams are the params of remove_feature_flag_list.
type RemoveFeatureFlagListParams struct {
	FlagID string `json:"flag_id" jsonschema:"id of the flag (a key or name is resolved)" ref:"feature_flag"`
	Kind   string `json:"kind" jsonschema:"include or exclude: the kind of the list"`
	ListID string `json:"list_id" jsonschema:"id of the list (get_feature_flag_details shows it)"`
}

// Action implements Params.
func (RemoveFeatureFlagListParams) Action() Name { return RemoveFeatureFlagList }

func (p RemoveFeatureFlagListParams) canonical() RemoveFeatureFlagListParams {
	return RemoveFeatureFlagListParams{FlagID: idValue(p.FlagID), Kind: listKindValue(p.Kind), ListID: idValue(p.ListID)}
}

// declareFlagListRemove declares this file's action in r.
func declareFlagListRemove(r *Registry) {
	Add(r, Def[RemoveFeatureFlagListParams]{
		Name: RemoveFeatureFlagList, Order: 170, Destructive: true, Invalidates: []Cache{CacheFlags},
		Object:      ObjectFeatureFlag,
		Description: "Remove one include or exclude list from a feature flag (public segments in it are kept).",
		Canonical:   RemoveFeatureFlagListParams.canonical,
		Validate: func(c *Checker, p RemoveFeatureFlagListParams) error {
			_, _, err := c.flagListRef(p.FlagID, p.Kind, p.ListID)
			return err
		},
		Plan:      planRemoveList,
		Execute:   executeRemoveList,
		Reconcile: reconcileRemoveList,
		Report:    ReportAs(reportList),
	})
}

func planRemoveList(b *Planner, p RemoveFeatureFlagListParams) error {
	f, d, err := b.flagAndSegments(p.FlagID)
	if err != nil {
		return err
	}
	l, ok := f.list(p.Kind, p.ListID)
	if !ok {
		return fmt.Errorf("feature flag %q has no %s list %s", f.Name, p.Kind, p.ListID)
	}
	b.Line("remove the %s list %s from feature flag %s:", p.Kind, l.ID, flagHeader(f))
	b.Line("  %s", fmtList(l, d))
	if len(l.Members.Segments) > 0 {
		b.Line("The segments themselves are kept.")
	}
	reachChange(b, f, f.withoutList(l.ID), d)
	return nil
}

func executeRemoveList(ctx context.Context, env Env, p RemoveFeatureFlagListParams, _ string) (Outcome, error) {
	cur, err := readFlag(ctx, env.API, p.FlagID)
	if err != nil {
		return Outcome{}, err
	}
	l, ok := cur.list(p.Kind, p.ListID)
	if !ok {
		return Outcome{}, fmt.Errorf("feature flag %q has no %s list %s any more", cur.Name, p.Kind, p.ListID)
	}
	if _, err := env.API.DeleteFlagList(ctx, upgradeKind(p.Kind), p.ListID); err != nil {
		return Outcome{}, err
	}
	held, err := readFlag(ctx, env.API, p.FlagID)
	if err != nil {
		return Outcome{}, fmt.Errorf("the list was removed from feature flag %q, but reading it back failed: %w", cur.Name, err)
	}
	if _, still := held.anyList(p.ListID); still {
		return Outcome{}, fmt.Errorf("feature flag %q: the server answered the removal, but still has %s list %s", cur.Name, p.Kind, p.ListID)
	}
	return Result(listActionResult{Flag: flagResult(held), Kind: p.Kind, List: listResult(l), Action: "removed"}.withReach(ctx, env.API, held))
}

func reconcileRemoveList(ctx context.Context, env Env, p RemoveFeatureFlagListParams, _ string, _ time.Time) (Reconciliation, error) {
	f, gone, err := reconcileFlag(ctx, env, p.FlagID, string(RemoveFeatureFlagList))
	if err != nil || gone != nil {
		return derefRec(gone), err
	}
	if _, ok := f.anyList(p.ListID); ok {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("feature flag %q still has list %s: the removal did not happen", f.Name, p.ListID)}, nil
	}
	raw, err := Result(listActionResult{Flag: flagResult(f), Kind: p.Kind, List: ListResult{ID: p.ListID}, Action: "removed"})
	return Reconciliation{Outcome: OutcomeDone, Result: raw.Result, Note: fmt.Sprintf("feature flag %q no longer has list %s: the removal happened", f.Name, p.ListID)}, err
}
