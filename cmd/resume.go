package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

func init() { Register(func(f *Factory) *cobra.Command { return NewCmdResume(f, nil) }) }

// ResumeOptions are the inputs of `resume`.
type ResumeOptions struct {
	Session string // id or path of a checkpoint file
	Answer  string
	Wait    bool
	Timeout time.Duration
	Turn    TurnOptions

	answerSet, confirmSet, convSet bool
}

// NewCmdResume builds `resume`.
func NewCmdResume(f *Factory, runF func(context.Context, *ResumeOptions) error) *cobra.Command {
	o := &ResumeOptions{}
	c := &cobra.Command{
		Use:   "resume [SESSION]",
		Short: "Continue a paused or suspended session",
		Long: `Continue a session that paused for a confirmation (give --answer) or that
waits on a job (checks it once, or waits with --wait). SESSION defaults to the
most recent paused or suspended session; it may also be the path of a
checkpoint file, which is then taken into the state dir.`,
		Example: `  upgrade-agent resume --answer yes
  upgrade-agent resume 3f2a9c1b7d0e --answer "no, use 60/40"
  upgrade-agent resume --wait --timeout 10m`,
		Args: maxArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Session = args[0]
			}
			o.answerSet = c.Flags().Changed("answer")
			o.confirmSet = c.Flags().Changed("confirm")
			o.convSet = c.Flags().Changed("conversational-outputs")
			o.Turn.waitJobsSet = c.Flags().Changed("wait-jobs")
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runResume(c.Context(), f, o)
		},
	}
	c.Flags().StringVar(&o.Answer, "answer", "", "answer to the pending confirmation: yes, no, or free text")
	c.Flags().BoolVar(&o.Wait, "wait", false, "block until the job ends")
	c.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Minute, "with --wait, give up after this long")
	addTurnFlags(c, &o.Turn)
	return c
}

func runResume(ctx context.Context, f *Factory, o *ResumeOptions) error {
	if err := resolveTurnOptions(f, &o.Turn, o.confirmSet, o.convSet); err != nil {
		return err
	}
	if o.Timeout <= 0 {
		return Usagef("--timeout must be positive")
	}
	env, err := newTurnEnv(ctx, f, &o.Turn)
	if err != nil {
		return err
	}
	defer env.Close()
	id := o.Session
	switch {
	case id == "":
		id, err = env.store.Latest(checkpoint.StatusAwaitingConfirmation, checkpoint.StatusWaitingJob)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return &UsageError{Err: fmt.Errorf("%w: no session is paused or waiting on a job", pipeline.ErrNothingToResume)}
		}
		if err != nil {
			return err
		}
	case !checkpoint.ValidID(id):
		if _, serr := os.Stat(id); serr != nil {
			return Usagef("%q is neither a session id nor a checkpoint file", id)
		}
		imported, err := env.store.Import(id)
		if err != nil {
			if errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrNotFound) {
				return &UsageError{Err: err}
			}
			return err
		}
		fmt.Fprintf(f.IO.ErrOut, "imported %s as session %s\n", id, imported)
		id = imported
	}
	sess, unlock, err := openSession(env.store, id, false, f.Now())
	if err != nil {
		return err
	}
	defer unlock()
	connectMCP(ctx, f, env, sess)

	printed := printReplyEarly(f, env)
	var res *pipeline.Result
	var turnErr error
	ic := sess.CP.Interrupt
	switch {
	case ic != nil && ic.Kind == checkpoint.KindConfirmation:
		if (!o.answerSet || o.Answer == "") && o.Turn.Yes {
			o.Answer, o.answerSet = "yes", true
		}
		if !o.answerSet || o.Answer == "" {
			return Usagef("session %s awaits a confirmation: pass --answer yes, --answer no, or --answer TEXT", id)
		}
		res, turnErr = env.agent.Ask(ctx, sess, o.Answer)
	case ic != nil && ic.Kind == checkpoint.KindJob:
		wait := time.Duration(0)
		if o.Wait {
			wait = o.Timeout
		}
		res, turnErr = resumeJob(ctx, f, env, sess, wait)
	case sess.RetryInput() != "":
		fmt.Fprintf(f.IO.ErrOut, "retrying the failed turn: %s\n", sess.RetryInput())
		res, turnErr = env.agent.Ask(ctx, sess, sess.RetryInput())
	default:
		return &UsageError{Err: fmt.Errorf("session %s: %w: it is %s", id, pipeline.ErrNothingToResume, sess.CP.Status)}
	}
	return renderTurn(f, res, turnErr, false, *printed)
}
