package actions

// Params are the typed, parsed parameters of one action. The JSON field
// names are the contract of spec/pipeline.md (snake_case).
type Params interface {
	Action() Name
}

// DecisionPointParam is one decision point of an experiment.
type DecisionPointParam struct {
	Site             string `json:"site" jsonschema:"site of the decision point, one of the context's EXP_POINTS"`
	Target           string `json:"target" jsonschema:"target of the decision point, one of the context's EXP_IDS"`
	ExcludeIfReached bool   `json:"exclude_if_reached,omitempty" jsonschema:"exclude for good users who reach it while the experiment is inactive (default false)"`
}

// ConditionParam is one condition of an experiment. Weight is a pointer so
// that a weight left out is reported as missing rather than read as 0.
type ConditionParam struct {
	Code   string   `json:"code" jsonschema:"condition code, one of the context's CONDITIONS, not 'default'"`
	Weight *float64 `json:"weight" jsonschema:"assignment weight in percent; the weights of all conditions sum to 100"`
}

// PostRuleParam is the post-experiment rule.
type PostRuleParam struct {
	Rule          string `json:"rule" jsonschema:"continue (keep the condition), assign (everyone gets one condition) or revert (legacy)"`
	ConditionCode string `json:"condition_code,omitempty" jsonschema:"with rule assign: the condition everyone gets; empty = the default condition"`
}

// GroupParam names one group in an inclusion or exclusion list.
type GroupParam struct {
	Type    string `json:"type" jsonschema:"group type, one of the context's GROUP_TYPES"`
	GroupID string `json:"group_id" jsonschema:"id of the group"`
}

// CreateExperimentParams are the params of create_experiment. Empty optional
// fields take the defaults: assignment unit individual, consistency
// individual, post rule continue, filter mode includeAll.
type CreateExperimentParams struct {
	Name               string               `json:"name" jsonschema:"experiment name, unique on the server"`
	Context            string               `json:"context" jsonschema:"app context, one of the context metadata's keys"`
	DecisionPoints     []DecisionPointParam `json:"decision_points" jsonschema:"at least one decision point"`
	Conditions         []ConditionParam     `json:"conditions" jsonschema:"at least one condition; weights sum to 100"`
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
}

// Action implements Params.
func (CreateExperimentParams) Action() Name { return CreateExperiment }

// UpdateExperimentParams are the params of update_experiment. Every field
// but ExperimentID is a pointer: nil means "leave as it is", so an explicit
// empty list (say, "tags": []) can still clear a field.
type UpdateExperimentParams struct {
	ExperimentID       string                `json:"experiment_id" jsonschema:"id (UUID) of the experiment to change"`
	Name               *string               `json:"name,omitempty"`
	Context            *string               `json:"context,omitempty"`
	DecisionPoints     *[]DecisionPointParam `json:"decision_points,omitempty" jsonschema:"the complete new list; existing ones are matched by site+target"`
	Conditions         *[]ConditionParam     `json:"conditions,omitempty" jsonschema:"the complete new list; existing ones are matched by code"`
	Description        *string               `json:"description,omitempty"`
	Tags               *[]string             `json:"tags,omitempty"`
	AssignmentUnit     *string               `json:"assignment_unit,omitempty"`
	GroupType          *string               `json:"group_type,omitempty"`
	ConsistencyRule    *string               `json:"consistency_rule,omitempty"`
	PostExperimentRule *PostRuleParam        `json:"post_experiment_rule,omitempty"`
	FilterMode         *string               `json:"filter_mode,omitempty"`
	InclusionUsers     *[]string             `json:"inclusion_users,omitempty"`
	InclusionGroups    *[]GroupParam         `json:"inclusion_groups,omitempty"`
	ExclusionUsers     *[]string             `json:"exclusion_users,omitempty"`
	ExclusionGroups    *[]GroupParam         `json:"exclusion_groups,omitempty"`
}

// Action implements Params.
func (UpdateExperimentParams) Action() Name { return UpdateExperiment }

// UpdateExperimentStatusParams are the params of update_experiment_status.
// Status is held in UpGrade's internal naming once parsed.
type UpdateExperimentStatusParams struct {
	ExperimentID string `json:"experiment_id" jsonschema:"id (UUID) of the experiment"`
	Status       string `json:"status" jsonschema:"target state: enrolling (start/restart), enrollmentComplete (stop), cancelled, archived; display names running, paused, completed are accepted"`
}

// Action implements Params.
func (UpdateExperimentStatusParams) Action() Name { return UpdateExperimentStatus }

