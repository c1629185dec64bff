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
// was based on, so that resume can refuse a decision made on stale data.
type Plan struct {
	Action      Name            `json:"action"`
	Params      json.RawMessage `json:"params"` // Canonical(p)
	Message     string          `json:"message"`
	Destructive bool            `json:"destructive"`
	// ExperimentID and ExperimentVersion identify the experiment the
	// message describes (update, status, delete, mark, balance); IsStale
	// compares them with the server before executing.
	ExperimentID      string   `json:"experiment_id,omitempty"`
	ExperimentVersion string   `json:"experiment_version,omitempty"`
	Warnings          []string `json:"warnings,omitempty"`
}

// DestructiveMarker starts the message of every destructive action.
const DestructiveMarker = "DESTRUCTIVE: "

// ConfirmPrompt ends every confirmation message.
const ConfirmPrompt = "Reply yes to proceed or no to cancel."

// BuildPlan builds the confirmation for p. The text depends only on p and
// the server's data: the same input gives byte-identical text. Call it
// after Validate reported no problem; it reads what the text shows
// (current values, experiments at a decision point) and fails when that
// read fails.
func BuildPlan(ctx context.Context, api API, p Params) (*Plan, error) {
	// Describe what will run, which is the canonical form, not whatever
	// spelling the caller's struct holds.
	p, err := canonicalParams(p)
	if err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	spec, _ := Lookup(string(p.Action()))
	canon, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	b := &planBuilder{ctx: ctx, api: api, plan: &Plan{Action: spec.Name, Params: canon, Destructive: spec.Destructive}}
	if spec.Destructive {
		b.text.WriteString(DestructiveMarker)
	}
	switch v := p.(type) {
	case CreateExperimentParams:
		err = b.create(v)
	case UpdateExperimentParams:
		err = b.update(v)
	case UpdateExperimentStatusParams:
		err = b.status(v)
	case DeleteExperimentParams:
		err = b.delete(v)
	case InitExperimentUserParams:
		b.init(v)
	case GetDecisionPointAssignmentsParams:
		b.line("Ask UpGrade which conditions user %s gets in context %s.", quote(v.UserID), ident(v.Context))
		b.line("The user must have been initialised before (init_experiment_user); nothing is marked.")
	case MarkDecisionPointParams:
		err = b.mark(v)
	case VisitDecisionPointParams:
		err = b.visit(v)
	case BalanceParams:
		err = b.balance(v)
	}
	if err != nil {
		return nil, fmt.Errorf("build plan for %s: %w", spec.Name, err)
	}
	for _, w := range b.plan.Warnings {
		b.line("Warning: %s", w)
	}
	b.text.WriteString(ConfirmPrompt)
	b.plan.Message = b.text.String()
	return b.plan, nil
}

// IsStale reports whether the experiment a plan describes changed since
// the plan was built, or no longer exists. Plans that describe no
// experiment are never stale. The error is non-nil only when the check
// could not be made.
func IsStale(ctx context.Context, api API, plan *Plan) (bool, error) {
	if plan == nil || plan.ExperimentID == "" {
		return false, nil
	}
	e, err := api.Experiment(ctx, plan.ExperimentID)
	if err != nil {
		if upgrade.CategoryOf(err) == upgrade.CategoryNotFound {
			return true, nil
		}
		return false, fmt.Errorf("checking experiment %s: %w", plan.ExperimentID, err)
	}
	return experimentVersion(e) != plan.ExperimentVersion, nil
}

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

type planBuilder struct {
	ctx  context.Context
	api  API
	plan *Plan
	text strings.Builder
}

func (b *planBuilder) line(format string, args ...any) {
	fmt.Fprintf(&b.text, format, args...)
	b.text.WriteByte('\n')
}

func (b *planBuilder) warn(format string, args ...any) {
	b.plan.Warnings = append(b.plan.Warnings, fmt.Sprintf(format, args...))
}

func (b *planBuilder) pin(e *upgrade.Experiment) {
	b.plan.ExperimentID = e.ID
	b.plan.ExperimentVersion = experimentVersion(e)
}

