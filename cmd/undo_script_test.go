package cmd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
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
	// flagdesc KEY TEXT sets the description of the flag KEY in the
	// embedded simulator's data file: someone else's change.
	scriptCmds["flagdesc"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: flagdesc KEY TEXT")
		}
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			fs, err := c.Flags(ctx)
			if err != nil {
				return err
			}
			for _, f := range fs {
				if f.Key == args[0] {
					full, err := c.Flag(ctx, f.ID)
					if err != nil {
						return err
					}
					full.Description = args[1]
					_, err = c.UpdateFlag(ctx, full)
					return err
				}
			}
			return fmt.Errorf("no flag %s", args[0])
		})
	}
}
