package actions

import (
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Params and spellings shared by the feature flag and segment actions
// (spec/pipeline.md, "Feature flags and segments"). Each action's own params
// struct is in its file (flag_*.go, segment_*.go).

// Flag statuses and filter modes are upgrade's (upgrade.FlagStatuses,
// upgrade.FilterModes: the one list of each); the names here are short
// forms for the actions' code. List kinds are the agent's words.
const (
	FlagEnabled  = upgrade.FlagEnabled
	FlagDisabled = upgrade.FlagDisabled
	FlagArchived = upgrade.FlagArchived

	FlagIncludeAll = upgrade.FilterIncludeAll
	FlagExcludeAll = upgrade.FilterExcludeAll

	ListInclude = "include"
	ListExclude = "exclude"
)

// FlagListParam is one include or exclude list of a feature flag: exactly
// one of users, groups and segment_ids, as UpGrade's web UI makes them.
type FlagListParam struct {
	Enabled    *bool        `json:"enabled,omitempty" jsonschema:"whether the list counts (default true)"`
	Users      []string     `json:"users,omitempty" jsonschema:"user ids"`
	Groups     []GroupParam `json:"groups,omitempty" jsonschema:"groups (type and group_id)"`
	SegmentIDs []string     `json:"segment_ids,omitempty" jsonschema:"ids of public segments of the flag's context (names are resolved)" ref:"segment"`
}

// flagStatusValue folds a status to UpGrade's spelling
// (upgrade.FlagStatusOf: any case, display names), and on/off, which is
// how people speak of a switch.
func flagStatusValue(s string) string {
	v := upgrade.FlagStatusOf(s)
	switch strings.ToLower(v) {
	case "on", "active", "enable":
		return FlagEnabled
	case "off", "inactive", "disable":
		return FlagDisabled
	case "archive":
		return FlagArchived
	}
	return v
}

// listKindValue folds include/exclude and the spellings models use for
// them (inclusion, includeList, Include).
func listKindValue(s string) string {
	k := foldKey(s)
	switch {
	case k == "":
		return ""
	case strings.HasPrefix(k, "incl"):
		return ListInclude
	case strings.HasPrefix(k, "excl"):
		return ListExclude
	}
	return strings.TrimSpace(s)
}

// normFlagList trims a list's members; enabled defaults to true.
func normFlagList(l FlagListParam) FlagListParam {
	on := true
	if l.Enabled != nil {
		on = *l.Enabled
	}
	return FlagListParam{Enabled: &on, Users: trimList(l.Users), Groups: normGroups(l.Groups), SegmentIDs: idList(l.SegmentIDs)}
}

func normFlagLists(ls []FlagListParam) []FlagListParam {
	var out []FlagListParam
	for _, l := range ls {
		n := normFlagList(l)
		out = append(out, n)
	}
	return out
}

// idList trims ids (a UUID in lower case) and drops the empty ones.
func idList(ids []string) []string {
	var out []string
	for _, s := range ids {
		if s = idValue(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// enabledOf reads a canonical list's enabled flag.
func enabledOf(l FlagListParam) bool { return l.Enabled == nil || *l.Enabled }

// memberKinds names the member kinds a list holds.
func memberKinds(users []string, groups []GroupParam, segs []string) []string {
	var kinds []string
	if len(users) > 0 {
		kinds = append(kinds, "users")
	}
	if len(groups) > 0 {
		kinds = append(kinds, "groups")
	}
	if len(segs) > 0 {
		kinds = append(kinds, "segment_ids")
	}
	return kinds
}

// groupFromString reads a group written as one string, "classId:c7" or
// "classId=c7", into the object form; ok is false for anything else.
func groupFromString(s string) (map[string]any, bool) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, ":=")
	if i <= 0 || i == len(s)-1 {
		return nil, false
	}
	typ, id := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
	if typ == "" || id == "" || strings.ContainsAny(typ, " \t") {
		return nil, false
	}
	return map[string]any{"type": typ, "group_id": id}, true
}

// groupFromPair reads a group written as {"classId": "c7"}: one key that
// is not a field of GroupParam, with a string value.
func groupFromPair(obj map[string]any) (map[string]any, bool) {
	if len(obj) != 1 {
		return nil, false
	}
	for k, v := range obj {
		s, ok := v.(string)
		fk := foldKey(k)
		if !ok || fk == "type" || fk == "groupid" || strings.TrimSpace(s) == "" {
			return nil, false
		}
		return map[string]any{"type": strings.TrimSpace(k), "group_id": strings.TrimSpace(s)}, true
	}
	return nil, false
}

// memberSet is the content of a list or a segment in the agent's terms.
type memberSet struct {
	Users    []string
	Groups   []GroupParam
	Segments []string // segment ids
}

func (m memberSet) empty() bool {
	return len(m.Users) == 0 && len(m.Groups) == 0 && len(m.Segments) == 0
}

func (m memberSet) sorted() memberSet {
	out := memberSet{Users: slices.Clone(m.Users), Groups: slices.Clone(m.Groups), Segments: slices.Clone(m.Segments)}
	slices.Sort(out.Users)
	out.Users = slices.Compact(out.Users)
	slices.SortFunc(out.Groups, func(a, b GroupParam) int {
		if c := strings.Compare(a.Type, b.Type); c != 0 {
			return c
		}
		return strings.Compare(a.GroupID, b.GroupID)
	})
	out.Groups = slices.Compact(out.Groups)
	slices.Sort(out.Segments)
	out.Segments = slices.Compact(out.Segments)
	return out
}

// memberDiff is what changes between two member sets.
type memberDiff struct {
	AddUsers, RemoveUsers       []string
	AddGroups, RemoveGroups     []GroupParam
	AddSegments, RemoveSegments []string
}

func (d memberDiff) empty() bool {
	return len(d.AddUsers)+len(d.RemoveUsers)+len(d.AddGroups)+len(d.RemoveGroups)+len(d.AddSegments)+len(d.RemoveSegments) == 0
}

func diffMembers(cur, next memberSet) memberDiff {
	return memberDiff{
		AddUsers: minus(next.Users, cur.Users), RemoveUsers: minus(cur.Users, next.Users),
		AddGroups: minusGroups(next.Groups, cur.Groups), RemoveGroups: minusGroups(cur.Groups, next.Groups),
		AddSegments: minus(next.Segments, cur.Segments), RemoveSegments: minus(cur.Segments, next.Segments),
	}
}

// minus is a without b, in a's order, each once.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func minusGroups(a, b []GroupParam) []GroupParam {
	var out []GroupParam
	for _, x := range a {
		if !slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// union is a then what b adds, each once.
func union(a, b []string) []string {
	out := minus(a, nil)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func unionGroups(a, b []GroupParam) []GroupParam {
	out := minusGroups(a, nil)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// groupShorthand turns the short forms models write for one group into
// the object form; anything else is returned as it is.
func groupShorthand(v any) any {
	switch x := v.(type) {
	case string:
		if g, ok := groupFromString(x); ok {
			return g
		}
	case map[string]any:
		if g, ok := groupFromPair(x); ok {
			return g
		}
	}
	return v
}

// FlagStatus folds a status as the agent's tools accept it (display names,
// on/off) to UpGrade's spelling; "" stays "".
func FlagStatus(s string) string { return flagStatusValue(s) }
