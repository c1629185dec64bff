package actions

import (
	"errors"
	"strings"
)

// Name is the name of an executor action. The values are the tool-level
// contract of spec/pipeline.md: the LLM names them, checkpoints store them.
type Name string

// The nine executor actions.
const (
	CreateExperiment            Name = "create_experiment"
	UpdateExperiment            Name = "update_experiment"
	UpdateExperimentStatus      Name = "update_experiment_status"
	DeleteExperiment            Name = "delete_experiment"
	InitExperimentUser          Name = "init_experiment_user"
	GetDecisionPointAssignments Name = "get_decision_point_assignments"
	MarkDecisionPoint           Name = "mark_decision_point"
	VisitDecisionPoint          Name = "visit_decision_point"
	TestConditionBalance        Name = "test_condition_balance"
)

// ErrUnknownAction is returned (wrapped) for a name that is none of the nine.
var ErrUnknownAction = errors.New("unknown action")

// Spec describes an action's properties that the pipeline routes on.
type Spec struct {
	Name        Name
	Description string
	// Destructive actions need a yes even under the "destructive" policy:
	// they delete, change who gets which condition, or write enrollment
	// records that cannot be taken back.
	Destructive bool
	// LongRunning actions run as a job (spec/durability.md).
	LongRunning bool
	// WritesExperiments: experiment data cached in the session state
	// (experiment_names, all_experiments, experiment_details) is stale after
	// the action ran.
	WritesExperiments bool
	// WritesEnrollment: enrollment figures (gathered_info.enrollment_details)
	// are stale after the action ran.
	WritesEnrollment bool
	// Params is the zero value of the action's typed params struct, for
	// generating its JSON schema.
	Params any
}

// specs is in the order of spec/pipeline.md; Names keeps that order.
var specs = []Spec{
	{Name: CreateExperiment, WritesExperiments: true, Params: CreateExperimentParams{},
		Description: "Create a new experiment (created inactive) in an app context, with its decision points and weighted conditions."},
	{Name: UpdateExperiment, WritesExperiments: true, Params: UpdateExperimentParams{},
		Description: "Change fields of an existing experiment; only the fields given change. Condition and decision point ids are kept."},
	{Name: UpdateExperimentStatus, Destructive: true, WritesExperiments: true, WritesEnrollment: true, Params: UpdateExperimentStatusParams{},
		Description: "Start, stop, restart, cancel or archive an experiment."},
	{Name: DeleteExperiment, Destructive: true, WritesExperiments: true, WritesEnrollment: true, Params: DeleteExperimentParams{},
		Description: "Delete an experiment and its enrollment data for good."},
	{Name: InitExperimentUser, Params: InitExperimentUserParams{},
		Description: "Register a user with UpGrade, with their groups and working groups."},
	{Name: GetDecisionPointAssignments, Params: GetDecisionPointAssignmentsParams{},
		Description: "Ask UpGrade which condition a user gets at each decision point of an app context."},
	{Name: MarkDecisionPoint, Destructive: true, WritesEnrollment: true, Params: MarkDecisionPointParams{},
		Description: "Record that a user reached a decision point and which condition they saw (enrolls or excludes the user)."},
	{Name: VisitDecisionPoint, Destructive: true, WritesEnrollment: true, Params: VisitDecisionPointParams{},
		Description: "Simulate one user visiting a decision point: init, assign, then mark what was assigned."},
	{Name: TestConditionBalance, Destructive: true, LongRunning: true, WritesEnrollment: true, Params: BalanceParams{},
		Description: "Simulate many synthetic users at a decision point and compare the condition counts with the weights (chi-square)."},
}

// Names lists the nine actions in the order of spec/pipeline.md.
func Names() []Name {
	out := make([]Name, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// Lookup returns the spec of the named action.
func Lookup(name string) (Spec, bool) {
	for _, s := range specs {
		if string(s.Name) == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Confirmation policies (spec/cli.md --confirm).
const (
	PolicyAlways      = "always"
	PolicyDestructive = "destructive"
	PolicyNever       = "never"
)

// RequiresConfirmation reports whether an action needs a human yes under a
// policy. An unknown policy or action needs one: when in doubt, ask.
func RequiresConfirmation(policy string, name Name) bool {
	spec, ok := Lookup(string(name))
	if !ok {
		return true
	}
	switch strings.ToLower(strings.TrimSpace(policy)) {
	case PolicyNever:
		return false
	case PolicyDestructive:
		return spec.Destructive
	default:
		return true
	}
}

func knownNames() string {
	parts := make([]string, len(specs))
	for i, s := range specs {
		parts[i] = string(s.Name)
	}
	return strings.Join(parts, ", ")
}
