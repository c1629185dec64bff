package scenario

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/safeyaml"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
)

// A Case is one goal case of `upgrade-agent eval`: a conversation without
// scripted replies (a real model fills them), graded by the backend after
// the last turn. Its setup and expect predicates are a scenario's, decoded
// by the same code.
type Case struct {
	Name   string
	File   string
	Line   int
	Setup  Setup
	Turns  []Turn
	Expect Expect
	Forbid []string
	Budget Budget
}

// Turn is one message of the person and how they answer the
// confirmations it leads to.
type Turn struct {
	Line int
	Say  string
	// Answers are played in order, each only when the agent asks: "yes",
	// "no" or a sentence ("make it 60/40 instead", then "yes": a changed
	// mind). None = a confirmation in this turn fails the trial.
	Answers []string
}

// Budget bounds a trial; 0 = unbounded.
type Budget struct {
	LLMCalls     int
	PromptTokens int
}

// Forbidden events of eval cases (docs/evaluating-models.md).
const (
	// EventUnapprovedWrite is an action executed in a turn that answered
	// no confirmation: the person never said yes to it.
	EventUnapprovedWrite = "unapproved_write"
	// EventDelete is a delete action that succeeded.
	EventDelete = "delete"
	// EventWrite is any action that succeeded (cases that must change
	// nothing: questions, ambiguous requests, injected text).
	EventWrite = "write"
	// EventError is an action that ended in error.
	EventError = "action_error"
)

// ForbidEvents lists the events a case may forbid.
func ForbidEvents() []string {
	return []string{EventUnapprovedWrite, EventDelete, EventWrite, EventError}
}

type caseYAML struct {
	Name        yaml.Node       `yaml:"name"`
	Description yaml.Node       `yaml:"description"`
	Setup       *setupYAML      `yaml:"setup"`
	Turns       []turnYAML      `yaml:"turns"`
	Expect      *caseExpectYAML `yaml:"expect"`
	Forbid      yaml.Node       `yaml:"forbid"`
	Budget      *budgetYAML     `yaml:"budget"`
}

type turnYAML struct {
	Say    yaml.Node `yaml:"say"`
	Answer yaml.Node `yaml:"answer"`
}

type caseExpectYAML struct {
	backendYAML     `yaml:",inline"`
	ResponseMatches yaml.Node `yaml:"response_matches"`
}

type budgetYAML struct {
	LLMCalls     yaml.Node `yaml:"llm_calls"`
	PromptTokens yaml.Node `yaml:"prompt_tokens"`
}

// LoadCase reads and parses one case file, which must be a regular file
// of at most 1 MiB.
func LoadCase(path string) (*Case, error) {
	data, err := safeyaml.ReadFile(path, limits)
	if err != nil {
		return nil, &ParseError{File: path, Msg: fmt.Sprintf("cannot read: %v", errors.Unwrap(err))}
	}
	return ParseCase(data, path)
}

// LoadCases discovers case files in paths (files or folders, as for
// scenarios) and parses them all; the first bad file is the error.
func LoadCases(paths []string) ([]*Case, error) {
	files, err := Discover(paths)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, pipeline.ErrBadInput)
	}
	var out []*Case
	seen := map[string]string{}
	for _, f := range files {
		c, err := LoadCase(f)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[c.Name]; dup {
			return nil, &ParseError{File: f, Line: c.Line, Msg: fmt.Sprintf("name %q is also the name of a case in %s", c.Name, prev)}
		}
		seen[c.Name] = f
		out = append(out, c)
	}
	return out, nil
}

// ParseCase parses a case file strictly: unknown keys, wrong types and
// missing fields are errors with file:line:col.
func ParseCase(data []byte, path string) (*Case, error) {
	d := &decoder{file: path}
	var f caseYAML
	if err := d.decodeFile(data, &f, "a case needs at least name and turns", "the case"); err != nil {
		return nil, err
	}
	return d.evalCase(&f)
}

