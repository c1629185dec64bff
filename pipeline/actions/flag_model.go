package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// The feature flag and segment actions reason about the server's data in
// the agent's terms: a flag with its lists as member sets, the public
// segments by id, and where each segment is used. This file reads them and
// renders them; the actions' files decide.

// flagList is one list of a flag.
type flagList struct {
	ID       string
	Kind     string // include, exclude
	Enabled  bool
	ListType string
	Members  memberSet
	// CreatedAt is the server's time of the list row (reconciliation).
	CreatedAt string
}

// flagState is a flag as the actions see it.
type flagState struct {
	ID, Name, Key, Context, Status, FilterMode, Description string
	Contexts                                                []string
	Tags                                                    []string
	Include, Exclude                                        []flagList
	Version                                                 string
	CreatedAt                                               string
}

func flagStateOf(f *upgrade.FeatureFlag) flagState {
	s := flagState{ID: f.ID, Name: f.Name, Key: f.Key, Context: f.ContextName(), Contexts: slices.Clone(f.Context),
		Status: f.Status, FilterMode: f.FilterMode, Description: f.Description, Tags: nonEmpty(f.Tags),
		Version: fmt.Sprintf("v%d@%s", f.VersionNumber, f.UpdatedAt), CreatedAt: f.CreatedAt}
	for _, l := range f.Inclusion {
		s.Include = append(s.Include, listOf(ListInclude, l))
	}
	for _, l := range f.Exclusion {
		s.Exclude = append(s.Exclude, listOf(ListExclude, l))
	}
	return s
}

func listOf(kind string, l upgrade.FlagList) flagList {
	fl := flagList{ID: l.ID(), Kind: kind, Enabled: l.Enabled, ListType: l.ListType, CreatedAt: l.CreatedAt}
	if l.Segment != nil {
		fl.Members = segmentMembers(l.Segment)
	}
	return fl
}

func segmentMembers(s *upgrade.SegmentRecord) memberSet {
	m := memberSet{Users: nonEmpty(s.UserIDs()), Groups: groupParams(s.GroupRefs()), Segments: nonEmpty(s.SubSegmentIDs())}
	return m.sorted()
}

// lists returns the flag's lists of one kind.
func (f flagState) lists(kind string) []flagList {
	if kind == ListExclude {
		return f.Exclude
	}
	return f.Include
}

// list finds a list of the flag by kind and id.
func (f flagState) list(kind, id string) (flagList, bool) {
	for _, l := range f.lists(kind) {
		if l.ID == id {
			return l, true
		}
	}
	return flagList{}, false
}

// anyList finds a list of the flag by id, of either kind.
func (f flagState) anyList(id string) (flagList, bool) {
	if l, ok := f.list(ListInclude, id); ok {
		return l, true
	}
	return f.list(ListExclude, id)
}

func (f flagState) hasLists() bool { return len(f.Include)+len(f.Exclude) > 0 }

func enabledLists(ls []flagList) []flagList {
	var out []flagList
	for _, l := range ls {
		if l.Enabled {
			out = append(out, l)
		}
	}
	return out
}

// readFlag reads a flag with its lists.
func readFlag(ctx context.Context, api FlagReader, id string) (flagState, error) {
	f, err := api.Flag(ctx, id)
	if err != nil {
		return flagState{}, fmt.Errorf("reading feature flag %s: %w", id, err)
	}
	return flagStateOf(f), nil
}

// ---- segments ----

// segInfo is a public segment as the actions see it.
type segInfo struct {
	ID, Name, Context, Description, Status string
	Tags                                   []string
	Members                                memberSet
	Version                                string
}

func segInfoOf(s *upgrade.SegmentRecord) segInfo {
	return segInfo{ID: s.ID, Name: s.Name, Context: s.Context, Description: s.Description, Status: s.Status,
		Tags: nonEmpty(s.Tags), Members: segmentMembers(s), Version: fmt.Sprintf("v%d@%s", s.VersionNumber, s.UpdatedAt)}
}

