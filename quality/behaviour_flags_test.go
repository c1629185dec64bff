package quality

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The habits real models have with the feature flag and segment tools: a
// key in the wrong case, a group written as "classId:c7", segment names
// instead of ids, lists sent as one object, nulls and empty optional
// fields, numbers as strings, display-name statuses. Every case ends with
// the backend holding what was shown and approved.

// seedFlags makes the flags and segments every case starts with:
// segment "pilot schools" (assign-prog, users u1 u2), flag "Math hints"
// (MATH_HINTS, assign-prog, disabled, excludeAll, exclude list u9),
// segment "reading club" (assign-prog, user r1) and flag "Reading aid"
// (READING_AID, assign-prog, enabled, excludeAll, include list classId c7).
// Their ids fill {{id:pilot schools}}, {{id:MATH_HINTS}}, {{id:MATH_HINTS
// exclude}}, {{id:reading club}}, {{id:READING_AID}} and
// {{id:READING_AID include}}.
func seedFlags(t *testing.T, w *world, api *upgrade.Client) {
	t.Helper()
	ctx := context.Background()
	raw, err := actions.Run(ctx, api, actions.CreateSegmentParams{Name: "pilot schools", Context: "assign-prog", Users: []string{"u1", "u2"}})
	if err != nil {
		t.Fatalf("seed segment: %v", err)
	}
	var seg actions.SegmentResult
	if err := json.Unmarshal(raw, &seg); err != nil {
		t.Fatal(err)
	}
	w.ids["pilot schools"] = seg.ID
	raw, err = actions.Run(ctx, api, actions.CreateFeatureFlagParams{Name: "Math hints", Key: "MATH_HINTS", Context: "assign-prog",
		ExcludeLists: []actions.FlagListParam{{Users: []string{"u9"}}}})
	if err != nil {
		t.Fatalf("seed flag: %v", err)
	}
	var fl actions.FlagResult
	if err := json.Unmarshal(raw, &fl); err != nil {
		t.Fatal(err)
	}
	w.ids["MATH_HINTS"] = fl.ID
	w.ids["MATH_HINTS exclude"] = fl.ExcludeLists[0].ID
	raw, err = actions.Run(ctx, api, actions.CreateSegmentParams{Name: "reading club", Context: "assign-prog", Users: []string{"r1"}})
	if err != nil {
		t.Fatalf("seed segment: %v", err)
	}
	if err := json.Unmarshal(raw, &seg); err != nil {
		t.Fatal(err)
	}
	w.ids["reading club"] = seg.ID
	raw, err = actions.Run(ctx, api, actions.CreateFeatureFlagParams{Name: "Reading aid", Key: "READING_AID", Context: "assign-prog", Status: actions.FlagEnabled,
		IncludeLists: []actions.FlagListParam{{Groups: []actions.GroupParam{{Type: "classId", GroupID: "c7"}}}}})
	if err != nil {
		t.Fatalf("seed flag: %v", err)
	}
	fl = actions.FlagResult{}
	if err := json.Unmarshal(raw, &fl); err != nil {
		t.Fatal(err)
	}
	w.ids["READING_AID"] = fl.ID
	w.ids["READING_AID include"] = fl.IncludeLists[0].ID
}

