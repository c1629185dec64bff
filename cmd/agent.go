package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/exitcode"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// TurnOptions are the flags that ask and resume share.
type TurnOptions struct {
	Confirm               string
	Yes                   bool
	OutputSchema          string
	ConversationalOutputs bool
	WaitJobs              time.Duration
	waitJobsSet           bool
}

// turnEnv is an agent wired to the configured LLM, UpGrade and session
// store, plus what must be released afterwards.
type turnEnv struct {
	agent   *pipeline.Agent
	store   *checkpoint.FileStore
	closers []func()
}

func (e *turnEnv) Close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// resolveTurnOptions applies flag > config > default to the turn flags.
func resolveTurnOptions(f *Factory, o *TurnOptions, confirmSet, convSet bool) error {
	cfg := f.opts().Config
	if !confirmSet && cfg != nil && cfg.Confirm != "" {
		o.Confirm = cfg.Confirm
	}
	if o.Confirm == "" {
		o.Confirm = pipeline.PolicyAlways
	}
	switch o.Confirm {
	case pipeline.PolicyAlways, pipeline.PolicyDestructive, pipeline.PolicyNever:
	default:
		return Usagef("--confirm must be always, destructive or never, got %q", o.Confirm)
	}
	if o.Confirm == pipeline.PolicyNever && !o.Yes {
		return Usagef("--confirm never runs actions without asking; it is refused unless --yes is also given")
	}
	if !o.waitJobsSet {
		o.WaitJobs = 5 * time.Second
		if cfg != nil && cfg.WaitJobs != nil {
			o.WaitJobs = *cfg.WaitJobs
		}
	}
	if o.WaitJobs < 0 {
		return Usagef("--wait-jobs must not be negative")
	}
	if !convSet && cfg != nil {
		o.ConversationalOutputs = cfg.ConversationalOutputs
	}
	if o.OutputSchema == "" && cfg != nil {
		o.OutputSchema = cfg.OutputSchema
	}
	return nil
}

// newTurnEnv builds the agent for one ask or resume run.
func newTurnEnv(ctx context.Context, f *Factory, o *TurnOptions) (*turnEnv, error) {
	env := &turnEnv{}
	store, err := f.Sessions()
	if err != nil {
		return nil, err
	}
	env.store = store
	client, closer, err := f.LLM()
	if err != nil {
		return nil, err
	}
	if closer != nil {
		env.closers = append(env.closers, func() {
			if cerr := closer.Close(); cerr != nil {
				fmt.Fprintf(f.IO.ErrOut, "warning: %v\n", cerr)
			}
		})
	}
	api, cleanup, err := f.Upgrade(ctx)
	if err != nil {
		env.Close()
		return nil, err
	}
	env.closers = append(env.closers, cleanup)
	cfg := f.opts().Config
	a := &pipeline.Agent{
		LLM: client, API: api, Store: store, Model: f.opts().Model,
		Policy: o.Confirm, Yes: o.Yes, WaitJobs: o.WaitJobs,
		Secrets: f.Secrets(), Logger: f.Logger(),
	}
	if cfg != nil {
		if cfg.MaxAutoReplies != nil {
			a.MaxLLMCalls = *cfg.MaxAutoReplies
		}
		if cfg.MaxConsecutiveAutoReplies != nil {
			a.MaxConsecutiveAutoReplies = *cfg.MaxConsecutiveAutoReplies
		}
		a.TerminationWords = cfg.TerminationWords
		for _, r := range cfg.Replies {
			if r.Regexp != nil {
				a.PatternReplies = append(a.PatternReplies, pipeline.PatternReply{Pattern: r.Regexp, Reply: r.Reply})
			}
		}
	}
	if err := configureOutput(a, o); err != nil {
		env.Close()
		return nil, err
	}
	if err := configureJobs(f, a, store); err != nil {
		env.Close()
		return nil, err
	}
	env.agent = a
	return env, nil
}

