package flageval

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// User is the person asking: their id, every group they belong to (type ->
// ids) and their working group (type -> id).
type User struct {
	ID           string              `json:"id"`
	Groups       map[string][]string `json:"groups,omitempty"`
	WorkingGroup map[string]string   `json:"workingGroup,omitempty"`
}

// Segments resolves a segment id to the segment with its own members; the
// sub-segments a list or segment names are looked up here, at any depth.
type Segments map[string]*upgrade.SegmentRecord

// NewSegments indexes segments by id, and the sub-segments they embed where
// no record of their own is given (embedded sub-segments usually carry no
// members, so a full record always wins).
func NewSegments(recs ...upgrade.SegmentRecord) Segments {
	s := Segments{}
	for i := range recs {
		s[recs[i].ID] = &recs[i]
	}
	var walk func(r *upgrade.SegmentRecord)
	walk = func(r *upgrade.SegmentRecord) {
		for i := range r.SubSegments {
			sub := &r.SubSegments[i]
			if _, ok := s[sub.ID]; !ok {
				s[sub.ID] = sub
				walk(sub)
			}
		}
	}
	for i := range recs {
		walk(&recs[i])
	}
	return s
}

// Input is one question: does Flag serve User in Context?
type Input struct {
	Flag *upgrade.FeatureFlag
	// Context is the app context asked for; "" = the flag's first context.
	Context string
	User    User
	// Segments resolves the sub-segments of the flag's lists.
	Segments Segments
	// GlobalExclude holds the global exclusion segments; only those of
	// Context apply.
	GlobalExclude []upgrade.SegmentRecord
}

// Rule names what decided.
type Rule string

// The rules, in the order UpGrade applies them.
const (
	RuleNotEnabled      Rule = "flag_not_enabled"   // status disabled or archived
	RuleOtherContext    Rule = "context_not_served" // the flag's contexts lack the one asked for
	RuleGlobalExclusion Rule = "global_exclusion"   // the context's global exclusion segment holds the user
	RuleUserExcluded    Rule = "user_excluded"      // the user id is on an enabled exclude list
	RuleUserIncluded    Rule = "user_included"      // the user id is on an enabled include list
	RuleGroupExcluded   Rule = "group_excluded"     // one of the user's groups is on an enabled exclude list
	RuleGroupIncluded   Rule = "group_included"     // excludeAll: one of the user's groups is on an enabled include list
	RuleIncludeAll      Rule = "include_all"        // includeAll and no exclusion matched: served
	RuleExcludeAll      Rule = "exclude_all"        // excludeAll and no inclusion matched: not served
)

// Match says where the user was found.
type Match struct {
	// Kind is inclusion or exclusion; "" for the global exclusion.
	Kind     upgrade.ListKind `json:"kind,omitempty"`
	ListID   string           `json:"listId"`
	ListName string           `json:"listName"`
	ListType string           `json:"listType,omitempty"`
	Enabled  bool             `json:"enabled"`
	// Path names the segments from the list down to the one holding the
	// member (empty when the list holds it itself).
	Path []string `json:"path,omitempty"`
	// Exactly one of User and Group is set.
	User  string            `json:"user,omitempty"`
	Group *upgrade.GroupRef `json:"group,omitempty"`
}

// Result is the answer.
type Result struct {
	Served  bool   `json:"served"`
	Rule    Rule   `json:"rule"`
	Match   *Match `json:"match,omitempty"`
	Flag    string `json:"flag"`
	Context string `json:"context"`
	User    string `json:"user"`
	// InDisabledLists lists where the user would match in lists that are
	// switched off: UpGrade ignores them, and people are surprised.
	InDisabledLists []Match `json:"inDisabledLists,omitempty"`
	Explanation     string  `json:"explanation"`
}

// Evaluate applies UpGrade 6.5's rules: the flag must be enabled and serve
// the context, the user must not be globally excluded, then over ENABLED
// lists only: user id excluded, user id included, a group excluded, and
// (excludeAll) a group included decide in that order; otherwise includeAll
// serves and excludeAll does not. Groups are matched on (type, groupId)
// against all of the user's groups, not the working group.
func Evaluate(in Input) Result {
	f := in.Flag
	if f == nil {
		f = &upgrade.FeatureFlag{}
	}
	ctx := in.Context
	if ctx == "" {
		ctx = f.ContextName()
	}
	res := Result{Flag: f.Key, Context: ctx, User: in.User.ID}
	decide := func(served bool, rule Rule, m *Match) Result {
		res.Served, res.Rule, res.Match = served, rule, m
		res.Explanation = explain(f, res)
		return res
	}
	res.InDisabledLists = disabledMatches(f, in)
	if f.Status != upgrade.FlagEnabled {
		return decide(false, RuleNotEnabled, nil)
	}
	if !f.HasContext(ctx) {
		return decide(false, RuleOtherContext, nil)
	}
	if m := globallyExcluded(in, ctx); m != nil {
		return decide(false, RuleGlobalExclusion, m)
	}
	inc, exc := enabled(f.Inclusion), enabled(f.Exclusion)
	if m := findUser(exc, upgrade.ListExclusion, in); m != nil {
		return decide(false, RuleUserExcluded, m)
	}
	if m := findUser(inc, upgrade.ListInclusion, in); m != nil {
		return decide(true, RuleUserIncluded, m)
	}
	if m := findGroup(exc, upgrade.ListExclusion, in); m != nil {
		return decide(false, RuleGroupExcluded, m)
	}
	if f.FilterMode == upgrade.FilterIncludeAll {
		return decide(true, RuleIncludeAll, nil)
	}
	if m := findGroup(inc, upgrade.ListInclusion, in); m != nil {
		return decide(true, RuleGroupIncluded, m)
	}
	return decide(false, RuleExcludeAll, nil)
}

