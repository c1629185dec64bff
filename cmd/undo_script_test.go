package cmd

import (
	"encoding/json"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	// changeid stdout|FILE [N] sets $CHANGE to the id of the Nth (default
	// first, the newest) change of a `changes list -o json`.
	scriptCmds["changeid"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 1 || len(args) > 2 {
			ts.Fatalf("usage: changeid stdout|FILE [N]")
		}
		var rows []ChangeRow
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &rows))
		n := 0
		if len(args) == 2 {
			n = int(args[1][0] - '0')
		}
		if n >= len(rows) {
			ts.Fatalf("no change %d in %s", n, args[0])
		}
		ts.Setenv("CHANGE", rows[n].ID)
	}
}
