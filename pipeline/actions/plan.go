package actions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Plan is what the confirmation node shows and the checkpoint stores: the
// exact params that will run, the text the person reads, and what the text
// was based on. The text is a function of the params and the server's data
// at ExperimentVersion, so the pipeline re-renders it before executing and
// refuses an approval given to any other text (stale, or forged in a file).
type Plan struct {
	Action      Name            `json:"action"`
	Params      json.RawMessage `json:"params"` // the bound canonical params
	Message     string          `json:"message"`
	Destructive bool            `json:"destructive"`
	// ExperimentID and ExperimentVersion identify the experiment the
	// message describes (update, status, delete, mark, balance).
	ExperimentID      string   `json:"experiment_id,omitempty"`
	ExperimentVersion string   `json:"experiment_version,omitempty"`
	Warnings          []string `json:"warnings,omitempty"`
	// Facts are details that help the decision but change on their own
	// (enrolled users): told to the person, not part of the bound text.
	Facts []string `json:"facts,omitempty"`
}

// Same reports whether q shows the person what p showed: the same action,
// params, text and experiment version.
func (p *Plan) Same(q *Plan) bool {
	return p != nil && q != nil && p.Action == q.Action && string(p.Params) == string(q.Params) &&
		p.Message == q.Message && p.Destructive == q.Destructive && p.ExperimentVersion == q.ExperimentVersion
}

// DestructiveMarker starts the message of every destructive action.
const DestructiveMarker = "DESTRUCTIVE: "

// ConfirmPrompt ends every confirmation message.
const ConfirmPrompt = "Reply yes to proceed or no to cancel."