func (w *world) client(t *testing.T) *upgrade.Client {
	t.Helper()
	c, err := upgrade.New(upgrade.Config{BaseURL: w.srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// flagList renders a flag's lists of one kind: "users:u1,u2",
// "groups:classId=c7", "segments:pilot schools"; "(off)" for a disabled one.
func flagLists(t *testing.T, c *upgrade.Client, f *upgrade.FeatureFlag, kind upgrade.ListKind) []string {
	t.Helper()
	segs, err := c.Segments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, s := range segs.Segments {
		names[s.ID] = s.Name
	}
	lists := f.Inclusion
	if kind == upgrade.ListExclusion {
		lists = f.Exclusion
	}
	var out []string
	for _, l := range lists {
		var parts []string
		if l.Segment != nil {
			if u := l.Segment.UserIDs(); len(u) > 0 {
				slices.Sort(u)
				parts = append(parts, "users:"+strings.Join(u, ","))
			}
			for _, g := range l.Segment.GroupRefs() {
				parts = append(parts, "groups:"+g.Type+"="+g.GroupID)
			}
			for _, id := range l.Segment.SubSegmentIDs() {
				parts = append(parts, "segments:"+names[id])
			}
		}
		s := strings.Join(parts, " ")
		if !l.Enabled {
			s += " (off)"
		}
		out = append(out, s)
	}
	return out
}

// hasFlag: the flag of that key exists with that status and filter mode
// and exactly these include and exclude lists (nil: not checked).
func hasFlag(key, status, mode string, include, exclude []string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		c := w.client(t)
		ctx := context.Background()
		all, err := c.Flags(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range all {
			if f.Key != key {
				continue
			}
			full, err := c.Flag(ctx, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if full.Status != status || full.FilterMode != mode {
				t.Errorf("backend: flag %s is %s/%s, want %s/%s", key, full.Status, full.FilterMode, status, mode)
			}
			if got := flagLists(t, c, full, upgrade.ListInclusion); include != nil && !slices.Equal(got, include) {
				t.Errorf("backend: flag %s include lists %q, want %q", key, got, include)
			}
			if got := flagLists(t, c, full, upgrade.ListExclusion); exclude != nil && !slices.Equal(got, exclude) {
				t.Errorf("backend: flag %s exclude lists %q, want %q", key, got, exclude)
			}
			return
		}
		t.Errorf("backend: no flag with key %s", key)
	}
}

// hasSegment: the public segment exists with exactly these users.
func hasSegment(name string, users ...string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		s := segmentByName(t, w, name)
		if s == nil {
			t.Errorf("backend: no segment %q", name)
			return
		}
		got := s.UserIDs()
		slices.Sort(got)
		if !slices.Equal(got, users) {
			t.Errorf("backend: segment %q users %v, want %v", name, got, users)
		}
	}
}

func TestHabitFlags(t *testing.T) {
	t.Parallel()
	mathFlag := func(status string, include []string) check {
		return hasFlag("MATH_HINTS", status, "excludeAll", include, []string{"users:u9"})
	}
	runBehaviour(t, []behaviourCase{
		{name: "key in the wrong case", steps: []turnStep{
			request("Turn on math_hints.", "update_feature_flag_status", `{flag_id: math_hints, status: Enabled}`).
				expect(func(w *turnWant) { w.params = `{"flag_id":"{{id:MATH_HINTS}}","status":"enabled"}` }),
			yes("update_feature_flag_status"),
		}, backend: []check{mathFlag("enabled", nil)}},
		{name: "group as classId:c7", steps: []turnStep{
			request("Give math hints to class 7.", "add_feature_flag_list", `{flag_id: MATH_HINTS, kind: include, groups: ["classId:c7"]}`).
				expect(func(w *turnWant) {
					w.params = `{"groups":[{"type":"classId","group_id":"c7"}],"kind":"include","enabled":true}`
				}),
			yes("add_feature_flag_list"),
		}, backend: []check{mathFlag("disabled", []string{"groups:classId=c7"})}},
		{name: "group as a pair and the kind as inclusion", steps: []turnStep{
			request("Give math hints to class 7.", "add_feature_flag_list", `{flag_id: "{{id:MATH_HINTS}}", kind: Inclusion, groups: {classId: c7}, users: [], segment_ids: null}`).
				expect(func(w *turnWant) { w.params = `{"groups":[{"type":"classId","group_id":"c7"}],"kind":"include"}` }),
			yes("add_feature_flag_list"),
		}, backend: []check{mathFlag("disabled", []string{"groups:classId=c7"})}},
		{name: "segment name instead of an id", steps: []turnStep{
			request("Give math hints to the pilot schools.", "add_feature_flag_list", `{flag_id: Math hints, kind: include, segment_ids: [Pilot Schools]}`).
				expect(func(w *turnWant) { w.params = `{"segment_ids":["{{id:pilot schools}}"]}` }),
			yes("add_feature_flag_list"),
		}, backend: []check{mathFlag("disabled", []string{"segments:pilot schools"})}},
		{name: "lists sent as one object", steps: []turnStep{
			request("Create a flag Hint panel (HINT_PANEL) in assign-prog for u1 and u2, on.", "create_feature_flag",
				`{name: Hint panel, key: HINT_PANEL, context: assign-prog, status: "Enabled", filter_mode: exclude all, description: null, tags: [], include_lists: {users: [u1, u2], enabled: "true"}, exclude_lists: null}`).
				expect(func(w *turnWant) {
					w.params = `{"status":"enabled","filter_mode":"excludeAll","include_lists":[{"enabled":true,"users":["u1","u2"]}]}`
				}),
			yes("create_feature_flag"),
		}, backend: []check{hasFlag("HINT_PANEL", "enabled", "excludeAll", []string{"users:u1,u2"}, []string{})}},
		{name: "numbers as strings and one value for a list", steps: []turnStep{
			request("Add user 123 to the pilot schools and drop u1.", "update_segment", `{segment_id: pilot schools, add_users: 123, remove_users: "u1", users: null, name: null}`).
				expect(func(w *turnWant) { w.params = `{"add_users":["123"],"remove_users":["u1"]}` }),
			yes("update_segment"),
		}, backend: []check{hasSegment("pilot schools", "123", "u2")}},
		{name: "exclude list members merged", steps: []turnStep{
			request("Also exclude u12 from math hints.", "update_feature_flag_list",
				`{flag_id: MATH_HINTS, list_id: "{{id:MATH_HINTS exclude}}", users: [u9, u12], kind: null}`).
				expect(func(w *turnWant) { w.params = `{"kind":"exclude","users":["u9","u12"]}` }),
			yes("update_feature_flag_list"),
		}, backend: []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", nil, []string{"users:u12,u9"})}},
		{name: "a taken key is refused in Go", steps: []turnStep{
			{say: "Create a flag called Hints again with key MATH_HINTS in assign-prog.",
				llm:  analyze + gather("create_feature_flag", `{name: Hints again, key: MATH_HINTS, context: assign-prog}`) + respond,
				want: turnWant{field: "key", calls: 3}},
		}, backend: []check{mathFlag("disabled", []string{})}},
		{name: "why not served, without an exposure", steps: []turnStep{
			{say: "Why doesn't u12 in class c7 get math hints?",
				llm: "- call:\n    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: Explain the flag for u12., reasoning: Evaluation., needs_action: false}\n" +
					"    explain_feature_flag: {flag_id: Math Hints, user_id: u12, groups: {classId: c7}}\n" + respond,
				want: turnWant{calls: 2, seen: []string{`"served":false`, `"rule":"flag_not_enabled"`}}},
		}, backend: []check{mathFlag("disabled", []string{}), noExposures("MATH_HINTS")}},
	})
}

// noExposures: the client API was never asked for the flag.
func noExposures(key string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		page, err := w.client(t).FlagsPage(context.Background(), upgrade.PageRequest{Skip: 0, Take: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range page.Nodes {
			if f.Key == key && f.Exposures != nil && *f.Exposures != 0 {
				t.Errorf("backend: flag %s has %d exposures; explaining must not record any", key, *f.Exposures)
			}
		}
	}
}

// flagByKey is the stored flag of that key, or nil.
func flagByKey(t *testing.T, w *world, key string) *upgrade.FeatureFlag {
	t.Helper()
	all, err := w.client(t).Flags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if f.Key == key {
			return &f
		}
	}
	return nil
}

// segmentByName is the public segment of that name, or nil.
func segmentByName(t *testing.T, w *world, name string) *upgrade.SegmentRecord {
	t.Helper()
	all, err := w.client(t).Segments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all.Segments {
		if s.Name == name {
			return &s
		}
	}
	return nil
}

// flagNamed: the flag of that key exists and has that name.
func flagNamed(key, name string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		switch f := flagByKey(t, w, key); {
		case f == nil:
			t.Errorf("backend: no flag with key %s", key)
		case f.Name != name:
			t.Errorf("backend: flag %s is named %q, want %q", key, f.Name, name)
		}
	}
}

// noFlag: no flag has that key.
func noFlag(key string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if flagByKey(t, w, key) != nil {
			t.Errorf("backend: flag %s is still there", key)
		}
	}
}

// noSegment: no public segment has that name.
func noSegment(name string) check {
	return func(t *testing.T, w *world) {
		t.Helper()
		if segmentByName(t, w, name) != nil {
			t.Errorf("backend: segment %q is still there", name)
		}
	}
}

// flagsSeeded: the seeded flags and segments are as made, and no flag
// was ever asked for through the client API (no exposure).
func flagsSeeded() check {
	return func(t *testing.T, w *world) {
		t.Helper()
		hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{"users:u9"})(t, w)
		hasFlag("READING_AID", "enabled", "excludeAll", []string{"groups:classId=c7"}, []string{})(t, w)
		hasSegment("pilot schools", "u1", "u2")(t, w)
		hasSegment("reading club", "r1")(t, w)
		noExposures("MATH_HINTS")(t, w)
		noExposures("READING_AID")(t, w)
	}
}

// TestBindingFlags is issue 13's table for the feature flag and segment
// actions: explicit defaults, empty and null optionals, display names
// ("Enabled", "Include", "Exclude all"), other cases and stray spaces in
// keys, names and ids show the same confirmation, which one yes runs.
func TestBindingFlags(t *testing.T) {
	t.Parallel()
	mathOff := hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{"users:u9"})
	families := []bindFamily{
		{action: "create_feature_flag", say: "Create a flag Hint panel with key HINT_PANEL in assign-prog for u1 and u2.",
			plain:   `{"name":"Hint panel","key":"HINT_PANEL","context":"assign-prog","include_lists":[{"users":["u1","u2"]}]}`,
			backend: []check{hasFlag("HINT_PANEL", "disabled", "excludeAll", []string{"users:u1,u2"}, []string{}), flagsSeeded()},
			vars: []bindVariant{
				{"explicit defaults", `{name: Hint panel, key: HINT_PANEL, context: assign-prog, status: disabled, filter_mode: excludeAll, include_lists: [{enabled: true, users: [u1, u2]}]}`},
				{"empty optionals", `{name: Hint panel, key: HINT_PANEL, context: assign-prog, description: "", tags: [], include_lists: [{users: [u1, u2], groups: [], segment_ids: []}], exclude_lists: []}`},
				{"null optionals", `{name: Hint panel, key: HINT_PANEL, context: assign-prog, description: null, tags: null, status: null, filter_mode: null, include_lists: [{enabled: null, users: [u1, u2], groups: null}], exclude_lists: null}`},
				{"display names and blanks", `{name: " Hint panel ", key: "HINT_PANEL ", context: " assign-prog", status: Disabled, filter_mode: Exclude All, include_lists: [{enabled: "true", users: [" u1", "u2 "]}]}`},
			}},
		{action: "update_feature_flag_status", say: "Turn on the math hints flag.",
			plain:   `{"flag_id":"{{id:MATH_HINTS}}","status":"enabled"}`,
			backend: []check{hasFlag("MATH_HINTS", "enabled", "excludeAll", []string{}, []string{"users:u9"})},
			vars: []bindVariant{
				{"display name", `{flag_id: "{{id:MATH_HINTS}}", status: Enabled}`},
				{"on", `{flag_id: MATH_HINTS, status: "ON"}`},
				{"blanks and upper-case id", `{flag_id: " {{upper:MATH_HINTS}} ", status: " enabled"}`},
			}},
		{action: "update_feature_flag", say: "Describe the math hints flag as Hints for math.",
			plain:   `{"flag_id":"{{id:MATH_HINTS}}","description":"Hints for math"}`,
			backend: []check{mathOff, flagNamed("MATH_HINTS", "Math hints")},
			vars: []bindVariant{
				{"null optionals", `{flag_id: "{{id:MATH_HINTS}}", description: Hints for math, name: null, key: null, context: null, tags: null, status: null, filter_mode: null}`},
				{"name with blanks", `{flag_id: " Math Hints ", description: "Hints for math "}`},
			}},
		{action: "add_feature_flag_list", say: "Give the math hints flag to class c7.",
			plain:   `{"flag_id":"{{id:MATH_HINTS}}","kind":"include","groups":[{"type":"classId","group_id":"c7"}]}`,
			backend: []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{"groups:classId=c7"}, []string{"users:u9"})},
			vars: []bindVariant{
				{"explicit defaults and empty lists", `{flag_id: "{{id:MATH_HINTS}}", kind: include, enabled: true, users: [], segment_ids: [], groups: [{type: classId, group_id: c7}]}`},
				{"display name", `{flag_id: MATH_HINTS, kind: Include, groups: [{type: classId, group_id: c7}]}`},
				{"one group as a string with blanks", `{flag_id: " math_hints", kind: " INCLUSION ", groups: " classId:c7 "}`},
			}},
		{action: "remove_feature_flag_list", say: "Remove the exclude list of math hints.",
			plain:   `{"flag_id":"{{id:MATH_HINTS}}","kind":"exclude","list_id":"{{id:MATH_HINTS exclude}}"}`,
			backend: []check{hasFlag("MATH_HINTS", "disabled", "excludeAll", []string{}, []string{})},
			vars: []bindVariant{
				{"display name and blanks", `{flag_id: MATH_HINTS, kind: Exclude, list_id: " {{upper:MATH_HINTS exclude}}"}`},
			}},
		{action: "create_segment", say: "Make a segment pilot teachers in assign-prog with t1 and t2.",
			plain:   `{"name":"pilot teachers","context":"assign-prog","users":["t1","t2"]}`,
			backend: []check{hasSegment("pilot teachers", "t1", "t2")},
			vars: []bindVariant{
				{"empty optionals", `{name: pilot teachers, context: assign-prog, users: [t1, t2], description: "", tags: [], groups: [], segment_ids: []}`},
				{"null optionals and blanks", `{name: "pilot teachers ", context: " assign-prog", users: [" t1", t2], description: null, groups: null, segment_ids: null}`},
			}},
		{action: "update_segment", say: "Add u3 to the pilot schools.",
			plain:   `{"segment_id":"{{id:pilot schools}}","add_users":["u3"]}`,
			backend: []check{hasSegment("pilot schools", "u1", "u2", "u3")},
			vars: []bindVariant{
				{"nulls and empty lists", `{segment_id: "{{id:pilot schools}}", add_users: [u3], name: null, users: null, remove_users: [], add_groups: [], segment_ids: null}`},
				{"name in another case, a number as a string", `{segment_id: PILOT SCHOOLS, add_users: " u3"}`},
			}},
		{action: "delete_segment", say: "Delete the reading club.",
			plain:   `{"segment_id":"{{id:reading club}}"}`,
			backend: []check{noSegment("reading club"), hasSegment("pilot schools", "u1", "u2")},
			vars: []bindVariant{
				{"name with blanks", `{segment_id: " Reading Club "}`},
				{"upper-case id", `{segment_id: "{{upper:reading club}}"}`},
			}},
	}
	runBehaviour(t, bindCases(families))
}
