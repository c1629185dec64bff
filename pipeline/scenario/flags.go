package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Feature flags and segments in scenarios: setup.segments and setup.flags
// (the params of create_segment and create_feature_flag; segment_ids may
// name segments), the templates {{flag:KEY}}, {{segment:NAME}} and
// {{list:KEY:include|exclude:N}}, and backend.flags, backend.flag_absent,
// backend.segments, backend.segment_absent.

// SetupSegment is one public segment to create.
type SetupSegment struct {
	Name   string
	Params json.RawMessage
	Line   int
}

// SetupFlag is one feature flag to create, with its lists.
type SetupFlag struct {
	Key    string
	Params json.RawMessage
	Line   int
}

// segmentYAML is a segment of setup: the params of create_segment.
type segmentYAML struct {
	Name        yaml.Node `yaml:"name"`
	Context     yaml.Node `yaml:"context"`
	Description yaml.Node `yaml:"description"`
	Tags        yaml.Node `yaml:"tags"`
	Users       yaml.Node `yaml:"users"`
	Groups      yaml.Node `yaml:"groups"`
	SegmentIDs  yaml.Node `yaml:"segment_ids"`
}

// flagYAML is a flag of setup: the params of create_feature_flag.
type flagYAML struct {
	Name         yaml.Node `yaml:"name"`
	Key          yaml.Node `yaml:"key"`
	Context      yaml.Node `yaml:"context"`
	Description  yaml.Node `yaml:"description"`
	Tags         yaml.Node `yaml:"tags"`
	Status       yaml.Node `yaml:"status"`
	FilterMode   yaml.Node `yaml:"filter_mode"`
	IncludeLists yaml.Node `yaml:"include_lists"`
	ExcludeLists yaml.Node `yaml:"exclude_lists"`
}

// flagExpectYAML is a flag of expect.backend, matched by key; lists are
// {enabled, users, groups, segments (by name)}.
type flagExpectYAML struct {
	Key          yaml.Node `yaml:"key"`
	Name         yaml.Node `yaml:"name"`
	Context      yaml.Node `yaml:"context"`
	Status       yaml.Node `yaml:"status"`
	FilterMode   yaml.Node `yaml:"filter_mode"`
	Description  yaml.Node `yaml:"description"`
	Tags         yaml.Node `yaml:"tags"`
	IncludeLists yaml.Node `yaml:"include_lists"`
	ExcludeLists yaml.Node `yaml:"exclude_lists"`
}

// segmentExpectYAML is a public segment of expect.backend, by name.
type segmentExpectYAML struct {
	Name        yaml.Node `yaml:"name"`
	Context     yaml.Node `yaml:"context"`
	Description yaml.Node `yaml:"description"`
	Tags        yaml.Node `yaml:"tags"`
	Users       yaml.Node `yaml:"users"`
	Groups      yaml.Node `yaml:"groups"`
	Segments    yaml.Node `yaml:"segments"`
}

// setupParams reads one setup entry (an experimentYAML, a segmentYAML, a
// flagYAML) into the params of action, with its identifying field idKey.
// field, when not nil, takes the keys it returns true for out of the
// params (an experiment's status), reporting its errors in d.err.
func (d *decoder) setupParams(x any, n *yaml.Node, what string, action actions.Name, idKey string, field func(key string, v *yaml.Node) bool) (string, json.RawMessage) {
	params := map[string]any{}
	keys, values := written(x)
	for j, key := range keys {
		if field != nil && field(key, values[j]) {
			if d.err != nil {
				return "", nil
			}
			continue
		}
		val, err := d.experimentValue(key, values[j])
		if err != nil {
			d.err = err
			return "", nil
		}
		params[key] = val
	}
	id, _ := params[idKey].(string)
	if id == "" {
		d.fail(n, "%s: %s is required", what, idKey)
		return "", nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		d.fail(n, "%s: %v", what, err)
		return "", nil
	}
	if _, err := actions.Bind(string(action), raw); err != nil {
		d.fail(n, "%s (%s): %v", what, id, err)
		return "", nil
	}
	return id, raw
}

func (d *decoder) setupSegment(x *segmentYAML, n *yaml.Node, i int) SetupSegment {
	name, raw := d.setupParams(x, n, fmt.Sprintf("setup.segments[%d]", i), actions.CreateSegment, "name", nil)
	return SetupSegment{Name: name, Params: raw, Line: n.Line}
}

func (d *decoder) setupFlag(x *flagYAML, n *yaml.Node, i int) SetupFlag {
	key, raw := d.setupParams(x, n, fmt.Sprintf("setup.flags[%d]", i), actions.CreateFeatureFlag, "key", nil)
	return SetupFlag{Key: key, Params: raw, Line: n.Line}
}

