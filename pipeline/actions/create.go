package actions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// CreateExperiment creates an experiment.
const CreateExperiment Name = "create_experiment"

// CreateExperimentParams are the params of create_experiment. Empty optional
// fields take the defaults: assignment unit individual, consistency
// individual, post rule continue, filter mode includeAll.
type CreateExperimentParams struct {
	Name               string               `json:"name" jsonschema:"experiment name, unique on the server"`
	Context            string               `json:"context" jsonschema:"app context, one of the context metadata's keys"`
	DecisionPoints     []DecisionPointParam `json:"decision_points" jsonschema:"at least one decision point; when none is given and the context has one site and one target, those"`
	Conditions         []ConditionParam     `json:"conditions" jsonschema:"at least one condition; weights sum to 100, equal when none are given" keyed:"code,weight"`
	Description        string               `json:"description,omitempty"`
	Tags               []string             `json:"tags,omitempty"`
	AssignmentUnit     string               `json:"assignment_unit,omitempty" jsonschema:"individual (default) or group"`
	GroupType          string               `json:"group_type,omitempty" jsonschema:"with assignment_unit group: one of the context's GROUP_TYPES"`
	ConsistencyRule    string               `json:"consistency_rule,omitempty" jsonschema:"individual (default), group (needs assignment_unit group) or experiment"`
	PostExperimentRule *PostRuleParam       `json:"post_experiment_rule,omitempty" jsonschema:"what users get after enrollment ends (default continue)"`
	FilterMode         string               `json:"filter_mode,omitempty" jsonschema:"includeAll (default: everyone but the excluded) or excludeAll (only the included)"`
	InclusionUsers     []string             `json:"inclusion_users,omitempty" jsonschema:"user ids included (filter_mode excludeAll)"`
	InclusionGroups    []GroupParam         `json:"inclusion_groups,omitempty" jsonschema:"groups included (filter_mode excludeAll)"`
	ExclusionUsers     []string             `json:"exclusion_users,omitempty" jsonschema:"user ids excluded"`
	ExclusionGroups    []GroupParam         `json:"exclusion_groups,omitempty" jsonschema:"groups excluded"`
	// AssignmentAlgorithm is empty for UpGrade's default, random (an
	// explicit "random" is folded to empty, so it confirms and hashes like
	// a create that leaves it out).
	AssignmentAlgorithm string `json:"assignment_algorithm,omitempty" jsonschema:"random (default), stratified random sampling (needs stratification_factor); ts_configurable (Thompson sampling) is refused: mooclets are off on a standard UpGrade 6.5"`
	// Design is "" for a simple experiment (an explicit "simple" folds to
	// it), factorial for one made of Factors.
	Design         string        `json:"design,omitempty" jsonschema:"simple (default) or factorial"`
	Factors        []FactorParam `json:"factors,omitempty" jsonschema:"design factorial: at least 2 factors of at least 2 levels; the conditions are every combination, coded Color=Red; Shape=Circle (leave conditions out for an even split)" keyed:"name,levels"`
	ConditionOrder string        `json:"condition_order,omitempty" jsonschema:"with assignment_unit within-subjects: random, random round robin or ordered round robin"`
	// StratificationFactor names the factor of stratified random sampling.
	StratificationFactor string `json:"stratification_factor,omitempty" jsonschema:"an existing factor (get_stratification_factors)"`
}

// Action implements Params.
func (CreateExperimentParams) Action() Name { return CreateExperiment }

func (p CreateExperimentParams) canonical() CreateExperimentParams {
	return withDefaults(shapeDesign(CreateExperimentParams{
		Name:                strings.TrimSpace(p.Name),
		Context:             strings.TrimSpace(p.Context),
		DecisionPoints:      normDecisionPoints(p.DecisionPoints),
		Conditions:          normConditions(p.Conditions),
		Description:         strings.TrimSpace(p.Description),
		Tags:                trimList(p.Tags),
		AssignmentUnit:      enumValue(p.AssignmentUnit, units),
		GroupType:           strings.TrimSpace(p.GroupType),
		ConsistencyRule:     enumValue(p.ConsistencyRule, consistencies),
		PostExperimentRule:  normPostRule(p.PostExperimentRule),
		FilterMode:          upgrade.FilterModeOf(p.FilterMode),
		InclusionUsers:      trimList(p.InclusionUsers),
		InclusionGroups:     normGroups(p.InclusionGroups),
		ExclusionUsers:      trimList(p.ExclusionUsers),
		ExclusionGroups:     normGroups(p.ExclusionGroups),
		AssignmentAlgorithm: algorithmValue(p.AssignmentAlgorithm),
		Design:              designValue(p.Design),
		Factors:             normFactors(p.Factors),
		ConditionOrder:      conditionOrderValue(p.ConditionOrder),

		// Stratified random sampling (stratification_factor.go).
		StratificationFactor: strings.TrimSpace(p.StratificationFactor),
	}))
}

