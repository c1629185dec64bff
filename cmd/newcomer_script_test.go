package cmd

import (
	"encoding/json"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	// sessionid stdout|FILE sets $SESSION to the session_id of an
	// `ask -o json` or `resume -o json` result.
	scriptCmds["sessionid"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: sessionid stdout|FILE")
		}
		data := ts.ReadFile(args[0])
		var res struct {
			SessionID string `json:"session_id"`
		}
		ts.Check(json.Unmarshal([]byte(data), &res))
		if res.SessionID == "" {
			ts.Fatalf("no session_id in %s", args[0])
		}
		ts.Setenv("SESSION", res.SessionID)
	}
}