// applyFlagSetup creates the segments, then the flags, through the
// actions' own code; names in segment_ids are resolved as for the agent.
func (r *run) applyFlagSetup(ctx context.Context) error {
	create := func(action actions.Name, raw json.RawMessage, key, where string) error {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		act, _ := actions.Builtin().Lookup(string(action))
		if _, err := actions.ResolveFlagRefs(ctx, r.admin, act.Spec().Refs, m); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		resolved, _ := json.Marshal(m)
		b, err := actions.Bind(string(action), resolved)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if _, err := b.Execute(ctx, actions.Env{API: r.admin}, key); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return nil
	}
	for i, s := range r.sc.Setup.Segments {
		where := fmt.Sprintf("%s:%d: setup segment %q", r.sc.File, s.Line, s.Name)
		if err := create(actions.CreateSegment, s.Params, fmt.Sprintf("scenario-setup/%s/segment/%d", r.sc.Name, i), where); err != nil {
			return err
		}
	}
	for i, f := range r.sc.Setup.Flags {
		where := fmt.Sprintf("%s:%d: setup flag %q", r.sc.File, f.Line, f.Key)
		if err := create(actions.CreateFeatureFlag, f.Params, fmt.Sprintf("scenario-setup/%s/flag/%d", r.sc.Name, i), where); err != nil {
			return err
		}
	}
	return nil
}

// flagState is the backend's flags (with lists) and segments.
type flagState struct {
	flags []upgrade.FeatureFlag
	segs  *upgrade.SegmentsAnswer
	err   error
}

// readFlags reads every flag with its lists and the segments. A backend
// without flags (before 6.5) answers with an error, kept for the
// expectations that need them.
func (r *run) readFlags(ctx context.Context) flagState {
	all, err := r.admin.Flags(ctx)
	if err != nil {
		return flagState{err: err}
	}
	st := flagState{}
	for _, f := range all {
		full, err := r.admin.Flag(ctx, f.ID)
		if err != nil {
			return flagState{err: err}
		}
		st.flags = append(st.flags, *full)
	}
	if st.segs, err = r.admin.Segments(ctx); err != nil {
		return flagState{err: err}
	}
	return st
}

// learnFlags records the ids the templates and the normaliser know.
func (r *run) learnFlags(st flagState) {
	if st.err != nil {
		return
	}
	for _, f := range st.flags {
		r.res.flags[f.Key] = f.ID
		r.norm.kinds[strings.ToLower(f.ID)] = "flag"
		lists := map[string][]string{}
		for _, l := range f.Inclusion {
			lists["include"] = append(lists["include"], l.ID())
			r.norm.kinds[strings.ToLower(l.ID())] = "list"
		}
		for _, l := range f.Exclusion {
			lists["exclude"] = append(lists["exclude"], l.ID())
			r.norm.kinds[strings.ToLower(l.ID())] = "list"
		}
		r.res.lists[f.Key] = lists
	}
	for _, s := range st.segs.Segments {
		r.res.segments[s.Name] = s.ID
		r.norm.kinds[strings.ToLower(s.ID)] = "seg"
	}
}

// flagTemplate expands {{flag:KEY}}, {{segment:NAME}} and
// {{list:KEY:KIND:N}}; ok is false for another kind.
func (r *resolver) flagTemplate(kind, arg string) (string, bool, error) {
	switch kind {
	case "flag":
		id, ok := r.flags[arg]
		if !ok {
			return "", true, fmt.Errorf("no feature flag with key %q on the backend", arg)
		}
		return id, true, nil
	case "segment":
		id, ok := r.segments[arg]
		if !ok {
			return "", true, fmt.Errorf("no public segment named %q on the backend", arg)
		}
		return id, true, nil
	case "list":
		parts := strings.Split(arg, ":")
		if len(parts) != 3 {
			return "", true, fmt.Errorf("want {{list:FLAG_KEY:include|exclude:N}}")
		}
		var n int
		if _, err := fmt.Sscanf(parts[2], "%d", &n); err != nil {
			return "", true, fmt.Errorf("list number %q: want a number from 0", parts[2])
		}
		ids := r.lists[parts[0]][parts[1]]
		if n < 0 || n >= len(ids) {
			return "", true, fmt.Errorf("flag %q has %d %s lists", parts[0], len(ids), parts[1])
		}
		return ids[n], true, nil
	}
	return "", false, nil
}

// setupFlagLines writes the flags and segments of the setup.
func (t *transcript) setupFlagLines(st flagState) {
	if st.err != nil {
		return
	}
	for _, s := range st.segs.Segments {
		fmt.Fprintf(&t.b, "  segment %q %s: %s, %d users, %d groups, %d segments\n", s.Name, s.ID, s.Context, len(s.Users), len(s.Groups), len(s.SubSegments))
	}
	for _, f := range st.flags {
		fmt.Fprintf(&t.b, "  flag %s %q %s: %s, %s, %s, %d include lists, %d exclude lists\n", f.Key, f.Name, f.ID, f.ContextName(), f.Status, f.FilterMode,
			len(f.Inclusion), len(f.Exclusion))
	}
}

