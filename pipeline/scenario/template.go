package scenario

import (
	"fmt"
	"sort"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/internal/lazyre"
	"github.com/upgrade-agent/upgrade-agent/llm/llmtest"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// templateRE matches {{experiment:NAME}}, {{condition:EXPERIMENT:CODE}},
// {{session}} and {{job}}.
var templateRE = lazyre.Of(`\{\{\s*(experiment|condition|session|job|flag|segment|list)\s*(?::([^{}]*))?\}\}`)

// resolver expands templates. Names stay resolvable after an experiment is
// deleted (the last id seen under the name wins), so a step that deletes an
// experiment can still name it in its expectations.
type resolver struct {
	experiments map[string]string            // name -> id
	conditions  map[string]map[string]string // experiment name -> code -> id
	session     string
	job         string
	flags       map[string]string              // key -> id
	segments    map[string]string              // public segment name -> id
	lists       map[string]map[string][]string // flag key -> include|exclude -> list ids
}

func newResolver() *resolver {
	return &resolver{experiments: map[string]string{}, conditions: map[string]map[string]string{},
		flags: map[string]string{}, segments: map[string]string{}, lists: map[string]map[string][]string{}}
}

// learn records the ids of the experiments currently on the backend.
func (r *resolver) learn(es []upgrade.Experiment) {
	for _, e := range es {
		r.experiments[e.Name] = e.ID
		codes := map[string]string{}
		for _, c := range e.Conditions {
			codes[c.ConditionCode] = c.ID
		}
		r.conditions[e.Name] = codes
	}
}

func (r *resolver) expand(s string) (string, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	var firstErr error
	out := templateRE.Get().ReplaceAllStringFunc(s, func(m string) string {
		v, err := r.one(templateRE.Get().FindStringSubmatch(m))
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("template %s: %w", m, err)
		}
		return v
	})
	return out, firstErr
}

func (r *resolver) one(m []string) (string, error) {
	kind, arg := m[1], strings.TrimSpace(m[2])
	if v, ok, err := r.flagTemplate(kind, arg); ok {
		return v, err
	}
	switch kind {
	case "experiment":
		if arg == "" {
			return "", fmt.Errorf("want {{experiment:NAME}}")
		}
		id, ok := r.experiments[arg]
		if !ok {
			return "", fmt.Errorf("no experiment named %q on the backend (known: %s)", arg, r.names())
		}
		return id, nil
	case "condition":
		exp, code, ok := strings.Cut(arg, ":")
		if !ok || exp == "" || code == "" {
			return "", fmt.Errorf("want {{condition:EXPERIMENT:CODE}}")
		}
		codes, ok := r.conditions[strings.TrimSpace(exp)]
		if !ok {
			return "", fmt.Errorf("no experiment named %q on the backend (known: %s)", exp, r.names())
		}
		id, ok := codes[strings.TrimSpace(code)]
		if !ok {
			return "", fmt.Errorf("experiment %q has no condition %q", exp, code)
		}
		return id, nil
	case "session":
		if r.session == "" {
			return "", fmt.Errorf("no session yet (the first step starts it)")
		}
		return r.session, nil
	case "job":
		if r.job == "" {
			return "", fmt.Errorf("no job has been started in this scenario yet")
		}
		return r.job, nil
	}
	return "", fmt.Errorf("unknown template")
}

func (r *resolver) names() string {
	if len(r.experiments) == 0 {
		return "none"
	}
	names := make([]string, 0, len(r.experiments))
	for n := range r.experiments {
		names = append(names, fmt.Sprintf("%q", n))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// expandValue expands templates in every string of a JSON-like value.
func (r *resolver) expandValue(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return r.expand(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			e, err := r.expandValue(val)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			e, err := r.expandValue(val)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return v, nil
}

func (r *resolver) expandList(list []string) ([]string, error) {
	if list == nil {
		return nil, nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		e, err := r.expand(s)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// expandReplies returns copies of the scripted replies with templates
// expanded in their text, tool arguments and message checks.
func (r *resolver) expandReplies(in []llmtest.Reply) ([]llmtest.Reply, error) {
	out := make([]llmtest.Reply, len(in))
	for i, rep := range in {
		c := rep
		var err error
		if c.Text, err = r.expand(rep.Text); err != nil {
			return nil, fmt.Errorf("llm reply (%s): %w", rep.Source, err)
		}
		c.Calls = make([]llmtest.Call, len(rep.Calls))
		for j, call := range rep.Calls {
			c.Calls[j] = call
			if c.Calls[j].Arguments, err = r.expand(call.Arguments); err != nil {
				return nil, fmt.Errorf("llm reply (%s): %w", rep.Source, err)
			}
		}
		if c.MessagesContain, err = r.expandList(rep.MessagesContain); err != nil {
			return nil, fmt.Errorf("llm reply (%s): %w", rep.Source, err)
		}
		out[i] = c
	}
	return out, nil
}

// expandExpect returns a copy of e with every template expanded.
func (r *resolver) expandExpect(e Expect) (Expect, error) {
	var err error
	if e.ResponseContains, err = r.expandList(e.ResponseContains); err != nil {
		return e, err
	}
	if e.ResponseMatches, err = r.expandList(e.ResponseMatches); err != nil {
		return e, err
	}
	if c := e.Confirmation; c != nil {
		cc := *c
		if cc.MessageContains, err = r.expandList(c.MessageContains); err != nil {
			return e, err
		}
		e.Confirmation = &cc
	}
	if e.Actions != nil {
		list := make([]ExpectAction, len(*e.Actions))
		for i, a := range *e.Actions {
			list[i] = a
			if list[i].ParamsSubset, err = r.expandValue(a.ParamsSubset); err != nil {
				return e, err
			}
			if list[i].ResultSubset, err = r.expandValue(a.ResultSubset); err != nil {
				return e, err
			}
			if list[i].ErrorContains, err = r.expand(a.ErrorContains); err != nil {
				return e, err
			}
		}
		e.Actions = &list
	}
	if e.Errors != nil {
		list := make([]ExpectError, len(*e.Errors))
		for i, x := range *e.Errors {
			list[i] = x
			if list[i].MessageContains, err = r.expand(x.MessageContains); err != nil {
				return e, err
			}
		}
		e.Errors = &list
	}
	if e.Output, err = r.expandValue(e.Output); err != nil {
		return e, err
	}
	if b := e.Backend; b != nil {
		bb := *b
		for _, list := range []*[]map[string]any{&bb.Experiments, &bb.Users} {
			expanded := make([]map[string]any, len(*list))
			for i, m := range *list {
				v, err := r.expandValue(m)
				if err != nil {
					return e, err
				}
				expanded[i] = v.(map[string]any)
			}
			*list = expanded
		}
		if bb.ExperimentAbsent, err = r.expandList(b.ExperimentAbsent); err != nil {
			return e, err
		}
		if err := r.expandFlagExpect(&bb); err != nil {
			return e, err
		}
		e.Backend = &bb
	}
	if e.TerminationReason != nil {
		s, err := r.expand(*e.TerminationReason)
		if err != nil {
			return e, err
		}
		e.TerminationReason = &s
	}
	return e, nil
}
