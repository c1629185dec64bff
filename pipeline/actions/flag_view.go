package actions

import (
	"context"
	"fmt"
	"sort"
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
	Match   string   `json:"match"` // exact_key, key, exact_name, prefix, contains
}

// FindFlags ranks the flags against a key or name: exact key, key in any
// case, exact name, prefix, substring (of the key with _ read as blanks too).
func FindFlags(flags []upgrade.FeatureFlag, q string, limit int) []FlagMatch {
	q = strings.TrimSpace(q)
	ql := strings.ToLower(q)
	rank := func(f upgrade.FeatureFlag) (string, int) {
		kl, nl := strings.ToLower(f.Key), strings.ToLower(f.Name)
		switch {
		case f.ID == idValue(q) || f.Key == q:
			return "exact_key", 0
		case kl == ql:
			return "key", 1
		case nl == ql:
			return "exact_name", 2
		case strings.HasPrefix(kl, ql) || strings.HasPrefix(nl, ql):
			return "prefix", 3
		case strings.Contains(kl, ql) || strings.Contains(nl, ql) || strings.Contains(strings.ReplaceAll(kl, "_", " "), ql):
			return "contains", 4
		}
		return "", -1
	}
	type scored struct {
		m     FlagMatch
		score int
	}
	var found []scored
	for _, f := range flags {
		if how, score := rank(f); score >= 0 {
			found = append(found, scored{FlagMatch{ID: f.ID, Key: f.Key, Name: f.Name, Context: f.Context, Status: f.Status, Match: how}, score})
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
	return out
}

// UniqueFlag is the one flag matches mean: the only one, or the only one
// matched by key or exact name.
func UniqueFlag(ms []FlagMatch) (FlagMatch, bool) {
	if len(ms) == 1 {
		return ms[0], true
	}
	exact := func(m FlagMatch) bool { return m.Match == "exact_key" || m.Match == "key" || m.Match == "exact_name" }
	if len(ms) > 1 && exact(ms[0]) && ms[0].Match != ms[1].Match {
		return ms[0], true
	}
	return FlagMatch{}, false
}

// FindSegments ranks public segments against a name: exact (any case),
// prefix, substring. unique is true when one segment is meant.
func FindSegments(segs []upgrade.SegmentRecord, q string, limit int) (found []upgrade.SegmentRecord, unique bool) {
	ql := strings.ToLower(strings.TrimSpace(q))
	var ranks []int
	for rank, match := range []func(string) bool{
		func(n string) bool { return n == ql },
		func(n string) bool { return n != ql && strings.HasPrefix(n, ql) },
		func(n string) bool { return !strings.HasPrefix(n, ql) && strings.Contains(n, ql) },
	} {
		for _, s := range segs {
			if (s.Type == "" || s.Type == upgrade.SegmentPublic) && match(strings.ToLower(s.Name)) && len(found) < limit {
				found = append(found, s)
				ranks = append(ranks, rank)
			}
		}
	}
	unique = len(found) == 1 || len(found) > 1 && ranks[0] == 0 && ranks[1] != 0
	return found, unique
}

// ResolveFlagID turns a flag id, key (any case) or name into the flag's id.
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
