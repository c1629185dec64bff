package pipeline

import (
	"context"
	_ "embed"
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/lazy"
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
	Context string `json:"context,omitempty"`
	Status  string `json:"status,omitempty"`
	Name    string `json:"name,omitempty"`
}

type experimentRef struct {
	ExperimentID string `json:"experiment_id"`
}

type nameArg struct {
	Name string `json:"name"`
}

type contextArg struct {
	Context string `json:"context"`
}

type actionArg struct {
	Action string `json:"action" jsonschema:"the action"`
}

type setActionNeededArgs struct {
	Action    string `json:"action" jsonschema:"one of get_action_schema's"`
	Reasoning string `json:"reasoning"`
	NextStep  string `json:"next_step,omitempty"`
}

type setActionParamsArgs struct {
	ActionParams map[string]any `json:"action_params"`
}

type updateActionParamArgs struct {
	Key   string `json:"key" jsonschema:"name or path: conditions[0].weight"`
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
var lookupToolDefs = &lazy.Value[[]*toolDef]{New: buildLookupTools}

func lookupTools() []*toolDef { return lookupToolDefs.Get() }

func buildLookupTools() []*toolDef {
	defs := []*toolDef{
		newTool("check_upgrade_health", "UpGrade's version.", true,
			func(ctx context.Context, t *turn, _ noArgs) (any, error) {
				info, err := t.a.deps.API.Health(ctx)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("upgrade_health", "", info) })
				return info, nil
			}),
		newTool("get_context_metadata", "Contexts: conditions, sites (EXP_POINTS), targets (EXP_IDS), group types.", true,
			func(ctx context.Context, t *turn, _ noArgs) (any, error) { return t.metadata(ctx) }),
		newTool("get_experiment_names", "Experiment names and ids.", true,
			func(ctx context.Context, t *turn, _ noArgs) (any, error) { return t.experimentNames(ctx) }).about(actions.ObjectExperiment),
		newTool("get_all_experiments", "Experiments, filtered.", true,
			func(ctx context.Context, t *turn, f experimentFilter) (any, error) {
				all, err := t.allExperiments(ctx)
				if err != nil {
					return nil, err
				}
				return filterExperiments(all, f), nil
			}).about(actions.ObjectExperiment),
		newTool("get_experiment_details", "One experiment in full.", true,
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
		newTool("find_experiment", "Find experiments by name; details of a unique match.", true,
			func(ctx context.Context, t *turn, a nameArg) (any, error) {
				names, err := t.experimentNames(ctx)
				if err != nil {
					return nil, err
				}
				matches := findExperiments(names, a.Name, 5)
				m, ok := uniqueMatch(matches)
				if !ok {
					return map[string]any{"matches": matches}, nil
				}
				// One experiment is meant: its details come along, so no
				// second lookup is needed; a lone match is not listed
				// again (the details carry its id and name).
				e, err := upgrade.ExperimentWithLists(ctx, t.a.deps.API, m.ID)
				if err != nil {
					return nil, err
				}
				d := readmodel.DetailsOf(e)
				t.update(func(s *State) { s.setInfo("experiment_details", m.ID, d) })
				switch {
				case len(matches) > 1:
					return map[string]any{"matches": matches, "details": d}, nil
				case m.Match != "exact":
					return map[string]any{"match": m.Match, "details": d}, nil
				}
				return map[string]any{"details": d}, nil
			}).about(actions.ObjectExperiment),
		newTool("get_core_terms", "Terms: experiments, statuses, flags, segments.", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.update(func(s *State) { s.setInfo("core_terms", "", coreTerms) })
				return coreTerms, nil
			}),
		newTool("get_assignment_terms", "Assignment by unit, consistency, status.", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.update(func(s *State) { s.setInfo("assignment_terms", "", assignmentTerms) })
				return assignmentTerms, nil
			}),
		newTool("get_available_contexts", "Context names.", true,
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
	defs = append(defs, metricTools()...)
	defs = append(defs, changeTools()...)
	return defs
}

// lookupTool is the built-in lookup of that name.
func lookupTool(name string) *toolDef {
	for _, d := range lookupTools() {
		if d.name == name {
			return d
		}
	}
	panic("pipeline: no lookup " + name) // programming error, caught by tests
}

// stateTools are the gatherer's tools that choose and shape the action.
// set_action_needed's action is a plain string checked here (the names are
// enumerated once, in get_action_schema), so an action costs its name once.
func stateTools() []*toolDef {
	return []*toolDef{
		newTool("set_action_needed", "The one action to prepare.", false,
			func(_ context.Context, t *turn, a setActionNeededArgs) (any, error) {
				name := strings.TrimSpace(a.Action)
				act, ok := t.a.action(name)
				if !ok {
					// No enum holds the model to the names: take them as
					// models misspell them ("Update experiment status").
					folded := strings.NewReplacer(" ", "_", "-", "_").Replace(strings.ToLower(name))
					if b, ok2 := t.a.reg().Lookup(folded); ok2 {
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
			}),
		newTool("set_action_params", "All params of the chosen action.", false,
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
		newTool("update_action_params", "One param of the chosen action; null removes it.", false,
			func(ctx context.Context, t *turn, a updateActionParamArgs) (any, error) {
				return t.patchParams(ctx, a.Key, a.Value)
			}),
		newTool("set_missing_params", "Required params only the person can give.", false,
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
		newTool("add_error", "A problem to tell the person.", false,
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
	return withEnum(names, "action", newTool("get_action_schema", "An action's params.", true,
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
