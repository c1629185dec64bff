package pipeline

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

//go:embed knowledge/core_terms.json
var coreTerms json.RawMessage

//go:embed knowledge/assignment_terms.json
var assignmentTerms json.RawMessage

type noArgs struct{}

type experimentFilter struct {
	Context string `json:"context,omitempty" jsonschema:"only experiments of this app context"`
	Status  string `json:"status,omitempty" jsonschema:"only experiments in this status (internal or display name)"`
	Name    string `json:"name,omitempty" jsonschema:"only names containing this text"`
}

type experimentRef struct {
	ExperimentID string `json:"experiment_id" jsonschema:"experiment id (a name is also accepted)"`
}

type nameArg struct {
	Name string `json:"name" jsonschema:"experiment name or part of it"`
}

type contextArg struct {
	Context string `json:"context" jsonschema:"app context name"`
}

type setActionNeededArgs struct {
	Action    string `json:"action" jsonschema:"one of the executor actions"`
	Reasoning string `json:"reasoning"`
	NextStep  string `json:"next_step,omitempty" jsonschema:"what the request still needs after this action; omit for a single step"`
}

type setActionParamsArgs struct {
	ActionParams map[string]any `json:"action_params" jsonschema:"all parameters of the action, as its schema names them"`
}

type updateActionParamArgs struct {
	Key   string `json:"key" jsonschema:"parameter name"`
	Value any    `json:"value"`
}

type setMissingArgs struct {
	MissingParams []string `json:"missing_params" jsonschema:"names of required parameters only the person can give"`
}

type addErrorArgs struct {
	ErrorType string `json:"error_type" jsonschema:"api, auth, validation, not_found or unknown"`
	Message   string `json:"message"`
}

// readTools are shared by the gatherer and the responder.
var (
	toolContextMetadata = newTool("get_context_metadata", "App contexts with their conditions, sites (EXP_POINTS), targets (EXP_IDS) and group types.", true,
		func(ctx context.Context, t *turn, _ noArgs) (any, error) { return t.metadata(ctx) })
	toolExperimentNames = newTool("get_experiment_names", "Names and ids of all experiments.", true,
		func(ctx context.Context, t *turn, _ noArgs) (any, error) { return t.experimentNames(ctx) })
	toolAllExperiments = newTool("get_all_experiments", "Experiments (compact) with optional filters.", true,
		func(ctx context.Context, t *turn, f experimentFilter) (any, error) {
			all, err := t.allExperiments(ctx)
			if err != nil {
				return nil, err
			}
			return filterExperiments(all, f), nil
		})
)

