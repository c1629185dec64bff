package actions

import (
	"context"
	"fmt"
	"time"
)

// UpdateFeatureFlagList is the name of the update_feature_flag_list action.
const UpdateFeatureFlagList Name = "update_feature_flag_list"

// UpdateFeatureFlagListParams are the params of update_feature_flag_list. A
// member kind given replaces that kind; one not given is kept; the whole
// list is written back (UpGrade replaces list members only as a whole).
type UpdateFeatureFlagListParams struct {
	FlagID     string        `json:"flag_id" jsonschema:"id of the flag (a key or name is resolved)" ref:"feature_flag"`
	Kind       string        `json:"kind" jsonschema:"include or exclude: the kind of the list"`
	ListID     string        `json:"list_id" jsonschema:"id of the list (get_feature_flag_details shows it)"`
	Enabled    *bool         `json:"enabled,omitempty" jsonschema:"turn the list on or off"`
	Users      *[]string     `json:"users,omitempty" jsonschema:"the list's users after the change (the whole list)"`
	Groups     *[]GroupParam `json:"groups,omitempty" jsonschema:"the list's groups after the change (the whole list)"`
	SegmentIDs *[]string     `json:"segment_ids,omitempty" jsonschema:"the list's segments after the change (names are resolved)" ref:"segment"`
}

// Action implements Params.
func (UpdateFeatureFlagListParams) Action() Name { return UpdateFeatureFlagList }

func (p UpdateFeatureFlagListParams) canonical() UpdateFeatureFlagListParams {
	c := UpdateFeatureFlagListParams{FlagID: idValue(p.FlagID), Kind: listKindValue(p.Kind), ListID: idValue(p.ListID),
		Enabled: p.Enabled, Users: keepList(p.Users), Groups: keepGroups(p.Groups)}
	if p.SegmentIDs != nil {
		ids := idList(*p.SegmentIDs)
		if ids == nil {
			ids = []string{}
		}
		c.SegmentIDs = &ids
	}
	return c
}

// declareFlagListUpdate declares this file's action in r.
func declareFlagListUpdate(r *Registry) {
	Add(r, Def[UpdateFeatureFlagListParams]{
		Name: UpdateFeatureFlagList, Order: 160, Invalidates: []Cache{CacheFlags},
		Object:      ObjectFeatureFlag,
		Description: "Change one list of a feature flag: turn it on or off, or replace its users, groups or segments.",
		Note:        "list_id from get_feature_flag_details",
		Canonical:   UpdateFeatureFlagListParams.canonical,
		Validate:    validateUpdateList,
		Plan:        planUpdateList,
		Execute:     executeUpdateList,
		Reconcile:   reconcileUpdateList,
		Report:      ReportAs(reportList),
	})
}

// apply is the list after the update.
func (p UpdateFeatureFlagListParams) apply(l flagList) flagList {
	n := l
	m := l.Members
	if p.Users != nil {
		m.Users = *p.Users
	}
	if p.Groups != nil {
		m.Groups = *p.Groups
	}
	if p.SegmentIDs != nil {
		m.Segments = *p.SegmentIDs
	}
	n.Members = m.sorted()
	if p.Enabled != nil {
		n.Enabled = *p.Enabled
	}
	return n
}

// withList is the flag with list l in place of the list of its id.
func (f flagState) withList(l flagList) flagState {
	n := f
	replace := func(ls []flagList) []flagList {
		out := make([]flagList, len(ls))
		for i, x := range ls {
			out[i] = x
			if x.ID == l.ID {
				out[i] = l
			}
		}
		return out
	}
	n.Include, n.Exclude = replace(f.Include), replace(f.Exclude)
	return n
}

// withoutList is the flag without list id.
func (f flagState) withoutList(id string) flagState {
	n := f
	drop := func(ls []flagList) []flagList {
		var out []flagList
		for _, x := range ls {
			if x.ID != id {
				out = append(out, x)
			}
		}
		return out
	}
	n.Include, n.Exclude = drop(f.Include), drop(f.Exclude)
	return n
}

// flagListRef checks flag, kind and list id; the list, or nil.
func (c *Checker) flagListRef(flagID, kind, listID string) (*flagState, *flagList, error) {
	f, err := c.flag("flag_id", flagID)
	if err != nil {
		return nil, nil, err
	}
	c.listKind(kind)
	if listID == "" {
		c.Missing("list_id", "list_id is required (get_feature_flag_details lists the flag's lists with their ids)")
		return f, nil, nil
	}
	if f == nil || (kind != ListInclude && kind != ListExclude) {
		return f, nil, nil
	}
	if l, ok := f.list(kind, listID); ok {
		return f, &l, nil
	}
	if other, ok := f.anyList(listID); ok {
		c.AddValue("kind", kind, "list %s of flag %q is an %s list", listID, f.Name, other.Kind)
		return f, nil, nil
	}
	c.NotFound("list_id", "flag %q has no list %s; its lists: %s", f.Name, listID, listOrNone(listIDs(*f)))
	return f, nil, nil
}

