package readmodel

import (
	"sort"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Group is a group member of a list or segment.
type Group struct {
	Type    string `json:"type"`
	GroupID string `json:"group_id"`
}

// String is TYPE=ID.
func (g Group) String() string { return g.Type + "=" + g.GroupID }

// SegmentRef names a segment by id and name.
type SegmentRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Members are the members a list or segment holds itself.
type Members struct {
	Users    []string     `json:"users"`
	Groups   []Group      `json:"groups"`
	Segments []SegmentRef `json:"segments"` // sub-segments, by name
}

// Count is "2 users, 1 group, 1 segment"; "nobody" when empty.
func (m Members) Count() string {
	var parts []string
	add := func(n int, what string) {
		if n == 1 {
			parts = append(parts, "1 "+what)
		} else if n > 1 {
			parts = append(parts, strconv.Itoa(n)+" "+what+"s")
		}
	}
	add(len(m.Users), "user")
	add(len(m.Groups), "group")
	add(len(m.Segments), "segment")
	if len(parts) == 0 {
		return "nobody"
	}
	return strings.Join(parts, ", ")
}

// SegmentNames maps segment ids to names, for members shown by name.
type SegmentNames map[string]string

// NamesOf indexes segments (and the sub-segment rows they embed).
func NamesOf(segs ...upgrade.SegmentRecord) SegmentNames {
	out := SegmentNames{}
	for _, s := range segs {
		out[s.ID] = s.Name
		for _, sub := range s.SubSegments {
			if _, ok := out[sub.ID]; !ok {
				out[sub.ID] = sub.Name
			}
		}
	}
	return out
}

// MembersOf lists a segment's own members, sub-segments by name.
func MembersOf(s *upgrade.SegmentRecord, names SegmentNames) Members {
	m := Members{Users: []string{}, Groups: []Group{}, Segments: []SegmentRef{}}
	if s == nil {
		return m
	}
	m.Users = append(m.Users, s.UserIDs()...)
	for _, g := range s.Groups {
		m.Groups = append(m.Groups, Group{Type: g.Type, GroupID: g.GroupID})
	}
	for _, sub := range s.SubSegments {
		name := sub.Name
		if n, ok := names[sub.ID]; ok && n != "" {
			name = n
		}
		m.Segments = append(m.Segments, SegmentRef{ID: sub.ID, Name: name})
	}
	return m
}

// FlagList is one include or exclude list of a flag.
type FlagList struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"` // include, exclude
	Enabled  bool   `json:"enabled"`
	ListType string `json:"list_type"`
	Members
}

// FlagSummary is one flag in a list: `flags list` and get_feature_flags.
type FlagSummary struct {
	ID             string   `json:"id"`
	Key            string   `json:"key"`
	Name           string   `json:"name"`
	Context        []string `json:"context"`
	Status         string   `json:"status"`
	FilterMode     string   `json:"filter_mode"`
	IncludeEnabled int      `json:"include_enabled"`
	IncludeTotal   int      `json:"include_total"`
	ExcludeEnabled int      `json:"exclude_enabled"`
	ExcludeTotal   int      `json:"exclude_total"`
	Tags           []string `json:"tags"`
	UpdatedAt      string   `json:"updated_at,omitempty"`
}

// FlagDetails is one flag with its lists: `flags show` and
// get_feature_flag_details.
type FlagDetails struct {
	FlagSummary
	Description string     `json:"description"`
	CreatedAt   string     `json:"created_at,omitempty"`
	Include     []FlagList `json:"include"`
	Exclude     []FlagList `json:"exclude"`
	// Reach says who the flag reaches now, in words.
	Reach string `json:"reach"`
}

// FlagListCounts are the list counts of flags, read from the usage arrays
// of GET /segments (one read for every flag), keyed by flag id.
type FlagListCounts map[string]*[4]int // include enabled, include total, exclude enabled, exclude total

// CountLists counts every flag's lists from the usage arrays.
func CountLists(u upgrade.SegmentUsage) FlagListCounts {
	out := FlagListCounts{}
	add := func(rows []upgrade.FlagList, off int) {
		for _, r := range rows {
			c := out[r.FeatureFlagID]
			if c == nil {
				c = &[4]int{}
				out[r.FeatureFlagID] = c
			}
			c[off+1]++
			if r.Enabled {
				c[off]++
			}
		}
	}
	add(u.FlagInclusion, 0)
	add(u.FlagExclusion, 2)
	return out
}

