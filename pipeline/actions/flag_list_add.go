package actions

import (
	"context"
	"fmt"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// AddFeatureFlagList is the name of the add_feature_flag_list action.
const AddFeatureFlagList Name = "add_feature_flag_list"

// AddFeatureFlagListParams are the params of add_feature_flag_list: the
// members flat, exactly one kind of them.
type AddFeatureFlagListParams struct {
	FlagID     string       `json:"flag_id" jsonschema:"id of the flag (a key or name is resolved)" ref:"feature_flag"`
	Kind       string       `json:"kind" jsonschema:"include (who gets the flag) or exclude (who never gets it)"`
	Enabled    *bool        `json:"enabled,omitempty" jsonschema:"whether the list counts (default true)"`
	Users      []string     `json:"users,omitempty" jsonschema:"user ids"`
	Groups     []GroupParam `json:"groups,omitempty" jsonschema:"groups (type and group_id)"`
	SegmentIDs []string     `json:"segment_ids,omitempty" jsonschema:"ids of public segments of the flag's context (names are resolved)" ref:"segment"`
}

// Action implements Params.
func (AddFeatureFlagListParams) Action() Name { return AddFeatureFlagList }

func (p AddFeatureFlagListParams) canonical() AddFeatureFlagListParams {
	l := normFlagList(FlagListParam{Enabled: p.Enabled, Users: p.Users, Groups: p.Groups, SegmentIDs: p.SegmentIDs})
	return AddFeatureFlagListParams{FlagID: idValue(p.FlagID), Kind: listKindValue(p.Kind), Enabled: l.Enabled,
		Users: l.Users, Groups: l.Groups, SegmentIDs: l.SegmentIDs}
}

func (p AddFeatureFlagListParams) members() memberSet {
	return memberSet{Users: p.Users, Groups: p.Groups, Segments: p.SegmentIDs}.sorted()
}

// declareFlagListAdd declares this file's action in r.
func declareFlagListAdd(r *Registry) {
	Add(r, Def[AddFeatureFlagListParams]{
		Name: AddFeatureFlagList, Order: 150, Invalidates: []Cache{CacheFlags},
		Object:      ObjectFeatureFlag,
		Description: "Add an include or exclude list to a feature flag: users, groups or public segments (one kind per list).",
		Note:        "kind include or exclude; one of users, groups, segment_ids",
		Canonical:   AddFeatureFlagListParams.canonical,
		Validate: func(c *Checker, p AddFeatureFlagListParams) error {
			f, err := c.flag("flag_id", p.FlagID)
			if err != nil {
				return err
			}
			c.listKind(p.Kind)
			m := p.members()
			c.oneKind("members", m)
			if f == nil {
				return nil
			}
			return c.members("", m, f.Context, "")
		},
		Plan:      planAddList,
		Execute:   executeAddList,
		Reconcile: reconcileAddList,
		Report:    ReportAs(reportList),
	})
}

func (c *Checker) listKind(kind string) {
	switch kind {
	case "":
		c.Missing("kind", "kind is required: include (who gets the flag) or exclude (who never gets it)")
	case ListInclude, ListExclude:
	default:
		c.AddValue("kind", kind, "unknown list kind; use include or exclude")
	}
}

func planAddList(b *Planner, p AddFeatureFlagListParams) error {
	f, d, err := b.flagAndSegments(p.FlagID)
	if err != nil {
		return err
	}
	l := flagList{Kind: p.Kind, Enabled: enabledOf(FlagListParam{Enabled: p.Enabled}), Members: p.members()}
	b.Line("Add an %s list to feature flag %s:", p.Kind, flagHeader(f))
	b.Line("  %s", fmtList(l, d))
	n := f
	if p.Kind == ListExclude {
		n.Exclude = append(append([]flagList(nil), f.Exclude...), l)
	} else {
		n.Include = append(append([]flagList(nil), f.Include...), l)
	}
	reachChange(b, f, n, d)
	if p.Kind == ListInclude && f.FilterMode == FlagIncludeAll {
		b.Warn("the flag's filter mode is includeAll: it already reaches everyone not excluded, so an include list changes nobody's result")
	}
	return nil
}

// reachChange shows whom the flag reaches before and after a change.
func reachChange(b *Planner, cur, next flagState, d *segDir) {
	before, after := reach(cur, d), reach(next, d)
	if before == after {
		b.Line("Who gets it (unchanged): %s.", after)
	} else {
		b.Line("Who gets it now: %s.", before)
		b.Line("After the change: %s.", after)
	}
	reachWarnings(b, next)
}

// listResultOf is the result of a list action: the list and the flag.
type listActionResult struct {
	Flag   FlagResult `json:"flag"`
	Kind   string     `json:"kind"`
	List   ListResult `json:"list"`
	Action string     `json:"action"` // added, updated, removed
	Reach  string     `json:"reach,omitempty"`
}

// withReach adds whom the flag reaches now to a list action's result.
func (r listActionResult) withReach(ctx context.Context, api SegmentReader, f flagState) listActionResult {
	if d, err := readSegments(ctx, api); err == nil {
		r.Reach = reach(f, d)
	}
	return r
}

func reportList(r listActionResult) string {
	how := map[string]string{"added": "Added %s list %s to", "updated": "Updated %s list %s of", "removed": "Removed %s list %s from"}[r.Action]
	if how == "" {
		how = "Changed %s list %s of"
	}
	s := fmt.Sprintf(how+" feature flag %q (key %s). It now has %s and %s.", r.Kind, r.List.ID, r.Flag.Name, r.Flag.Key,
		plural(len(r.Flag.IncludeLists), "include list", "include lists"), plural(len(r.Flag.ExcludeLists), "exclude list", "exclude lists"))
	if r.Reach != "" {
		s += " Who gets it: " + r.Reach + "."
	}
	return s
}

// addListID is the id an added list gets: derived from the approved
// confirmation, so a repeat after a crash finds the list it added.
func addListID(key string) string {
	if key == "" {
		return ""
	}
	return upgrade.IDFrom(key + "/list")
}

func executeAddList(ctx context.Context, env Env, p AddFeatureFlagListParams, key string) (Outcome, error) {
	cur, err := readFlag(ctx, env.API, p.FlagID)
	if err != nil {
		return Outcome{}, err
	}
	id := addListID(key)
	l := flagList{ID: id, Kind: p.Kind, Enabled: enabledOf(FlagListParam{Enabled: p.Enabled}), Members: p.members()}
	want := cur
	if _, done := cur.anyList(id); id == "" || !done {
		out, err := env.API.AddFlagList(ctx, upgradeKind(p.Kind), listInput(cur, p.Kind, id, l.Enabled, l.Members))
		if err != nil {
			return Outcome{}, err
		}
		if out.ID() != "" {
			l.ID = out.ID()
		}
		if p.Kind == ListExclude {
			want.Exclude = append(append([]flagList(nil), cur.Exclude...), l)
		} else {
			want.Include = append(append([]flagList(nil), cur.Include...), l)
		}
	}
	held, err := holdFlag(ctx, env.API, want)
	if err != nil {
		return Outcome{}, fmt.Errorf("the %s list was added to feature flag %q, but %w", p.Kind, cur.Name, err)
	}
	got, _ := held.list(p.Kind, l.ID)
	if got.ID == "" {
		got = l
	}
	return Result(listActionResult{Flag: flagResult(held), Kind: p.Kind, List: listResult(got), Action: "added"}.withReach(ctx, env.API, held))
}

func reconcileAddList(ctx context.Context, env Env, p AddFeatureFlagListParams, key string, startedAt time.Time) (Reconciliation, error) {
	f, gone, err := reconcileFlag(ctx, env, p.FlagID, string(AddFeatureFlagList))
	if err != nil || gone != nil {
		return derefRec(gone), err
	}
	done := func(l flagList, how string) (Reconciliation, error) {
		raw, err := Result(listActionResult{Flag: flagResult(f), Kind: p.Kind, List: listResult(l), Action: "added"})
		return Reconciliation{Outcome: OutcomeDone, Result: raw.Result, Note: fmt.Sprintf("feature flag %q has the list (%s): the add happened", f.Name, how)}, err
	}
	if id := addListID(key); id != "" {
		if l, ok := f.list(p.Kind, id); ok {
			return done(l, "under the id this confirmation gives it")
		}
	}
	for _, l := range f.lists(p.Kind) {
		created, perr := time.Parse(time.RFC3339, l.CreatedAt)
		if perr == nil && !created.Before(startedAt.Add(-time.Second)) && sameMembers(l.Members, p.members()) {
			return done(l, "with these members, made after the action started")
		}
	}
	return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("feature flag %q has no such %s list: the add did not happen", f.Name, p.Kind)}, nil
}
