package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The gatherer's flag and segment lookups show the shapes of
// upgrade/readmodel (the one read model, shared with `flags` and
// `segments`); what is here is finding and resolving, with the same rules
// as the params' names (flag_refs.go).

// FlagMatch is a flag found by key or name.
type FlagMatch struct {
	ID      string   `json:"id"`
	Key     string   `json:"key"`
	Name    string   `json:"name"`
	Context []string `json:"context"`
	Status  string   `json:"status"`
	Match   string   `json:"match"` // upgrade.Match...: exact_key, key, exact, prefix, contains, fuzzy
}

// FindFlags ranks the flags against a key or name (upgrade.Catalog.Find):
// id or exact key, key in any case, name in any case, prefix, substring,
// a name a few edits away.
func FindFlags(flags []upgrade.FeatureFlag, q string, limit int) []FlagMatch {
	out := []FlagMatch{}
	for _, m := range (upgrade.Catalog{Kind: upgrade.KindFeatureFlag, Items: upgrade.FlagsNamed(flags)}).Find(q, limit) {
		i := slices.IndexFunc(flags, func(f upgrade.FeatureFlag) bool { return f.ID == m.ID })
		f := flags[i]
		out = append(out, FlagMatch{ID: f.ID, Key: f.Key, Name: f.Name, Context: f.Context, Status: f.Status, Match: m.How})
	}
	return out
}

// UniqueFlag is the one flag matches mean (upgrade.Unique): the only one,
// or the only one matched exactly by key or name.
func UniqueFlag(ms []FlagMatch) (FlagMatch, bool) {
	um := make([]upgrade.Match, len(ms))
	for i, m := range ms {
		um[i] = upgrade.Match{Named: upgrade.Named{ID: m.ID}, How: m.Match}
	}
	if len(um) == 0 {
		return FlagMatch{}, false
	}
	if u, ok := upgrade.Unique(um); ok {
		return ms[slices.IndexFunc(ms, func(m FlagMatch) bool { return m.ID == u.ID })], true
	}
	return FlagMatch{}, false
}

// FindSegments ranks the public segments against a name
// (upgrade.Catalog.Find). unique is true when one segment is meant.
func FindSegments(segs []upgrade.SegmentRecord, q string, limit int) (found []upgrade.SegmentRecord, unique bool) {
	public := slices.DeleteFunc(slices.Clone(segs), func(s upgrade.SegmentRecord) bool {
		return s.Type != "" && s.Type != upgrade.SegmentPublic
	})
	ms := upgrade.Catalog{Kind: upgrade.KindSegment, Items: upgrade.SegmentsNamed(public)}.Find(q, limit)
	for _, m := range ms {
		found = append(found, public[slices.IndexFunc(public, func(s upgrade.SegmentRecord) bool { return s.ID == m.ID })])
	}
	if len(ms) > 0 {
		_, unique = upgrade.Unique(ms)
	}
	return found, unique
}

// ResolveFlagID turns a flag id, key (any case) or name into the flag's id.
func ResolveFlagID(ctx context.Context, api CatalogAPI, ref string) (string, error) {
	r := &refResolver{ctx: ctx, api: api}
	f, err := r.flag(ref)
	if err != nil {
		return "", err
	}
	if f == nil {
		return "", fmt.Errorf("no feature flag with id %s", strings.TrimSpace(ref))
	}
	return f.ID, nil
}

// ResolveSegmentID turns a segment id or name into the segment's id.
func ResolveSegmentID(ctx context.Context, api CatalogAPI, ref string) (string, error) {
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
