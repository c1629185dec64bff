package pipeline

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/flageval"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

// The gatherer's feature flag, segment and history lookups (spec/pipeline.md,
// "Feature flags and segments"), in the shapes of upgrade/readmodel, as
// `flags` and `segments` show them. Read-only; results are stored under
// gathered_info and dropped when an action declares actions.CacheFlags.

type flagFilter struct {
	Context string `json:"context,omitempty" jsonschema:"only flags of this app context"`
	Status  string `json:"status,omitempty" jsonschema:"only flags with this status: enabled, disabled, archived"`
	Key     string `json:"key,omitempty" jsonschema:"only keys containing this text (any case)"`
}

type flagNameArg struct {
	NameOrKey string `json:"name_or_key" jsonschema:"the flag's key or name, or part of it"`
}

type flagRef struct {
	FlagID string `json:"flag_id" jsonschema:"flag id (a key or name is also accepted)"`
}

type segmentFilter struct {
	Context string `json:"context,omitempty" jsonschema:"only segments of this app context"`
}

type segmentNameArg struct {
	Name string `json:"name" jsonschema:"segment name or part of it"`
}

type segmentRef struct {
	SegmentID string `json:"segment_id" jsonschema:"segment id (a name is also accepted)"`
}

type explainArgs struct {
	FlagID string              `json:"flag_id" jsonschema:"flag id (a key or name is also accepted)"`
	UserID string              `json:"user_id" jsonschema:"the user's id"`
	Groups map[string][]string `json:"groups,omitempty" jsonschema:"the user's groups, type -> ids, e.g. {\"classId\": [\"c7\"]}; without them only rules on the user id can match"`
	// Context is the app context asked for; the flag's first by default.
	Context string `json:"context,omitempty" jsonschema:"the app context the client asks in (default: the flag's first)"`
}

// flagDetails reads a flag with everything its lists name.
func flagDetails(ctx context.Context, t *turn, id string) (readmodel.FlagDetails, error) {
	snap, err := t.a.deps.API.FlagSnapshot(ctx, id)
	if err != nil {
		return readmodel.FlagDetails{}, err
	}
	d := readmodel.FlagDetailsOf(snap.Flag, readmodel.NamesOf(append(snap.Segments, snap.Global...)...))
	t.update(func(s *State) { s.setInfo("feature_flag_details", id, d) })
	return d, nil
}

// segmentDetails reads a public segment with its members and uses.
func segmentDetails(ctx context.Context, t *turn, id string) (readmodel.SegmentDetails, error) {
	all, err := t.a.deps.API.Segments(ctx)
	if err != nil {
		return readmodel.SegmentDetails{}, err
	}
	i := slices.IndexFunc(all.Segments, func(s upgrade.SegmentRecord) bool { return s.ID == id })
	var seg *upgrade.SegmentRecord
	if i >= 0 {
		seg = &all.Segments[i]
	} else if seg, err = t.a.deps.API.Segment(ctx, id); err != nil {
		return readmodel.SegmentDetails{}, err
	}
	d := readmodel.SegmentDetailsOf(seg, all.SegmentUsage, all.Segments)
	t.update(func(s *State) { s.setInfo("segment_details", id, d) })
	return d, nil
}

