package pipeline

import (
	"context"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// The gatherer's feature flag, segment and history lookups (spec/pipeline.md,
// "Feature flags and segments"). Read-only; results are stored under
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
}

// globalSegmentsAPI reads the global exclusion segments, which
// explain_feature_flag applies first; *upgrade.Client has it, and a backend
// without it is evaluated without global exclusions.
type globalSegmentsAPI interface {
	GlobalSegments(ctx context.Context) ([]upgrade.SegmentRecord, error)
}

type historyEntry struct {
	From string `json:"from"`
	To   string `json:"to"`
	At   string `json:"at"`
}

func flagTools() []*toolDef {
	return []*toolDef{
		newTool("get_feature_flags", "Feature flags (key, name, context, status, filter mode) with optional filters.", true,
			func(ctx context.Context, t *turn, f flagFilter) (any, error) {
				out, err := actions.ListFlags(ctx, t.a.API, f.Context, f.Status, f.Key)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("feature_flags", "", out) })
				return out, nil
			}),
		newTool("find_feature_flag", "Best matches for a flag key or name (exact key, exact name, prefix, substring) with ids; the details of a unique match.", true,
			func(ctx context.Context, t *turn, a flagNameArg) (any, error) {
				ms, err := actions.FindFlags(ctx, t.a.API, a.NameOrKey, 5)
				if err != nil {
					return nil, err
				}
				res := map[string]any{"matches": ms}
				if m, ok := actions.UniqueFlag(ms); ok {
					d, err := actions.DescribeFlag(ctx, t.a.API, m.ID)
					if err != nil {
						return nil, err
					}
					t.update(func(s *State) { s.setInfo("feature_flag_details", m.ID, d) })
					res["details"] = d
				}
				return res, nil
			}),
		newTool("get_feature_flag_details", "One feature flag with its include and exclude lists (members, segments by name) and whom it reaches.", true,
			func(ctx context.Context, t *turn, a flagRef) (any, error) {
				id, err := actions.ResolveFlagID(ctx, t.a.API, a.FlagID)
				if err != nil {
					return nil, inputErrorf("flag_id: %v", err)
				}
				d, err := actions.DescribeFlag(ctx, t.a.API, id)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("feature_flag_details", id, d) })
				return d, nil
			}),
		newTool("get_segments", "Public segments with member counts and how many flag and experiment lists use them.", true,
			func(ctx context.Context, t *turn, f segmentFilter) (any, error) {
				out, err := actions.ListSegments(ctx, t.a.API, f.Context)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("segments", "", out) })
				return out, nil
			}),
		newTool("find_segment", "Best matches for a segment name (exact, prefix, substring) with ids; the details of a unique match.", true,
			func(ctx context.Context, t *turn, a segmentNameArg) (any, error) {
				ms, how, err := actions.FindSegments(ctx, t.a.API, a.Name, 5)
				if err != nil {
					return nil, err
				}
				res := map[string]any{"matches": ms}
				if len(ms) == 1 || len(ms) > 1 && how[0] == "exact" && how[1] != "exact" {
					d, err := actions.DescribeSegment(ctx, t.a.API, ms[0].ID)
					if err != nil {
						return nil, err
					}
					t.update(func(s *State) { s.setInfo("segment_details", ms[0].ID, d) })
					res["details"] = d
				}
				return res, nil
			}),
		newTool("get_segment_details", "One public segment: its users, groups and sub-segments, the segments holding it, and the flags and experiments that use it.", true,
			func(ctx context.Context, t *turn, a segmentRef) (any, error) {
				id, err := actions.ResolveSegmentID(ctx, t.a.API, a.SegmentID)
				if err != nil {
					return nil, inputErrorf("segment_id: %v", err)
				}
				d, err := actions.DescribeSegment(ctx, t.a.API, id)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("segment_details", id, d) })
				return d, nil
			}),
		newTool("explain_feature_flag", "Whether a flag is served to a user and the rule that decided, computed from the flag's lists by UpGrade's rules (no request to the client API: no exposure is recorded).", true,
			func(ctx context.Context, t *turn, a explainArgs) (any, error) {
				if strings.TrimSpace(a.UserID) == "" {
					return nil, inputErrorf("user_id is required")
				}
				id, err := actions.ResolveFlagID(ctx, t.a.API, a.FlagID)
				if err != nil {
					return nil, inputErrorf("flag_id: %v", err)
				}
				var global func(context.Context) ([]upgrade.SegmentRecord, error)
				if h, ok := t.a.API.(globalSegmentsAPI); ok {
					global = h.GlobalSegments
				}
				res, err := actions.ExplainFlag(ctx, t.a.API, global, id, a.UserID, a.Groups)
				if err != nil {
					return nil, err
				}
				out := map[string]any{"result": res}
				if len(a.Groups) == 0 {
					out["note"] = "no groups were given: only rules on the user id could match; ask for the user's groups (class, school) to check group lists"
				}
				t.update(func(s *State) { s.setInfo("flag_explanations", id+":"+strings.TrimSpace(a.UserID), out) })
				return out, nil
			}),
		newTool("get_experiment_history", "The state changes of an experiment (from, to, time), oldest first.", true,
			func(ctx context.Context, t *turn, a experimentRef) (any, error) {
				id, err := t.resolveID(ctx, a.ExperimentID)
				if err != nil {
					return nil, err
				}
				e, err := t.a.API.Experiment(ctx, id)
				if err != nil {
					return nil, err
				}
				entries := []historyEntry{}
				for _, l := range upgrade.SortedHistory(e.StateTimeLogs) {
					entries = append(entries, historyEntry{From: l.FromState.Display(), To: l.ToState.Display(), At: l.TimeLog})
				}
				out := map[string]any{"experiment_id": e.ID, "name": e.Name, "state": e.State.Display(), "history": entries}
				if len(entries) == 0 {
					out["note"] = "the server recorded no state change: the experiment has kept its first state"
				}
				t.update(func(s *State) { s.setInfo("experiment_history", id, out) })
				return out, nil
			}),
	}
}
