package llm

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/internal/safeyaml"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
)

// FromSpec builds the client an --llm value names:
//
//	openai (or "")  the live endpoint of opts; needs an API key unless a base
//	                URL is set (a local server such as Ollama needs none)
//	script:FILE     the replies of a YAML script, served by an in-process
//	                llmtest server reached through the real client
//	record:FILE     the live endpoint, with every answer written to a
//	                cassette when the Closer runs
//	replay:FILE     answers from a cassette, no network at all
//
// The Closer is never nil. For script: it fails when replies were left
// unused or a call went unanswered; for record: it writes the cassette.
func FromSpec(spec string, opts Options) (Client, io.Closer, error) {
	kind, arg, hasArg := strings.Cut(strings.TrimSpace(spec), ":")
	switch kind {
	case "", "openai", "live":
		if hasArg {
			break
		}
		c, err := newLive(opts)
		if err != nil {
			return nil, nil, err
		}
		return c, nopCloser{}, nil
	case "script":
		if arg == "" {
			return nil, nil, fmt.Errorf("%w %q: want script:FILE", ErrInvalidSpec, spec)
		}
		return fromScript(arg, opts)
	case "record":
		if arg == "" {
			return nil, nil, fmt.Errorf("%w %q: want record:FILE", ErrInvalidSpec, spec)
		}
		c, err := newLive(opts)
		if err != nil {
			return nil, nil, err
		}
		// The folder is made now, before the first call: a cassette that
		// cannot be written must not cost the live calls first.
		if err := os.MkdirAll(filepath.Dir(arg), 0o755); err != nil {
			return nil, nil, fmt.Errorf("cassette %s: %w", arg, err)
		}
		r := &recorder{inner: c, model: c.Model(), path: arg, secret: redact.New(opts.APIKey)}
		return r, r, nil
	case "replay":
		if arg == "" {
			return nil, nil, fmt.Errorf("%w %q: want replay:FILE", ErrInvalidSpec, spec)
		}
		p, err := loadCassette(arg)
		if err != nil {
			return nil, nil, err
		}
		return p, p, nil
	}
	return nil, nil, fmt.Errorf("%w %q: want openai, script:FILE, record:FILE or replay:FILE", ErrInvalidSpec, spec)
}

func newLive(opts Options) (*OpenAI, error) {
	if opts.APIKey == "" && opts.BaseURL == "" {
		return nil, ErrNotConfigured
	}
	return New(opts)
}

// fromScript reads the script as every YAML input is read: a regular file
// of at most 1 MiB, aliases bounded (internal/safeyaml).
func fromScript(path string, opts Options) (Client, io.Closer, error) {
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
	c, err := New(opts)
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

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
