package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// DuplicateExperiment copies an experiment's design into a new one.
const DuplicateExperiment Name = "duplicate_experiment"

// DuplicateExperimentParams are the params of duplicate_experiment.
type DuplicateExperimentParams struct {
	ExperimentID string `json:"experiment_id" jsonschema:"the experiment to copy (a name is resolved)" ref:"experiment"`
	Name         string `json:"name" jsonschema:"the copy's name"`
	Context      string `json:"context,omitempty" jsonschema:"the copy's app context (default: the source's)"`
}

// Action implements Params.
func (DuplicateExperimentParams) Action() Name { return DuplicateExperiment }

// declareDuplicateExperiment declares this file's action in r.
func declareDuplicateExperiment(r *Registry) {
	Add(r, Def[DuplicateExperimentParams]{
		Name: DuplicateExperiment, Order: 98, Object: ObjectExperiment, Invalidates: []Cache{CacheExperiments},
		Description: "Copy an experiment's design into a new inactive experiment (new ids).",
		Canonical: func(p DuplicateExperimentParams) DuplicateExperimentParams {
			return DuplicateExperimentParams{ExperimentID: idValue(p.ExperimentID), Name: strings.TrimSpace(p.Name), Context: strings.TrimSpace(p.Context)}
		},
		Validate:  validateDuplicate,
		Plan:      planDuplicate,
		Execute:   executeDuplicate,
		Reconcile: reconcileDuplicate,
		Report: ReportAs(func(r duplicateResult) string {
			s := fmt.Sprintf("Created experiment %q (id %s) in context %s as a copy. It is %s: nobody is enrolled until it is started.",
				r.Name, r.ID, r.Context, r.State)
			if r.Dropped != "" {
				s += "\nDropped: " + r.Dropped + "."
			}
			return s
		}),
	})
}

// duplicateDesign is the copy's design: the source's, renamed and moved;
// a context change drops the inclusion and exclusion lists, which name
// users, groups and segments of the old context.
func duplicateDesign(src *upgrade.Experiment, p DuplicateExperimentParams) (CreateExperimentParams, bool) {
	d := designOf(src)
	d.Name = p.Name
	moved := p.Context != "" && p.Context != d.Context
	if moved {
		d.Context = p.Context
		d.InclusionUsers, d.InclusionGroups, d.ExclusionUsers, d.ExclusionGroups = nil, nil, nil, nil
	}
	return withDefaults(d), moved
}

// duplicateResult is a copy's result: the experiment, and what a move to
// another context left behind.
type duplicateResult struct {
	ExperimentResult
	Dropped string `json:"dropped,omitempty"`
}

// droppedByMove says what a copy into another context leaves behind ("" when
// it stays in the source's context).
func droppedByMove(src *upgrade.Experiment, moved bool) string {
	if !moved || (len(src.Queries) == 0 && fmtListsOf(src) == fmtListsOf(&upgrade.Experiment{})) {
		return ""
	}
	return fmt.Sprintf("%s and the inclusion and exclusion lists (%s), which belong to context %s",
		countNoun(len(src.Queries), "query", "queries"), fmtListsOf(src), src.ContextName())
}

// fmtListsOf counts an experiment's list members: "2 users, 1 group, 0 segments".
func fmtListsOf(e *upgrade.Experiment) string {
	users := len(e.Inclusion.Users) + len(e.Exclusion.Users)
	groups := len(e.Inclusion.Groups) + len(e.Exclusion.Groups)
	segs := len(e.Inclusion.Segments) + len(e.Exclusion.Segments)
	return countNoun(users, "user", "users") + ", " + countNoun(groups, "group", "groups") + ", " + countNoun(segs, "segment", "segments")
}

