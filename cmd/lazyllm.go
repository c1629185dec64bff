package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// ErrTypeLLMUnavailable is the errors[].type of a turn that needed the
// model when none is configured (exit 2): nothing was sent anywhere, so
// llm_calls stays 0 and a session that the turn would have started is not
// stored.
const ErrTypeLLMUnavailable = "llm_unavailable"

// turnLLM is the LLM of ask and resume. When no model is configured it is
// not an error yet: a turn that makes no call (a clear yes or no, a job's
// result, a reply written in Go) needs none. The client returned then fails
// the first call the turn does make, with the error that names what to set
// (llm.ErrNotConfigured, exit 2), and counts the calls it refused. Every
// other problem (a bad script, an unreadable cassette) is reported at once,
// as before.
func (f *Factory) turnLLM() (llm.Client, io.Closer, error) {
	c, closer, err := f.LLM()
	if errors.Is(err, llm.ErrNotConfigured) {
		return &unconfiguredLLM{err: err}, nil, nil
	}
	return c, closer, err
}

// unconfiguredLLM stands in for a model that is not configured.
type unconfiguredLLM struct {
	err     error
	refused atomic.Int32
}

func (u *unconfiguredLLM) Chat(context.Context, llm.Request) (*llm.Response, error) {
	u.refused.Add(1)
	return nil, fmt.Errorf("this turn needs the model: %w", u.err)
}

// calls is how many calls the turn tried (none reached a model).
func (u *unconfiguredLLM) calls() int {
	if u == nil {
		return 0
	}
	return int(u.refused.Load())
}

// settleUnavailable makes the result of a turn that met no configured
// model say so: its error is llm_unavailable, and the calls that were
// never sent are not counted.
func settleUnavailable(res *pipeline.Result, u *unconfiguredLLM) {
	n := u.calls()
	if res == nil || n == 0 {
		return
	}
	res.Usage.LLMCalls = max(0, res.Usage.LLMCalls-n)
	for i, e := range res.Errors {
		if strings.Contains(e.Message, llm.ErrNotConfigured.Error()) {
			res.Errors[i].Type = ErrTypeLLMUnavailable
		}
	}
}

// unsavedWhenUnavailable is the session store of a turn with no model
// configured: once the turn has needed the model, a session that is not
// stored yet stays unstored (it holds nothing but the failure), while a
// stored one keeps its history as usual.
type unsavedWhenUnavailable struct {
	checkpoint.Store
	llm *unconfiguredLLM
}

func (s unsavedWhenUnavailable) Save(cp *checkpoint.Checkpoint) error {
	if s.llm.calls() > 0 {
		if _, err := s.Store.Load(cp.SessionID); errors.Is(err, checkpoint.ErrNotFound) {
			return nil
		}
	}
	return s.Store.Save(cp)
}

// List lists the wrapped store's sessions: undo_change finds a change in
// any of them.
func (s unsavedWhenUnavailable) List() ([]checkpoint.Summary, error) {
	if l, ok := s.Store.(interface {
		List() ([]checkpoint.Summary, error)
	}); ok {
		return l.List()
	}
	return nil, nil
}