func (r *resolver) expandFlagExpect(bb *ExpectBackend) error {
	for _, list := range []*[]map[string]any{&bb.Flags, &bb.Segments} {
		expanded := make([]map[string]any, len(*list))
		for i, m := range *list {
			v, err := r.expandValue(m)
			if err != nil {
				return err
			}
			expanded[i] = v.(map[string]any)
		}
		*list = expanded
	}
	return nil
}

func checkFlags(b *ExpectBackend, st flagState) []string {
	if !b.expectsFlags() {
		return nil
	}
	if st.err != nil {
		return []string{fmt.Sprintf("backend: cannot read the flags and segments: %v", st.err)}
	}
	var out []string
	names := map[string]string{}
	segByName := map[string][]upgrade.SegmentRecord{}
	for _, s := range st.segs.Segments {
		names[s.ID] = s.Name
		segByName[s.Name] = append(segByName[s.Name], s)
	}
	flagByKey := map[string][]upgrade.FeatureFlag{}
	for _, f := range st.flags {
		flagByKey[f.Key] = append(flagByKey[f.Key], f)
	}
	out = append(out, absent("flag_absent", "flag", b.FlagAbsent, flagByKey)...)
	out = append(out, absent("segment_absent", "segment", b.SegmentAbsent, segByName)...)
	out = append(out, matchOne("flags", "key", "flags have that key", b.Flags, flagByKey,
		func(f upgrade.FeatureFlag) any { return flagView(f, names) })...)
	out = append(out, matchOne("segments", "name", "public segments have that name", b.Segments, segByName,
		func(s upgrade.SegmentRecord) any { return segmentView(s, names) })...)
	return out
}

// matchOne compares each entry of backend.<key> with the one record of its
// idKey in byID; none or several is a failure ("<n> <many>").
func matchOne[T any](key, idKey, many string, wants []map[string]any, byID map[string][]T, view func(T) any) []string {
	var out []string
	for i, want := range wants {
		id := want[idKey].(string)
		p := fmt.Sprintf("backend.%s[%d] (%s)", key, i, id)
		if list := byID[id]; len(list) != 1 {
			out = append(out, fmt.Sprintf("%s: %d %s", p, len(list), many))
		} else {
			out = append(out, subset(p, want, view(list[0]))...)
		}
	}
	return out
}

// membersView is a list or segment in the vocabulary of the actions:
// users, groups {type, group_id}, segments by name; sorted.
func membersView(s *upgrade.SegmentRecord, names map[string]string) map[string]any {
	users, groups, segs := []string{}, []map[string]any{}, []string{}
	if s != nil {
		users = append(users, s.UserIDs()...)
		for _, g := range s.GroupRefs() {
			groups = append(groups, map[string]any{"type": g.Type, "group_id": g.GroupID})
		}
		for _, id := range s.SubSegmentIDs() {
			name := names[id]
			if name == "" {
				name = id
			}
			segs = append(segs, name)
		}
	}
	sort.Strings(users)
	sort.Strings(segs)
	sort.Slice(groups, func(i, j int) bool {
		return fmt.Sprint(groups[i]["type"], groups[i]["group_id"]) < fmt.Sprint(groups[j]["type"], groups[j]["group_id"])
	})
	return map[string]any{"users": users, "groups": groups, "segments": segs}
}

func flagView(f upgrade.FeatureFlag, names map[string]string) any {
	lists := func(ls []upgrade.FlagList) []any {
		out := []any{}
		for _, l := range ls {
			m := membersView(l.Segment, names)
			m["enabled"] = l.Enabled
			out = append(out, m)
		}
		return out
	}
	tags := f.Tags
	if tags == nil {
		tags = []string{}
	}
	return jsonValue(map[string]any{"key": f.Key, "name": f.Name, "context": f.ContextName(), "status": f.Status, "filter_mode": f.FilterMode,
		"description": f.Description, "tags": tags, "include_lists": lists(f.Inclusion), "exclude_lists": lists(f.Exclusion)})
}

func segmentView(s upgrade.SegmentRecord, names map[string]string) any {
	m := membersView(&s, names)
	m["name"], m["context"], m["description"] = s.Name, s.Context, s.Description
	tags := s.Tags
	if tags == nil {
		tags = []string{}
	}
	m["tags"] = tags
	return jsonValue(m)
}

// expectsFlags reports whether b names flags or segments.
func (b *ExpectBackend) expectsFlags() bool {
	return len(b.Flags)+len(b.FlagAbsent)+len(b.Segments)+len(b.SegmentAbsent) > 0
}

// usesFlags reports whether a scenario sets up, names or expects flags or
// segments: only then does each step read them.
func usesFlags(sc *Scenario) bool {
	if len(sc.Setup.Flags)+len(sc.Setup.Segments) > 0 {
		return true
	}
	for _, st := range sc.Steps {
		if b := st.Expect.Backend; b != nil && b.expectsFlags() {
			return true
		}
		for _, rep := range st.LLM {
			for _, c := range rep.Calls {
				if strings.Contains(c.Arguments, "{{flag:") || strings.Contains(c.Arguments, "{{segment:") || strings.Contains(c.Arguments, "{{list:") {
					return true
				}
			}
		}
	}
	return false
}