// usage is one flag or experiment list that references a segment, directly
// or through a parent segment.
type usage struct {
	Kind    string // flag, experiment
	ID      string
	Name    string
	Status  string // flag status or experiment state
	List    string // include, exclude
	Enabled bool
	Via     string // the parent segment's name, when used through one
}

func (u usage) String() string {
	what := "flag"
	if u.Kind == "experiment" {
		what = "experiment"
	}
	s := fmt.Sprintf("%s %s (%s), %s list", what, quote(u.Name), u.Status, u.List)
	if !u.Enabled {
		s += " (disabled)"
	}
	if u.Via != "" {
		s += " through segment " + quote(u.Via)
	}
	return s
}

// segDir is every public segment of the server and every list that uses
// one: what GET /segments answers.
type segDir struct {
	byID  map[string]segInfo
	order []string
	raw   *upgrade.SegmentsAnswer
	// named are the public segments as upgrade.Catalog resolves them (the
	// CLI's rules: upgrade.SegmentsNamed).
	named []upgrade.Named
}

func readSegments(ctx context.Context, api SegmentReader) (*segDir, error) {
	all, err := api.Segments(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading segments: %w", err)
	}
	d := &segDir{byID: map[string]segInfo{}, raw: all}
	var public []upgrade.SegmentRecord
	for i := range all.Segments {
		s := &all.Segments[i]
		if s.Type != "" && s.Type != upgrade.SegmentPublic {
			continue
		}
		d.byID[s.ID] = segInfoOf(s)
		d.order = append(d.order, s.ID)
		public = append(public, *s)
	}
	d.named = upgrade.SegmentsNamed(public)
	return d, nil
}

func (d *segDir) get(id string) (segInfo, bool) {
	s, ok := d.byID[id]
	return s, ok
}

// name renders a segment reference: its name and id, or the id alone when
// the server does not know it.
func (d *segDir) name(id string) string {
	if s, ok := d.byID[id]; ok {
		return fmt.Sprintf("segment %s (id %s)", quote(s.Name), s.ID)
	}
	return fmt.Sprintf("segment %s (not a public segment)", id)
}

