// Package readmodel is the one read model of UpGrade data that both the
// table commands (experiments list|show|stats|history, flags, segments,
// contexts) and the agent's tools show: an experiment's summary, details,
// enrollment and history, feature flags with their lists and reach,
// segments with members and uses, the app contexts, metrics with the
// queries using them, and an experiment's results with their intervals and
// sample-ratio check (results.go, on internal/stats). One formula per
// figure, whoever reads it.
//
// It only shapes data the client read; it must not call the server.
package readmodel

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// ConditionWeight is a condition code and its assignment weight.
type ConditionWeight struct {
	Code   string  `json:"code"`
	Weight float64 `json:"weight"`
}

// DecisionPointRef is a site and its optional target.
type DecisionPointRef struct {
	Site   string `json:"site"`
	Target string `json:"target,omitempty"`
}

// String is site/target, or the site alone.
func (p DecisionPointRef) String() string {
	if p.Target == "" {
		return p.Site
	}
	return p.Site + "/" + p.Target
}

// Summary is one experiment in a list: `experiments list`, and the
// agent's get_all_experiments (state all_experiments).
type Summary struct {
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	Context        string             `json:"context"`
	Status         upgrade.State      `json:"status"`
	Unit           string             `json:"unit"`
	Consistency    string             `json:"consistency"`
	PostRule       string             `json:"post_rule,omitempty"`
	Conditions     []ConditionWeight  `json:"conditions"`
	DecisionPoints []DecisionPointRef `json:"decision_points"`
	CreatedAt      string             `json:"created_at,omitempty"`
	UpdatedAt      string             `json:"updated_at,omitempty"`
}

// Summarize reduces an experiment to its list row; conditions and decision
// points in their configured order.
func Summarize(e *upgrade.Experiment) Summary {
	s := Summary{
		ID: e.ID, Name: e.Name, Context: e.ContextName(), Status: e.State,
		Unit: e.AssignmentUnit, Consistency: e.ConsistencyRule, PostRule: e.PostExperimentRule,
		Conditions: []ConditionWeight{}, DecisionPoints: []DecisionPointRef{}, UpdatedAt: e.UpdatedAt, CreatedAt: e.CreatedAt,
	}
	for _, c := range conditions(e) {
		s.Conditions = append(s.Conditions, ConditionWeight{Code: c.ConditionCode, Weight: c.AssignmentWeight})
	}
	for _, p := range partitions(e) {
		s.DecisionPoints = append(s.DecisionPoints, DecisionPointRef{Site: p.Site, Target: p.Target})
	}
	return s
}