func gathererTools(extra ...*toolDef) *toolSet {
	defs := []*toolDef{
		newTool("check_upgrade_health", "Server name and version.", true,
			func(ctx context.Context, t *turn, _ noArgs) (any, error) {
				info, err := t.a.API.Health(ctx)
				if err != nil {
					return nil, err
				}
				t.update(func(s *State) { s.setInfo("upgrade_health", "", info) })
				return info, nil
			}),
		toolContextMetadata,
		toolExperimentNames,
		toolAllExperiments,
		newTool("get_experiment_details", "Full details of one experiment.", true,
			func(ctx context.Context, t *turn, a experimentRef) (any, error) {
				id, err := t.resolveID(ctx, a.ExperimentID)
				if err != nil {
					return nil, err
				}
				e, err := t.a.API.Experiment(ctx, id)
				if err != nil {
					return nil, err
				}
				d := detailsOf(e)
				t.update(func(s *State) { s.setInfo("experiment_details", id, d) })
				return d, nil
			}),
		newTool("get_enrollment_details", "Enrollment per condition and decision point of one experiment.", true,
			func(ctx context.Context, t *turn, a experimentRef) (any, error) {
				id, err := t.resolveID(ctx, a.ExperimentID)
				if err != nil {
					return nil, err
				}
				e, err := t.a.API.Experiment(ctx, id)
				if err != nil {
					return nil, err
				}
				st, err := t.a.API.EnrollmentStats(ctx, id)
				if err != nil {
					return nil, err
				}
				d := enrollmentOf(e, st)
				t.update(func(s *State) { s.setInfo("enrollment_details", id, d) })
				return d, nil
			}),
		newTool("find_experiment", "Best matches for an experiment name (exact, prefix, fuzzy) with ids.", true,
			func(ctx context.Context, t *turn, a nameArg) (any, error) {
				names, err := t.experimentNames(ctx)
				if err != nil {
					return nil, err
				}
				return map[string]any{"matches": findExperiments(names, a.Name, 5)}, nil
			}),
		newTool("get_core_terms", "UpGrade terminology: context, unit, consistency, post rule, decision point, segments, statuses.", true,
			func(_ context.Context, t *turn, _ noArgs) (any, error) {
				t.update(func(s *State) { s.setInfo("core_terms", "", coreTerms) })
				return coreTerms, nil
			}),
		newTool("get_assignment_terms", "How assignment behaves for each unit/consistency combination and status.", true,
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
				return map[string]any{"contexts": contextNames(md)}, nil
			}),
		newTool("get_conditions_for_context", "Condition codes allowed in a context.", true,
			func(ctx context.Context, t *turn, a contextArg) (any, error) {
				ci, err := t.contextInfo(ctx, a.Context)
				if err != nil {
					return nil, err
				}
				return map[string]any{"context": a.Context, "conditions": ci.Conditions}, nil
			}),
		newTool("get_decision_points_for_context", "Decision point sites and targets allowed in a context.", true,
			func(ctx context.Context, t *turn, a contextArg) (any, error) {
				ci, err := t.contextInfo(ctx, a.Context)
				if err != nil {
					return nil, err
				}
				return map[string]any{"context": a.Context, "sites": ci.ExpPoints, "targets": ci.ExpIDs}, nil
			}),
		newTool("get_group_types_for_context", "Group types allowed in a context.", true,
			func(ctx context.Context, t *turn, a contextArg) (any, error) {
				ci, err := t.contextInfo(ctx, a.Context)
				if err != nil {
					return nil, err
				}
				return map[string]any{"context": a.Context, "group_types": ci.GroupTypes}, nil
			}),
	}
	for _, name := range actions.Names() {
		defs = append(defs, schemaTool(name))
	}
	defs = append(defs, extra...)
	defs = append(defs,
		newTool("set_action_needed", "Choose the one action to prepare.", false,
			func(_ context.Context, t *turn, a setActionNeededArgs) (any, error) {
				_, builtin := actions.Lookup(a.Action)
				_, isMCP := t.a.mcpAction(a.Action)
				if !builtin && !isMCP {
					return nil, inputErrorf("unknown action %q; valid actions: %s", a.Action, strings.Join(actionNames(), ", "))
				}
				t.update(func(s *State) {
					if s.ActionNeeded != a.Action {
						s.ActionParams = nil
						s.MissingParams = []string{}
					}
					s.ActionNeeded = a.Action
					s.ActionReasoning = a.Reasoning
					s.NextStep = a.NextStep
				})
				return map[string]any{"ok": true, "action": a.Action}, nil
			}),
		newTool("set_action_params", "Set all parameters of the chosen action.", false,
			func(ctx context.Context, t *turn, a setActionParamsArgs) (any, error) {
				return t.setParams(ctx, a.ActionParams)
			}),
		newTool("update_action_params", "Set or replace one parameter of the chosen action.", false,
			func(ctx context.Context, t *turn, a updateActionParamArgs) (any, error) {
				t.mu.Lock()
				params := map[string]any{}
				for k, v := range t.st.ActionParams {
					params[k] = v
				}
				t.mu.Unlock()
				if a.Value == nil {
					delete(params, a.Key)
				} else {
					params[a.Key] = a.Value
				}
				return t.setParams(ctx, params)
			}),
		newTool("set_missing_params", "Name the required parameters only the person can give.", false,
			func(_ context.Context, t *turn, a setMissingArgs) (any, error) {
				t.update(func(s *State) { s.MissingParams = append([]string{}, a.MissingParams...) })
				return map[string]any{"ok": true}, nil
			}),
		newTool("add_error", "Record a problem to report to the person.", false,
			func(_ context.Context, t *turn, a addErrorArgs) (any, error) {
				typ := a.ErrorType
				if !slices.Contains([]string{ErrTypeAPI, ErrTypeAuth, ErrTypeValidation, ErrTypeNotFound, ErrTypeUnknown}, typ) {
					typ = ErrTypeUnknown
				}
				t.update(func(s *State) { s.addError(typ, a.Message) })
				return map[string]any{"ok": true}, nil
			}),
	)
	return newToolSet(defs...)
}