func summarizeFlag(f *upgrade.FeatureFlag) FlagSummary {
	return FlagSummary{ID: f.ID, Key: f.Key, Name: f.Name, Context: nonNil(f.Context), Status: f.Status, FilterMode: f.FilterMode,
		Tags: nonNil(f.Tags), UpdatedAt: f.UpdatedAt}
}

// SummarizeFlags lists flags sorted by key then name, with list counts
// (from CountLists; flags read with their lists count those instead).
func SummarizeFlags(flags []upgrade.FeatureFlag, counts FlagListCounts) []FlagSummary {
	out := make([]FlagSummary, 0, len(flags))
	for i := range flags {
		f := &flags[i]
		s := summarizeFlag(f)
		if c := counts[f.ID]; c != nil {
			s.IncludeEnabled, s.IncludeTotal, s.ExcludeEnabled, s.ExcludeTotal = c[0], c[1], c[2], c[3]
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// FlagDetailsOf is a flag read with its lists.
func FlagDetailsOf(f *upgrade.FeatureFlag, names SegmentNames) FlagDetails {
	d := FlagDetails{FlagSummary: summarizeFlag(f), Description: f.Description, CreatedAt: f.CreatedAt,
		Include: []FlagList{}, Exclude: []FlagList{}}
	for _, k := range []struct {
		kind  string
		lists []upgrade.FlagList
		out   *[]FlagList
		on    *int
		total *int
	}{{"include", f.Inclusion, &d.Include, &d.IncludeEnabled, &d.IncludeTotal}, {"exclude", f.Exclusion, &d.Exclude, &d.ExcludeEnabled, &d.ExcludeTotal}} {
		for _, l := range k.lists {
			*k.out = append(*k.out, FlagList{ID: l.ID(), Kind: k.kind, Enabled: l.Enabled, ListType: l.ListType, Members: MembersOf(l.Segment, names)})
			*k.total++
			if l.Enabled {
				*k.on++
			}
		}
	}
	d.Reach = Reach(f)
	return d
}

// Reach says in words who a flag reaches, from its status, filter mode and
// enabled lists (the plan of a flag change shows the same sentence).
func Reach(f *upgrade.FeatureFlag) string {
	ctx := strings.Join(f.Context, ", ")
	if f.Status != upgrade.FlagEnabled {
		return "nobody: the flag is " + f.Status
	}
	include, exclude := enabledLists(f.Inclusion), enabledLists(f.Exclusion)
	except := ""
	if len(exclude) > 0 {
		except = " except the members of " + listCount(len(exclude), "enabled exclude list")
	}
	if f.FilterMode == upgrade.FilterIncludeAll {
		return "everyone in " + ctx + except
	}
	if len(include) == 0 {
		return "nobody: filter mode excludeAll and no enabled include list"
	}
	return "the members of " + listCount(len(include), "enabled include list") + " in " + ctx + except
}

func enabledLists(ls []upgrade.FlagList) []upgrade.FlagList {
	var out []upgrade.FlagList
	for _, l := range ls {
		if l.Enabled {
			out = append(out, l)
		}
	}
	return out
}

func listCount(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// SegmentSummary is one segment in a list: `segments list` and
// get_segments.
type SegmentSummary struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Context   string   `json:"context"`
	Type      string   `json:"type"`
	Status    string   `json:"status,omitempty"`
	Users     int      `json:"users"`
	Groups    int      `json:"groups"`
	Segments  int      `json:"segments"`
	UsedBy    []string `json:"used_by"` // flag and experiment names
	Tags      []string `json:"tags"`
	UpdatedAt string   `json:"updated_at,omitempty"`
}

// Use is one flag or experiment list that includes a segment, directly or
// through the segments named in Via.
type Use struct {
	Kind   string   `json:"kind"` // flag or experiment
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	List   string   `json:"list"` // include or exclude
	ListID string   `json:"list_id"`
	State  string   `json:"state"` // flag status or experiment state
	On     bool     `json:"enabled"`
	Via    []string `json:"via,omitempty"`
}

// SegmentDetails is one segment with members and its uses: `segments show`
// and get_segment_details.
type SegmentDetails struct {
	SegmentSummary
	Description string  `json:"description"`
	Members     Members `json:"members"`
	Uses        []Use   `json:"uses"`
}

// UsesOf lists the flag and experiment lists that include segment id,
// directly or below other segments (segs resolves the ones in between),
// sorted by kind and name.
func UsesOf(id string, u upgrade.SegmentUsage, segs []upgrade.SegmentRecord) []Use {
	byID := map[string]*upgrade.SegmentRecord{}
	for i := range segs {
		byID[segs[i].ID] = &segs[i]
	}
	// path finds id below the given sub-segments, returning the names of
	// the segments in between.
	var path func(subs []upgrade.SegmentRecord, seen map[string]bool) ([]string, bool)
	path = func(subs []upgrade.SegmentRecord, seen map[string]bool) ([]string, bool) {
		for _, s := range subs {
			if s.ID == id {
				return nil, true
			}
		}
		for _, s := range subs {
			full := byID[s.ID]
			if full == nil || seen[s.ID] {
				continue
			}
			seen[s.ID] = true
			if rest, ok := path(full.SubSegments, seen); ok {
				return append([]string{full.Name}, rest...), true
			}
		}
		return nil, false
	}
	out := []Use{}
	add := func(seg *upgrade.SegmentRecord, use Use) {
		if seg == nil {
			return
		}
		if via, ok := path(seg.SubSegments, map[string]bool{}); ok {
			use.Via = via
			out = append(out, use)
		}
	}
	for _, k := range []struct {
		rows []upgrade.FlagList
		list string
	}{{u.FlagInclusion, "include"}, {u.FlagExclusion, "exclude"}} {
		for _, r := range k.rows {
			use := Use{Kind: "flag", ID: r.FeatureFlagID, List: k.list, ListID: r.ID(), On: r.Enabled}
			if r.FeatureFlag != nil {
				use.Name, use.State = r.FeatureFlag.Name, r.FeatureFlag.Status
			}
			add(r.Segment, use)
		}
	}
	for _, k := range []struct {
		rows []upgrade.ExperimentUsageRow
		list string
	}{{u.ExperimentInclusion, "include"}, {u.ExperimentExclusion, "exclude"}} {
		for _, r := range k.rows {
			use := Use{Kind: "experiment", ID: r.ExperimentID, List: k.list, ListID: r.SegmentID, On: true}
			if r.Experiment != nil {
				use.Name, use.State = r.Experiment.Name, string(r.Experiment.State)
			}
			add(r.Segment, use)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind > out[j].Kind // flags first
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func summarizeSegment(s *upgrade.SegmentRecord, uses []Use) SegmentSummary {
	sum := SegmentSummary{ID: s.ID, Name: s.Name, Context: s.Context, Type: s.Type, Status: s.Status,
		Users: len(s.Users), Groups: len(s.Groups), Segments: len(s.SubSegments), UsedBy: []string{}, Tags: nonNil(s.Tags), UpdatedAt: s.UpdatedAt}
	for _, u := range uses {
		if !containsStr(sum.UsedBy, u.Name) {
			sum.UsedBy = append(sum.UsedBy, u.Name)
		}
	}
	return sum
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// SummarizeSegments lists segments sorted by name then context, each with
// the names of the flags and experiments using it.
func SummarizeSegments(segs []upgrade.SegmentRecord, u upgrade.SegmentUsage) []SegmentSummary {
	out := make([]SegmentSummary, 0, len(segs))
	for i := range segs {
		out = append(out, summarizeSegment(&segs[i], UsesOf(segs[i].ID, u, segs)))
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Context < out[j].Context
	})
	return out
}

// SegmentDetailsOf is one segment with members by name and its uses; segs
// are the other segments (names and nesting).
func SegmentDetailsOf(s *upgrade.SegmentRecord, u upgrade.SegmentUsage, segs []upgrade.SegmentRecord) SegmentDetails {
	uses := UsesOf(s.ID, u, segs)
	return SegmentDetails{SegmentSummary: summarizeSegment(s, uses), Description: s.Description,
		Members: MembersOf(s, NamesOf(segs...)), Uses: uses}
}

// HistoryEntry is one state change of an experiment.
type HistoryEntry struct {
	From upgrade.State `json:"from"`
	To   upgrade.State `json:"to"`
	Time string        `json:"time"`
}

// History is the state changes of one experiment, oldest first:
// `experiments history` and get_experiment_history.
type History struct {
	ExperimentID   string         `json:"experiment_id"`
	ExperimentName string         `json:"experiment_name"`
	Status         upgrade.State  `json:"status"`
	Changes        []HistoryEntry `json:"changes"`
}

// HistoryOf reads the state time logs of e, oldest first, internal names.
func HistoryOf(e *upgrade.Experiment) History {
	h := History{ExperimentID: e.ID, ExperimentName: e.Name, Status: e.State, Changes: []HistoryEntry{}}
	for _, l := range upgrade.SortedHistory(e.StateTimeLogs) {
		h.Changes = append(h.Changes, HistoryEntry{From: l.FromState, To: l.ToState, Time: l.TimeLog})
	}
	return h
}