// DeleteExperimentParams are the params of delete_experiment.
type DeleteExperimentParams struct {
	ExperimentID string `json:"experiment_id" jsonschema:"id (UUID) of the experiment to delete"`
}

// Action implements Params.
func (DeleteExperimentParams) Action() Name { return DeleteExperiment }

// InitExperimentUserParams are the params of init_experiment_user.
type InitExperimentUserParams struct {
	UserID       string              `json:"user_id" jsonschema:"the user id"`
	Group        map[string][]string `json:"group,omitempty" jsonschema:"group type -> ids of the groups the user belongs to"`
	WorkingGroup map[string]string   `json:"working_group,omitempty" jsonschema:"group type -> the id of the user's current group (must be one of group)"`
}

// Action implements Params.
func (InitExperimentUserParams) Action() Name { return InitExperimentUser }

// GetDecisionPointAssignmentsParams are the params of
// get_decision_point_assignments.
type GetDecisionPointAssignmentsParams struct {
	UserID  string `json:"user_id" jsonschema:"the user id (initialised before)"`
	Context string `json:"context" jsonschema:"app context"`
}

// Action implements Params.
func (GetDecisionPointAssignmentsParams) Action() Name { return GetDecisionPointAssignments }

// SiteTarget names a decision point by site and target.
type SiteTarget struct {
	Site   string `json:"site"`
	Target string `json:"target,omitempty"`
}

// AssignedConditionParam is the condition a mark reports.
type AssignedConditionParam struct {
	ConditionCode string `json:"condition_code" jsonschema:"code of the condition the user saw"`
	ExperimentID  string `json:"experiment_id" jsonschema:"id of the experiment the condition belongs to"`
}

// MarkDecisionPointParams are the params of mark_decision_point. A nil
// AssignedCondition means no condition was assigned; Status then defaults to
// "no condition assigned", otherwise to "condition applied".
type MarkDecisionPointParams struct {
	UserID            string                  `json:"user_id"`
	DecisionPoint     SiteTarget              `json:"decision_point"`
	AssignedCondition *AssignedConditionParam `json:"assigned_condition" jsonschema:"the condition applied, or null when none was assigned"`
	Status            string                  `json:"status,omitempty" jsonschema:"condition applied, condition not applied (excludes the user) or no condition assigned"`
}

// Action implements Params.
func (MarkDecisionPointParams) Action() Name { return MarkDecisionPoint }

// VisitDecisionPointParams are the params of visit_decision_point.
type VisitDecisionPointParams struct {
	UserID       string              `json:"user_id"`
	Context      string              `json:"context"`
	Site         string              `json:"site"`
	Target       string              `json:"target"`
	Group        map[string][]string `json:"group,omitempty"`
	WorkingGroup map[string]string   `json:"working_group,omitempty"`
}

// Action implements Params.
func (VisitDecisionPointParams) Action() Name { return VisitDecisionPoint }

// BalanceParams are the params of test_condition_balance.
type BalanceParams struct {
	NumUsers     int                 `json:"num_users" jsonschema:"number of synthetic users, 1..10000"`
	Context      string              `json:"context"`
	Site         string              `json:"site"`
	Target       string              `json:"target"`
	ExperimentID string              `json:"experiment_id,omitempty" jsonschema:"count only this experiment's assignments"`
	Group        map[string][]string `json:"group,omitempty" jsonschema:"groups given to every synthetic user"`
	WorkingGroup map[string]string   `json:"working_group,omitempty" jsonschema:"working groups given to every synthetic user"`
}

// Action implements Params.
func (BalanceParams) Action() Name { return TestConditionBalance }

// MaxBalanceUsers bounds num_users of test_condition_balance.
const MaxBalanceUsers = 10000

// unwrap turns a *T params into T, so callers may pass either.
func unwrap(p Params) Params {
	switch v := p.(type) {
	case *CreateExperimentParams:
		if v != nil {
			return *v
		}
	case *UpdateExperimentParams:
		if v != nil {
			return *v
		}
	case *UpdateExperimentStatusParams:
		if v != nil {
			return *v
		}
	case *DeleteExperimentParams:
		if v != nil {
			return *v
		}
	case *InitExperimentUserParams:
		if v != nil {
			return *v
		}
	case *GetDecisionPointAssignmentsParams:
		if v != nil {
			return *v
		}
	case *MarkDecisionPointParams:
		if v != nil {
			return *v
		}
	case *VisitDecisionPointParams:
		if v != nil {
			return *v
		}
	case *BalanceParams:
		if v != nil {
			return *v
		}
	default:
		return p
	}
	return nil
}