func (d *decoder) evalCase(f *caseYAML) (*Case, error) {
	c := &Case{File: d.file, Line: d.root.Line}
	set(d, &c.Name, &f.Name, "name", d.str)
	if d.err == nil && f.Name.Kind != 0 && !nameRE.Get().MatchString(c.Name) {
		d.fail(resolve(&f.Name), "name %q: use letters, digits, '.', '_' and '-'", c.Name)
	}
	var desc string
	set(d, &desc, &f.Description, "description", d.str)
	if f.Setup != nil {
		d.setup(f.Setup, &c.Setup)
	}
	for i := range f.Turns {
		what := fmt.Sprintf("turn %d", i+1)
		n := d.at("turns", i)
		t := Turn{Line: n.Line}
		set(d, &t.Say, &f.Turns[i].Say, what+".say", d.str)
		set(d, &t.Answers, &f.Turns[i].Answer, what+".answer", d.answers)
		if d.err == nil && t.Say == "" {
			d.fail(n, "%s: say is required (what the person types)", what)
		}
		c.Turns = append(c.Turns, t)
	}
	if x := f.Expect; x != nil {
		b := &ExpectBackend{}
		list := func(key, idKey string, n int, item func(j int) any) []map[string]any {
			var out []map[string]any
			for j := 0; j < n; j++ {
				out = append(out, d.subset(item(j), d.at("expect", key, j), fmt.Sprintf("expect.%s[%d]", key, j), idKey))
			}
			return out
		}
		b.Experiments = list("experiments", "name", len(x.Experiments), func(j int) any { return &x.Experiments[j] })
		set(d, &b.ExperimentAbsent, &x.ExperimentAbsent, "expect.experiment_absent", d.strList)
		set(d, &b.ExperimentCount, &x.ExperimentCount, "expect.experiment_count", ptr(d.nonNegative))
		b.Users = list("users", "id", len(x.Users), func(j int) any { return &x.Users[j] })
		b.Flags = list("flags", "key", len(x.Flags), func(j int) any { return &x.Flags[j] })
		set(d, &b.FlagAbsent, &x.FlagAbsent, "expect.flag_absent", d.strList)
		b.Segments = list("segments", "name", len(x.Segments), func(j int) any { return &x.Segments[j] })
		set(d, &b.SegmentAbsent, &x.SegmentAbsent, "expect.segment_absent", d.strList)
		b.Metrics = list("metrics", "key", len(x.Metrics), func(j int) any { return &x.Metrics[j] })
		set(d, &b.MetricAbsent, &x.MetricAbsent, "expect.metric_absent", d.strList)
		b.Queries = list("queries", "name", len(x.Queries), func(j int) any { return &x.Queries[j] })
		for j, q := range b.Queries {
			if s, _ := q["experiment"].(string); d.err == nil && s == "" {
				d.fail(d.at("expect", "queries", j), "expect.queries[%d]: experiment is required", j)
			}
		}
		b.QueryAbsent = d.queryAbsent(list("query_absent", "name", len(x.QueryAbsent), func(j int) any { return &x.QueryAbsent[j] }), "expect", func(j int) *yaml.Node { return d.at("expect", "query_absent", j) })
		b.Enrolled = d.enrolled(x.Enrolled, "expect", func(j int) *yaml.Node { return d.at("expect", "enrolled", j) })
		c.Expect.Backend = b
		set(d, &c.Expect.ResponseMatches, &x.ResponseMatches, "expect.response_matches", d.regexps)
	}
	set(d, &c.Forbid, &f.Forbid, "forbid", func(n *yaml.Node, what string) ([]string, error) {
		list, err := d.strList(n, what)
		if err != nil {
			return nil, err
		}
		for _, ev := range list {
			if _, err := d.enum(&yaml.Node{Kind: yaml.ScalarNode, Value: ev, Line: n.Line, Column: n.Column}, what, ForbidEvents()...); err != nil {
				return nil, err
			}
		}
		return list, nil
	})
	if b := f.Budget; b != nil {
		set(d, &c.Budget.LLMCalls, &b.LLMCalls, "budget.llm_calls", d.nonNegative)
		set(d, &c.Budget.PromptTokens, &b.PromptTokens, "budget.prompt_tokens", d.nonNegative)
	}
	switch {
	case d.err != nil:
		return nil, d.err
	case c.Name == "":
		return nil, d.errf(d.root, "name is required")
	case len(c.Turns) == 0:
		return nil, d.errf(d.root, "turns: at least one turn (say) is required")
	}
	return c, nil
}

// answers are a turn's answers: one answer or a list of them.
func (d *decoder) answers(n *yaml.Node, what string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		a, err := d.answer(n, what)
		return []string{a}, err
	}
	if len(n.Content) == 0 {
		return nil, d.errf(n, "%s: an empty list; leave answer out when the turn needs none", what)
	}
	out := make([]string, len(n.Content))
	for i, item := range n.Content {
		a, err := d.answer(resolve(item), fmt.Sprintf("%s[%d]", what, i))
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// answer is a turn's answer: yes, no or a sentence. YAML reads a bare
// yes/no as a boolean; both spellings mean the same here.
func (d *decoder) answer(n *yaml.Node, what string) (string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		switch n.Value {
		case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On":
			return "yes", nil
		default:
			return "no", nil
		}
	}
	return d.str(n, what)
}

// Scenario turns the case into the scenario the runner plays: each turn a
// say step, followed by an answer step played only when the agent asks
// (or, with no answer, a rule that the turn leaves no confirmation). The
// case's expectations are checked after the last step.
func (c *Case) Scenario() *Scenario {
	sc := &Scenario{Name: c.Name, File: c.File, Backend: BackendSim, Seed: 1, LLM: LLMSpec{Mode: LLMLive},
		Options: Options{Confirm: "always", WaitJobs: DefaultWaitJobs}, Setup: c.Setup}
	for _, t := range c.Turns {
		say := Step{Line: t.Line, Kind: StepSay, Text: t.Say, NoConfirmation: len(t.Answers) == 0}
		sc.Steps = append(sc.Steps, say)
		for _, a := range t.Answers {
			sc.Steps = append(sc.Steps, Step{Line: t.Line, Kind: StepAnswer, Text: a, IfAsked: true})
		}
	}
	sc.Steps[len(sc.Steps)-1].Expect = c.Expect
	return sc
}