func countNoun(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func validateDuplicate(c *Checker, p DuplicateExperimentParams) error {
	if p.Name == "" {
		c.Missing("name", "name is required: the copy's name")
	}
	src, err := c.Experiment("experiment_id", p.ExperimentID)
	if err != nil || src == nil {
		return err
	}
	d, moved := duplicateDesign(src, p)
	if p.Name == "" {
		return nil
	}
	n := len(c.problems)
	if err := c.design(d, "", true); err != nil {
		return err
	}
	if moved {
		// The copy keeps the source's decision points and conditions: say
		// why a field the action does not have is wrong.
		for i := n; i < len(c.problems); i++ {
			if f := c.problems[i].Field; strings.HasPrefix(f, "decision_points") || strings.HasPrefix(f, "conditions") || strings.HasPrefix(f, "group_type") {
				c.problems[i].Field = "context"
				c.problems[i].Message += fmt.Sprintf(" (the copy keeps the %s of %q; context %s cannot take them)", f, src.Name, p.Context)
			}
		}
	}
	return nil
}

func planDuplicate(b *Planner, p DuplicateExperimentParams) error {
	src, err := b.Experiment(p.ExperimentID)
	if err != nil {
		return err
	}
	if src, err = upgrade.ExperimentWithLists(b.Context(), b.API(), src.ID); err != nil {
		return fmt.Errorf("reading the lists of experiment %s: %w", p.ExperimentID, err)
	}
	d, moved := duplicateDesign(src, p)
	b.Line("Create experiment %s in context %s, a copy of %s (id %s).", quote(d.Name), ident(d.Context), quote(src.Name), src.ID)
	b.designLines(d)
	b.stratificationLines(d)
	kept, kept2 := "kept", upgrade.Segment{}
	if drop := droppedByMove(src, moved); drop != "" {
		kept = "dropped"
		b.Warn("the copy moves from context %s to %s: its queries and its inclusion and exclusion lists are dropped, as UpGrade's web UI does", ident(src.ContextName()), ident(d.Context))
		b.Line("  Dropped with the move: %s.", drop)
	} else if moved {
		b.Line("  The copy moves from context %s to %s; the source has no queries or list members to drop.", ident(src.ContextName()), ident(d.Context))
	} else {
		kept2 = src.Inclusion
		b.Line("  Inclusion and exclusion lists kept (%s).", fmtListsOf(src))
	}
	parts := "its conditions and decision points"
	if d.Design == DesignFactorial {
		parts = "its conditions, decision points and factor levels"
	}
	b.Line("  Queries: %d %s; condition payloads kept; new ids for the experiment, %s.", len(src.Queries), kept, parts)
	b.designWarnings(d, kept2)
	b.Line("It is created inactive: nobody is enrolled until it is started.")
	return nil
}

// duplicateOf builds the object to send: the source with the copy's
// design, new ids (payloads follow their condition and decision point),
// no history.
func duplicateOf(src *upgrade.Experiment, d CreateExperimentParams, moved bool, id string) *upgrade.Experiment {
	e := *buildExperiment(src, d)
	e.ID, e.State, e.StateTimeLogs, e.CreatedAt, e.UpdatedAt, e.VersionNumber = id, upgrade.StateInactive, nil, "", "", 0
	e.StartOn, e.EndOn = nil, nil
	ids := map[string]string{}
	for i := range e.Conditions {
		n := upgrade.NewID()
		ids[e.Conditions[i].ID], e.Conditions[i].ID, e.Conditions[i].TwoCharacterID = n, n, ""
	}
	for i := range e.Partitions {
		n := upgrade.NewID()
		ids[e.Partitions[i].ID], e.Partitions[i].ID, e.Partitions[i].TwoCharacterID = n, n, ""
	}
	if e.RevertTo != nil {
		r := ids[*e.RevertTo]
		e.RevertTo = &r
	}
	freshLevelIDs(&e)
	var payloads []json.RawMessage
	for _, raw := range e.ConditionPayloads {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		m["id"] = upgrade.NewID()
		for _, k := range []string{"parentCondition", "decisionPoint"} {
			if s, ok := m[k].(string); ok && ids[s] != "" {
				m[k] = ids[s]
			}
		}
		if b, err := json.Marshal(m); err == nil {
			payloads = append(payloads, b)
		}
	}
	e.ConditionPayloads = payloads
	e.Queries = nil
	if !moved {
		for _, raw := range src.Queries {
			var m map[string]any
			if json.Unmarshal(raw, &m) != nil {
				continue
			}
			m["id"] = upgrade.NewID()
			delete(m, "experiment")
			if b, err := json.Marshal(m); err == nil {
				e.Queries = append(e.Queries, b)
			}
		}
	} else {
		e.Inclusion, e.Exclusion = upgrade.Segment{}, upgrade.Segment{}
	}
	return &e
}

func executeDuplicate(ctx context.Context, env Env, p DuplicateExperimentParams, key string) (Outcome, error) {
	id := createID(key)
	if e, err := env.API.Experiment(ctx, id); err == nil {
		return Result(SummarizeExperiment(e))
	} else if upgrade.CategoryOf(err) != upgrade.CategoryNotFound {
		return Outcome{}, fmt.Errorf("checking whether experiment %s exists before creating it: %w", id, err)
	}
	src, err := upgrade.ExperimentWithLists(ctx, env.API, p.ExperimentID)
	if err != nil {
		return Outcome{}, fmt.Errorf("reading experiment %s: %w", p.ExperimentID, err)
	}
	d, moved := duplicateDesign(src, p)
	out, err := env.API.CreateExperiment(upgrade.WithCreateID(ctx, id), duplicateOf(src, d, moved, id))
	if err != nil {
		return Outcome{}, err
	}
	held, err := hold(ctx, env.API, out.ID, d)
	if err != nil {
		return Outcome{}, fmt.Errorf("experiment %q was created (id %s), but %w", d.Name, out.ID, err)
	}
	return Result(duplicateResult{SummarizeExperiment(held), droppedByMove(src, moved)})
}

// freshLevelIDs gives a copy's factor levels and level combination elements
// new ids: a level id is a key of UpGrade's level table, so the source's
// ids cannot be stored twice.
func freshLevelIDs(e *upgrade.Experiment) {
	ids := map[string]string{}
	e.Factors = slices.Clone(e.Factors)
	for i := range e.Factors {
		e.Factors[i].Levels = slices.Clone(e.Factors[i].Levels)
		for k := range e.Factors[i].Levels {
			n := upgrade.NewID()
			ids[e.Factors[i].Levels[k].ID], e.Factors[i].Levels[k].ID = n, n
		}
	}
	for i := range e.Conditions {
		els := slices.Clone(e.Conditions[i].LevelCombinationElements)
		for k := range els {
			els[k].ID = upgrade.NewID()
			if n := ids[els[k].Level.ID]; n != "" {
				els[k].Level.ID = n
			}
		}
		e.Conditions[i].LevelCombinationElements = els
	}
}

func reconcileDuplicate(ctx context.Context, env Env, p DuplicateExperimentParams, key string, startedAt time.Time) (Reconciliation, error) {
	return reconcileCreate(ctx, env, CreateExperimentParams{Name: p.Name}, key, startedAt)
}