func actionNames() []string {
	var n []string
	for _, a := range actions.Names() {
		n = append(n, string(a))
	}
	return n
}

// schemaTool answers get_<action>_schema with the JSON schema of the action's
// typed params.
func schemaTool(name actions.Name) *toolDef {
	spec, _ := actions.Lookup(string(name))
	schema, err := jsonschema.ForType(reflectTypeOf(spec.Params), nil)
	if err != nil {
		panic(fmt.Sprintf("schema of %s: %v", name, err))
	}
	tidySchema(schema)
	raw, _ := json.Marshal(schema)
	key := string(name) + "_schema"
	info := map[string]any{"action": name, "description": spec.Description, "parameters": json.RawMessage(raw),
		"destructive": spec.Destructive, "long_running": spec.LongRunning}
	return newTool("get_"+key, "Parameters of "+string(name)+".", true,
		func(_ context.Context, t *turn, _ noArgs) (any, error) {
			t.update(func(s *State) { s.setInfo(key, "", info) })
			return info, nil
		})
}

// setParams checks params against the pending action's typed params. A
// failure is returned to the model to correct; state keeps the last good
// params.
func (t *turn) setParams(ctx context.Context, params map[string]any) (any, error) {
	t.mu.Lock()
	action := t.st.ActionNeeded
	t.mu.Unlock()
	if action == "" {
		return nil, inputErrorf("call set_action_needed first")
	}
	// Models often pass a name where an id belongs: resolve it here, so the
	// confirmation shows (and the executor uses) the real id.
	if ref, ok := params["experiment_id"].(string); ok && ref != "" && !uuidRE.MatchString(ref) {
		id, err := t.resolveID(ctx, ref)
		if err != nil {
			return nil, err
		}
		params["experiment_id"] = id
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, inputErrorf("params: %v", err)
	}
	if tl, ok := t.a.mcpAction(action); ok {
		if _, err := checkMCPParams(tl, params); err != nil {
			return nil, inputErrorf("%s arguments: %v", action, err)
		}
	} else if _, err := actions.Parse(action, raw); err != nil {
		return nil, inputErrorf("%s params: %v", action, err)
	}
	t.update(func(s *State) {
		s.ActionParams = params
		// A param that is now given is no longer missing.
		var still []string
		for _, m := range s.MissingParams {
			if _, ok := params[m]; !ok {
				still = append(still, m)
			}
		}
		s.MissingParams = append([]string{}, still...)
	})
	return map[string]any{"ok": true, "action": action, "params": params}, nil
}