// declareCreate declares this file's action in r.
func declareCreate(r *Registry) {
	Add(r, Def[CreateExperimentParams]{
		Name: CreateExperiment, Order: 10, Invalidates: []Cache{CacheExperiments},
		Object:      ObjectExperiment,
		Description: "Create a new experiment (created inactive) in an app context, with its decision points and weighted conditions.",
		Canonical:   CreateExperimentParams.canonical,
		Validate:    func(c *Checker, p CreateExperimentParams) error { return c.design(p, "", true) },
		Plan:        planCreate,
		Execute:     executeCreate,
		Reconcile:   reconcileCreate,
		Report: ReportAs(func(r ExperimentResult) string {
			return fmt.Sprintf("Created experiment %q (id %s) in context %s.\n%sIt is %s: nobody is enrolled until it is started.",
				r.Name, r.ID, r.Context, designSummary(r), r.State)
		}),
	})
}

func planCreate(b *Planner, d CreateExperimentParams) error {
	b.Line("Create experiment %s in context %s.", quote(d.Name), ident(d.Context))
	b.designLines(d)
	b.stratificationLines(d)
	b.designWarnings(d, upgrade.Segment{})
	b.Line("It is created inactive: nobody is enrolled until it is started.")
	return nil
}

// createID is the id a create sends: derived from the approved
// confirmation, so that executing it again after a crash finds the
// experiment it made instead of making a twin.
func createID(key string) string {
	if key == "" {
		return upgrade.NewID()
	}
	return upgrade.IDFrom(key)
}

func executeCreate(ctx context.Context, env Env, d CreateExperimentParams, key string) (Outcome, error) {
	id := createID(key)
	// UpGrade overwrites on a POST with an existing id (upsert), so an id
	// that exists is never sent again: it is this confirmation's experiment,
	// made by an earlier attempt, and maybe changed since by someone.
	if e, err := env.API.Experiment(ctx, id); err == nil {
		return Result(SummarizeExperiment(e))
	} else if upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		return Outcome{}, fmt.Errorf("checking whether experiment %s exists before creating it: %w", id, err)
	}
	out, err := env.API.CreateExperiment(upgrade.WithCreateID(ctx, id), buildExperiment(nil, d))
	if err != nil {
		return Outcome{}, err
	}
	held, err := hold(ctx, env.API, out.ID, d)
	if err != nil {
		return Outcome{}, fmt.Errorf("experiment %q was created (id %s), but %w", d.Name, out.ID, err)
	}
	return Result(SummarizeExperiment(held))
}

func reconcileCreate(ctx context.Context, env Env, p CreateExperimentParams, key string, startedAt time.Time) (Reconciliation, error) {
	api := env.API
	if key != "" {
		id := createID(key)
		e, err := api.Experiment(ctx, id)
		switch {
		case err == nil:
			return Reconciliation{Outcome: OutcomeDone, Result: resultOf(e),
				Note: fmt.Sprintf("experiment %q exists under the id this confirmation gives it (%s): the create happened", e.Name, e.ID)}, nil
		case upgrade.CategoryOf(err) != upgrade.CategoryNotFound:
			return Reconciliation{}, fmt.Errorf("reconcile create: reading experiment %s: %w", id, err)
		}
	}
	names, err := api.ExperimentNames(ctx)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile create: reading experiment names: %w", err)
	}
	for _, n := range names {
		if strings.EqualFold(strings.TrimSpace(n.Name), p.Name) {
			return Reconciliation{Outcome: OutcomeUnknown,
				Note: fmt.Sprintf("an experiment named %q exists (id %s), but not under the id this confirmation gives it: someone else may have made it", n.Name, n.ID)}, nil
		}
	}
	return Reconciliation{Outcome: OutcomeNotDone, Note: fmt.Sprintf("no experiment named %q exists: the create did not happen", p.Name)}, nil
}