// renderTurn prints a turn's result (JSON on stdout, or the reply on stdout
// and hints on stderr) and returns the error that gives the exit code.
func renderTurn(f *Factory, res *pipeline.Result, turnErr error, newSession bool, printed bool) error {
	if res == nil {
		return turnErr
	}
	if f.opts().Output == "json" {
		if err := WriteData(f.IO.Out, "json", res); err != nil {
			return err
		}
	} else {
		if !printed && res.Response != "" {
			fmt.Fprintln(f.IO.Out, res.Response)
		}
		if newSession {
			fmt.Fprintf(f.IO.ErrOut, "session: %s\n", res.SessionID)
		}
		switch res.Status {
		case pipeline.StatusAwaitingConfirmation:
			fmt.Fprintf(f.IO.ErrOut, "awaiting confirmation: upgrade-agent resume %s --answer yes\n", res.SessionID)
		case pipeline.StatusWaitingJob:
			msg := fmt.Sprintf("waiting on job %s", res.Job.ID)
			if res.Job.Progress != nil {
				msg += fmt.Sprintf(" (%d/%d)", res.Job.Progress.Done, res.Job.Progress.Total)
			}
			fmt.Fprintf(f.IO.ErrOut, "%s: upgrade-agent resume %s --wait\n", msg, res.SessionID)
		case pipeline.StatusTerminated:
			fmt.Fprintf(f.IO.ErrOut, "terminated: %s\n", res.TerminationReason)
		}
		if turnErr == nil && authFailed(res) {
			for _, e := range res.Errors {
				if e.Type == pipeline.ErrTypeAuth {
					fmt.Fprintf(f.IO.ErrOut, "error: %s\n", e.Message)
				}
			}
			fmt.Fprintln(f.IO.ErrOut, upgradeAuthHint)
		}
	}
	code := exitcode.ForTurn(res.Status, authFailed(res), turnErr)
	if code == exitcode.OK {
		return nil
	}
	if turnErr != nil {
		return turnErr
	}
	return &ExitError{Code: code}
}

func authFailed(res *pipeline.Result) bool {
	for _, e := range res.Errors {
		if e.Type == pipeline.ErrTypeAuth {
			return true
		}
	}
	return false
}

// readMessage takes the message argument, or stdin when it is "-".
func readMessage(f *Factory, arg string) (string, error) {
	if arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(io.LimitReader(f.IO.In, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read message from stdin: %w", err)
	}
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		return "", Usagef("empty message on stdin")
	}
	return msg, nil
}

// openSession locks and loads a session, or creates it when create is set.
func openSession(store *checkpoint.FileStore, id string, create bool, now time.Time) (*pipeline.Session, func(), error) {
	unlock, err := store.Lock(id)
	if err != nil {
		return nil, nil, err
	}
	if create {
		return pipeline.NewSession(id, now), unlock, nil
	}
	sess, err := pipeline.LoadSession(store, id)
	if err != nil {
		unlock()
		if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
			return nil, nil, &UsageError{Err: err}
		}
		return nil, nil, err
	}
	return sess, unlock, nil
}

// printReplyEarly prints the reply in text mode as soon as it is final, before
// the optional output node runs; the flag it returns says it was printed. On
// a terminal the responder's text is streamed as it arrives, and only what
// Go adds after it (a confirmation text) is printed at the end.
func printReplyEarly(f *Factory, env *turnEnv) *bool {
	printed := new(bool)
	if f.opts().Output == "json" {
		return printed
	}
	var streamed strings.Builder
	if f.IO.StdoutTTY {
		env.agent.StreamText = func(delta string) {
			if streamed.Len() == 0 {
				delta = strings.TrimLeft(delta, " \n")
			}
			streamed.WriteString(delta)
			fmt.Fprint(f.IO.Out, delta)
		}
	}
	env.agent.OnResponse = func(text string) {
		*printed = true
		if s := strings.TrimSpace(streamed.String()); s != "" && strings.HasPrefix(text, s) {
			fmt.Fprintln(f.IO.Out, text[len(s):])
			return
		}
		if streamed.Len() > 0 {
			fmt.Fprintln(f.IO.Out)
		}
		fmt.Fprintln(f.IO.Out, text)
	}
	return printed
}
