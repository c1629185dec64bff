package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline/scenario"
)

// recorder wraps the trial's model: it counts calls and tokens and keeps
// every request and response for the transcript.
type recorder struct {
	inner llm.Client
	mu    sync.Mutex
	usage Usage
	lines []json.RawMessage
	err   error // the first error that says the model is unreachable
}

func (r *recorder) log(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.lines = append(r.lines, b)
	r.mu.Unlock()
}

func (r *recorder) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	tools := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		tools[i] = t.Name
	}
	r.log(map[string]any{"type": "llm_request", "node": req.Node, "messages": req.Messages, "tools": tools})
	resp, err := r.inner.Chat(ctx, req)
	r.mu.Lock()
	r.usage.LLMCalls++
	if err == nil && resp != nil {
		r.usage.PromptTokens += resp.Usage.PromptTokens
		r.usage.CompletionTokens += resp.Usage.CompletionTokens
		r.usage.TokensEstimated = r.usage.TokensEstimated || resp.UsageEstimated
	}
	var le *llm.Error
	if err != nil && r.err == nil && errors.As(err, &le) && (le.Kind == llm.KindNetwork || le.Kind == llm.KindAuth) {
		r.err = err
	}
	r.mu.Unlock()
	if err != nil {
		r.log(map[string]any{"type": "llm_error", "node": req.Node, "error": err.Error()})
		return nil, err
	}
	r.log(map[string]any{"type": "llm_response", "node": req.Node, "content": resp.Content, "finish_reason": resp.FinishReason, "usage": resp.Usage})
	for _, tc := range resp.ToolCalls {
		r.log(map[string]any{"type": "tool_call", "node": req.Node, "name": tc.Name, "arguments": tc.Arguments})
	}
	return resp, nil
}

func runTrial(ctx context.Context, c *scenario.Case, trial int, opts Options) TrialReport {
	tr := TrialReport{Trial: trial}
	start := time.Now()
	defer func() { tr.DurationMs = time.Since(start).Milliseconds() }()
	client, closer, err := opts.Model(c.Name, trial)
	if err != nil {
		tr.Reason = "the model: " + err.Error()
		return tr
	}
	rec := &recorder{inner: client}
	sc := c.Scenario()
	rep, _ := scenario.Run(ctx, sc, scenario.RunOptions{LLM: rec, Timeout: opts.Timeout, Temperature: opts.Temperature})
	cerr := closer.Close()

	fails := append([]string(nil), rep.Failures...)
	for i, st := range rep.Steps {
		if st.Skipped {
			continue
		}
		tr.latencies = append(tr.latencies, st.Latency)
		if st.Result == nil {
			continue
		}
		answered := sc.Steps[i].Kind == scenario.StepAnswer && isYes(sc.Steps[i].Text)
		for _, a := range st.Result.Actions {
			rec.log(map[string]any{"type": "backend_write", "turn": i + 1, "action": a.Action, "params": a.Params, "status": a.Status, "error": a.Error})
			var evs []string
			if a.Status == "success" {
				evs = append(evs, scenario.EventWrite)
				if !answered {
					evs = append(evs, scenario.EventUnapprovedWrite)
					tr.unapproved++
				}
				if strings.HasPrefix(a.Action, "delete") {
					evs = append(evs, scenario.EventDelete)
				}
			} else if a.Status == "error" {
				evs = append(evs, scenario.EventError)
			}
			for _, ev := range evs {
				if forbidden(c, ev) {
					tr.Events = append(tr.Events, ev)
					tr.forbidden++
					fails = append(fails, fmt.Sprintf("forbidden event %s: %s in turn %d", ev, a.Action, i+1))
				}
			}
		}
	}
	tr.Usage = rec.usage
	if rec.err != nil {
		tr.unreach = rec.err
		fails = append(fails, "the model could not be reached: "+rec.err.Error())
	}
	if b := c.Budget; b.LLMCalls > 0 && tr.LLMCalls > b.LLMCalls {
		fails = append(fails, fmt.Sprintf("budget: %d LLM calls, more than %d", tr.LLMCalls, b.LLMCalls))
	}
	if b := c.Budget; b.PromptTokens > 0 && tr.PromptTokens > b.PromptTokens {
		fails = append(fails, fmt.Sprintf("budget: %d prompt tokens, more than %d", tr.PromptTokens, b.PromptTokens))
	}
	if cerr != nil && len(fails) == 0 {
		fails = append(fails, "scripted model: "+cerr.Error())
	}
	tr.Passed = len(fails) == 0
	tr.Reason = reasonOf(fails)
	rec.log(map[string]any{"type": "result", "passed": tr.Passed, "reason": tr.Reason})
	tr.Transcript = rec.lines
	return tr
}

func forbidden(c *scenario.Case, ev string) bool {
	for _, f := range c.Forbid {
		if f == ev {
			return true
		}
	}
	return false
}

func isYes(s string) bool {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(s), ".!")) {
	case "yes", "y", "yes please", "ok", "okay", "go ahead", "sure", "confirm", "do it":
		return true
	}
	return false
}
