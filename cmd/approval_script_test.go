package cmd

import (
	"context"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

func init() {
	// describe NAME TEXT sets the description of the experiment NAME in the
	// embedded simulator: data that reaches the model when it reads the
	// experiment.
	scriptCmds["describe"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: describe NAME TEXT")
		}
		withSimClient(ts, func(ctx context.Context, c *upgrade.Client) error {
			e, err := fetchExperiment(ctx, c, args[0])
			if err != nil {
				return err
			}
			e.Description = args[1]
			_, err = c.UpdateExperiment(ctx, e)
			return err
		})
	}
}