// byName finds the public segments of a name, ignoring case; in context
// appContext first when it is given.
func (d *segDir) byName(name, appContext string) []segInfo {
	var exact, other []segInfo
	for _, id := range d.order {
		s := d.byID[id]
		if !strings.EqualFold(strings.TrimSpace(s.Name), strings.TrimSpace(name)) {
			continue
		}
		if appContext == "" || s.Context == appContext {
			exact = append(exact, s)
		} else {
			other = append(other, s)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return other
}

// parents lists the public segments that hold id as a sub-segment.
func (d *segDir) parents(id string) []segInfo {
	var out []segInfo
	for _, pid := range d.order {
		if slices.Contains(d.byID[pid].Members.Segments, id) {
			out = append(out, d.byID[pid])
		}
	}
	return out
}

// descendants lists the segments id holds, at any depth (each once).
func (d *segDir) descendants(id string) []string {
	var out []string
	seen := map[string]bool{id: true}
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, sub := range d.byID[cur].Members.Segments {
			if !seen[sub] {
				seen[sub] = true
				out = append(out, sub)
				queue = append(queue, sub)
			}
		}
	}
	return out
}

// usages lists the flag and experiment lists that use segment id, directly
// or through a segment that holds it, flags first (readmodel.UsesOf, as
// `segments show` lists them).
func (d *segDir) usages(id string) []usage {
	if d.raw == nil {
		return nil
	}
	var out []usage
	seen := map[string]bool{}
	for _, u := range readmodel.UsesOf(id, d.raw.SegmentUsage, d.raw.Segments) {
		x := usage{Kind: u.Kind, ID: u.ID, Name: u.Name, Status: u.State, List: u.List, Enabled: u.On, Via: strings.Join(u.Via, `" > "`)}
		if k := x.String(); !seen[k] {
			seen[k] = true
			out = append(out, x)
		}
	}
	return out
}

// running reports whether a usage keeps serving: an enabled flag, or an
// experiment that is enrolling.
func (u usage) running() bool {
	if u.Kind == "flag" {
		return u.Status == FlagEnabled
	}
	return u.Status == string(upgrade.StateEnrolling) || strings.EqualFold(u.Status, "running")
}

// ---- rendering ----

// fmtMembers renders a member set: users, groups, segments by name.
func fmtMembers(m memberSet, d *segDir) string {
	var parts []string
	if len(m.Users) > 0 {
		parts = append(parts, plural(len(m.Users), "user", "users")+" "+fmtUsers(m.Users))
	}
	if len(m.Groups) > 0 {
		parts = append(parts, plural(len(m.Groups), "group", "groups")+" "+fmtGroups(m.Groups))
	}
	for _, s := range m.Segments {
		parts = append(parts, "the members of "+d.name(s))
	}
	if len(parts) == 0 {
		return "(no members)"
	}
	return strings.Join(parts, "; ")
}

func fmtList(l flagList, d *segDir) string {
	s := fmtMembers(l.Members, d)
	if !l.Enabled {
		s += " [disabled: does not count]"
	}
	return s
}

// listLines renders a flag's lists of one kind under a heading.
func listLines(b *Planner, heading string, ls []flagList, d *segDir) {
	if len(ls) == 0 {
		b.Line("  %s: (none)", heading)
		return
	}
	b.Line("  %s:", heading)
	for i, l := range ls {
		id := ""
		if l.ID != "" {
			id = " (list " + l.ID + ")"
		}
		b.Line("    %d. %s%s", i+1, fmtList(l, d), id)
	}
}

// reach says in words whom the flag is served to, by UpGrade's rules: only
// when enabled, only enabled lists count, exclusion wins.
func reach(f flagState, d *segDir) string {
	who := reachWhenEnabled(f, d)
	if f.Status != FlagEnabled {
		return fmt.Sprintf("nobody: the flag is %s (only enabled flags are served); once enabled it would reach %s", identOrNone(f.Status), who)
	}
	return who
}

func reachWhenEnabled(f flagState, d *segDir) string {
	// A list without members (say, its only segment was deleted: UpGrade
	// drops it from the list silently) matches nobody, so it is left out
	// of the sentence rather than shown as "except (no members)".
	inc, exc := withMembers(enabledLists(f.Include)), withMembers(enabledLists(f.Exclude))
	ctx := identOrNone(f.Context)
	except := ""
	if len(exc) > 0 {
		parts := make([]string, len(exc))
		for i, l := range exc {
			parts[i] = fmtMembers(l.Members, d)
		}
		except = ", except " + strings.Join(parts, "; ")
	}
	if f.FilterMode == FlagIncludeAll {
		return "everyone in context " + ctx + except
	}
	if len(inc) == 0 {
		if len(enabledLists(f.Include)) > 0 {
			return "nobody (filter mode excludeAll and its enabled include lists have no members)"
		}
		return "nobody (filter mode excludeAll and no enabled include list)"
	}
	parts := make([]string, len(inc))
	for i, l := range inc {
		parts[i] = fmtMembers(l.Members, d)
	}
	return "only " + strings.Join(parts, ", or ") + " in context " + ctx + except
}

func withMembers(ls []flagList) []flagList {
	var out []flagList
	for _, l := range ls {
		if !l.Members.empty() {
			out = append(out, l)
		}
	}
	return out
}

// reachWarnings are the warnings of spec/pipeline.md for a flag as it will
// be: enabled and reaching nobody, or enabled and reaching everyone.
func reachWarnings(b *Planner, f flagState) {
	if f.Status != FlagEnabled {
		return
	}
	switch {
	case f.FilterMode == FlagExcludeAll && len(enabledLists(f.Include)) == 0:
		b.Warn("the flag is enabled with filter mode excludeAll and no enabled include list: it reaches nobody")
	case f.FilterMode == FlagIncludeAll && len(enabledLists(f.Exclude)) == 0:
		b.Warn("the flag is enabled with filter mode includeAll and no exclude list: it reaches everyone in context %s", identOrNone(f.Context))
	}
}

// flagHeader names a flag in a plan's first line.
func flagHeader(f flagState) string {
	return fmt.Sprintf("%s (key %s, id %s, context %s, %s)", quote(f.Name), quote(f.Key), f.ID, identOrNone(f.Context), identOrNone(f.Status))
}

func fmtDiff(b *Planner, diff memberDiff, d *segDir) {
	if len(diff.AddUsers) > 0 {
		b.Line("    + users %s", fmtUsers(diff.AddUsers))
	}
	if len(diff.RemoveUsers) > 0 {
		b.Line("    - users %s", fmtUsers(diff.RemoveUsers))
	}
	if len(diff.AddGroups) > 0 {
		b.Line("    + groups %s", fmtGroups(diff.AddGroups))
	}
	if len(diff.RemoveGroups) > 0 {
		b.Line("    - groups %s", fmtGroups(diff.RemoveGroups))
	}
	for _, s := range diff.AddSegments {
		b.Line("    + %s", d.name(s))
	}
	for _, s := range diff.RemoveSegments {
		b.Line("    - %s", d.name(s))
	}
	if diff.empty() {
		b.Line("    (members unchanged)")
	}
}

// pinObject binds the plan to one version of the flag or segment it
// describes; the checkpoint keeps it in experiment_id/experiment_version.
func (b *Planner) pinObject(id, version string) {
	b.plan.ExperimentID = id
	b.plan.ExperimentVersion = version
}

// ---- validation shared by the flag and segment actions ----

// flag reads a flag, turning an unknown id into a not_found problem; nil
// when it does not exist.
func (c *Checker) flag(field, id string) (*flagState, error) {
	if id == "" {
		c.Missing(field, "%s is required (look the flag up with find_feature_flag)", field)
		return nil, nil
	}
	if !upgrade.IsUUID(id) {
		c.NotFound(field, "%q is not a feature flag id (a UUID); look the flag up by key or name with find_feature_flag", id)
		return nil, nil
	}
	f, err := c.api.Flag(c.ctx, id)
	if err != nil {
		switch upgrade.CategoryOf(err) {
		case upgrade.CategoryNotFound, upgrade.CategoryValidation:
			c.NotFound(field, "no feature flag with id %s", id)
			return nil, nil
		}
		return nil, fmt.Errorf("reading feature flag %s: %w", id, err)
	}
	s := flagStateOf(f)
	return &s, nil
}

// segments reads the public segments once per check.
func (c *Checker) segments() (*segDir, error) {
	if c.segs != nil {
		return c.segs, nil
	}
	d, err := readSegments(c.ctx, c.api)
	if err != nil {
		return nil, err
	}
	c.segs = d
	return d, nil
}

// segment checks that id names a public segment; nil when it does not.
func (c *Checker) segment(field, id string) (*segInfo, error) {
	if id == "" {
		c.Missing(field, "%s is required (look the segment up with find_segment)", field)
		return nil, nil
	}
	d, err := c.segments()
	if err != nil {
		return nil, err
	}
	s, ok := d.get(id)
	if !ok {
		c.NotFound(field, "no public segment with id %q; look the segment up by name with find_segment", id)
		return nil, nil
	}
	return &s, nil
}

// members checks the members of a list or segment against the context:
// group types of the context, segment ids of public segments of the same
// context (self may not hold itself).
func (c *Checker) members(prefix string, m memberSet, appContext string, self string) error {
	info, ctxOK := upgrade.ContextInfo{}, false
	if appContext != "" {
		md, err := c.metadata()
		if err != nil {
			return err
		}
		info, ctxOK = md[appContext]
	}
	c.userList(join(prefix, "users"), m.Users)
	c.groupList(join(prefix, "groups"), m.Groups, appContext, info, ctxOK)
	if len(m.Segments) == 0 {
		return nil
	}
	d, err := c.segments()
	if err != nil {
		return err
	}
	for i, id := range m.Segments {
		f := fmt.Sprintf("%s[%d]", join(prefix, "segment_ids"), i)
		s, ok := d.get(id)
		switch {
		case !ok:
			c.NotFound(f, "no public segment with id %q; look it up by name with find_segment", id)
		case id == self:
			c.Add(f, "segment %s cannot hold itself", quote(s.Name))
		case self != "" && slices.Contains(d.descendants(id), self):
			c.Add(f, "segment %s already holds this segment: holding it back would make a loop", quote(s.Name))
		case appContext != "" && s.Context != appContext:
			c.Add(f, "segment %s is in context %s, not %s", quote(s.Name), s.Context, appContext)
		}
	}
	return nil
}

// oneKind checks that a flag list holds exactly one kind of member.
func (c *Checker) oneKind(field string, m memberSet) {
	switch kinds := memberKinds(m.Users, m.Groups, m.Segments); len(kinds) {
	case 0:
		c.Missing(field, "a list needs members: exactly one of users, groups or segment_ids")
	case 1:
	default:
		c.Add(field, "a list holds exactly one kind of member, as in UpGrade's web UI; got %s: make one list per kind", strings.Join(kinds, " and "))
	}
}

// listType is the listType UpGrade's web UI sends for a list's members.
func listType(m memberSet) string {
	switch {
	case len(m.Segments) > 0:
		return "Segment"
	case len(m.Groups) > 0:
		return m.Groups[0].Type
	}
	return "Individual"
}

func upgradeKind(kind string) upgrade.ListKind {
	if kind == ListExclude {
		return upgrade.ListExclusion
	}
	return upgrade.ListInclusion
}

func (l FlagListParam) members() memberSet {
	return memberSet{Users: l.Users, Groups: l.Groups, Segments: l.SegmentIDs}.sorted()
}

// listInput is the body of a flag list route.
func listInput(flag flagState, kind, listID string, enabled bool, m memberSet) upgrade.FlagListInput {
	name := listID
	if name == "" {
		name = kind + " list"
	}
	return upgrade.FlagListInput{FlagID: flag.ID, Enabled: enabled, ListType: listType(m), Segment: upgrade.SegmentInput{
		ID: listID, Name: name, Context: flag.Context, Type: upgrade.SegmentPrivate, ListType: listType(m),
		UserIDs: nonNilList(m.Users), Groups: groupRefs(m.Groups), SubSegmentIDs: nonNilList(m.Segments)}}
}

func nonNilList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// sameMembers reports whether two member sets hold the same members.
func sameMembers(a, b memberSet) bool { return diffMembers(a.sorted(), b.sorted()).empty() }

func isNotFound(err error) bool { return upgrade.CategoryOf(err) == upgrade.CategoryNotFound }

// flagAndSegments reads the flag a plan describes and the public segments
// (for names and usage), and pins the plan to the flag's version.
func (b *Planner) flagAndSegments(id string) (flagState, *segDir, error) {
	f, err := readFlag(b.ctx, b.api, id)
	if err != nil {
		return flagState{}, nil, err
	}
	d, err := readSegments(b.ctx, b.api)
	if err != nil {
		return flagState{}, nil, err
	}
	b.pinObject(f.ID, f.Version)
	return f, d, nil
}

// reconcileFlag reads the flag an interrupted action wrote. A flag that is
// gone makes the outcome unknown: gone is the answer (rec), not an error.
func reconcileFlag(ctx context.Context, env Env, id, action string) (f flagState, rec *Reconciliation, err error) {
	f, err = readFlag(ctx, env.API, id)
	switch {
	case err == nil:
		return f, nil, nil
	case isNotFound(err):
		return f, &Reconciliation{Outcome: OutcomeUnknown, Note: fmt.Sprintf("feature flag %s no longer exists", id)}, nil
	}
	return f, nil, fmt.Errorf("reconcile %s: %w", action, err)
}

func derefRec(r *Reconciliation) Reconciliation {
	if r == nil {
		return Reconciliation{}
	}
	return *r
}

// segmentAndSegments reads the public segments and the one a plan
// describes, and pins the plan to its version.
func (b *Planner) segmentAndSegments(id string) (segInfo, *segDir, error) {
	d, err := readSegments(b.ctx, b.api)
	if err != nil {
		return segInfo{}, nil, err
	}
	s, ok := d.get(id)
	if !ok {
		return segInfo{}, nil, fmt.Errorf("no public segment with id %s", id)
	}
	b.pinObject(s.ID, s.Version)
	return s, d, nil
}
