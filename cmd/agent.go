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
	// AllowOtherServer continues a session proposed against another UpGrade.
	AllowOtherServer bool
	waitJobsSet      bool
}

// turnEnv is what an agent is wired to (the configured LLM, UpGrade,
// job runner and session store), the agent once start has built it, and
// what must be released afterwards.
type turnEnv struct {
	deps     pipeline.Deps
	settings pipeline.Settings
	auditor  pipeline.Auditor
	agent    *pipeline.Agent
	store    checkpoint.SessionStore
	closers  []func()
	// noLLM is the stand-in when no model is configured (nil otherwise).
	noLLM *unconfiguredLLM
}

func (e *turnEnv) Close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// resolveTurnOptions applies flag > config > default to the turn flags.
// The settings themselves are checked by pipeline.New, the one place every
// front end goes through.
func resolveTurnOptions(f *Factory, o *TurnOptions, confirmSet, convSet bool) {
	cfg := f.opts().Config
	if !confirmSet && cfg != nil && cfg.Confirm != "" {
		o.Confirm = cfg.Confirm
	}
	if !o.waitJobsSet {
		o.WaitJobs = 5 * time.Second
		if cfg != nil && cfg.WaitJobs != nil {
			o.WaitJobs = *cfg.WaitJobs
		}
	}
	if !convSet && cfg != nil {
		o.ConversationalOutputs = cfg.ConversationalOutputs
	}
	if o.OutputSchema == "" && cfg != nil {
		o.OutputSchema = cfg.OutputSchema
	}
}

// newTurnEnv builds the agent for one ask or resume run.
func newTurnEnv(ctx context.Context, f *Factory, o *TurnOptions) (*turnEnv, error) {
	env := &turnEnv{}
	// The team store's connection is made while the model, the UpGrade
	// client and the simulator are set up; its error still comes first.
	f.openStoreEarly()
	storeFirst := func(err error) error {
		if _, serr := f.Sessions(); serr != nil {
			return serr
		}
		return err
	}
	s := pipeline.Settings{Model: f.opts().Model, Policy: o.Confirm, Yes: o.Yes, WaitJobs: o.WaitJobs, Secrets: f.Secrets()}
	if cfg := f.opts().Config; cfg != nil {
		if cfg.MaxAutoReplies != nil {
			s.MaxLLMCalls = *cfg.MaxAutoReplies
		}
		if cfg.MaxConsecutiveAutoReplies != nil {
			s.MaxConsecutiveAutoReplies = *cfg.MaxConsecutiveAutoReplies
		}
		s.TerminationWords = cfg.TerminationWords
		for _, r := range cfg.Replies {
			if r.Regexp != nil {
				s.PatternReplies = append(s.PatternReplies, pipeline.PatternReply{Pattern: r.Regexp, Reply: r.Reply})
			}
		}
		s.TrustedMCPServers = trustedServers(cfg)
		s.ReplyWording = cfg.ReplyWording
	}
	if o.OutputSchema != "" {
		schema, err := pipeline.LoadOutputSchema(o.OutputSchema)
		if err != nil {
			return nil, storeFirst(err)
		}
		s.Output = &pipeline.OutputConfig{Schema: schema, Enabled: o.ConversationalOutputs}
	}
	client, closer, err := f.turnLLM()
	if err != nil {
		return nil, storeFirst(err)
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
		return nil, storeFirst(err)
	}
	env.closers = append(env.closers, cleanup)
	store, err := f.Sessions()
	if err != nil {
		env.Close()
		return nil, err
	}
	env.store = store
	jobRunner, err := jobRunner(f)
	if err != nil {
		env.Close()
		return nil, err
	}
	aud, err := f.Auditor()
	if err != nil {
		env.Close()
		return nil, err
	}
	s.ApprovalTTL = f.opts().Team.ApprovalTTL
	env.deps = pipeline.Deps{LLM: client, API: api, Store: store, Jobs: jobRunner, Actions: f.Actions(), Logger: f.Logger(), ExitCode: exitcode.Code}
	if u, ok := client.(*unconfiguredLLM); ok {
		env.noLLM = u
		env.deps.Store = unsavedWhenUnavailable{Store: store, llm: u}
	}
	env.settings = s
	env.auditor = aud
	return env, nil
}

// start builds the agent for an opened session: with the MCP servers of
// the config (connected knowing the capabilities the session negotiated
// before) and the view's callbacks. Nothing changes the agent afterwards.
func (e *turnEnv) start(ctx context.Context, f *Factory, sess *pipeline.Session, view TurnView) error {
	view.noteLLM(e.noLLM)
	opts := append(view.Options(), pipeline.WithAuditor(e.auditor))
	if m := connectMCP(ctx, f, sess); m != nil {
		e.closers = append(e.closers, func() { _ = m.Close() })
		opts = append(opts, pipeline.WithMCP(m))
	}
	a, err := pipeline.New(e.deps, e.settings, opts...)
	if err != nil {
		return err
	}
	e.agent = a
	return nil
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

// How openSession finds a session.
type sessionSource int

const (
	sessionStored   sessionSource = iota // saved by this state dir
	sessionNew                           // created now
	sessionImported                      // taken from a checkpoint file
)

// openSession locks and loads a session, or creates it.
func openSession(store checkpoint.SessionStore, id string, src sessionSource, now time.Time) (*pipeline.Session, func(), error) {
	unlock, err := store.Lock(id)
	if err != nil {
		return nil, nil, err
	}
	load := pipeline.LoadSession
	switch src {
	case sessionNew:
		return pipeline.NewSession(id, now), unlock, nil
	case sessionImported:
		load = pipeline.LoadImportedSession
	}
	sess, err := load(store, id)
	if err != nil {
		unlock()
		if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
			return nil, nil, &UsageError{Err: err}
		}
		return nil, nil, err
	}
	return sess, unlock, nil
}