func (b *planBuilder) experiment(id string) (*upgrade.Experiment, error) {
	e, err := b.api.Experiment(b.ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading experiment %s: %w", id, err)
	}
	return e, nil
}

func (b *planBuilder) create(p CreateExperimentParams) error {
	d := withDefaults(p)
	b.line("Create experiment %s in context %s.", quote(d.Name), ident(d.Context))
	b.designLines(d)
	b.designWarnings(d)
	b.line("It is created inactive: nobody is enrolled until it is started.")
	return nil
}

// designLines lists every setting of a design, defaults included, so the
// person sees exactly what the experiment will be.
func (b *planBuilder) designLines(d CreateExperimentParams) {
	b.line("  Decision points:")
	for i, dp := range d.DecisionPoints {
		b.line("    %d. %s", i+1, fmtDecisionPoint(dp))
	}
	b.line("  Conditions:")
	for i, c := range d.Conditions {
		b.line("    %d. %s: %s%%", i+1, ident(c.Code), fmtWeight(c.Weight))
	}
	unit := d.AssignmentUnit
	if unit == upgrade.UnitGroup {
		unit += " (group type " + ident(d.GroupType) + ")"
	}
	b.line("  Assignment unit: %s", unit)
	b.line("  Consistency rule: %s", d.ConsistencyRule)
	b.line("  Post-experiment rule: %s", fmtPostRuleLong(d.PostExperimentRule))
	switch d.FilterMode {
	case upgrade.FilterExcludeAll:
		b.line("  Participants: excludeAll (only the included, minus the excluded)")
		b.line("    Included users: %s", fmtUsers(d.InclusionUsers))
		b.line("    Included groups: %s", fmtGroups(d.InclusionGroups))
	default:
		b.line("  Participants: %s (everyone except the excluded)", d.FilterMode)
	}
	b.line("    Excluded users: %s", fmtUsers(d.ExclusionUsers))
	b.line("    Excluded groups: %s", fmtGroups(d.ExclusionGroups))
	if d.Description != "" {
		b.line("  Description: %s", quote(d.Description))
	}
	if len(d.Tags) > 0 {
		b.line("  Tags: %s", fmtUsers(d.Tags))
	}
}

