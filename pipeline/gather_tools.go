package pipeline

import (
	"context"
	_ "embed"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/upgrade-agent/upgrade-agent/internal/textdist"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/readmodel"
)

//go:embed knowledge/core_terms.json
var coreTerms json.RawMessage

//go:embed knowledge/assignment_terms.json
var assignmentTerms json.RawMessage

type noArgs struct{}

type experimentFilter struct {
	Context string `json:"context,omitempty" jsonschema:"app context"`
	Status  string `json:"status,omitempty"`
	Name    string `json:"name,omitempty" jsonschema:"part of the name"`
}

type experimentRef struct {
	ExperimentID string `json:"experiment_id" jsonschema:"id or name"`
}

type nameArg struct {
	Name string `json:"name" jsonschema:"name or part of it"`
}

type contextArg struct {
	Context string `json:"context" jsonschema:"app context"`
}

type actionArg struct {
	Action string `json:"action" jsonschema:"the action"`
}

type setActionNeededArgs struct {
	Action    string `json:"action" jsonschema:"one of the executor actions"`
	Reasoning string `json:"reasoning"`
	NextStep  string `json:"next_step,omitempty" jsonschema:"what the request still needs after this action"`
}

type setActionParamsArgs struct {
	ActionParams map[string]any `json:"action_params" jsonschema:"named as in the action's schema"`
}

type updateActionParamArgs struct {
	Key   string `json:"key" jsonschema:"name or path (conditions[0].weight)"`
	Value any    `json:"value"`
}

type setMissingArgs struct {
	MissingParams []string `json:"missing_params"`
}

type addErrorArgs struct {
	ErrorType string `json:"error_type" jsonschema:"api, auth, validation, not_found, unknown"`
	Message   string `json:"message"`
}

// lookupTools are the gatherer's built-in read tools, each with the object
// it is about (spec/pipeline.md, "Tool scope"): made once per process, on
// first need, so that their bytes repeat from call to call.
var lookupTools = sync.OnceValue(func() []*toolDef {
	defs := []*toolDef{
		newTool("check_upgrade_health", "Server name and version.", true,
			func(ctx context.Context, t *turn, _ noArgs) (any, error) {
				info, err := t.a.deps.API.Health(ctx)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("upgrade_health", "", info) })
				return info, nil
			}),
		newTool("get_context_metadata", "App contexts with their conditions, sites (EXP_POINTS), targets (EXP_IDS) and group types.", true,
			func(ctx context.Context, t *turn, _ noArgs) (any, error) { return t.metadata(ctx) }),
		newTool("get_experiment_names", "Names and ids of all experiments.", true,
			func(ctx context.Context, t *turn, _ noArgs) (any, error) { return t.experimentNames(ctx) }).about(actions.ObjectExperiment),
		newTool("get_all_experiments", "Experiments, compact, optionally filtered.", true,
			func(ctx context.Context, t *turn, f experimentFilter) (any, error) {
				all, err := t.allExperiments(ctx)
				if err != nil {
					return nil, err
				}
				return filterExperiments(all, f), nil
			}).about(actions.ObjectExperiment),
		newTool("get_experiment_details", "Full details of one experiment.", true,
			func(ctx context.Context, t *turn, a experimentRef) (any, error) {
				id, err := t.resolveID(ctx, a.ExperimentID)
				if err != nil {
					return nil, err
				}
				e, err := upgrade.ExperimentWithLists(ctx, t.a.deps.API, id)
				if err != nil {
					return nil, err
				}
				d := readmodel.DetailsOf(e)
				t.update(func(s *State) { s.setInfo("experiment_details", id, d) })
				return d, nil
			}).about(actions.ObjectExperiment),
		newTool("get_enrollment_details", "Enrollment per condition and decision point.", true,
			func(ctx context.Context, t *turn, a experimentRef) (any, error) {
				id, err := t.resolveID(ctx, a.ExperimentID)
				if err != nil {
					return nil, err
				}
				e, err := t.a.deps.API.Experiment(ctx, id)
				if err != nil {
					return nil, err
				}
				st, err := t.a.deps.API.EnrollmentStats(ctx, id)
				if err != nil {
					return nil, err
				}
				d := readmodel.EnrollmentOf(e, st)
				t.update(func(s *State) { s.setInfo("enrollment_details", id, d) })
				return d, nil
			}).about(actions.ObjectExperiment),
		newTool("find_experiment", "Experiments matching a name, with ids (and details when one matches).", true,
			func(ctx context.Context, t *turn, a nameArg) (any, error) {
				names, err := t.experimentNames(ctx)
				if err != nil {
					return nil, err
				}
				matches := findExperiments(names, a.Name, 5)
				res := map[string]any{"matches": matches}
				if m, ok := uniqueMatch(matches); ok {
					// One experiment is meant: its details come along, so
					// no second lookup is needed.
					e, err := upgrade.ExperimentWithLists(ctx, t.a.deps.API, m.ID)
					if err != nil {
						return nil, err
					}
					d := readmodel.DetailsOf(e)
					t.update(func(s *State) { s.setInfo("experiment_details", m.ID, d) })
					res["details"] = d
				}
				return res, nil
			}).about(actions.ObjectExperiment),
		newTool("get_core_terms", "UpGrade terminology: experiments, statuses, feature flags, segments.", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.update(func(s *State) { s.setInfo("core_terms", "", coreTerms) })
				return coreTerms, nil
			}),
		newTool("get_assignment_terms", "How assignment behaves per unit, consistency and status.", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.update(func(s *State) { s.setInfo("assignment_terms", "", assignmentTerms) })
				return assignmentTerms, nil
			}),
		newTool("get_available_contexts", "Names of the valid app contexts.", true,
			func(ctx context.Context, t *turn, _ noArgs) (any, error) {
				md, err := t.metadata(ctx)
				if err != nil {
					return nil, err
				}
				return map[string]any{"contexts": readmodel.ContextNames(md)}, nil
			}),
		newTool("get_conditions_for_context", "Condition codes of a context.", true,
			func(ctx context.Context, t *turn, a contextArg) (any, error) {
				ci, err := t.contextInfo(ctx, a.Context)
				if err != nil {
					return nil, err
				}
				return map[string]any{"context": a.Context, "conditions": ci.Conditions}, nil
			}).about(actions.ObjectExperiment),
		newTool("get_decision_points_for_context", "Sites and targets of a context.", true,
			func(ctx context.Context, t *turn, a contextArg) (any, error) {
				ci, err := t.contextInfo(ctx, a.Context)
				if err != nil {
					return nil, err
				}
				return map[string]any{"context": a.Context, "sites": ci.ExpPoints, "targets": ci.ExpIDs}, nil
			}).about(actions.ObjectExperiment),
		newTool("get_group_types_for_context", "Group types of a context.", true,
			func(ctx context.Context, t *turn, a contextArg) (any, error) {
				ci, err := t.contextInfo(ctx, a.Context)
				if err != nil {
					return nil, err
				}
				return map[string]any{"context": a.Context, "group_types": ci.GroupTypes}, nil
			}),
	}
	defs = append(defs, flagTools()...)
	defs = append(defs, changeTools()...)
	return defs
})

