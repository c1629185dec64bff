package quality

import "testing"

// The habits of real models with undo ("undo that", "put the flag back"):
// the newest change named as last in any case and with stray spaces, a
// lookup of recent changes first, and a redo by undoing the undo. Every
// case ends with the backend holding the flag as it was.
func TestHabitUndo(t *testing.T) {
	t.Parallel()
	enable := func() []turnStep {
		return []turnStep{
			request("Turn on math hints.", "update_feature_flag_status", `{flag_id: MATH_HINTS, status: enabled}`),
			yes("update_feature_flag_status"),
		}
	}
	mathFlag := func(status string) check {
		return hasFlag("MATH_HINTS", status, "excludeAll", nil, []string{"users:u9"})
	}
	runBehaviour(t, []behaviourCase{
		{name: "undo that", steps: append(enable(),
			request("Undo that.", "undo_change", `{change_id: last}`),
			yes("undo_change"),
		), backend: []check{mathFlag("disabled")}},
		{name: "put the flag back, last with spaces and capitals", steps: append(enable(),
			request("Put the flag back.", "undo_change", `{change_id: " Last "}`).
				expect(func(w *turnWant) { w.params = `{"change_id":"Last"}` }),
			yes("undo_change"),
		), backend: []check{mathFlag("disabled")}},
		{name: "redo: undo the undo", steps: append(enable(),
			request("Undo that.", "undo_change", `{change_id: last}`),
			yes("undo_change"),
			request("Undo that too.", "undo_change", `{change_id: last}`),
			yes("undo_change"),
		), backend: []check{mathFlag("enabled")}},
	})
}