func (b *planBuilder) designWarnings(d CreateExperimentParams) {
	if d.FilterMode == upgrade.FilterExcludeAll && len(d.InclusionUsers) == 0 && len(d.InclusionGroups) == 0 {
		b.warn("filter mode excludeAll with empty inclusion lists: nobody would be enrolled")
	}
	if d.AssignmentUnit != upgrade.UnitGroup && d.GroupType != "" {
		b.warn("group_type %s is ignored: the assignment unit is %s", ident(d.GroupType), d.AssignmentUnit)
	}
	for _, c := range d.Conditions {
		if c.Weight != nil && *c.Weight == 0 {
			b.warn("condition %s has weight 0: nobody will get it", ident(c.Code))
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
	{"assignment_unit", func(d CreateExperimentParams) string { return identOrNone(d.AssignmentUnit) }},
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

func (b *planBuilder) update(p UpdateExperimentParams) error {
	e, err := b.experiment(p.ExperimentID)
	if err != nil {
		return err
	}
	b.pin(e)
	cur := designOf(e)
	next := applyUpdate(cur, p)
	b.line("Update experiment %s (id %s, context %s, state %s):", quote(e.Name), e.ID, identOrNone(e.ContextName()), e.State)
	changes := designChanges(cur, next)
	for _, c := range changes {
		b.line("  %s", c)
	}
	if len(changes) == 0 {
		b.line("  (no change: every value given equals the current one)")
		b.warn("nothing would change")
	}
	b.line("Existing condition and decision point ids are kept (matched by code and by site/target).")
	if len(changes) > 0 && e.State == upgrade.StateEnrolling {
		b.warn("the experiment is enrolling: the change applies to users assigned from now on")
	}
	for _, code := range removedCodes(cur, next) {
		b.warn("condition %s is removed; users who had it lose it", ident(code))
	}
	b.designWarnings(next)
	return nil
}

func removedCodes(cur, next CreateExperimentParams) []string {
	keep := map[string]bool{}
	for _, c := range next.Conditions {
		keep[c.Code] = true
	}
	var out []string
	for _, c := range cur.Conditions {
		if !keep[c.Code] {
			out = append(out, c.Code)
		}
	}
	return out
}

func (b *planBuilder) status(p UpdateExperimentStatusParams) error {
	e, err := b.experiment(p.ExperimentID)
	if err != nil {
		return err
	}
	b.pin(e)
	target := upgrade.State(p.Status)
	verb, ok := AllowedTransition(e.State, target)
	if !ok {
		verb = "not an offered change"
	}
	b.line("change the status of experiment %s (id %s, context %s): %s -> %s (%s).",
		quote(e.Name), e.ID, identOrNone(e.ContextName()), e.State, target, verb)
	d := designOf(e)
	switch target {
	case upgrade.StateEnrolling:
		if e.State == upgrade.StateEnrollmentComplete {
			b.line("Enrollment resumes: users who reach its decision points are assigned conditions again.")
		} else {
			b.line("Users who reach its decision points from now on are assigned conditions (unit %s, consistency %s).",
				identOrNone(e.AssignmentUnit), identOrNone(e.ConsistencyRule))
		}
		if e.FilterMode == upgrade.FilterExcludeAll && e.Inclusion.Empty() {
			b.warn("filter mode excludeAll with empty inclusion lists: nobody would be enrolled")
		}
	case upgrade.StateEnrollmentComplete:
		b.line("Enrollment ends; the post-experiment rule applies: %s.", fmtPostRuleLong(d.PostExperimentRule))
	case upgrade.StateCancelled:
		b.line("The experiment stops: everyone gets the default condition.")
	case upgrade.StateArchived:
		b.line("The experiment is archived: it stays readable but no longer runs.")
	}
	return nil
}

func (b *planBuilder) delete(p DeleteExperimentParams) error {
	e, err := b.experiment(p.ExperimentID)
	if err != nil {
		return err
	}
	b.pin(e)
	b.line("delete experiment %s (id %s, context %s, state %s).", quote(e.Name), e.ID, identOrNone(e.ContextName()), e.State)
	users := ""
	// The enrollment count helps the decision but is not essential; a
	// server that cannot compute it still lets the person decide.
	if st, err := b.api.EnrollmentStats(b.ctx, e.ID); err == nil && st != nil {
		users = fmt.Sprintf(" and %s enrolled", plural(st.Users, "user", "users"))
	}
	b.line("It has %s (%s), %s (%s)%s; the experiment and its enrollment data are removed for good.",
		plural(len(e.Conditions), "condition", "conditions"), listOrNone(experimentCodes(e)),
		plural(len(e.Partitions), "decision point", "decision points"), listOrNone(partitionNames(e)), users)
	if e.State == upgrade.StateEnrolling {
		b.warn("the experiment is enrolling: its users get the default condition from now on")
	}
	return nil
}

func (b *planBuilder) init(p InitExperimentUserParams) {
	b.line("Initialise user %s in UpGrade.", quote(p.UserID))
	b.line("  Groups: %s", fmtGroupMap(p.Group))
	b.line("  Working groups: %s", fmtWorkingGroups(p.WorkingGroup))
}

func (b *planBuilder) mark(p MarkDecisionPointParams) error {
	dp := ident(siteTarget(p.DecisionPoint.Site, p.DecisionPoint.Target))
	status := p.Status
	if p.AssignedCondition == nil {
		if status == "" {
			status = upgrade.MarkNoConditionAssigned
		}
		b.line("mark decision point %s for user %s: no condition, status %s.", dp, quote(p.UserID), quote(status))
		b.line("This records that the user reached the decision point without a condition.")
		return nil
	}
	if status == "" {
		status = upgrade.MarkConditionApplied
	}
	e, err := b.experiment(p.AssignedCondition.ExperimentID)
	if err != nil {
		return err
	}
	b.pin(e)
	b.line("mark decision point %s for user %s: condition %s of experiment %s (id %s), status %s.",
		dp, quote(p.UserID), ident(p.AssignedCondition.ConditionCode), quote(e.Name), e.ID, quote(status))
	if status == upgrade.MarkConditionNotApplied {
		b.line("This excludes the user from the experiment for good.")
	} else {
		b.line("This records the user's enrollment in the experiment.")
	}
	return nil
}

// experimentsAt lists the experiments of a context with a decision point
// at site/target, in the server's order.
func experimentsAt(ctx context.Context, api API, appContext, site, target string) ([]upgrade.Experiment, error) {
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

func (b *planBuilder) visit(p VisitDecisionPointParams) error {
	dp := ident(siteTarget(p.Site, p.Target))
	b.line("simulate user %s visiting decision point %s in context %s:", quote(p.UserID), dp, ident(p.Context))
	b.line("  1. init the user (groups: %s; working groups: %s)", fmtGroupMap(p.Group), fmtWorkingGroups(p.WorkingGroup))
	b.line("  2. ask UpGrade for the user's conditions in %s", ident(p.Context))
	b.line("  3. mark %s with the condition assigned there, or %s", dp, quote(upgrade.MarkNoConditionAssigned))
	es, err := experimentsAt(b.ctx, b.api, p.Context, p.Site, p.Target)
	if err != nil {
		return err
	}
	b.line("Experiments at this decision point: %s.", fmtExperiments(es))
	b.line("This writes 1 synthetic user into UpGrade and may enroll them in an experiment.")
	return nil
}

func (b *planBuilder) balance(p BalanceParams) error {
	dp := ident(siteTarget(p.Site, p.Target))
	b.line("simulate %s visiting decision point %s in context %s and count their conditions.",
		plural(p.NumUsers, "synthetic user", "synthetic users"), dp, ident(p.Context))
	var e *upgrade.Experiment
	if p.ExperimentID != "" {
		var err error
		if e, err = b.experiment(p.ExperimentID); err != nil {
			return err
		}
		b.pin(e)
		parts := make([]string, 0, len(e.Conditions))
		for _, c := range sortedConditions(e.Conditions) {
			parts = append(parts, fmt.Sprintf("%s %s%%", ident(c.ConditionCode), fmtNum(c.AssignmentWeight)))
		}
		b.line("  Counted: only assignments of experiment %s (id %s, state %s); weights %s.",
			quote(e.Name), e.ID, e.State, joinOrNone(parts))
	} else {
		es, err := experimentsAt(b.ctx, b.api, p.Context, p.Site, p.Target)
		if err != nil {
			return err
		}
		b.line("  Counted: every condition assigned there; experiments at this decision point: %s.", fmtExperiments(es))
		if len(es) == 1 {
			e = &es[0]
		}
	}
	if len(p.Group) > 0 || len(p.WorkingGroup) > 0 {
		b.line("  Every user gets groups: %s; working groups: %s.", fmtGroupMap(p.Group), fmtWorkingGroups(p.WorkingGroup))
	} else {
		b.line("  The users belong to no group.")
	}
	b.line("Each user is initialised, assigned and marked: this writes %s and their enrollment records into UpGrade, where they stay.",
		plural(p.NumUsers, "synthetic user", "synthetic users"))
	b.line("It runs as a background job; the result compares the counts with the weights (chi-square test).")
	if e != nil {
		if e.State != upgrade.StateEnrolling {
			b.warn("experiment %s is not enrolling (state %s): every user would get the default condition", quote(e.Name), e.State)
		}
		if e.ConsistencyRule == upgrade.ConsistencyGroup {
			b.warn("experiment %s uses group consistency and every synthetic user shares the same working group: they all get one condition", quote(e.Name))
		}
		if e.FilterMode == upgrade.FilterExcludeAll {
			b.warn("experiment %s only enrolls its inclusion lists (excludeAll): synthetic users outside them get the default condition", quote(e.Name))
		}
	}
	return nil
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
