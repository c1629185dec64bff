package actions

import (
	"fmt"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Transition is a status change the agent offers. The server itself allows
// any state to any state; these are the ones that make sense for a person
// running an experiment (upgrade-api.md).
type Transition struct {
	From, To upgrade.State
	Verb     string // start, stop, restart, cancel, archive
}

var transitions = []Transition{
	{upgrade.StateInactive, upgrade.StateEnrolling, "start"},
	{upgrade.StateInactive, upgrade.StateCancelled, "cancel"},
	{upgrade.StateEnrolling, upgrade.StateEnrollmentComplete, "stop"},
	{upgrade.StateEnrolling, upgrade.StateCancelled, "cancel"},
	{upgrade.StateEnrollmentComplete, upgrade.StateEnrolling, "restart"},
	{upgrade.StateEnrollmentComplete, upgrade.StateCancelled, "cancel"},
	{upgrade.StateEnrollmentComplete, upgrade.StateArchived, "archive"},
	{upgrade.StateCancelled, upgrade.StateArchived, "archive"},
	// Archive is offered from any state (docs/designs.md).
	{upgrade.StateInactive, upgrade.StateArchived, "archive"},
	{upgrade.StateEnrolling, upgrade.StateArchived, "archive"},
	{upgrade.StatePreview, upgrade.StateArchived, "archive"},
	{upgrade.StateScheduled, upgrade.StateArchived, "archive"},
	{upgrade.StateDraft, upgrade.StateArchived, "archive"},
}

// TransitionsFrom lists the status changes offered from a state.
func TransitionsFrom(from upgrade.State) []Transition {
	var out []Transition
	for _, t := range transitions {
		if t.From == from {
			out = append(out, t)
		}
	}
	return out
}

// AllowedTransition reports whether from -> to is offered, and its verb.
func AllowedTransition(from, to upgrade.State) (verb string, ok bool) {
	for _, t := range transitions {
		if t.From == from && t.To == to {
			return t.Verb, true
		}
	}
	return "", false
}

func describeTransitionsFrom(from upgrade.State) string {
	ts := TransitionsFrom(from)
	if len(ts) == 0 {
		return fmt.Sprintf("no status change is offered from %s", from)
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s (%s)", t.To, t.Verb)
	}
	return fmt.Sprintf("from %s the experiment can go to %s", from, strings.Join(parts, ", "))
}
