package actions

// Param types shared by several actions. Each action's own params struct is
// in the action's file.

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

// SiteTarget names a decision point by site and target.
type SiteTarget struct {
	Site   string `json:"site"`
	Target string `json:"target,omitempty"`
}

// AssignedConditionParam is the condition a mark reports.
type AssignedConditionParam struct {
	ConditionCode string `json:"condition_code" jsonschema:"code of the condition the user saw"`
	ExperimentID  string `json:"experiment_id" jsonschema:"id of the experiment the condition belongs to" ref:"experiment"`
}
