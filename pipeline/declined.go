package pipeline

// DeclinedOut is the confirmation a person refused in this turn: nothing
// was run. Front ends show it whatever the reply says.
type DeclinedOut struct {
	Action  string `json:"action"`
	Summary string `json:"summary"` // the plan's headline, e.g. delete experiment "Math Hints"
}
