package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// CreateFeatureFlag is the name of the create_feature_flag action.
const CreateFeatureFlag Name = "create_feature_flag"

// CreateFeatureFlagParams are the params of create_feature_flag. Status
// defaults to disabled and filter mode to excludeAll, as in UpGrade's web
// UI: a new flag reaches nobody until it is enabled and given an include
// list.
type CreateFeatureFlagParams struct {
	Name         string          `json:"name" jsonschema:"flag name"`
	Key          string          `json:"key" jsonschema:"the key client applications ask for, unique in the context"`
	Context      string          `json:"context" jsonschema:"app context, one of the context metadata's keys"`
	Description  string          `json:"description,omitempty"`
	Tags         []string        `json:"tags,omitempty"`
	Status       string          `json:"status,omitempty" jsonschema:"enabled, disabled (default) or archived"`
	FilterMode   string          `json:"filter_mode,omitempty" jsonschema:"excludeAll (default: nobody but the included) or includeAll (everyone but the excluded)"`
	IncludeLists []FlagListParam `json:"include_lists,omitempty" jsonschema:"lists of who gets the flag; each list holds exactly one of users, groups, segment_ids"`
	ExcludeLists []FlagListParam `json:"exclude_lists,omitempty" jsonschema:"lists of who never gets it (exclusion wins)"`
}

// Action implements Params.
func (CreateFeatureFlagParams) Action() Name { return CreateFeatureFlag }

func (p CreateFeatureFlagParams) canonical() CreateFeatureFlagParams {
	c := CreateFeatureFlagParams{
		Name: strings.TrimSpace(p.Name), Key: strings.TrimSpace(p.Key), Context: strings.TrimSpace(p.Context),
		Description: strings.TrimSpace(p.Description), Tags: trimList(p.Tags),
		Status: flagStatusValue(p.Status), FilterMode: upgrade.FilterModeOf(p.FilterMode),
		IncludeLists: normFlagLists(p.IncludeLists), ExcludeLists: normFlagLists(p.ExcludeLists),
	}
	if c.Status == "" {
		c.Status = FlagDisabled
	}
	if c.FilterMode == "" {
		c.FilterMode = FlagExcludeAll
	}
	return c
}

// declareFlagCreate declares this file's action in r.
func declareFlagCreate(r *Registry) {
	Add(r, Def[CreateFeatureFlagParams]{
		Name: CreateFeatureFlag, Order: 110, Invalidates: []Cache{CacheFlags},
		Object:      ObjectFeatureFlag,
		Description: "Create a feature flag in an app context (disabled and excludeAll unless given), with its include and exclude lists.",
		Canonical:   CreateFeatureFlagParams.canonical,
		Validate:    validateCreateFlag,
		Plan:        planCreateFlag,
		Execute:     executeCreateFlag,
		Reconcile:   reconcileCreateFlag,
		Report:      ReportAs(reportFlag("Created")),
	})
}

// flagRules checks the fields a flag's create and update share.
func (c *Checker) flagRules(name, key, appContext, status, mode string, selfID string, checkKey bool) error {
	if name == "" {
		c.Missing("name", "name is required")
	}
	if key == "" {
		c.Missing("key", "key is required (the name client applications ask for, such as MATH_HINTS)")
	}
	if _, _, err := c.context(appContext); err != nil {
		return err
	}
	if status != "" && !slices.Contains(upgrade.FlagStatuses(), status) {
		c.AddValue("status", status, "unknown status; use enabled, disabled or archived")
	}
	if mode != "" && !slices.Contains(upgrade.FilterModes(), mode) {
		c.AddValue("filter_mode", mode, "unknown filter mode; use excludeAll (nobody but the included) or includeAll (everyone but the excluded)")
	}
	if !checkKey || key == "" || appContext == "" {
		return nil
	}
	all, err := c.api.Flags(c.ctx)
	if err != nil {
		return fmt.Errorf("reading feature flags: %w", err)
	}
	for _, f := range all {
		if f.ID != selfID && f.Key == key && slices.Equal(f.Context, []string{appContext}) {
			c.Add("key", "feature flag %q (id %s) already has key %s in context %s; keys are unique per context: choose another key or change that flag", f.Name, f.ID, key, appContext)
		}
	}
	return nil
}

