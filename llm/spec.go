package llm

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
)

// FromSpec builds the client an --llm value names:
//
//	openai (or "")  the live endpoint of opts; needs an API key unless a base
//	                URL is set (a local server such as Ollama needs none)
//	record:FILE     the live endpoint, with every answer written to a
//	                cassette when the Closer runs
//	replay:FILE     answers from a cassette, no network at all
//
// script:FILE, the replies of a YAML script, is served by the scripted test
// server, which the client does not carry: llm/llmspec.FromSpec opens every
// form, this one included, and is what the CLI calls. Here it is refused.
//
// The Closer is never nil. For record: it writes the cassette.
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
		return nil, nil, fmt.Errorf("%w %q: the scripted server is opened by llmspec.FromSpec", ErrInvalidSpec, spec)
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

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