// SessionGroups is the group memberships /v6/featureflag evaluates with:
// the stored ones when no session groups are sent, the session groups
// alone when includeStored is false, both merged when it is true.
func SessionGroups(stored, session map[string][]string, sent, includeStored bool) map[string][]string {
	if !sent {
		return stored
	}
	out := map[string][]string{}
	if includeStored {
		for t, ids := range stored {
			out[t] = append(out[t], ids...)
		}
	}
	for t, ids := range session {
		for _, id := range ids {
			if !slices.Contains(out[t], id) {
				out[t] = append(out[t], id)
			}
		}
	}
	return out
}

func enabled(lists []upgrade.FlagList) []upgrade.FlagList {
	var out []upgrade.FlagList
	for _, l := range lists {
		if l.Enabled {
			out = append(out, l)
		}
	}
	return out
}

// holder is a segment reached from a list, with the names on the way.
type holder struct {
	seg  *upgrade.SegmentRecord
	path []string
}

// walk lists seg and every segment below it, depth first, each once.
func walk(seg *upgrade.SegmentRecord, segs Segments) []holder {
	var out []holder
	seen := map[string]bool{}
	var visit func(s *upgrade.SegmentRecord, path []string)
	visit = func(s *upgrade.SegmentRecord, path []string) {
		if s == nil || (s.ID != "" && seen[s.ID]) {
			return
		}
		seen[s.ID] = true
		out = append(out, holder{seg: s, path: path})
		for i := range s.SubSegments {
			sub := &s.SubSegments[i]
			if full, ok := segs[sub.ID]; ok {
				sub = full
			}
			visit(sub, append(slices.Clone(path), sub.Name))
		}
	}
	visit(seg, nil)
	return out
}

func listSegment(l upgrade.FlagList, segs Segments) *upgrade.SegmentRecord {
	if l.Segment != nil {
		return l.Segment
	}
	return segs[l.ID()]
}

func matchOf(l upgrade.FlagList, kind upgrade.ListKind, h holder) *Match {
	m := &Match{Kind: kind, ListID: l.ID(), ListType: l.ListType, Enabled: l.Enabled, Path: h.path}
	if l.Segment != nil {
		m.ListName = l.Segment.Name
	}
	return m
}

func userIn(seg *upgrade.SegmentRecord, id string) bool {
	for _, u := range seg.Users {
		if u.UserID == id {
			return true
		}
	}
	return false
}

func groupIn(seg *upgrade.SegmentRecord, groups map[string][]string) *upgrade.GroupRef {
	for _, g := range seg.Groups {
		if slices.Contains(groups[g.Type], g.GroupID) {
			ref := g.Ref()
			return &ref
		}
	}
	return nil
}

func findUser(lists []upgrade.FlagList, kind upgrade.ListKind, in Input) *Match {
	for _, l := range lists {
		for _, h := range walk(listSegment(l, in.Segments), in.Segments) {
			if userIn(h.seg, in.User.ID) {
				m := matchOf(l, kind, h)
				m.User = in.User.ID
				return m
			}
		}
	}
	return nil
}

func findGroup(lists []upgrade.FlagList, kind upgrade.ListKind, in Input) *Match {
	for _, l := range lists {
		for _, h := range walk(listSegment(l, in.Segments), in.Segments) {
			if g := groupIn(h.seg, in.User.Groups); g != nil {
				m := matchOf(l, kind, h)
				m.Group = g
				return m
			}
		}
	}
	return nil
}

func disabledMatches(f *upgrade.FeatureFlag, in Input) []Match {
	var out []Match
	for _, k := range []struct {
		kind  upgrade.ListKind
		lists []upgrade.FlagList
	}{{upgrade.ListInclusion, f.Inclusion}, {upgrade.ListExclusion, f.Exclusion}} {
		for _, l := range k.lists {
			if l.Enabled {
				continue
			}
			one := []upgrade.FlagList{l}
			if m := findUser(one, k.kind, in); m != nil {
				out = append(out, *m)
			} else if m := findGroup(one, k.kind, in); m != nil {
				out = append(out, *m)
			}
		}
	}
	return out
}