// lookupTool is the built-in lookup of that name.
func lookupTool(name string) *toolDef {
	for _, d := range lookupTools() {
		if d.name == name {
			return d
		}
	}
	panic("pipeline: no lookup " + name) // programming error, caught by tests
}

// stateTools are the gatherer's tools that choose and shape the action;
// names, the actions in scope, become set_action_needed's enum.
func stateTools(names []string) []*toolDef {
	return []*toolDef{
		withEnum(names, "action", newTool("set_action_needed", "Choose the one action to prepare.", false,
			func(_ context.Context, t *turn, a setActionNeededArgs) (any, error) {
				name := strings.TrimSpace(a.Action)
				act, ok := t.a.action(name)
				if !ok {
					if b, ok2 := t.a.reg().Lookup(strings.ToLower(name)); ok2 {
						act, ok = b, true
					}
				}
				if !ok {
					return nil, inputErrorf("action: got %q: not an action; the actions are %s", a.Action, strings.Join(t.a.actionNames(actions.ObjectNone), ", "))
				}
				name = act.Spec().Name
				t.update(func(s *State) {
					if t.sess.draft.name != name {
						t.declared = nil
					}
					t.sess.chooseAction(name)
					s.ActionReasoning = a.Reasoning
					s.NextStep = strings.TrimSpace(a.NextStep)
					t.problems = nil
				})
				return map[string]any{"ok": true, "action": name}, nil
			})),
		newTool("set_action_params", "Set all parameters of the chosen action.", false,
			func(ctx context.Context, t *turn, a setActionParamsArgs) (any, error) {
				res, err := t.setParams(ctx, json.RawMessage(compactJSON(a.ActionParams)))
				t.update(func(*State) {
					for _, pr := range t.problems {
						if !pr.Missing {
							t.stop = true // a full set that is wrong: the person corrects it
						}
					}
				})
				return res, err
			}),
		newTool("update_action_params", "Set one parameter of the chosen action; null removes it.", false,
			func(ctx context.Context, t *turn, a updateActionParamArgs) (any, error) {
				return t.patchParams(ctx, a.Key, a.Value)
			}),
		newTool("set_missing_params", "Name the required parameters only the person can give.", false,
			func(_ context.Context, t *turn, a setMissingArgs) (any, error) {
				t.update(func(*State) {
					t.declared = map[string]bool{}
					for _, m := range a.MissingParams {
						if m = strings.TrimSpace(m); m != "" {
							t.declared[m] = true
						}
					}
					missing := []string{}
					for m := range t.declared {
						missing = append(missing, m)
					}
					slices.Sort(missing)
					t.sess.setMissing(missing)
					if t.problems != nil {
						t.setProblems(t.problems)
					}
					if len(t.declared) > 0 {
						t.stop = true
					}
				})
				return map[string]any{"ok": true}, nil
			}),
		newTool("add_error", "Record a problem to report to the person.", false,
			func(_ context.Context, t *turn, a addErrorArgs) (any, error) {
				typ := strings.ToLower(strings.TrimSpace(a.ErrorType))
				if !slices.Contains([]string{ErrTypeAPI, ErrTypeAuth, ErrTypeValidation, ErrTypeNotFound, ErrTypeUnknown}, typ) {
					typ = ErrTypeUnknown
				}
				t.update(func(s *State) { s.addError(typ, a.Message) })
				return map[string]any{"ok": true}, nil
			}),
	}
}

