package actions

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
)

// The gatherer's feature flag and segment lookups read through here, so
// that what a lookup shows and what a plan shows come from one reading of
// the server (segments named the same way, usage found the same way).

// FlagSummary is one flag in a list.
type FlagSummary struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Key        string `json:"key"`
	Context    string `json:"context"`
	Status     string `json:"status"`
	FilterMode string `json:"filter_mode"`
	UpdatedAt  string `json:"updated_at,omitempty"`
}

// SegmentRef names a segment.
type SegmentRef struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// ListView is one list of a flag with its members, segments by name.
type ListView struct {
	ID       string       `json:"id"`
	Enabled  bool         `json:"enabled"`
	Users    []string     `json:"users,omitempty"`
	Groups   []GroupParam `json:"groups,omitempty"`
	Segments []SegmentRef `json:"segments,omitempty"`
}

// FlagDetails is a flag with its lists and whom it reaches.
type FlagDetails struct {
	FlagSummary
	Description  string     `json:"description,omitempty"`
	Tags         []string   `json:"tags,omitempty"`
	IncludeLists []ListView `json:"include_lists"`
	ExcludeLists []ListView `json:"exclude_lists"`
	Reaches      string     `json:"reaches"`
}

// SegmentSummary is one public segment in a list.
type SegmentSummary struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Context  string `json:"context"`
	Status   string `json:"status,omitempty"`
	Users    int    `json:"users"`
	Groups   int    `json:"groups"`
	Segments int    `json:"segments"`
	UsedBy   int    `json:"used_by"`
}

