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
  upgrade-agent resume --wait --timeout 10m
  upgrade-agent --state-dir kept/handoff resume --answer yes   # a paused scenario kept by CI (README)`,
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
	return withOutputs(c, "json")
}

func runResume(ctx context.Context, f *Factory, o *ResumeOptions) error {
	resolveTurnOptions(f, &o.Turn, o.confirmSet, o.convSet)
	if o.Timeout <= 0 {
		return Usagef("--timeout must be positive")
	}
	env, err := newTurnEnv(ctx, f, &o.Turn)
	if err != nil {
		return err
	}
	defer env.Close()
	id, src := o.Session, sessionStored
	switch {
	case id == "":
		if err := needNamedSession(f, "resume"); err != nil {
			return err
		}
		id, err = env.store.Latest(checkpoint.StatusAwaitingConfirmation, checkpoint.StatusWaitingJob, checkpoint.StatusRunning)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return Usagef("%w: no session is paused, waiting on a job, or stopped in the middle of a turn", pipeline.ErrNothingToResume)
		}
		if err != nil {
			return err
		}
	case !checkpoint.ValidID(id):
		if _, serr := os.Lstat(id); serr != nil {
			return Usagef("%q is neither a session id nor a checkpoint file", id)
		}
		if err := guardServer(f, env.store, "", id, o.Turn.AllowOtherServer); err != nil {
			return err
		}
		if id, err = env.store.Import(id); err != nil {
			return err
		}
		src = sessionImported
		fmt.Fprintf(f.IO.ErrOut, "imported %s as session %s\n", o.Session, id)
	}
	if src != sessionImported {
		if o.Session != "" {
			if id, err = resolveSession(env.store, id); err != nil {
				return err
			}
		}
		if err := guardServer(f, env.store, id, "", o.Turn.AllowOtherServer); err != nil {
			return err
		}
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
	// The input is built here, at the boundary: --answer yes|no and --yes
	// become a Decision addressed to the confirmation the session shows.
	req := pipeline.ResumeRequest{Answer: o.Answer, HasAnswer: o.answerSet, Yes: o.Turn.Yes, Progress: view.Progress}
	if o.Wait {
		req.Wait = o.Timeout
	}
	in, err := pipeline.ResumeInput(sess, req)
	if err != nil {
		return err
	}
	if m, ok := in.(pipeline.Message); ok && m.Text == sess.RetryInput() && sess.Status() == checkpoint.StatusIdle {
		fmt.Fprintf(f.IO.ErrOut, "retrying the failed turn: %s\n", sess.RetryInput())
	}
	res, turnErr := env.agent.Run(ctx, sess, in)
	return renderTurn(view, res, turnErr, false)
}