func listIDs(f flagState) []string {
	var out []string
	for _, l := range append(append([]flagList(nil), f.Include...), f.Exclude...) {
		out = append(out, l.Kind+" "+l.ID)
	}
	return out
}

func validateUpdateList(c *Checker, p UpdateFeatureFlagListParams) error {
	f, l, err := c.flagListRef(p.FlagID, p.Kind, p.ListID)
	if err != nil || l == nil {
		return err
	}
	if p.Enabled == nil && p.Users == nil && p.Groups == nil && p.SegmentIDs == nil {
		c.Missing("fields", "name what changes: enabled, users, groups or segment_ids")
		return nil
	}
	n := p.apply(*l)
	c.oneKind("members", n.Members)
	return c.members("", n.Members, f.Context, "")
}

func planUpdateList(b *Planner, p UpdateFeatureFlagListParams) error {
	f, d, err := b.flagAndSegments(p.FlagID)
	if err != nil {
		return err
	}
	l, ok := f.list(p.Kind, p.ListID)
	if !ok {
		return fmt.Errorf("feature flag %q has no %s list %s", f.Name, p.Kind, p.ListID)
	}
	n := p.apply(l)
	b.Line("Update the %s list %s of feature flag %s:", p.Kind, l.ID, flagHeader(f))
	if n.Enabled != l.Enabled {
		b.Line("  enabled: %t -> %t", l.Enabled, n.Enabled)
	}
	b.Line("  Members:")
	fmtDiff(b, diffMembers(l.Members, n.Members), d)
	b.Line("  The list after the change: %s", fmtList(n, d))
	reachChange(b, f, f.withList(n), d)
	if sameMembers(l.Members, n.Members) && l.Enabled == n.Enabled {
		b.Warn("nothing would change")
	}
	return nil
}

func executeUpdateList(ctx context.Context, env Env, p UpdateFeatureFlagListParams, _ string) (Outcome, error) {
	cur, err := readFlag(ctx, env.API, p.FlagID)
	if err != nil {
		return Outcome{}, err
	}
	l, ok := cur.list(p.Kind, p.ListID)
	if !ok {
		return Outcome{}, fmt.Errorf("feature flag %q has no %s list %s any more", cur.Name, p.Kind, p.ListID)
	}
	n := p.apply(l)
	if _, err := env.API.UpdateFlagList(ctx, upgradeKind(p.Kind), listInput(cur, p.Kind, l.ID, n.Enabled, n.Members)); err != nil {
		return Outcome{}, err
	}
	want := cur.withList(n)
	held, err := holdFlag(ctx, env.API, want)
	if err != nil {
		return Outcome{}, fmt.Errorf("the %s list %s of feature flag %q was written, but %w", p.Kind, l.ID, cur.Name, err)
	}
	got, _ := held.list(p.Kind, l.ID)
	return Result(listActionResult{Flag: flagResult(held), Kind: p.Kind, List: listResult(got), Action: "updated"}.withReach(ctx, env.API, held))
}

func reconcileUpdateList(ctx context.Context, env Env, p UpdateFeatureFlagListParams, _ string, _ time.Time) (Reconciliation, error) {
	f, gone, err := reconcileFlag(ctx, env, p.FlagID, string(UpdateFeatureFlagList))
	if err != nil || gone != nil {
		return derefRec(gone), err
	}
	l, ok := f.list(p.Kind, p.ListID)
	if !ok {
		return Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("feature flag %q no longer has %s list %s", f.Name, p.Kind, p.ListID)}, nil
	}
	n := p.apply(l)
	if n.Enabled != l.Enabled || !sameMembers(n.Members, l.Members) {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("the %s list %s of feature flag %q does not have the new members yet: the update did not happen", p.Kind, l.ID, f.Name)}, nil
	}
	raw, err := Result(listActionResult{Flag: flagResult(f), Kind: p.Kind, List: listResult(l), Action: "updated"})
	return Reconciliation{Outcome: OutcomeDone, Result: raw.Result, Note: fmt.Sprintf("the %s list %s of feature flag %q already holds what was approved", p.Kind, l.ID, f.Name)}, err
}