// lists checks the include or exclude lists of a create.
func (c *Checker) flagLists(field string, ls []FlagListParam, appContext string) error {
	for i, l := range ls {
		f := fmt.Sprintf("%s[%d]", field, i)
		m := l.members()
		c.oneKind(f, m)
		if err := c.members(f, m, appContext, ""); err != nil {
			return err
		}
	}
	return nil
}

func validateCreateFlag(c *Checker, p CreateFeatureFlagParams) error {
	if err := c.flagRules(p.Name, p.Key, p.Context, p.Status, p.FilterMode, "", true); err != nil {
		return err
	}
	if err := c.flagLists("include_lists", p.IncludeLists, p.Context); err != nil {
		return err
	}
	return c.flagLists("exclude_lists", p.ExcludeLists, p.Context)
}

// stateOfCreate is the flag a create makes, as the plan shows it.
func stateOfCreate(p CreateFeatureFlagParams) flagState {
	f := flagState{Name: p.Name, Key: p.Key, Context: p.Context, Contexts: []string{p.Context}, Status: p.Status,
		FilterMode: p.FilterMode, Description: p.Description, Tags: p.Tags}
	for _, l := range p.IncludeLists {
		f.Include = append(f.Include, flagList{Kind: ListInclude, Enabled: enabledOf(l), Members: l.members()})
	}
	for _, l := range p.ExcludeLists {
		f.Exclude = append(f.Exclude, flagList{Kind: ListExclude, Enabled: enabledOf(l), Members: l.members()})
	}
	return f
}

func planCreateFlag(b *Planner, p CreateFeatureFlagParams) error {
	d, err := readSegments(b.ctx, b.api)
	if err != nil {
		return err
	}
	f := stateOfCreate(p)
	b.Line("Create feature flag %s with key %s in context %s.", quote(p.Name), quote(p.Key), ident(p.Context))
	b.Line("  Status: %s", p.Status)
	b.Line("  Filter mode: %s", fmtFilterMode(p.FilterMode))
	listLines(b, "Include lists", f.Include, d)
	listLines(b, "Exclude lists", f.Exclude, d)
	if p.Description != "" {
		b.Line("  Description: %s", quote(p.Description))
	}
	if len(p.Tags) > 0 {
		b.Line("  Tags: %s", fmtUsers(p.Tags))
	}
	b.Line("Who gets it: %s.", reach(f, d))
	reachWarnings(b, f)
	return keyCaseWarning(b, p.Key, p.Context, "")
}

// keyCaseWarning warns about a flag whose key differs only in case: the
// client asks by exact key, so the two are easy to confuse.
func keyCaseWarning(b *Planner, key, appContext, selfID string) error {
	all, err := b.api.Flags(b.ctx)
	if err != nil {
		return fmt.Errorf("reading feature flags: %w", err)
	}
	for _, f := range all {
		if f.ID != selfID && f.Key != key && strings.EqualFold(f.Key, key) && f.HasContext(appContext) {
			b.Warn("flag %s has key %s, which differs only in case; clients ask by the exact key", quote(f.Name), quote(f.Key))
		}
	}
	return nil
}

func fmtFilterMode(m string) string {
	switch m {
	case FlagIncludeAll:
		return "includeAll (everyone in the context except the excluded)"
	case FlagExcludeAll:
		return "excludeAll (nobody except the included, minus the excluded)"
	}
	return identOrNone(m)
}

// FlagResult is the compact form of a flag in action results.
type FlagResult struct {
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	Key          string       `json:"key"`
	Context      string       `json:"context"`
	Status       string       `json:"status"`
	FilterMode   string       `json:"filter_mode"`
	IncludeLists []ListResult `json:"include_lists"`
	ExcludeLists []ListResult `json:"exclude_lists"`
}

// ListResult is one list of a flag in results.
type ListResult struct {
	ID         string       `json:"id"`
	Enabled    bool         `json:"enabled"`
	Users      []string     `json:"users,omitempty"`
	Groups     []GroupParam `json:"groups,omitempty"`
	SegmentIDs []string     `json:"segment_ids,omitempty"`
}