// UsageView is one flag or experiment that uses a segment.
type UsageView struct {
	Kind    string `json:"kind"` // flag, experiment
	ID      string `json:"id"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	List    string `json:"list"` // include, exclude
	Enabled bool   `json:"enabled"`
	Via     string `json:"via,omitempty"`
}

// SegmentDetails is a public segment with its members, sub-segments and
// where it is used.
type SegmentDetails struct {
	SegmentSummary
	Description string       `json:"description,omitempty"`
	Tags        []string     `json:"tags,omitempty"`
	UserIDs     []string     `json:"user_ids"`
	GroupList   []GroupParam `json:"group_list"`
	SubSegments []SegmentRef `json:"sub_segments"`
	Parents     []SegmentRef `json:"held_by_segments,omitempty"`
	Usage       []UsageView  `json:"used_by_lists"`
}

func summaryOf(f upgrade.FeatureFlag) FlagSummary {
	return FlagSummary{ID: f.ID, Name: f.Name, Key: f.Key, Context: strings.Join(f.Context, ","), Status: f.Status, FilterMode: f.FilterMode, UpdatedAt: f.UpdatedAt}
}

// ListFlags lists the flags, filtered by context, status and a part of
// the key (any case), sorted by key.
func ListFlags(ctx context.Context, api API, appContext, status, key string) ([]FlagSummary, error) {
	all, err := api.Flags(ctx)
	if err != nil {
		return nil, err
	}
	status, key = flagStatusValue(status), strings.ToLower(strings.TrimSpace(key))
	appContext = strings.TrimSpace(appContext)
	out := []FlagSummary{}
	for _, f := range all {
		switch {
		case appContext != "" && !f.HasContext(appContext):
		case status != "" && f.Status != status:
		case key != "" && !strings.Contains(strings.ToLower(f.Key), key):
		default:
			out = append(out, summaryOf(f))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// FlagMatch is a flag found by key or name.
type FlagMatch struct {
	FlagSummary
	Match string `json:"match"` // exact_key, key, exact_name, prefix, contains
}

// FindFlags ranks the flags against a key or name: exact key, key in any
// case, exact name, prefix, substring.
func FindFlags(ctx context.Context, api API, q string, limit int) ([]FlagMatch, error) {
	all, err := api.Flags(ctx)
	if err != nil {
		return nil, err
	}
	q = strings.TrimSpace(q)
	ql := strings.ToLower(q)
	type scored struct {
		m     FlagMatch
		score int
	}
	var found []scored
	for _, f := range all {
		kl, nl := strings.ToLower(f.Key), strings.ToLower(f.Name)
		s := summaryOf(f)
		switch {
		case f.ID == idValue(q) || f.Key == q:
			found = append(found, scored{FlagMatch{s, "exact_key"}, 0})
		case kl == ql:
			found = append(found, scored{FlagMatch{s, "key"}, 1})
		case nl == ql:
			found = append(found, scored{FlagMatch{s, "exact_name"}, 2})
		case strings.HasPrefix(kl, ql) || strings.HasPrefix(nl, ql):
			found = append(found, scored{FlagMatch{s, "prefix"}, 3})
		case strings.Contains(kl, ql) || strings.Contains(nl, ql) ||
			strings.Contains(strings.ReplaceAll(kl, "_", " "), ql):
			found = append(found, scored{FlagMatch{s, "contains"}, 4})
		}
	}
	sort.SliceStable(found, func(i, j int) bool {
		if found[i].score != found[j].score {
			return found[i].score < found[j].score
		}
		return found[i].m.Key < found[j].m.Key
	})
	out := []FlagMatch{}
	for i := 0; i < len(found) && i < limit; i++ {
		out = append(out, found[i].m)
	}
	return out, nil
}

// UniqueFlag is the one flag matches mean: the only one, or the only
// exact one.
func UniqueFlag(ms []FlagMatch) (FlagMatch, bool) {
	if len(ms) == 1 {
		return ms[0], true
	}
	if len(ms) > 1 && ms[0].Match != ms[1].Match && (ms[0].Match == "exact_key" || ms[0].Match == "key" || ms[0].Match == "exact_name") {
		return ms[0], true
	}
	return FlagMatch{}, false
}

// ResolveFlagID turns a flag id, key or name into the flag's id.
func ResolveFlagID(ctx context.Context, api API, ref string) (string, error) {
	r := &refResolver{ctx: ctx, api: api}
	f, err := r.flag(ref)
	if err != nil {
		return "", err
	}
	if f == nil {
		return "", fmt.Errorf("no feature flag with id %s", ref)
	}
	return f.ID, nil
}

// ResolveSegmentID turns a segment id or name into the segment's id.
func ResolveSegmentID(ctx context.Context, api API, ref string) (string, error) {
	if upgrade.IsUUID(strings.TrimSpace(ref)) {
		return idValue(ref), nil
	}
	r := &refResolver{ctx: ctx, api: api}
	s, err := r.segment(ref, "")
	if err != nil {
		return "", err
	}
	return s.ID, nil
}

func listView(l flagList, d *segDir) ListView {
	v := ListView{ID: l.ID, Enabled: l.Enabled, Users: l.Members.Users, Groups: l.Members.Groups}
	for _, id := range l.Members.Segments {
		v.Segments = append(v.Segments, segRef(id, d))
	}
	return v
}

func segRef(id string, d *segDir) SegmentRef {
	r := SegmentRef{ID: id}
	if s, ok := d.get(id); ok {
		r.Name = s.Name
	}
	return r
}

// DescribeFlag reads a flag with its lists, members resolved to names.
func DescribeFlag(ctx context.Context, api API, id string) (FlagDetails, error) {
	f, err := api.Flag(ctx, id)
	if err != nil {
		return FlagDetails{}, err
	}
	d, err := readSegments(ctx, api)
	if err != nil {
		return FlagDetails{}, err
	}
	s := flagStateOf(f)
	out := FlagDetails{FlagSummary: summaryOf(*f), Description: f.Description, Tags: s.Tags,
		IncludeLists: []ListView{}, ExcludeLists: []ListView{}, Reaches: reach(s, d)}
	for _, l := range s.Include {
		out.IncludeLists = append(out.IncludeLists, listView(l, d))
	}
	for _, l := range s.Exclude {
		out.ExcludeLists = append(out.ExcludeLists, listView(l, d))
	}
	return out, nil
}

func segSummary(s segInfo, d *segDir) SegmentSummary {
	return SegmentSummary{ID: s.ID, Name: s.Name, Context: s.Context, Status: s.Status, Users: len(s.Members.Users),
		Groups: len(s.Members.Groups), Segments: len(s.Members.Segments), UsedBy: len(d.usages(s.ID))}
}

// ListSegments lists the public segments, of one context when given,
// sorted by name.
func ListSegments(ctx context.Context, api API, appContext string) ([]SegmentSummary, error) {
	d, err := readSegments(ctx, api)
	if err != nil {
		return nil, err
	}
	out := []SegmentSummary{}
	for _, id := range d.order {
		s := d.byID[id]
		if appContext != "" && s.Context != strings.TrimSpace(appContext) {
			continue
		}
		out = append(out, segSummary(s, d))
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.ToLower(out[i].Name) < strings.ToLower(out[j].Name) })
	return out, nil
}

// FindSegments ranks the public segments against a name: exact (any
// case), prefix, substring.
func FindSegments(ctx context.Context, api API, q string, limit int) ([]SegmentSummary, []string, error) {
	d, err := readSegments(ctx, api)
	if err != nil {
		return nil, nil, err
	}
	ql := strings.ToLower(strings.TrimSpace(q))
	var out []SegmentSummary
	var how []string
	for _, rank := range []string{"exact", "prefix", "contains"} {
		for _, id := range d.order {
			s := d.byID[id]
			nl := strings.ToLower(s.Name)
			ok := rank == "exact" && nl == ql || rank == "prefix" && nl != ql && strings.HasPrefix(nl, ql) ||
				rank == "contains" && !strings.HasPrefix(nl, ql) && strings.Contains(nl, ql)
			if ok && len(out) < limit {
				out = append(out, segSummary(s, d))
				how = append(how, rank)
			}
		}
	}
	if out == nil {
		out = []SegmentSummary{}
	}
	return out, how, nil
}

// DescribeSegment reads a public segment with its members, sub-segments by
// name, the segments that hold it and the flags and experiments using it.
func DescribeSegment(ctx context.Context, api API, id string) (SegmentDetails, error) {
	d, err := readSegments(ctx, api)
	if err != nil {
		return SegmentDetails{}, err
	}
	s, ok := d.get(id)
	if !ok {
		rec, err := api.Segment(ctx, id) // not listed: the server says why
		if err != nil {
			return SegmentDetails{}, err
		}
		s = segInfoOf(rec)
	}
	out := SegmentDetails{SegmentSummary: segSummary(s, d), Description: s.Description, Tags: s.Tags,
		UserIDs: nonNilList(s.Members.Users), GroupList: append([]GroupParam{}, s.Members.Groups...), SubSegments: []SegmentRef{}, Usage: []UsageView{}}
	for _, sub := range s.Members.Segments {
		out.SubSegments = append(out.SubSegments, segRef(sub, d))
	}
	for _, p := range d.parents(s.ID) {
		out.Parents = append(out.Parents, SegmentRef{ID: p.ID, Name: p.Name})
	}
	for _, u := range d.usages(s.ID) {
		out.Usage = append(out.Usage, UsageView(u))
	}
	return out, nil
}

// ExplainFlag decides in Go whether flag id serves user userID with the
// given groups, by UpGrade's rules, and names the rule that decided. It
// reads the flag and the segments; it never asks the client API, so no
// exposure is recorded.
func ExplainFlag(ctx context.Context, api API, global func(context.Context) ([]upgrade.SegmentRecord, error), id, userID string, groups map[string][]string) (flageval.Result, error) {
	f, err := api.Flag(ctx, id)
	if err != nil {
		return flageval.Result{}, err
	}
	all, err := api.Segments(ctx)
	if err != nil {
		return flageval.Result{}, fmt.Errorf("reading segments: %w", err)
	}
	var globals []upgrade.SegmentRecord
	if global != nil {
		if globals, err = global(ctx); err != nil {
			return flageval.Result{}, fmt.Errorf("reading the global exclusion segments: %w", err)
		}
	}
	return flageval.Evaluate(flageval.Input{Flag: f, User: flageval.User{ID: strings.TrimSpace(userID), Groups: normGroupMap(groups)},
		Segments: flageval.NewSegments(all.Segments...), GlobalExclude: globals}), nil
}
