package actions

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func validCreate() CreateExperimentParams {
	return CreateExperimentParams{
		Name: "Fraction Hints", Context: "assign-prog",
		DecisionPoints: []DecisionPointParam{{Site: "SelectSection", Target: "absolute_value_plot_equality"}},
		Conditions:     []ConditionParam{{Code: "control", Weight: ptr(50.0)}, {Code: "variant", Weight: ptr(50.0)}},
	}
}

func create(mod func(p *CreateExperimentParams)) CreateExperimentParams {
	p := validCreate()
	mod(&p)
	return p
}

const (
	unknownID  = "99999999-9999-4999-8999-999999999999"
	validSites = "valid sites: SelectSection"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		want []Problem
	}{
		// create_experiment
		{"create: valid", validCreate(), nil},
		{"create: ts_configurable refused with the reason", create(func(p *CreateExperimentParams) { p.AssignmentAlgorithm = "ts_configurable" }),
			[]Problem{{Field: "assignment_algorithm", Message: `ts_configurable (Thompson sampling) cannot be used: UpGrade 6.5 refuses it with "moocletPolicyParameters was provided but mooclets are not enabled on backend"; an administrator would have to enable mooclets on the UpGrade backend (and run its mooclet service) first. Use random`}}},
		{"create: stratified needs a factor", create(func(p *CreateExperimentParams) { p.AssignmentAlgorithm = "stratified random sampling" }),
			[]Problem{{Field: "stratification_factor", Message: "stratification_factor is required with stratified random sampling; factors: prior", Missing: true}}},
		{"create: unknown algorithm", create(func(p *CreateExperimentParams) { p.AssignmentAlgorithm = "bandit" }),
			[]Problem{{Field: "assignment_algorithm", Message: `unknown assignment algorithm "bandit"; use random`}}},
		{"create: name missing", create(func(p *CreateExperimentParams) { p.Name = "" }),
			[]Problem{{Field: "name", Message: "name is required", Missing: true}}},
		{"create: duplicate name", create(func(p *CreateExperimentParams) { p.Name = "math hints" }),
			[]Problem{{Field: "name", Message: `an experiment named "Math Hints" already exists (id ` + mathHintsID + `); change it with update_experiment instead, or choose another name`}}},
		{"create: context missing", create(func(p *CreateExperimentParams) { p.Context = "" }),
			[]Problem{{Field: "context", Message: "context is required (one of the app contexts in the context metadata)", Missing: true}}},
		{"create: unknown context", create(func(p *CreateExperimentParams) { p.Context = "assign_prog" }),
			[]Problem{{Field: "context", Message: `unknown context "assign_prog"; valid contexts: assign-prog, livehint-ai, mathstream`}}},
		{"create: no decision point", create(func(p *CreateExperimentParams) { p.DecisionPoints = nil }),
			[]Problem{{Field: "decision_points", Message: "at least one decision point (site and target) is required", Missing: true}}},
		{"create: unknown site", create(func(p *CreateExperimentParams) { p.DecisionPoints[0].Site = "Lesson" }),
			[]Problem{{Field: "decision_points[0].site", Message: `site "Lesson" is not a site of context assign-prog; ` + validSites}}},
		{"create: unknown target", create(func(p *CreateExperimentParams) { p.DecisionPoints[0].Target = "x" }),
			[]Problem{{Field: "decision_points[0].target", Message: `target "x" is not a target of context assign-prog; valid targets: absolute_value_plot_equality, analyzing_step_functions`}}},
		{"create: site and target missing", create(func(p *CreateExperimentParams) { p.DecisionPoints[0] = DecisionPointParam{} }),
			[]Problem{{Field: "decision_points[0].site", Message: "site is required", Missing: true},
				{Field: "decision_points[0].target", Message: "target is required", Missing: true}}},
		{"create: duplicate decision point", create(func(p *CreateExperimentParams) {
			p.DecisionPoints = append(p.DecisionPoints, p.DecisionPoints[0])
		}),
			[]Problem{{Field: "decision_points[1]", Message: "decision point SelectSection/absolute_value_plot_equality is listed twice (also decision_points[0])"}}},
		{"create: no condition", create(func(p *CreateExperimentParams) { p.Conditions = nil }),
			[]Problem{{Field: "conditions", Message: "at least one condition (code and weight) is required", Missing: true}}},
		{"create: condition code missing", create(func(p *CreateExperimentParams) { p.Conditions[1].Code = "" }),
			[]Problem{{Field: "conditions[1].code", Message: "condition code is required", Missing: true}}},
		{"create: code default", create(func(p *CreateExperimentParams) { p.Conditions[1].Code = "Default" }),
			[]Problem{{Field: "conditions[1].code", Message: `"Default" is reserved for UpGrade's default condition; choose another code`}}},
		{"create: code not in context", create(func(p *CreateExperimentParams) { p.Conditions[1].Code = "treatment" }),
			[]Problem{{Field: "conditions[1].code", Message: `condition "treatment" is not a condition of context assign-prog; valid conditions: control, variant`}}},
		{"create: duplicate code", create(func(p *CreateExperimentParams) { p.Conditions[1].Code = "control" }),
			[]Problem{{Field: "conditions[1].code", Message: `condition code "control" is used twice (also conditions[0]); codes must be unique`}}},
		{"create: weight missing", create(func(p *CreateExperimentParams) { p.Conditions[1].Weight = nil }),
			[]Problem{{Field: "conditions[1].weight", Message: "weight is required (percent; all weights sum to 100)", Missing: true}}},
		{"create: negative weight", create(func(p *CreateExperimentParams) { p.Conditions[0].Weight = ptr(-10.0) }),
			[]Problem{{Field: "conditions[0].weight", Message: "weight -10 is negative; weights are percentages from 0 to 100"}}},
		{"create: weights do not sum to 100", create(func(p *CreateExperimentParams) { p.Conditions[0].Weight = ptr(60.0) }),
			[]Problem{{Field: "conditions", Message: "the weights sum to 110; they must sum to 100"}}},
		{"create: weights off by more than the tolerance", create(func(p *CreateExperimentParams) { p.Conditions[0].Weight = ptr(49.98) }),
			[]Problem{{Field: "conditions", Message: "the weights sum to 99.98; they must sum to 100"}}},
		{"create: weights within the tolerance", create(func(p *CreateExperimentParams) {
			p.Context = "livehint-ai"
			p.DecisionPoints[0] = DecisionPointParam{Site: "problem-info", Target: "digital"}
			p.Conditions = []ConditionParam{{Code: "tutorbot-enabled1", Weight: ptr(33.33)}, {Code: "tutorbot-enabled2", Weight: ptr(33.33)}, {Code: "solver_bot_with_goal", Weight: ptr(33.33)}}
		}), nil},
		{"create: within-subjects", create(func(p *CreateExperimentParams) { p.AssignmentUnit = "within-subjects" }),
			[]Problem{{Field: "condition_order", Missing: true, Message: "condition_order is required with assignment_unit within-subjects: random, random round robin or ordered round robin"}}},
		{"create: unknown unit", create(func(p *CreateExperimentParams) { p.AssignmentUnit = "school" }),
			[]Problem{{Field: "assignment_unit", Message: `unknown assignment unit "school"; use individual, group or within-subjects`}}},
		{"create: group unit without group type", create(func(p *CreateExperimentParams) { p.AssignmentUnit = "group" }),
			[]Problem{{Field: "group_type", Message: "group_type is required with assignment_unit group; valid group types: schoolId, classId, instructorId", Missing: true}}},
		{"create: group type not in context", create(func(p *CreateExperimentParams) { p.AssignmentUnit, p.GroupType = "group", "teacherId" }),
			[]Problem{{Field: "group_type", Message: `group type "teacherId" is not a group type of context assign-prog; valid group types: schoolId, classId, instructorId`}}},
		{"create: group unit and consistency", create(func(p *CreateExperimentParams) {
			p.AssignmentUnit, p.GroupType, p.ConsistencyRule = "group", "classId", "group"
		}), nil},
		{"create: group consistency needs group unit", create(func(p *CreateExperimentParams) { p.ConsistencyRule = "group" }),
			[]Problem{{Field: "consistency_rule", Message: "group consistency needs assignment_unit group (with a group_type)"}}},
		{"create: unknown consistency", create(func(p *CreateExperimentParams) { p.ConsistencyRule = "strict" }),
			[]Problem{{Field: "consistency_rule", Message: `unknown consistency rule "strict"; use individual, group or experiment`}}},
		{"create: post rule assigns an unknown code", create(func(p *CreateExperimentParams) {
			p.PostExperimentRule = &PostRuleParam{Rule: "assign", ConditionCode: "treatment"}
		}),
			[]Problem{{Field: "post_experiment_rule.condition_code", Message: `condition "treatment" is not one of the experiment's conditions (control, variant); leave it empty for the default condition`}}},
		{"create: post rule assigns the default", create(func(p *CreateExperimentParams) { p.PostExperimentRule = &PostRuleParam{Rule: "assign"} }), nil},
		{"create: condition code with continue", create(func(p *CreateExperimentParams) {
			p.PostExperimentRule = &PostRuleParam{Rule: "continue", ConditionCode: "variant"}
		}),
			[]Problem{{Field: "post_experiment_rule.condition_code", Message: "condition_code applies only with rule assign (rule is continue)"}}},
		{"create: unknown post rule", create(func(p *CreateExperimentParams) { p.PostExperimentRule = &PostRuleParam{Rule: "keep"} }),
			[]Problem{{Field: "post_experiment_rule.rule", Message: `unknown post-experiment rule "keep"; use continue or assign`}}},
		{"create: unknown filter mode", create(func(p *CreateExperimentParams) { p.FilterMode = "all" }),
			[]Problem{{Field: "filter_mode", Message: `unknown filter mode "all"; use includeAll or excludeAll`}}},
		{"create: inclusion lists with includeAll", create(func(p *CreateExperimentParams) {
			p.InclusionUsers = []string{"s1"}
			p.InclusionGroups = []GroupParam{{Type: "classId", GroupID: "c1"}}
		}),
			[]Problem{
				{Field: "inclusion_users", Message: "inclusion lists need filter_mode excludeAll (includeAll enrolls everyone except the excluded)"},
				{Field: "inclusion_groups", Message: "inclusion lists need filter_mode excludeAll (includeAll enrolls everyone except the excluded)"},
			}},
		{"create: excludeAll with inclusion lists", create(func(p *CreateExperimentParams) {
			p.FilterMode = "excludeAll"
			p.InclusionUsers = []string{"s1"}
			p.InclusionGroups = []GroupParam{{Type: "classId", GroupID: "c1"}}
		}), nil},
		{"create: segment group type unknown", create(func(p *CreateExperimentParams) {
			p.ExclusionGroups = []GroupParam{{Type: "districtId", GroupID: "d1"}}
		}),
			[]Problem{{Field: "exclusion_groups[0].type", Message: `group type "districtId" is not a group type of context assign-prog; valid group types: schoolId, classId, instructorId`}}},
		{"create: segment group id missing", create(func(p *CreateExperimentParams) {
			p.ExclusionGroups = []GroupParam{{Type: "classId"}}
		}),
			[]Problem{{Field: "exclusion_groups[0].group_id", Message: "group_id is required", Missing: true}}},
		{"create: an empty user id is dropped", create(func(p *CreateExperimentParams) { p.ExclusionUsers = []string{"s1", " "} }), nil},

		// update_experiment
		{"update: id missing", UpdateExperimentParams{Name: ptr("X")},
			[]Problem{{Field: "experiment_id", Message: "experiment_id is required (look the experiment up by name with find_experiment)", Missing: true}}},
		{"update: id not a UUID", UpdateExperimentParams{ExperimentID: "Math Hints", Name: ptr("X")},
			[]Problem{{Field: "experiment_id", Message: `"Math Hints" is not an experiment id (a UUID); look the experiment up by name with find_experiment`, NotFound: true}}},
		{"update: unknown experiment", UpdateExperimentParams{ExperimentID: unknownID, Name: ptr("X")},
			[]Problem{{Field: "experiment_id", Message: "no experiment with id " + unknownID, NotFound: true}}},
		{"update: nothing to change", UpdateExperimentParams{ExperimentID: mathHintsID},
			[]Problem{{Field: "fields", Message: "name at least one field to change (status changes use update_experiment_status)", Missing: true}}},
		{"update: valid weights", UpdateExperimentParams{ExperimentID: mathHintsID,
			Conditions: &[]ConditionParam{{Code: "control", Weight: ptr(70.0)}, {Code: "variant", Weight: ptr(30.0)}}}, nil},
		{"update: weights do not sum to 100", UpdateExperimentParams{ExperimentID: mathHintsID,
			Conditions: &[]ConditionParam{{Code: "control", Weight: ptr(70.0)}, {Code: "variant", Weight: ptr(50.0)}}},
			[]Problem{{Field: "conditions", Message: "the weights sum to 120; they must sum to 100"}}},
		{"update: keeps its own name", UpdateExperimentParams{ExperimentID: mathHintsID, Name: ptr("Math Hints")}, nil},
		{"update: name of another experiment", UpdateExperimentParams{ExperimentID: mathHintsID, Name: ptr("Class Hints")},
			[]Problem{{Field: "name", Message: `another experiment is already named "Class Hints" (id ` + groupExpID + `); choose another name`}}},
		{"update: removes the post rule's condition", UpdateExperimentParams{ExperimentID: groupExpID,
			Conditions: &[]ConditionParam{{Code: "control", Weight: ptr(100.0)}}},
			[]Problem{{Field: "post_experiment_rule.condition_code", Message: `condition "variant" is not one of the experiment's conditions (control); leave it empty for the default condition`}}},
		{"update: group consistency on an individual experiment", UpdateExperimentParams{ExperimentID: mathHintsID, ConsistencyRule: ptr("group")},
			[]Problem{{Field: "consistency_rule", Message: "group consistency needs assignment_unit group (with a group_type)"}}},
		{"update: conditions of another context", UpdateExperimentParams{ExperimentID: mathHintsID, Context: ptr("mathstream")},
			[]Problem{
				{Field: "decision_points[0].site", Message: `site "SelectSection" is not a site of context mathstream; valid sites: lesson-stream`},
				{Field: "decision_points[0].target", Message: `target "absolute_value_plot_equality" is not a target of context mathstream; valid targets: question-hint`},
				{Field: "conditions[0].code", Message: `condition "control" is not a condition of context mathstream; valid conditions: question-hint-default, question-hint-tutorbot`},
				{Field: "conditions[1].code", Message: `condition "variant" is not a condition of context mathstream; valid conditions: question-hint-default, question-hint-tutorbot`},
			}},

		// update_experiment_status
		{"status: valid start", UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "enrolling"}, nil},
		{"status: missing", UpdateExperimentStatusParams{ExperimentID: mathHintsID},
			[]Problem{{Field: "status", Message: "status is required (enrolling to start, enrollmentComplete to stop, cancelled, archived)", Missing: true}}},
		{"status: unknown", UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "started"},
			[]Problem{{Field: "status", Value: `"started"`, Message: `unknown status; use one of inactive, preview, scheduled, enrolling, enrollmentComplete, cancelled, archived, draft (or running, paused, completed)`}}},
		{"status: already there", UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "inactive"},
			[]Problem{{Field: "status", Message: `experiment "Math Hints" is already inactive`}}},
		{"status: refused transition", UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: "enrollmentComplete"},
			[]Problem{{Field: "status", Message: `cannot change experiment "Math Hints" from inactive to enrollmentComplete; from inactive the experiment can go to enrolling (start), cancelled (cancel), archived (archive)`}}},
		{"status: unknown experiment", UpdateExperimentStatusParams{ExperimentID: unknownID, Status: "enrolling"},
			[]Problem{{Field: "experiment_id", Message: "no experiment with id " + unknownID, NotFound: true}}},

		// delete_experiment
		{"delete: valid", DeleteExperimentParams{ExperimentID: mathHintsID}, nil},
		{"delete: id missing", DeleteExperimentParams{},
			[]Problem{{Field: "experiment_id", Message: "experiment_id is required (look the experiment up by name with find_experiment)", Missing: true}}},
		{"delete: unknown experiment", DeleteExperimentParams{ExperimentID: unknownID},
			[]Problem{{Field: "experiment_id", Message: "no experiment with id " + unknownID, NotFound: true}}},

		// init_experiment_user
		{"init: valid", InitExperimentUserParams{UserID: "s1", Group: map[string][]string{"classId": {"c1", "c2"}}, WorkingGroup: map[string]string{"classId": "c2"}}, nil},
		{"init: user missing", InitExperimentUserParams{},
			[]Problem{{Field: "user_id", Message: "user_id is required", Missing: true}}},
		{"init: working group not a member", InitExperimentUserParams{UserID: "s1", Group: map[string][]string{"classId": {"c1"}}, WorkingGroup: map[string]string{"classId": "c9"}},
			[]Problem{{Field: "working_group.classId", Message: `working group "c9" is not one of the user's classId groups (c1)`}}},
		{"init: working group of another type", InitExperimentUserParams{UserID: "s1", Group: map[string][]string{"classId": {"c1"}}, WorkingGroup: map[string]string{"schoolId": "s1"}},
			[]Problem{{Field: "working_group.schoolId", Message: `working group "s1" is not one of the user's schoolId groups ((none))`}}},
		{"init: working group without group", InitExperimentUserParams{UserID: "s1", WorkingGroup: map[string]string{"classId": "c1"}},
			[]Problem{{Field: "working_group.classId", Message: "working_group needs the user's group memberships in group as well (the working group must be one of them)"}}},
		{"init: empty group list", InitExperimentUserParams{UserID: "s1", Group: map[string][]string{"classId": {}}},
			[]Problem{{Field: "group.classId", Message: "list at least one group id for group type classId"}}},

		// get_decision_point_assignments
		{"assign: valid", GetDecisionPointAssignmentsParams{UserID: "s1", Context: "assign-prog"}, nil},
		{"assign: unknown context", GetDecisionPointAssignmentsParams{UserID: "s1", Context: "nope"},
			[]Problem{{Field: "context", Message: `unknown context "nope"; valid contexts: assign-prog, livehint-ai, mathstream`}}},

		// mark_decision_point
		{"mark: valid", MarkDecisionPointParams{UserID: "s1", DecisionPoint: SiteTarget{Site: "SelectSection", Target: "absolute_value_plot_equality"},
			AssignedCondition: &AssignedConditionParam{ConditionCode: "control", ExperimentID: mathHintsID}}, nil},
		{"mark: valid without condition", MarkDecisionPointParams{UserID: "s1", DecisionPoint: SiteTarget{Site: "SelectSection", Target: "absolute_value_plot_equality"}}, nil},
		{"mark: site and target missing", MarkDecisionPointParams{UserID: "s1"},
			[]Problem{{Field: "decision_point.site", Message: "decision_point.site is required", Missing: true},
				{Field: "decision_point.target", Message: "decision_point.target is required (UpGrade refuses a mark without one)", Missing: true}}},
		{"mark: unknown status", MarkDecisionPointParams{UserID: "s1", DecisionPoint: SiteTarget{Site: "SelectSection", Target: "absolute_value_plot_equality"}, Status: "seen"},
			[]Problem{{Field: "status", Value: `"seen"`, Message: `unknown mark status; use "condition applied", "condition not applied" or "no condition assigned"`}}},
		{"mark: applied without condition", MarkDecisionPointParams{UserID: "s1", DecisionPoint: SiteTarget{Site: "SelectSection", Target: "absolute_value_plot_equality"}, Status: "condition applied"},
			[]Problem{{Field: "status", Message: `status "condition applied" needs assigned_condition (the condition the user saw)`}}},
		{"mark: no condition with a condition", MarkDecisionPointParams{UserID: "s1", DecisionPoint: SiteTarget{Site: "SelectSection", Target: "absolute_value_plot_equality"},
			AssignedCondition: &AssignedConditionParam{ConditionCode: "control", ExperimentID: mathHintsID}, Status: "no condition assigned"},
			[]Problem{{Field: "status", Message: `status "no condition assigned" contradicts assigned_condition; drop one of them`}}},
		{"mark: condition not in experiment", MarkDecisionPointParams{UserID: "s1", DecisionPoint: SiteTarget{Site: "SelectSection", Target: "absolute_value_plot_equality"},
			AssignedCondition: &AssignedConditionParam{ConditionCode: "treatment", ExperimentID: mathHintsID}},
			[]Problem{{Field: "assigned_condition.condition_code", Value: `"treatment"`, Message: `experiment "Math Hints" has no such condition; its conditions: control, variant`}}},
		{"mark: decision point not in experiment", MarkDecisionPointParams{UserID: "s1", DecisionPoint: SiteTarget{Site: "SelectSection", Target: "analyzing_step_functions"},
			AssignedCondition: &AssignedConditionParam{ConditionCode: "control", ExperimentID: mathHintsID}},
			[]Problem{{Field: "decision_point", Message: `experiment "Math Hints" has no decision point SelectSection/analyzing_step_functions; its decision points: SelectSection/absolute_value_plot_equality`}}},
		{"mark: unknown experiment", MarkDecisionPointParams{UserID: "s1", DecisionPoint: SiteTarget{Site: "SelectSection", Target: "absolute_value_plot_equality"},
			AssignedCondition: &AssignedConditionParam{ConditionCode: "control", ExperimentID: unknownID}},
			[]Problem{{Field: "assigned_condition.experiment_id", Message: "no experiment with id " + unknownID, NotFound: true}}},

		// visit_decision_point
		{"visit: valid", VisitDecisionPointParams{UserID: "s1", Context: "assign-prog", Site: "SelectSection", Target: "analyzing_step_functions"}, nil},
		{"visit: unknown site", VisitDecisionPointParams{UserID: "s1", Context: "assign-prog", Site: "Select", Target: "analyzing_step_functions"},
			[]Problem{{Field: "site", Message: `site "Select" is not a site of context assign-prog; ` + validSites}}},
		{"visit: target missing", VisitDecisionPointParams{UserID: "s1", Context: "assign-prog", Site: "SelectSection"},
			[]Problem{{Field: "target", Message: "target is required", Missing: true}}},

		// test_condition_balance
		{"balance: valid", BalanceParams{NumUsers: 500, Context: "mathstream", Site: "lesson-stream", Target: "question-hint", ExperimentID: streamExpID}, nil},
		{"balance: num_users missing", BalanceParams{Context: "mathstream", Site: "lesson-stream", Target: "question-hint"},
			[]Problem{{Field: "num_users", Message: "num_users is required (1..10000)", Missing: true}}},
		{"balance: too many users", BalanceParams{NumUsers: 10001, Context: "mathstream", Site: "lesson-stream", Target: "question-hint"},
			[]Problem{{Field: "num_users", Value: "10001", Message: "num_users must be between 1 and 10000"}}},
		{"balance: negative users", BalanceParams{NumUsers: -1, Context: "mathstream", Site: "lesson-stream", Target: "question-hint"},
			[]Problem{{Field: "num_users", Value: "-1", Message: "num_users must be between 1 and 10000"}}},
		{"balance: experiment of another context", BalanceParams{NumUsers: 10, Context: "assign-prog", Site: "SelectSection", Target: "analyzing_step_functions", ExperimentID: streamExpID},
			[]Problem{{Field: "experiment_id", Message: `experiment "Tutorbot Hints" runs in context mathstream, not assign-prog`}}},
		{"balance: experiment without that decision point", BalanceParams{NumUsers: 10, Context: "assign-prog", Site: "SelectSection", Target: "analyzing_step_functions", ExperimentID: mathHintsID},
			[]Problem{{Field: "experiment_id", Message: `experiment "Math Hints" has no decision point SelectSection/analyzing_step_functions; its decision points: SelectSection/absolute_value_plot_equality`}}},
		{"balance: working group not a member", BalanceParams{NumUsers: 10, Context: "mathstream", Site: "lesson-stream", Target: "question-hint",
			Group: map[string][]string{"classId": {"c1"}}, WorkingGroup: map[string]string{"classId": "c2"}},
			[]Problem{{Field: "working_group.classId", Message: `working group "c2" is not one of the user's classId groups (c1)`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Validate(context.Background(), seeded(), tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateTransitions(t *testing.T) {
	states := []upgrade.State{upgrade.StateInactive, upgrade.StateEnrolling, upgrade.StateEnrollmentComplete, upgrade.StateCancelled, upgrade.StateArchived}
	allowed := map[[2]upgrade.State]string{
		{upgrade.StateInactive, upgrade.StateEnrolling}:           "start",
		{upgrade.StateEnrolling, upgrade.StateEnrollmentComplete}: "stop",
		{upgrade.StateEnrollmentComplete, upgrade.StateEnrolling}: "restart",
		{upgrade.StateInactive, upgrade.StateCancelled}:           "cancel",
		{upgrade.StateEnrolling, upgrade.StateCancelled}:          "cancel",
		{upgrade.StateEnrollmentComplete, upgrade.StateCancelled}: "cancel",
		{upgrade.StateEnrollmentComplete, upgrade.StateArchived}:  "archive",
		{upgrade.StateCancelled, upgrade.StateArchived}:           "archive",
		{upgrade.StateInactive, upgrade.StateArchived}:            "archive",
		{upgrade.StateEnrolling, upgrade.StateArchived}:           "archive",
	}
	for _, from := range states {
		for _, to := range states {
			if from == to {
				continue
			}
			f := newFake()
			e := mathHints()
			e.State = from
			f.add(e)
			probs, err := Validate(context.Background(), f, UpdateExperimentStatusParams{ExperimentID: mathHintsID, Status: string(to)})
			if err != nil {
				t.Fatal(err)
			}
			verb, ok := AllowedTransition(from, to)
			if wantVerb, want := allowed[[2]upgrade.State{from, to}]; ok != want || verb != wantVerb {
				t.Errorf("AllowedTransition(%s, %s) = %q, %v; want %q, %v", from, to, verb, ok, wantVerb, want)
			}
			if ok && len(probs) != 0 {
				t.Errorf("%s -> %s refused: %v", from, to, probs)
			}
			if !ok && (len(probs) != 1 || probs[0].Field != "status") {
				t.Errorf("%s -> %s accepted or wrong problem: %v", from, to, probs)
			}
		}
	}
}

func TestValidateDisplayNames(t *testing.T) {
	f := seeded()
	for _, status := range []string{"running", "Running", "enrolling"} {
		p, err := Parse("update_experiment_status", []byte(`{"experiment_id":"`+mathHintsID+`","status":"`+status+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		probs, err := Validate(context.Background(), f, p)
		if err != nil || len(probs) != 0 {
			t.Errorf("status %q: %v %v", status, probs, err)
		}
	}
}

func TestValidateAPIFailure(t *testing.T) {
	down := &upgrade.Error{Category: upgrade.CategoryAPI, Message: "cannot reach UpGrade at http://127.0.0.1:1/api"}
	tests := []struct {
		method string
		p      Params
	}{
		{"ContextMetadata", validCreate()},
		{"ExperimentNames", validCreate()},
		{"Experiment", DeleteExperimentParams{ExperimentID: mathHintsID}},
	}
	for _, tt := range tests {
		f := seeded()
		f.errs[tt.method] = down
		probs, err := Validate(context.Background(), f, tt.p)
		if err == nil {
			t.Errorf("%s failing: no error, problems %v", tt.method, probs)
			continue
		}
		if !errors.Is(err, down) || upgrade.CategoryOf(err) != upgrade.CategoryAPI {
			t.Errorf("%s failing: error %v lost its category", tt.method, err)
		}
	}
}

func TestProblemType(t *testing.T) {
	if got := (Problem{NotFound: true}).Type(); got != "not_found" {
		t.Errorf("Type = %q", got)
	}
	if got := (Problem{Missing: true}).Type(); got != "validation" {
		t.Errorf("Type = %q", got)
	}
}

func TestValidateUpdateIgnoresOldTwin(t *testing.T) {
	f := seeded()
	twin := streamExp()
	twin.ID, twin.Name = "3eab8f5b-b03d-4c8a-a09c-6f4d5e7f8091", "Math Hints"
	f.add(twin)
	probs, err := Validate(context.Background(), f, UpdateExperimentParams{ExperimentID: mathHintsID, Description: ptr("new")})
	if err != nil || len(probs) != 0 {
		t.Errorf("an update that keeps the name: %v %v", probs, err)
	}
	if f.count("ExperimentNames") != 0 {
		t.Errorf("names read %d times for an update that keeps the name", f.count("ExperimentNames"))
	}
}

// The names a model uses for an algorithm fold to UpGrade's; random, the
// default, folds to empty so that naming it changes no params hash.
func TestAlgorithmValue(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "random": "", " Random ": "", "RANDOM": "",
		"ts_configurable": upgrade.AlgorithmMooclet, "TS Configurable": upgrade.AlgorithmMooclet, "Thompson sampling": upgrade.AlgorithmMooclet,
		"stratified": upgrade.AlgorithmStratified, "Stratified Random Sampling": upgrade.AlgorithmStratified,
		" bandit ": "bandit",
	} {
		if got := algorithmValue(in); got != want {
			t.Errorf("algorithmValue(%q) = %q, want %q", in, got, want)
		}
	}
}