func flagResult(f flagState) FlagResult {
	r := FlagResult{ID: f.ID, Name: f.Name, Key: f.Key, Context: f.Context, Status: f.Status, FilterMode: f.FilterMode,
		IncludeLists: []ListResult{}, ExcludeLists: []ListResult{}}
	for _, l := range f.Include {
		r.IncludeLists = append(r.IncludeLists, listResult(l))
	}
	for _, l := range f.Exclude {
		r.ExcludeLists = append(r.ExcludeLists, listResult(l))
	}
	return r
}

func listResult(l flagList) ListResult {
	return ListResult{ID: l.ID, Enabled: l.Enabled, Users: l.Members.Users, Groups: l.Members.Groups, SegmentIDs: l.Members.Segments}
}

func reportFlag(verb string) func(FlagResult) string {
	return func(r FlagResult) string {
		s := fmt.Sprintf("%s feature flag %q (key %s, id %s) in context %s: %s, filter mode %s, %s and %s.",
			verb, r.Name, r.Key, r.ID, r.Context, r.Status, r.FilterMode,
			plural(len(r.IncludeLists), "include list", "include lists"), plural(len(r.ExcludeLists), "exclude list", "exclude lists"))
		return s
	}
}

// flagBodyOf is the flag to send for the fields of f.
func flagBodyOf(f flagState) *upgrade.FeatureFlag {
	ctxs := f.Contexts
	if len(ctxs) == 0 || ctxs[0] != f.Context {
		ctxs = []string{f.Context}
	}
	return &upgrade.FeatureFlag{ID: f.ID, Name: f.Name, Key: f.Key, Description: f.Description, Context: slices.Clone(ctxs),
		Tags: nonNilList(f.Tags), Status: f.Status, FilterMode: f.FilterMode}
}

// flagDiffs lists what the server's flag lacks of the approved one: the
// fields, and the lists (matched by kind, members and enabled, in order).
func flagDiffs(want, got flagState) []string {
	var out []string
	field := func(name, w, g string) {
		if w != g {
			out = append(out, fmt.Sprintf("%s: %s, approved %s", name, quoteOrNone(g), quoteOrNone(w)))
		}
	}
	field("name", want.Name, got.Name)
	field("key", want.Key, got.Key)
	field("context", want.Context, got.Context)
	field("status", want.Status, got.Status)
	field("filter_mode", want.FilterMode, got.FilterMode)
	field("description", want.Description, got.Description)
	field("tags", fmtUsers(want.Tags), fmtUsers(got.Tags))
	for _, kind := range []string{ListInclude, ListExclude} {
		if missing := missingLists(want.lists(kind), got.lists(kind)); len(missing) > 0 {
			out = append(out, fmt.Sprintf("%s lists: %d of the approved lists are not on the server", kind, len(missing)))
		}
		if extra := missingLists(got.lists(kind), want.lists(kind)); len(extra) > 0 {
			out = append(out, fmt.Sprintf("%s lists: %d lists on the server were not approved", kind, len(extra)))
		}
	}
	return out
}

