package llmspec

import (
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/safeyaml"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
)

// EvalScript is the scripted model of `upgrade-agent eval --llm
// script:FILE`: the replies of each case, played again from the start for
// every trial. The file is a mapping from case name to either a list of
// replies (every trial the same) or {trials: [REPLIES, REPLIES, ...]}
// (trial i plays the i-th list, counting from 1 and wrapping around), so
// that a flawed model can fail some trials and pass others.
type EvalScript struct {
	path  string
	opts  llm.Options
	cases map[string][][]llmtest.Reply
}

// OpenEvalScript reads an eval script (docs/llm.md "eval scripts").
func OpenEvalScript(path string, opts llm.Options) (*EvalScript, error) {
	data, err := safeyaml.ReadFile(path, safeyaml.Limits{})
	if err != nil {
		return nil, fmt.Errorf("LLM script: %w", err)
	}
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: an eval script is a mapping from case name to replies: %w", path, err)
	}
	s := &EvalScript{path: path, opts: opts, cases: map[string][][]llmtest.Reply{}}
	for name, n := range doc {
		if n.Kind == yaml.MappingNode {
			var x struct {
				Trials [][]llmtest.Reply `yaml:"trials"`
			}
			if err := n.Decode(&x); err != nil {
				return nil, fmt.Errorf("%s:%d: case %s: %w", path, n.Line, name, err)
			}
			if len(x.Trials) == 0 {
				return nil, fmt.Errorf("%s:%d: case %s: trials: at least one list of replies", path, n.Line, name)
			}
			s.cases[name] = x.Trials
			continue
		}
		var replies []llmtest.Reply
		if err := n.Decode(&replies); err != nil {
			return nil, fmt.Errorf("%s:%d: case %s: %w", path, n.Line, name, err)
		}
		s.cases[name] = [][]llmtest.Reply{replies}
	}
	return s, nil
}

// Client serves one trial (1-based) of a case from a fresh scripted
// server. The Closer stops it and reports replies left unused or calls
// left unanswered (a trial that went another way than the script).
func (s *EvalScript) Client(caseName string, trial int) (llm.Client, io.Closer, error) {
	trials, ok := s.cases[caseName]
	if !ok {
		return nil, nil, fmt.Errorf("%w: LLM script %s has no replies for case %s", llm.ErrInvalidSpec, s.path, caseName)
	}
	srv := llmtest.NewServer(nil)
	srv.Enqueue(trials[(trial-1)%len(trials)]...)
	opts := s.opts
	opts.BaseURL = srv.URL()
	opts.APIKey = ""
	opts.AzureAPIVersion = ""
	opts.ProviderName = "script:" + s.path
	c, err := llm.New(opts)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return c, closerFunc(func() error {
		err := srv.Verify()
		srv.Close()
		return err
	}), nil
}