// experimentVersion identifies one version of an experiment: the server's
// version number and update time, or a digest of its content when a server
// sends neither.
func experimentVersion(e *upgrade.Experiment) string {
	if e.VersionNumber != 0 || e.UpdatedAt != "" {
		return fmt.Sprintf("v%d@%s", e.VersionNumber, e.UpdatedAt)
	}
	raw, _ := json.Marshal(e) // marshalling a decoded experiment cannot fail
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// Planner writes one confirmation while an action's Plan runs: the lines
// the person reads, warnings (shown after them), facts (told, not bound)
// and the experiment the text describes.
type Planner struct {
	ctx  context.Context
	api  API
	plan *Plan
	// changes finds recorded changes (undo_change's plan).
	changes ChangeSource
	text    strings.Builder
}

// Context is the context of the rendering.
func (b *Planner) Context() context.Context { return b.ctx }

// API is the UpGrade the plan reads.
func (b *Planner) API() API { return b.api }

// Line adds a line of text.
func (b *Planner) Line(format string, args ...any) {
	fmt.Fprintf(&b.text, format, args...)
	b.text.WriteByte('\n')
}

// Fact adds a detail that helps the decision but changes on its own.
func (b *Planner) Fact(format string, args ...any) {
	b.plan.Facts = append(b.plan.Facts, fmt.Sprintf(format, args...))
}

// Warn adds a warning, shown after the lines.
func (b *Planner) Warn(format string, args ...any) {
	b.plan.Warnings = append(b.plan.Warnings, fmt.Sprintf(format, args...))
}

// Pin binds the text to this version of the experiment: an approval of it
// is refused once the experiment changed.
func (b *Planner) Pin(e *upgrade.Experiment) {
	b.plan.ExperimentID = e.ID
	b.plan.ExperimentVersion = experimentVersion(e)
}

// Experiment reads an experiment.
func (b *Planner) Experiment(id string) (*upgrade.Experiment, error) {
	e, err := b.api.Experiment(b.ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading experiment %s: %w", id, err)
	}
	return e, nil
}

// designLines lists every setting of a design, defaults included, so the
// person sees exactly what the experiment will be.
func (b *Planner) designLines(d CreateExperimentParams) {
	b.Line("  Decision points:")
	for i, dp := range d.DecisionPoints {
		b.Line("    %d. %s", i+1, fmtDecisionPoint(dp))
	}
	if d.Design == DesignFactorial {
		b.Line("  Design: factorial, %d factors:", len(d.Factors))
		for i, f := range d.Factors {
			b.Line("    %d. %s", i+1, fmtFactors([]FactorParam{f}))
		}
		b.Line("  Conditions (every combination of levels; codes made by the agent):")
	} else {
		b.Line("  Conditions:")
	}
	for i, c := range d.Conditions {
		b.Line("    %d. %s: %s%%", i+1, ident(c.Code), fmtWeight(c.Weight))
	}
	unit := d.AssignmentUnit
	switch unit {
	case upgrade.UnitGroup:
		unit += " (group type " + ident(d.GroupType) + ")"
	case upgrade.UnitWithinSubjects:
		unit += " (every user gets every condition in turn, condition order " + d.ConditionOrder + ")"
	}
	b.Line("  Assignment unit: %s", unit)
	b.Line("  Consistency rule: %s", d.ConsistencyRule)
	b.Line("  Post-experiment rule: %s", fmtPostRuleLong(d.PostExperimentRule))
	switch d.FilterMode {
	case upgrade.FilterExcludeAll:
		b.Line("  Participants: excludeAll (only the included, minus the excluded)")
		b.Line("    Included users: %s", fmtUsers(d.InclusionUsers))
		b.Line("    Included groups: %s", fmtGroups(d.InclusionGroups))
	default:
		b.Line("  Participants: %s (everyone except the excluded)", d.FilterMode)
	}
	b.Line("    Excluded users: %s", fmtUsers(d.ExclusionUsers))
	b.Line("    Excluded groups: %s", fmtGroups(d.ExclusionGroups))
	if d.Description != "" {
		b.Line("  Description: %s", quote(d.Description))
	}
	if len(d.Tags) > 0 {
		b.Line("  Tags: %s", fmtUsers(d.Tags))
	}
}

// designWarnings warns about design d; kept are the inclusion lists naming
// public segments that the experiment keeps (none for a new one).
func (b *Planner) designWarnings(d CreateExperimentParams, kept upgrade.Segment) {
	if d.FilterMode == upgrade.FilterExcludeAll && len(d.InclusionUsers) == 0 && len(d.InclusionGroups) == 0 && len(kept.Segments) == 0 {
		b.Warn("filter mode excludeAll with empty inclusion lists: nobody would be enrolled")
	}
	if d.AssignmentUnit != upgrade.UnitGroup && d.GroupType != "" {
		b.Warn("group_type %s is ignored: the assignment unit is %s", ident(d.GroupType), d.AssignmentUnit)
	}
	for _, c := range d.Conditions {
		if c.Weight != nil && *c.Weight == 0 {
			b.Warn("condition %s has weight 0: nobody will get it", ident(c.Code))
		}
	}
}

// updateFields is the order in which update_experiment lists its changes.
var updateFields = []struct {
	name   string
	format func(d CreateExperimentParams) string
}{
	{"name", func(d CreateExperimentParams) string { return quoteOrNone(d.Name) }},
	{"context", func(d CreateExperimentParams) string { return identOrNone(d.Context) }},
	{"description", func(d CreateExperimentParams) string { return quoteOrNone(d.Description) }},
	{"tags", func(d CreateExperimentParams) string { return fmtUsers(d.Tags) }},
	{"decision_points", func(d CreateExperimentParams) string {
		parts := make([]string, len(d.DecisionPoints))
		for i, dp := range d.DecisionPoints {
			parts[i] = fmtDecisionPoint(dp)
		}
		return joinOrNone(parts)
	}},
	{"conditions", func(d CreateExperimentParams) string {
		parts := make([]string, len(d.Conditions))
		for i, c := range d.Conditions {
			parts[i] = ident(c.Code) + " " + fmtWeight(c.Weight) + "%"
		}
		return joinOrNone(parts)
	}},
	{"factors", func(d CreateExperimentParams) string { return fmtFactors(d.Factors) }},
	{"assignment_unit", func(d CreateExperimentParams) string { return identOrNone(d.AssignmentUnit) }},
	{"condition_order", func(d CreateExperimentParams) string { return identOrNone(d.ConditionOrder) }},
	{"group_type", func(d CreateExperimentParams) string { return identOrNone(d.GroupType) }},
	{"consistency_rule", func(d CreateExperimentParams) string { return identOrNone(d.ConsistencyRule) }},
	{"post_experiment_rule", func(d CreateExperimentParams) string { return fmtPostRule(d.PostExperimentRule) }},
	{"filter_mode", func(d CreateExperimentParams) string { return identOrNone(d.FilterMode) }},
	{"inclusion_users", func(d CreateExperimentParams) string { return fmtUsers(d.InclusionUsers) }},
	{"inclusion_groups", func(d CreateExperimentParams) string { return fmtGroups(d.InclusionGroups) }},
	{"exclusion_users", func(d CreateExperimentParams) string { return fmtUsers(d.ExclusionUsers) }},
	{"exclusion_groups", func(d CreateExperimentParams) string { return fmtGroups(d.ExclusionGroups) }},
}

// designChanges lists "field: old -> new" for every field that differs.
func designChanges(cur, next CreateExperimentParams) []string {
	var out []string
	for _, f := range updateFields {
		if o, n := f.format(cur), f.format(next); o != n {
			out = append(out, fmt.Sprintf("%s: %s -> %s", f.name, o, n))
		}
	}
	return out
}

// experimentsAt lists the experiments of a context with a decision point
// at site/target, in the server's order.
func experimentsAt(ctx context.Context, api ExperimentAPI, appContext, site, target string) ([]upgrade.Experiment, error) {
	all, err := api.Experiments(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing experiments: %w", err)
	}
	var out []upgrade.Experiment
	for i := range all {
		if contains(all[i].Context, appContext) && hasPartition(&all[i], site, target) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

func fmtExperiments(es []upgrade.Experiment) string {
	parts := make([]string, len(es))
	for i := range es {
		parts[i] = fmt.Sprintf("%s (%s)", quote(es[i].Name), es[i].State)
	}
	return joinOrNone(parts)
}

func fmtDecisionPoint(dp DecisionPointParam) string {
	s := ident(dp.Site) + "/" + ident(dp.Target)
	if dp.ExcludeIfReached {
		s += " (exclude if reached)"
	}
	return s
}

func fmtWeight(w *float64) string {
	if w == nil {
		return "?"
	}
	return fmtNum(*w)
}

func fmtPostRule(r *PostRuleParam) string {
	if r == nil || r.Rule == "" {
		return "(none)"
	}
	if r.Rule == upgrade.PostRuleAssign {
		if r.ConditionCode == "" {
			return "assign default"
		}
		return "assign " + ident(r.ConditionCode)
	}
	return ident(r.Rule)
}

func fmtPostRuleLong(r *PostRuleParam) string {
	if r == nil {
		return "(none)"
	}
	switch r.Rule {
	case upgrade.PostRuleContinue:
		return "continue (users keep the condition they had)"
	case upgrade.PostRuleAssign:
		if r.ConditionCode == "" {
			return "assign (everyone gets the default condition)"
		}
		return "assign (everyone gets " + ident(r.ConditionCode) + ")"
	case upgrade.PostRuleRevert:
		return "revert (legacy: everyone gets the default condition)"
	}
	return fmtPostRule(r)
}

func fmtUsers(list []string) string {
	parts := make([]string, len(list))
	for i, u := range list {
		parts[i] = quote(u)
	}
	return joinOrNone(parts)
}

func fmtGroups(gs []GroupParam) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = ident(g.Type) + " " + quote(g.GroupID)
	}
	return joinOrNone(parts)
}

func fmtGroupMap(m map[string][]string) string {
	if len(m) == 0 {
		return "unchanged"
	}
	var parts []string
	for _, typ := range sortedMapKeys(m) {
		parts = append(parts, ident(typ)+" "+fmtUsers(m[typ]))
	}
	return strings.Join(parts, "; ")
}

func fmtWorkingGroups(m map[string]string) string {
	if len(m) == 0 {
		return "unchanged"
	}
	var parts []string
	for _, typ := range sortedMapKeys(m) {
		parts = append(parts, ident(typ)+" "+quote(m[typ]))
	}
	return strings.Join(parts, "; ")
}

func joinOrNone(parts []string) string {
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return quote(s)
}

func identOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return ident(s)
}

// quote prints text that came from a person or the server (names, ids,
// descriptions) as a Go string literal: a newline or a crafted sentence in
// it can never pass for a line of the confirmation.
func quote(s string) string { return strconv.Quote(s) }

// ident prints a value checked against the context metadata bare when it
// is a plain token, quoted otherwise.
func ident(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		ok := r == '_' || r == '-' || r == '.' || r == '/' || r == ':' || r == '@' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
		if !ok {
			return quote(s)
		}
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