// globallyExcluded: the context's global segment holds the user id, or a
// group equal to one of the user's working groups; a user without any
// working group is excluded by any group on it (UpGrade's source).
func globallyExcluded(in Input, ctx string) *Match {
	for i := range in.GlobalExclude {
		g := &in.GlobalExclude[i]
		if g.Context != ctx {
			continue
		}
		for _, h := range walk(g, in.Segments) {
			m := &Match{ListID: g.ID, ListName: g.Name, Enabled: true, Path: h.path}
			if userIn(h.seg, in.User.ID) {
				m.User = in.User.ID
				return m
			}
			for _, grp := range h.seg.Groups {
				if len(in.User.WorkingGroup) == 0 || in.User.WorkingGroup[grp.Type] == grp.GroupID {
					ref := grp.Ref()
					m.Group = &ref
					return m
				}
			}
		}
	}
	return nil
}

// Describe renders a match: `user u1 on include list "pilot" (through
// segment "pilot schools")`.
func (m *Match) Describe() string {
	var who string
	if m.Group != nil {
		who = fmt.Sprintf("group %s=%s", m.Group.Type, m.Group.GroupID)
	} else {
		who = "user " + m.User
	}
	var where string
	switch m.Kind {
	case upgrade.ListInclusion:
		where = "include list"
	case upgrade.ListExclusion:
		where = "exclude list"
	default:
		where = "global exclusion segment"
	}
	name := m.ListName
	if name == "" {
		name = m.ListID
	}
	s := fmt.Sprintf("%s on %s %q", who, where, name)
	if !m.Enabled {
		s += " (disabled)"
	}
	if len(m.Path) > 0 {
		quoted := make([]string, len(m.Path))
		for i, p := range m.Path {
			quoted[i] = strconv.Quote(p)
		}
		s += " through segment " + strings.Join(quoted, " > ")
	}
	return s
}

func explain(f *upgrade.FeatureFlag, r Result) string {
	var s string
	switch r.Rule {
	case RuleNotEnabled:
		s = fmt.Sprintf("not served: the flag is %s (only enabled flags are served)", orNone(f.Status))
	case RuleOtherContext:
		s = fmt.Sprintf("not served: the flag serves %s, not %q", strings.Join(f.Context, ", "), r.Context)
	case RuleGlobalExclusion:
		s = "not served: " + r.Match.Describe() + " of context " + r.Context
	case RuleUserExcluded, RuleGroupExcluded:
		s = "not served: " + r.Match.Describe() + " (exclusion wins)"
	case RuleUserIncluded, RuleGroupIncluded:
		s = "served: " + r.Match.Describe()
	case RuleIncludeAll:
		s = "served: filter mode includeAll and no enabled exclude list holds the user or their groups"
	case RuleExcludeAll:
		s = "not served: filter mode excludeAll and no enabled include list holds the user or their groups"
	}
	if len(r.InDisabledLists) > 0 {
		parts := make([]string, 0, len(r.InDisabledLists))
		for _, m := range r.InDisabledLists {
			parts = append(parts, m.Describe())
		}
		s += "; ignored because the list is disabled: " + strings.Join(parts, "; ")
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "without status"
	}
	return s
}

// FromSnapshot builds the input for evaluating a flag read with
// Client.FlagSnapshot; appContext "" = the flag's first context.
func FromSnapshot(snap *upgrade.FlagSnapshot, appContext string, user User) Input {
	return Input{Flag: snap.Flag, Context: appContext, User: user,
		Segments: NewSegments(append(append([]upgrade.SegmentRecord{}, snap.Segments...), snap.Global...)...), GlobalExclude: snap.Global}
}

// ParseGroup reads a group written TYPE=ID (or TYPE:ID, as people also
// write it); spaces around either part are dropped.
func ParseGroup(s string) (upgrade.GroupRef, error) {
	i := strings.IndexAny(s, "=:")
	if i <= 0 || strings.TrimSpace(s[i+1:]) == "" || strings.TrimSpace(s[:i]) == "" {
		return upgrade.GroupRef{}, fmt.Errorf("group %q: write it as TYPE=ID, e.g. classId=c7", s)
	}
	return upgrade.GroupRef{Type: strings.TrimSpace(s[:i]), GroupID: strings.TrimSpace(s[i+1:])}, nil
}

// UserWithGroups is a user in the given groups; the first group of each
// type is also the working group of that type.
func UserWithGroups(id string, groups []upgrade.GroupRef) User {
	u := User{ID: id, Groups: map[string][]string{}, WorkingGroup: map[string]string{}}
	for _, g := range groups {
		if !slices.Contains(u.Groups[g.Type], g.GroupID) {
			u.Groups[g.Type] = append(u.Groups[g.Type], g.GroupID)
		}
		if _, ok := u.WorkingGroup[g.Type]; !ok {
			u.WorkingGroup[g.Type] = g.GroupID
		}
	}
	return u
}
