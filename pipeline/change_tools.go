package pipeline

import (
	"context"
	"slices"
	"sort"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// recentChangesShown is how many changes get_recent_changes returns.
const recentChangesShown = 8

type changeTargetArg struct {
	Target string `json:"target,omitempty"`
}

// recentChange is a change as get_recent_changes shows it to the model.
type recentChange struct {
	ID       string `json:"id"`
	When     string `json:"when"`
	Action   string `json:"action"`
	Target   string `json:"target"`
	Undoable string `json:"undoable"`
}

// changeTools are the gatherer's lookups of changes, in every scope:
// "undo that" needs the id of the change to undo.
func changeTools() []*toolDef {
	return []*toolDef{
		newTool("get_recent_changes", "Recent writes.", true,
			func(_ context.Context, t *turn, a changeTargetArg) (any, error) {
				return t.recentChanges(a.Target)
			}),
	}
}

// recentChanges lists the newest changes of every stored session, this
// session's as the turn has them (a change of this turn may not be saved
// yet).
func (t *turn) recentChanges(target string) ([]recentChange, error) {
	stored, err := allChanges(t.a.deps.Store, t.sess.cp.SessionID)
	if err != nil {
		return nil, err
	}
	all := slices.DeleteFunc(stored, func(c actions.Change) bool { return c.SessionID == t.sess.cp.SessionID })
	for _, c := range t.st.Changes {
		if !c.ExecutedAt.IsZero() {
			c.UndoneBy = ""
			all = append(all, c)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].ExecutedAt.After(all[j].ExecutedAt) })
	linkUndos(all)
	out := []recentChange{}
	for _, c := range all {
		if target != "" && !matchTarget(c, target) {
			continue
		}
		r := recentChange{ID: c.ID, When: c.ExecutedAt.Format("2006-01-02 15:04"), Action: c.Action, Target: c.Target.String(), Undoable: "no"}
		switch {
		case c.UndoneBy != "":
			r.Undoable = "done"
		case c.Undoable:
			r.Undoable = "yes"
		}
		out = append(out, r)
		if len(out) == recentChangesShown {
			break
		}
	}
	return out, nil
}