// actionSchemaTool answers get_action_schema(action) with the JSON schema of
// the action's typed params, its rules and an example; names, the actions
// in scope, are its enum. The result is kept under
// gathered_info.<action>_schema.
func actionSchemaTool(names []string) *toolDef {
	return withEnum(names, "action", newTool("get_action_schema", "Parameters of an action.", true,
		func(_ context.Context, t *turn, a actionArg) (any, error) {
			name := strings.ToLower(strings.TrimSpace(a.Action))
			act, ok := t.a.reg().Lookup(name)
			if !ok {
				return nil, inputErrorf("action: got %q: not an action; the actions are %s", a.Action, strings.Join(names, ", "))
			}
			spec := act.Spec()
			info := map[string]any{"action": spec.Name, "description": spec.Description, "parameters": spec.Schema,
				"destructive": spec.Destructive, "long_running": spec.LongRunning}
			t.update(func(s *State) { s.setInfo(spec.Name+"_schema", "", info) })
			return info, nil
		}))
}

func filterExperiments(all []readmodel.Summary, f experimentFilter) []readmodel.Summary {
	out := []readmodel.Summary{}
	var status upgrade.State
	if f.Status != "" {
		status = upgrade.NormalizeState(f.Status)
	}
	ctx, name := strings.TrimSpace(f.Context), strings.ToLower(strings.TrimSpace(f.Name))
	for _, e := range all {
		if ctx != "" && !strings.EqualFold(e.Context, ctx) {
			continue
		}
		if status != "" && e.Status != status {
			continue
		}
		if name != "" && !strings.Contains(strings.ToLower(e.Name), name) {
			continue
		}
		out = append(out, e)
	}
	return out
}

type match struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Match string `json:"match"` // exact, prefix, contains, fuzzy
}

// uniqueMatch is the one experiment a search means: the only match, or the
// only exact one.
func uniqueMatch(ms []match) (match, bool) {
	if len(ms) == 1 {
		return ms[0], true
	}
	if len(ms) > 1 && ms[0].Match == "exact" && ms[1].Match != "exact" {
		return ms[0], true
	}
	return match{}, false
}

// findExperiments ranks names against q: exact, then prefix, then substring,
// then small edit distance.
func findExperiments(names []upgrade.ExperimentName, q string, limit int) []match {
	ql := strings.ToLower(strings.TrimSpace(q))
	type scored struct {
		m     match
		score int
	}
	var all []scored
	for _, n := range names {
		nl := strings.ToLower(n.Name)
		switch {
		case nl == ql:
			all = append(all, scored{match{n.ID, n.Name, "exact"}, 0})
		case strings.HasPrefix(nl, ql):
			all = append(all, scored{match{n.ID, n.Name, "prefix"}, 1})
		case strings.Contains(nl, ql):
			all = append(all, scored{match{n.ID, n.Name, "contains"}, 2})
		default:
			d := textdist.Levenshtein(nl, ql)
			if d <= max(2, len(ql)/3) {
				all = append(all, scored{match{n.ID, n.Name, "fuzzy"}, 3 + d})
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score < all[j].score
		}
		return all[i].m.Name < all[j].m.Name
	})
	out := []match{}
	for i := 0; i < len(all) && i < limit; i++ {
		out = append(out, all[i].m)
	}
	return out
}
