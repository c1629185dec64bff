package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// ProposeOptions are the turn flags of a command that writes through a
// confirmation (stratification upload|rm, experiments|flags|segments
// import): it proposes one action in a new session, which stops with exit
// 10 until `resume SESSION --answer yes` (or runs at once with --yes).
type ProposeOptions struct {
	Turn TurnOptions

	confirmSet bool
}

func addProposeFlags(c *cobra.Command, o *ProposeOptions) {
	c.Flags().StringVar(&o.Turn.Confirm, "confirm", "", "which actions need a human yes: always, destructive or never (default always)")
	c.Flags().BoolVar(&o.Turn.Yes, "yes", false, "approve the confirmation in this run")
}

// runProposal validates params of action against the server (problems
// are exit 2, before any session exists) and proposes them in a new
// session.
func runProposal(ctx context.Context, f *Factory, o *ProposeOptions, text string, action actions.Name, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	b, err := f.Actions().Bind(string(action), raw)
	if err != nil {
		return &UsageError{Err: err}
	}
	client, done, err := f.Upgrade(ctx)
	if err != nil {
		return err
	}
	probs, err := b.Validate(ctx, actions.Env{API: client})
	done()
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		parts := make([]string, len(probs))
		for i, p := range probs {
			parts[i] = p.Field + ": " + p.Message
		}
		return Usagef("%s: %s", action, strings.Join(parts, "; "))
	}
	return proposeInNewSession(ctx, f, &o.Turn, o.confirmSet, text, string(action), b.Params, string(action)+": ")
}

// proposeInNewSession opens a new session and proposes action with params
// in it, without a model (Agent.Propose), rendering the turn as `ask`
// does. errPrefix, when set, starts the message of a failed turn.
func proposeInNewSession(ctx context.Context, f *Factory, turn *TurnOptions, confirmSet bool, text, action string, params []byte, errPrefix string) error {
	resolveTurnOptions(f, turn, confirmSet, false)
	env, err := newTurnEnv(ctx, f, turn)
	if err != nil {
		return err
	}
	defer env.Close()
	id := checkpoint.NewSessionID()
	sess, unlock, err := openSession(env.store, id, sessionNew, f.Now())
	if err != nil {
		return err
	}
	defer unlock()
	view := NewTurnView(f.opts().Output, f.IO, f.Now)
	if err := env.start(ctx, f, sess, view); err != nil {
		return err
	}
	res, turnErr := env.agent.Propose(ctx, sess, text, action, params)
	if turnErr != nil && errPrefix != "" {
		turnErr = fmt.Errorf("%s%w", errPrefix, turnErr)
	}
	return renderTurn(view, res, turnErr, true)
}