func flagTools() []*toolDef {
	return []*toolDef{
		newTool("get_feature_flags", "Feature flags (key, name, context, status, filter mode, list counts) with optional filters.", true,
			func(ctx context.Context, t *turn, f flagFilter) (any, error) {
				flags, err := t.a.deps.API.Flags(ctx)
				if err != nil {
					return nil, err
				}
				segs, err := t.a.deps.API.Segments(ctx)
				if err != nil {
					return nil, err
				}
				status, key, appContext := actions.FlagStatus(f.Status), strings.ToLower(strings.TrimSpace(f.Key)), strings.TrimSpace(f.Context)
				if status != "" && !slices.Contains([]string{actions.FlagEnabled, actions.FlagDisabled, actions.FlagArchived}, status) {
					return nil, inputErrorf("status: unknown value %q; use enabled, disabled or archived", strings.TrimSpace(f.Status))
				}
				keep := slices.DeleteFunc(flags, func(fl upgrade.FeatureFlag) bool {
					return appContext != "" && !slices.ContainsFunc(fl.Context, func(c string) bool { return strings.EqualFold(c, appContext) }) ||
						status != "" && fl.Status != status ||
						key != "" && !strings.Contains(strings.ToLower(fl.Key), key)
				})
				out := readmodel.SummarizeFlags(keep, readmodel.CountLists(segs.SegmentUsage))
				t.update(func(s *State) { s.setInfo("feature_flags", "", out) })
				return out, nil
			}).about(actions.ObjectFeatureFlag),
		newTool("find_feature_flag", "Best matches for a flag key or name (exact key, key in any case, exact name, prefix, substring) with ids; the details of a unique match.", true,
			func(ctx context.Context, t *turn, a flagNameArg) (any, error) {
				flags, err := t.a.deps.API.Flags(ctx)
				if err != nil {
					return nil, err
				}
				ms := actions.FindFlags(flags, a.NameOrKey, 5)
				res := map[string]any{"matches": ms}
				if m, ok := actions.UniqueFlag(ms); ok {
					if res["details"], err = flagDetails(ctx, t, m.ID); err != nil {
						return nil, err
					}
				}
				return res, nil
			}).about(actions.ObjectFeatureFlag),
		newTool("get_feature_flag_details", "One feature flag with its include and exclude lists (list ids, members, segments by name) and whom it reaches.", true,
			func(ctx context.Context, t *turn, a flagRef) (any, error) {
				id, err := actions.ResolveFlagID(ctx, t.a.deps.API, a.FlagID)
				if err != nil {
					return nil, inputErrorf("flag_id: %v", err)
				}
				return flagDetails(ctx, t, id)
			}).about(actions.ObjectFeatureFlag),
		newTool("get_segments", "Public segments with member counts and the flags and experiments that use them.", true,
			func(ctx context.Context, t *turn, f segmentFilter) (any, error) {
				all, err := t.a.deps.API.Segments(ctx)
				if err != nil {
					return nil, err
				}
				appContext := strings.TrimSpace(f.Context)
				keep := slices.DeleteFunc(slices.Clone(all.Segments), func(s upgrade.SegmentRecord) bool {
					return appContext != "" && !strings.EqualFold(s.Context, appContext)
				})
				out := readmodel.SummarizeSegments(keep, all.SegmentUsage)
				t.update(func(s *State) { s.setInfo("segments", "", out) })
				return out, nil
			}).about(actions.ObjectSegment),
		newTool("find_segment", "Best matches for a segment name (exact, prefix, substring) with ids; the details of a unique match.", true,
			func(ctx context.Context, t *turn, a segmentNameArg) (any, error) {
				all, err := t.a.deps.API.Segments(ctx)
				if err != nil {
					return nil, err
				}
				found, unique := actions.FindSegments(all.Segments, a.Name, 5)
				res := map[string]any{"matches": readmodel.SummarizeSegments(found, all.SegmentUsage)}
				if unique {
					if res["details"], err = segmentDetails(ctx, t, found[0].ID); err != nil {
						return nil, err
					}
				}
				return res, nil
			}).about(actions.ObjectSegment),
		newTool("get_segment_details", "One public segment: its users, groups and sub-segments, and the flags and experiments that use it (through parent segments too).", true,
			func(ctx context.Context, t *turn, a segmentRef) (any, error) {
				id, err := actions.ResolveSegmentID(ctx, t.a.deps.API, a.SegmentID)
				if err != nil {
					return nil, inputErrorf("segment_id: %v", err)
				}
				return segmentDetails(ctx, t, id)
			}).about(actions.ObjectSegment),
		explainGroupsLenient(newTool("explain_feature_flag", "Whether a flag is served to a user and the rule that decided, computed from the flag's lists by UpGrade's rules (no request to the client API: no exposure is recorded).", true,
			func(ctx context.Context, t *turn, a explainArgs) (any, error) {
				user := strings.TrimSpace(a.UserID)
				if user == "" {
					return nil, inputErrorf("user_id is required")
				}
				id, err := actions.ResolveFlagID(ctx, t.a.deps.API, a.FlagID)
				if err != nil {
					return nil, inputErrorf("flag_id: %v", err)
				}
				snap, err := t.a.deps.API.FlagSnapshot(ctx, id)
				if err != nil {
					return nil, err
				}
				appContext := strings.TrimSpace(a.Context)
				if i := slices.IndexFunc(snap.Flag.Context, func(c string) bool { return strings.EqualFold(c, appContext) }); i >= 0 {
					appContext = snap.Flag.Context[i] // the context as the flag spells it
				}
				var groups []upgrade.GroupRef
				for _, typ := range sortedKeys(a.Groups) {
					for _, g := range a.Groups[typ] {
						if g = strings.TrimSpace(g); g != "" {
							groups = append(groups, upgrade.GroupRef{Type: strings.TrimSpace(typ), GroupID: g})
						}
					}
				}
				res := flageval.Evaluate(flageval.FromSnapshot(snap, appContext, flageval.UserWithGroups(user, groups)))
				out := map[string]any{"result": res}
				if len(groups) == 0 {
					out["note"] = "no groups were given: only rules on the user id could match; ask for the user's groups (class, school) to check group lists"
				}
				t.update(func(s *State) { s.setInfo("flag_explanations", id+":"+user, out) })
				return out, nil
			})).about(actions.ObjectFeatureFlag),
		newTool("get_experiment_history", "State changes of an experiment, oldest first.", true,
			func(ctx context.Context, t *turn, a experimentRef) (any, error) {
				id, err := t.resolveID(ctx, a.ExperimentID)
				if err != nil {
					return nil, err
				}
				e, err := t.a.deps.API.Experiment(ctx, id)
				if err != nil {
					return nil, err
				}
				h := readmodel.HistoryOf(e)
				out := map[string]any{"history": h}
				if len(h.Changes) == 0 {
					out["note"] = "the server recorded no state change: the experiment has kept its first state"
				}
				t.update(func(s *State) { s.setInfo("experiment_history", id, out) })
				return out, nil
			}).about(actions.ObjectExperiment),
	}
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// explainGroupsLenient lets explain_feature_flag take the user's groups in
// every form models write them, besides the type -> ids map of its schema:
// "classId:c7", ["classId:c7"], [{"type": "classId", "group_id": "c7"}],
// [{"classId": "c7"}]. Anything else reaches the decoder as sent, which
// names the field.
func explainGroupsLenient(d *toolDef) *toolDef {
	run := d.run
	d.run = func(ctx context.Context, t *turn, raw json.RawMessage) (any, error) {
		obj, err := decodeObject(raw)
		if err != nil {
			return run(ctx, t, raw)
		}
		for k, v := range obj {
			if !strings.EqualFold(strings.TrimSpace(k), "groups") {
				continue
			}
			if m, ok := groupsMap(v); ok {
				obj[k] = m
				if b, err := json.Marshal(obj); err == nil {
					raw = b
				}
			}
		}
		return run(ctx, t, raw)
	}
	return d
}

// groupsMap reads groups written as one "type:id" string or a list of
// strings or objects into a type -> ids map; ok is false for a map (the
// schema's own form) and for anything it cannot read.
func groupsMap(v any) (map[string][]string, bool) {
	items, ok := v.([]any)
	if s, isStr := v.(string); isStr {
		items, ok = []any{s}, true
	}
	if !ok {
		return nil, false
	}
	out := map[string][]string{}
	for _, item := range items {
		switch x := item.(type) {
		case string:
			g, err := flageval.ParseGroup(x)
			if err != nil {
				return nil, false
			}
			out[g.Type] = append(out[g.Type], g.GroupID)
		case map[string]any:
			typ, id, ok := groupObject(x)
			if !ok {
				return nil, false
			}
			out[typ] = append(out[typ], id)
		default:
			return nil, false
		}
	}
	return out, true
}

// groupObject reads {"type": T, "group_id": ID} (any key case, groupId,
// id) or {T: ID}.
func groupObject(m map[string]any) (typ, id string, ok bool) {
	for k, v := range m {
		s, isStr := v.(string)
		if !isStr {
			return "", "", false
		}
		switch strings.ToLower(strings.ReplaceAll(strings.TrimSpace(k), "_", "")) {
		case "type":
			typ = strings.TrimSpace(s)
		case "groupid", "id":
			id = strings.TrimSpace(s)
		default:
			if len(m) != 1 {
				return "", "", false
			}
			typ, id = strings.TrimSpace(k), strings.TrimSpace(s)
		}
	}
	return typ, id, typ != "" && id != ""
}