func filterExperiments(all []ExperimentSummary, f experimentFilter) []ExperimentSummary {
	out := []ExperimentSummary{}
	status := ""
	if f.Status != "" {
		status = string(upgrade.NormalizeState(f.Status))
	}
	for _, e := range all {
		if f.Context != "" && !strings.EqualFold(e.Context, f.Context) {
			continue
		}
		if status != "" && e.Status != status {
			continue
		}
		if f.Name != "" && !strings.Contains(strings.ToLower(e.Name), strings.ToLower(f.Name)) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func contextNames(md upgrade.ContextMetadata) []string {
	names := make([]string, 0, len(md))
	for n := range md {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// experimentDetails is the view of one experiment given to the model.
type experimentDetails struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Description    string          `json:"description,omitempty"`
	Context        string          `json:"context"`
	Status         string          `json:"status"`
	Unit           string          `json:"assignment_unit"`
	GroupType      string          `json:"group_type,omitempty"`
	Consistency    string          `json:"consistency_rule,omitempty"`
	PostRule       string          `json:"post_experiment_rule"`
	RevertTo       string          `json:"revert_to,omitempty"`
	FilterMode     string          `json:"filter_mode"`
	Tags           []string        `json:"tags,omitempty"`
	Conditions     []conditionView `json:"conditions"`
	DecisionPoints []dpView        `json:"decision_points"`
	Inclusion      upgrade.Segment `json:"inclusion"`
	Exclusion      upgrade.Segment `json:"exclusion"`
	UpdatedAt      string          `json:"updated_at,omitempty"`
}

type conditionView struct {
	Code   string  `json:"code"`
	Weight float64 `json:"weight"`
	ID     string  `json:"id"`
}

type dpView struct {
	Site             string `json:"site"`
	Target           string `json:"target,omitempty"`
	ExcludeIfReached bool   `json:"exclude_if_reached"`
}

func detailsOf(e *upgrade.Experiment) experimentDetails {
	d := experimentDetails{
		ID: e.ID, Name: e.Name, Description: e.Description, Context: e.ContextName(), Status: string(e.State),
		Unit: e.AssignmentUnit, GroupType: e.Group, Consistency: e.ConsistencyRule, PostRule: e.PostExperimentRule,
		FilterMode: e.FilterMode, Tags: e.Tags, Inclusion: e.Inclusion, Exclusion: e.Exclusion, UpdatedAt: e.UpdatedAt,
		Conditions: []conditionView{}, DecisionPoints: []dpView{},
	}
	if e.RevertTo != nil {
		if c := e.ConditionByID(*e.RevertTo); c != nil {
			d.RevertTo = c.ConditionCode
		}
	}
	for _, c := range e.Conditions {
		d.Conditions = append(d.Conditions, conditionView{Code: c.ConditionCode, Weight: c.AssignmentWeight, ID: c.ID})
	}
	for _, p := range e.Partitions {
		d.DecisionPoints = append(d.DecisionPoints, dpView{Site: p.Site, Target: p.Target, ExcludeIfReached: p.ExcludeIfReached})
	}
	return d
}

type enrollmentView struct {
	ExperimentID   string              `json:"experiment_id"`
	Name           string              `json:"name"`
	Status         string              `json:"status"`
	Users          int                 `json:"users"`
	Groups         int                 `json:"groups"`
	UsersExcluded  int                 `json:"users_excluded"`
	GroupsExcluded int                 `json:"groups_excluded"`
	Conditions     []conditionEnrolled `json:"conditions"`
}

type conditionEnrolled struct {
	Code   string  `json:"code"`
	Weight float64 `json:"weight"`
	Users  int     `json:"users"`
	Groups int     `json:"groups"`
	Share  float64 `json:"share"`
}

func enrollmentOf(e *upgrade.Experiment, st *upgrade.EnrollmentStats) enrollmentView {
	v := enrollmentView{ExperimentID: e.ID, Name: e.Name, Status: string(e.State), Users: st.Users, Groups: st.Groups,
		UsersExcluded: st.UsersExcluded, GroupsExcluded: st.GroupsExcluded, Conditions: []conditionEnrolled{}}
	for _, cs := range st.Conditions {
		ce := conditionEnrolled{Code: cs.ID, Users: cs.Users, Groups: cs.Groups}
		if c := e.ConditionByID(cs.ID); c != nil {
			ce.Code, ce.Weight = c.ConditionCode, c.AssignmentWeight
		}
		if st.Users > 0 {
			ce.Share = roundTo(float64(cs.Users)/float64(st.Users), 4)
		}
		v.Conditions = append(v.Conditions, ce)
	}
	return v
}

type match struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Match string `json:"match"` // exact, prefix, contains, fuzzy
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
			d := levenshtein(nl, ql)
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

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
