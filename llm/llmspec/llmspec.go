// Package llmspec opens the LLM client an --llm value names. It is the one
// place where the client (llm) and the scripted test server (llm/llmtest)
// meet, so that the client the agent talks through carries no test server:
// `go list -deps ./llm` has no llmtest (quality/arrows_test.go holds it).
//
// It must not do more than choose: the live, recording and replaying
// clients are llm's, the scripted replies are llmtest's.
package llmspec

import (
	"fmt"
	"io"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/safeyaml"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
)

// FromSpec builds the client an --llm value names:
//
//	openai (or "")  the live endpoint of opts (llm.FromSpec)
//	script:FILE     the replies of a YAML script, served by an in-process
//	                llmtest server reached through the real client
//	record:FILE     the live endpoint, recorded to a cassette (llm.FromSpec)
//	replay:FILE     answers from a cassette, no network (llm.FromSpec)
//
// The Closer is never nil. For script: it fails when replies were left
// unused or a call went unanswered; for record: it writes the cassette.
func FromSpec(spec string, opts llm.Options) (llm.Client, io.Closer, error) {
	kind, arg, _ := strings.Cut(strings.TrimSpace(spec), ":")
	if kind != "script" {
		return llm.FromSpec(spec, opts)
	}
	if arg == "" {
		return nil, nil, fmt.Errorf("%w %q: want script:FILE", llm.ErrInvalidSpec, spec)
	}
	return fromScript(arg, opts)
}

// fromScript reads the script as every YAML input is read: a regular file
// of at most 1 MiB, aliases bounded (internal/safeyaml).
func fromScript(path string, opts llm.Options) (llm.Client, io.Closer, error) {
	data, err := safeyaml.ReadFile(path, safeyaml.Limits{})
	if err != nil {
		return nil, nil, fmt.Errorf("LLM script: %w", err)
	}
	replies, err := llmtest.ParseScript(data, path)
	if err != nil {
		return nil, nil, err
	}
	srv := llmtest.NewServer(nil)
	srv.Enqueue(replies...)
	opts.BaseURL = srv.URL()
	opts.APIKey = ""
	opts.AzureAPIVersion = ""
	opts.ProviderName = "script:" + path
	c, err := llm.New(opts)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return c, closerFunc(func() error {
		err := srv.Verify()
		srv.Close()
		if err != nil {
			return fmt.Errorf("LLM script %s: %w", path, err)
		}
		return nil
	}), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