// SummarizeAll summarizes a list, sorted by name.
func SummarizeAll(list []upgrade.Experiment) []Summary {
	out := make([]Summary, 0, len(list))
	for i := range list {
		out = append(out, Summarize(&list[i]))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Experiment is the one shape the CLI gives an experiment: each item of
// `experiments list -o json` and the object of `experiments show -o json`
// (docs/json.md lists the fields). It has Summary's names, so a script
// reads a list item and a shown experiment alike, and the details besides.
type Experiment struct {
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	Description    string             `json:"description"`
	Context        string             `json:"context"`
	Status         upgrade.State      `json:"status"`
	Unit           string             `json:"unit"`
	GroupType      string             `json:"group_type"`
	Consistency    string             `json:"consistency"`
	PostRule       string             `json:"post_rule"`
	RevertTo       string             `json:"revert_to"` // a condition code; "" = default
	FilterMode     string             `json:"filter_mode"`
	Tags           []string           `json:"tags"`
	Conditions     []DetailsCondition `json:"conditions"`
	DecisionPoints []DetailsPoint     `json:"decision_points"`
	Inclusion      upgrade.Segment    `json:"inclusion"`
	Exclusion      upgrade.Segment    `json:"exclusion"`
	CreatedAt      string             `json:"created_at"`
	UpdatedAt      string             `json:"updated_at"` // Design is "factorial" for a factorial experiment ("" simple), with
	// its Factors; ConditionOrder is a within-subjects experiment's.
	Design         string          `json:"design,omitempty"`
	Factors        []FactorDetails `json:"factors,omitempty"`
	ConditionOrder string          `json:"condition_order,omitempty"`
}

// ExperimentOf is e in the CLI's shape; empty lists are [], never null.
func ExperimentOf(e *upgrade.Experiment) Experiment {
	// The same fields as Details, in the same order: only the names differ.
	x := Experiment(DetailsOf(e))
	if x.Tags == nil {
		x.Tags = []string{}
	}
	for _, seg := range []*upgrade.Segment{&x.Inclusion, &x.Exclusion} {
		if seg.Users == nil {
			seg.Users = []string{}
		}
		if seg.Groups == nil {
			seg.Groups = []upgrade.GroupRef{}
		}
	}
	return x
}

// Details are the settings of one experiment, as the agent reads them
// (get_experiment_details, find_experiment).
type Details struct {
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	Description    string             `json:"description,omitempty"`
	Context        string             `json:"context"`
	Status         upgrade.State      `json:"status"`
	Unit           string             `json:"assignment_unit"`
	GroupType      string             `json:"group_type,omitempty"`
	Consistency    string             `json:"consistency_rule,omitempty"`
	PostRule       string             `json:"post_experiment_rule"`
	RevertTo       string             `json:"revert_to,omitempty"` // the condition code
	FilterMode     string             `json:"filter_mode"`
	Tags           []string           `json:"tags,omitempty"`
	Conditions     []DetailsCondition `json:"conditions"`
	DecisionPoints []DetailsPoint     `json:"decision_points"`
	Inclusion      upgrade.Segment    `json:"inclusion"`
	Exclusion      upgrade.Segment    `json:"exclusion"`
	CreatedAt      string             `json:"created_at,omitempty"`
	UpdatedAt      string             `json:"updated_at,omitempty"` // Design is "factorial" for a factorial experiment ("" simple), with
	// its Factors; ConditionOrder is a within-subjects experiment's.
	Design         string          `json:"design,omitempty"`
	Factors        []FactorDetails `json:"factors,omitempty"`
	ConditionOrder string          `json:"condition_order,omitempty"`
}

// DetailsCondition is one condition of Details. Levels are a factorial
// condition's levels, "Factor=Level" in factor order.
type DetailsCondition struct {
	Code   string   `json:"code"`
	Weight float64  `json:"weight"`
	ID     string   `json:"id"`
	Levels []string `json:"levels,omitempty"`
}

// FactorDetails is one factor of a factorial experiment.
type FactorDetails struct {
	Name   string         `json:"name"`
	Levels []LevelDetails `json:"levels"`
}

// LevelDetails is one level of a factor.
type LevelDetails struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Payload string `json:"payload,omitempty"`
}

// factorsOf are e's factors and levels in their order.
func factorsOf(e *upgrade.Experiment) []FactorDetails {
	if e.Type != upgrade.TypeFactorial {
		return nil
	}
	fs := slices.Clone(e.Factors)
	slices.SortStableFunc(fs, func(a, b upgrade.Factor) int { return a.Order - b.Order })
	out := []FactorDetails{}
	for _, f := range fs {
		ls := slices.Clone(f.Levels)
		slices.SortStableFunc(ls, func(a, b upgrade.Level) int { return a.Order - b.Order })
		fd := FactorDetails{Name: f.Name, Levels: []LevelDetails{}}
		for _, l := range ls {
			fd.Levels = append(fd.Levels, LevelDetails{ID: l.ID, Name: l.Name, Payload: l.PayloadText()})
		}
		out = append(out, fd)
	}
	return out
}

// levelNames maps a level id to "Factor=Level".
func levelNames(e *upgrade.Experiment) map[string]string {
	out := map[string]string{}
	for _, f := range e.Factors {
		for _, l := range f.Levels {
			out[l.ID] = f.Name + "=" + l.Name
		}
	}
	return out
}

// conditionLevels are a factorial condition's levels, in factor order.
func conditionLevels(e *upgrade.Experiment, c upgrade.Condition) []string {
	if e.Type != upgrade.TypeFactorial {
		return nil
	}
	names := levelNames(e)
	order := map[string]int{}
	for _, f := range e.Factors {
		order[f.Name] = f.Order
	}
	var out []string
	for _, el := range c.LevelCombinationElements {
		if n, ok := names[el.Level.ID]; ok {
			out = append(out, n)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		fa, _, _ := strings.Cut(a, "=")
		fb, _, _ := strings.Cut(b, "=")
		return order[fa] - order[fb]
	})
	return out
}

// DetailsPoint is one decision point of Details.
type DetailsPoint struct {
	Site             string `json:"site"`
	Target           string `json:"target,omitempty"`
	ExcludeIfReached bool   `json:"exclude_if_reached"`
}

// segmentsByName is s with its public segments (the lists naming them)
// sorted by name, then id: the server answers in row order, which changes.
func segmentsByName(s upgrade.Segment) upgrade.Segment {
	if len(s.Segments) == 0 {
		return s
	}
	s.Segments = slices.Clone(s.Segments)
	slices.SortFunc(s.Segments, func(a, b upgrade.SegmentRef) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return s
}

// DetailsOf is the settings of e.
func DetailsOf(e *upgrade.Experiment) Details {
	d := Details{
		ID: e.ID, Name: e.Name, Description: e.Description, Context: e.ContextName(), Status: e.State,
		Unit: e.AssignmentUnit, GroupType: e.Group, Consistency: e.ConsistencyRule, PostRule: e.PostExperimentRule,
		FilterMode: e.FilterMode, Tags: e.Tags, Inclusion: segmentsByName(e.Inclusion), Exclusion: segmentsByName(e.Exclusion),
		UpdatedAt: e.UpdatedAt, CreatedAt: e.CreatedAt,
		Conditions: []DetailsCondition{}, DecisionPoints: []DetailsPoint{},
	}
	if e.RevertTo != nil {
		if c := e.ConditionByID(*e.RevertTo); c != nil {
			d.RevertTo = c.ConditionCode
		}
	}
	for _, c := range conditions(e) {
		d.Conditions = append(d.Conditions, DetailsCondition{Code: c.ConditionCode, Weight: c.AssignmentWeight, ID: c.ID, Levels: conditionLevels(e, c)})
	}
	if e.Type == upgrade.TypeFactorial {
		d.Design, d.Factors = "factorial", factorsOf(e)
	}
	d.ConditionOrder = e.ConditionOrder
	for _, p := range partitions(e) {
		d.DecisionPoints = append(d.DecisionPoints, DetailsPoint{Site: p.Site, Target: p.Target, ExcludeIfReached: p.ExcludeIfReached})
	}
	return d
}

// ConditionEnrollment is one condition of an Enrollment.
type ConditionEnrollment struct {
	Condition   string  `json:"code"` // the condition code, named as in Experiment
	ConditionID string  `json:"id"`
	Weight      float64 `json:"weight"`
	Users       int     `json:"users"`
	Groups      int     `json:"groups"`
	Share       float64 `json:"share"` // fraction of the users enrolled in any condition, 0..1
}

// Enrollment is who is enrolled in an experiment, per condition:
// `experiments stats` and the agent's get_enrollment_details.
type Enrollment struct {
	ExperimentID   string                `json:"experiment_id"`
	ExperimentName string                `json:"experiment_name"`
	Status         upgrade.State         `json:"status,omitempty"`
	Users          int                   `json:"users"`
	Groups         int                   `json:"groups"`
	UsersExcluded  int                   `json:"users_excluded"`
	GroupsExcluded int                   `json:"groups_excluded"`
	Conditions     []ConditionEnrollment `json:"conditions"`
	// SampleRatio is the split checked against the weights, when the
	// reader asked for it (SampleRatioOf).
	SampleRatio *SampleRatio `json:"sample_ratio,omitempty"`
	// Levels are a factorial's users per level: the users of every
	// condition with that level.
	Levels []LevelEnrollment `json:"levels,omitempty"`
	// WithinSubjects says a user counts in every condition they marked,
	// so the conditions' users add up to more than the users.
	WithinSubjects bool `json:"within_subjects,omitempty"`
}

// LevelEnrollment is one level's users in a factorial experiment.
type LevelEnrollment struct {
	Factor  string `json:"factor"`
	Level   string `json:"level"`
	LevelID string `json:"level_id"`
	Users   int    `json:"users"`
}

// EnrollmentOf combines an experiment and its enrollment counts: one entry
// per condition in the experiment's order (counts of a condition it no
// longer has are kept, under their id), each with its share of the users
// enrolled in any condition: the one denominator.
func EnrollmentOf(e *upgrade.Experiment, st *upgrade.EnrollmentStats) Enrollment {
	r := Enrollment{ExperimentID: e.ID, ExperimentName: e.Name, Status: e.State, Users: st.Users, Groups: st.Groups,
		UsersExcluded: st.UsersExcluded, GroupsExcluded: st.GroupsExcluded, Conditions: []ConditionEnrollment{}}
	byID := make(map[string]upgrade.ConditionStats, len(st.Conditions))
	for _, c := range st.Conditions {
		byID[c.ID] = c
	}
	seen := map[string]bool{}
	for _, c := range conditions(e) {
		cs := byID[c.ID]
		r.Conditions = append(r.Conditions, ConditionEnrollment{Condition: c.ConditionCode, ConditionID: c.ID,
			Weight: c.AssignmentWeight, Users: cs.Users, Groups: cs.Groups})
		seen[c.ID] = true
	}
	for _, c := range st.Conditions {
		if !seen[c.ID] {
			r.Conditions = append(r.Conditions, ConditionEnrollment{Condition: c.ID, ConditionID: c.ID, Users: c.Users, Groups: c.Groups})
		}
	}
	r.WithinSubjects = e.AssignmentUnit == upgrade.UnitWithinSubjects
	if e.Type == upgrade.TypeFactorial {
		for _, f := range factorsOf(e) {
			for _, l := range f.Levels {
				le := LevelEnrollment{Factor: f.Name, Level: l.Name, LevelID: l.ID}
				for _, c := range e.Conditions {
					if slices.ContainsFunc(c.LevelCombinationElements, func(el upgrade.LevelCombinationElement) bool { return el.Level.ID == l.ID }) {
						le.Users += byID[c.ID].Users
					}
				}
				r.Levels = append(r.Levels, le)
			}
		}
	}
	total := 0
	for _, c := range r.Conditions {
		total += c.Users
	}
	if total > 0 {
		for i := range r.Conditions {
			r.Conditions[i].Share = float64(r.Conditions[i].Users) / float64(total)
		}
	}
	return r
}

// Context is one app context with what it allows.
type Context struct {
	Name       string   `json:"name"`
	Conditions []string `json:"conditions"`
	Sites      []string `json:"sites"`   // EXP_POINTS
	Targets    []string `json:"targets"` // EXP_IDS
	GroupTypes []string `json:"group_types"`
}

// Contexts turns context metadata into a list sorted by name.
func Contexts(meta upgrade.ContextMetadata) []Context {
	list := make([]Context, 0, len(meta))
	for name, m := range meta {
		list = append(list, Context{Name: name, Conditions: nonNil(m.Conditions), Sites: nonNil(m.ExpPoints),
			Targets: nonNil(m.ExpIDs), GroupTypes: nonNil(m.GroupTypes)})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

// ContextNames are the names of the contexts, sorted.
func ContextNames(meta upgrade.ContextMetadata) []string {
	names := make([]string, 0, len(meta))
	for n := range meta {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func conditions(e *upgrade.Experiment) []upgrade.Condition {
	out := append([]upgrade.Condition(nil), e.Conditions...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out
}

func partitions(e *upgrade.Experiment) []upgrade.DecisionPoint {
	out := append([]upgrade.DecisionPoint(nil), e.Partitions...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out
}