// missingLists lists the lists of want that got has no match for (same
// enabled flag and members; each list of got matches once).
func missingLists(want, got []flagList) []flagList {
	used := make([]bool, len(got))
	var out []flagList
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && g.Enabled == w.Enabled && sameMembers(g.Members, w.Members) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

func executeCreateFlag(ctx context.Context, env Env, p CreateFeatureFlagParams, key string) (Outcome, error) {
	want := stateOfCreate(p)
	// A flag with this key in this context is this confirmation's flag,
	// made by an earlier attempt (validation refused a twin): never make a
	// second one, complete the first.
	existing, err := flagByKey(ctx, env.API, p.Key, p.Context)
	if err != nil {
		return Outcome{}, err
	}
	id := ""
	if existing != nil {
		id = existing.ID
	} else {
		out, err := env.API.CreateFlag(ctx, flagBodyOf(want))
		if err != nil {
			return Outcome{}, err
		}
		id = out.ID
	}
	want.ID = id
	if key != "" {
		// Each list's id derives from the confirmation, so a repeat after
		// a crash can recognise the lists it added.
		for i := range want.Include {
			want.Include[i].ID = upgrade.IDFrom(fmt.Sprintf("%s/include/%d", key, i))
		}
		for i := range want.Exclude {
			want.Exclude[i].ID = upgrade.IDFrom(fmt.Sprintf("%s/exclude/%d", key, i))
		}
	}
	held, err := holdFlag(ctx, env.API, want)
	if err != nil {
		return Outcome{}, fmt.Errorf("feature flag %q was created (id %s), but %w", p.Name, id, err)
	}
	return Result(flagResult(held))
}

// flagByKey finds the flag with this exact key and context; nil if none.
func flagByKey(ctx context.Context, api FlagAPI, key, appContext string) (*upgrade.FeatureFlag, error) {
	all, err := api.Flags(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading feature flags: %w", err)
	}
	for i := range all {
		if all[i].Key == key && slices.Equal(all[i].Context, []string{appContext}) {
			return &all[i], nil
		}
	}
	return nil, nil
}

// holdFlag makes the server hold flag want (fields and lists) after a
// write: it reads the flag back, adds the lists it lacks, sets a status or filter mode it did not
// keep, reads again and compares. A difference left is an error that names
// it, never a success.
func holdFlag(ctx context.Context, api FlagAPI, want flagState) (flagState, error) {
	for attempt := 0; ; attempt++ {
		got, err := readFlag(ctx, api, want.ID)
		if err != nil {
			return flagState{}, fmt.Errorf("reading it back failed: %w", err)
		}
		diffs := flagDiffs(want, got)
		if len(diffs) == 0 {
			return got, nil
		}
		if attempt > 0 {
			return got, fmt.Errorf("the server does not hold what was approved (%s)", strings.Join(diffs, "; "))
		}
		if err := repairFlag(ctx, api, want, got); err != nil {
			return got, fmt.Errorf("the server does not hold what was approved (%s), and the write that sets it failed: %w", strings.Join(diffs, "; "), err)
		}
	}
}

func repairFlag(ctx context.Context, api FlagAPI, want, got flagState) error {
	if want.Name != got.Name || want.Key != got.Key || want.Description != got.Description || fmtUsers(want.Tags) != fmtUsers(got.Tags) || want.Context != got.Context {
		if _, err := api.UpdateFlag(ctx, flagBodyOf(want)); err != nil {
			return err
		}
	}
	if want.Status != got.Status {
		if _, err := api.SetFlagStatus(ctx, want.ID, want.Status); err != nil {
			return err
		}
	}
	if want.FilterMode != got.FilterMode {
		if _, err := api.SetFlagFilterMode(ctx, want.ID, want.FilterMode); err != nil {
			return err
		}
	}
	for _, kind := range []string{ListInclude, ListExclude} {
		for _, l := range missingLists(want.lists(kind), got.lists(kind)) {
			if _, err := api.AddFlagList(ctx, upgradeKind(kind), listInput(want, kind, l.ID, l.Enabled, l.Members)); err != nil {
				return fmt.Errorf("adding %s list %s: %w", kind, fmtMembers(l.Members, &segDir{}), err)
			}
		}
	}
	return nil
}

func reconcileCreateFlag(ctx context.Context, env Env, p CreateFeatureFlagParams, _ string, startedAt time.Time) (Reconciliation, error) {
	f, err := flagByKey(ctx, env.API, p.Key, p.Context)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile create_feature_flag: %w", err)
	}
	if f == nil {
		return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("no feature flag has key %s in context %s: the create did not happen", p.Key, p.Context)}, nil
	}
	got, err := readFlag(ctx, env.API, f.ID)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile create_feature_flag: %w", err)
	}
	want := stateOfCreate(p)
	want.ID = f.ID
	created, perr := time.Parse(time.RFC3339, f.CreatedAt)
	if perr == nil && created.Before(startedAt.Add(-time.Second)) {
		return Reconciliation{Outcome: OutcomeUnknown,
			Note: fmt.Sprintf("feature flag %q (id %s) has key %s, but it existed before this action started: someone else made it", f.Name, f.ID, p.Key)}, nil
	}
	if diffs := flagDiffs(want, got); len(diffs) > 0 {
		return Reconciliation{Outcome: OutcomeUnknown,
			Note: fmt.Sprintf("feature flag %q (id %s) was created, but it differs from what was approved (%s)", f.Name, f.ID, strings.Join(diffs, "; "))}, nil
	}
	raw, err := Result(flagResult(got))
	return Reconciliation{Outcome: OutcomeDone, Result: raw.Result,
		Note: fmt.Sprintf("feature flag %q exists with key %s (id %s): the create happened", got.Name, got.Key, got.ID)}, err
}
