package cmd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// UndoOptions are the inputs of `undo`.
type UndoOptions struct {
	ChangeID string
	Turn     TurnOptions

	confirmSet bool
}

// NewCmdUndo builds `undo`.
func NewCmdUndo(f *Factory, runF func(context.Context, *UndoOptions) error) *cobra.Command {
	o := &UndoOptions{}
	c := &cobra.Command{
		Use:   "undo [flags] ID",
		Short: "Propose putting a change's object back as it was before it",
		Long: `Propose the undo of a recorded change (ID: its id or a unique prefix, see
changes list) as an ordinary confirmation in a new session: exit 10, then
resume --answer yes runs it. The plan says what cannot come back and, when
someone changed the object since, what the undo would overwrite. A change
that cannot be undone, was undone already or whose object is gone says so
and proposes nothing (exit 2), as does an id prefix that starts several change
ids (they are listed). An undo is a change too: undo it to redo.`,
		Example: "  upgrade-agent undo 5e1d07a2c9b3\n  upgrade-agent undo 5e1d --confirm never --yes",
		Args:    exactArgs("ID"),
		RunE: func(c *cobra.Command, args []string) error {
			o.ChangeID = args[0]
			o.confirmSet = c.Flags().Changed("confirm")
			o.Turn.waitJobsSet = c.Flags().Changed("wait-jobs")
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runUndo(c.Context(), f, o)
		},
	}
	addTurnFlags(c, &o.Turn)
	return withOutputs(c, "json")
}

func runUndo(ctx context.Context, f *Factory, o *UndoOptions) error {
	ch, err := findChange(f, o.ChangeID)
	if err != nil {
		return err
	}
	params, _ := json.Marshal(actions.UndoChangeParams{ChangeID: ch.ID})
	return proposeInNewSession(ctx, f, &o.Turn, o.confirmSet, fmt.Sprintf("undo change %s", ch.ID), string(actions.UndoChange), params, "")
}
