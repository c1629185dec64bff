package cmd

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// AskOptions are the inputs of `ask`.
type AskOptions struct {
	Message  string
	Session  string
	Continue bool
	Turn     TurnOptions

	confirmSet, convSet bool
}

// NewCmdAsk builds `ask`.
func NewCmdAsk(f *Factory, runF func(context.Context, *AskOptions) error) *cobra.Command {
	o := &AskOptions{}
	c := &cobra.Command{
		Use:   "ask [flags] MESSAGE",
		Short: "Run one agent turn",
		Long: `Run one agent turn for MESSAGE ("-" reads it from stdin).

Without --session or --continue a new session starts. When the session awaits a
confirmation, the message is the answer: yes or no are decided at once, other
text goes to the model. Exit 10 means the turn paused for a confirmation, 11
that it waits on a job.`,
		Example: `  upgrade-agent ask "create Math Hints in assign-prog, 50/50"
  upgrade-agent ask --continue yes
  echo "list running experiments" | upgrade-agent ask -o json -`,
		Args: exactArgs("MESSAGE"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Message = args[0]
			o.confirmSet = c.Flags().Changed("confirm")
			o.convSet = c.Flags().Changed("conversational-outputs")
			o.Turn.waitJobsSet = c.Flags().Changed("wait-jobs")
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runAsk(c.Context(), f, o)
		},
	}
	c.Flags().StringVar(&o.Session, "session", "", "continue session `ID`")
	c.Flags().BoolVar(&o.Continue, "continue", false, "continue the most recent session")
	addTurnFlags(c, &o.Turn)
	return withOutputs(c, "json")
}

func addTurnFlags(c *cobra.Command, t *TurnOptions) {
	c.Flags().StringVar(&t.Confirm, "confirm", "", "which actions need a human yes: always, destructive or never (default always)")
	c.Flags().BoolVar(&t.Yes, "yes", false, "approve the pending and any new confirmation in this run")
	c.Flags().StringVar(&t.OutputSchema, "output-schema", "", "JSON Schema `file` for structured output")
	c.Flags().BoolVar(&t.ConversationalOutputs, "conversational-outputs", false, "fill the output schema's custom fields after each reply")
	c.Flags().DurationVar(&t.WaitJobs, "wait-jobs", 0, "how long a turn waits for a job it started before it suspends (default 5s)")
	c.Flags().BoolVar(&t.AllowOtherServer, "allow-other-server", false, "continue a session proposed against another UpGrade than this run's")
}

func runAsk(ctx context.Context, f *Factory, o *AskOptions) error {
	if o.Session != "" && o.Continue {
		return Usagef("--session and --continue cannot be used together")
	}
	msg, err := readMessage(f, o.Message)
	if err != nil {
		return err
	}
	resolveTurnOptions(f, &o.Turn, o.confirmSet, o.convSet)
	env, err := newTurnEnv(ctx, f, &o.Turn)
	if err != nil {
		return err
	}
	defer env.Close()

	id, create := o.Session, false
	switch {
	case o.Continue:
		if err := needNamedSession(f, "ask --continue"); err != nil {
			return err
		}
		id, err = env.store.Latest()
		if errors.Is(err, checkpoint.ErrNotFound) {
			return Usagef("no session to continue: start one with upgrade-agent ask MESSAGE")
		}
		if err != nil {
			return err
		}
	case id == "":
		id, create = checkpoint.NewSessionID(), true
	default:
		if id, err = resolveSession(env.store, id); err != nil {
			return err
		}
	}
	if err := guardServer(f, env.store, id, "", o.Turn.AllowOtherServer); err != nil {
		return err
	}
	src := sessionStored
	if create {
		src = sessionNew
	}
	sess, unlock, err := openSession(env.store, id, src, f.Now())
	if err != nil {
		return err
	}
	defer unlock()
	view := NewTurnView(f.opts().Output, f.IO, f.Now)
	if err := env.start(ctx, f, sess, view); err != nil {
		return err
	}
	res, turnErr := env.agent.Run(ctx, sess, askInput(sess, msg))
	return renderTurn(view, res, turnErr, create)
}

// askInput is the message, or, when it is a clear yes or no and the
// session awaits a confirmation, the Decision it makes, addressed to the
// confirmation the session shows.
func askInput(sess *pipeline.Session, msg string) pipeline.Input {
	if id := sess.PendingConfirmation(); id != "" {
		if approve, ok := pipeline.ParseDecision(msg); ok {
			return pipeline.Decision{ConfirmationID: id, Approve: approve, Note: msg}
		}
	}
	return pipeline.Message{Text: msg}
}
