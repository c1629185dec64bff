package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/upgrade-agent/upgrade-agent/llm"
)

// turnLLM is the LLM of ask and resume. When no model is configured it is
// not an error yet: a turn that makes no call (a clear yes or no, a job's
// result, a reply written in Go) needs none. The client returned then fails
// the first call the turn does make, with the error that names what to set
// (llm.ErrNotConfigured, exit 2). Every other problem (a bad script, an
// unreadable cassette) is reported at once, as before.
func (f *Factory) turnLLM() (llm.Client, io.Closer, error) {
	c, closer, err := f.LLM()
	if errors.Is(err, llm.ErrNotConfigured) {
		return unconfiguredLLM{err: err}, nil, nil
	}
	return c, closer, err
}

// unconfiguredLLM stands in for a model that is not configured.
type unconfiguredLLM struct{ err error }

func (u unconfiguredLLM) Chat(context.Context, llm.Request) (*llm.Response, error) {
	return nil, fmt.Errorf("this turn needs the model: %w", u.err)
}
