package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/llm"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/pipeline/scenario"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// originalTools is the tool list each node of the original design offered
// on every call, unscoped: the analyzer's and the responder's lists as our
// agent sends them, and the gatherer's list of every scope at once (every
// lookup of every object), with one argument-less get_<action>_schema tool
// per action in place of our get_action_schema(action), and
// set_action_needed with every action name as its enum (the original's
// gatherer bound get_tools_for_node("gatherer") on every call; this
// project's gatherer had the same shape before tool scoping, f88a305).
type originalTools struct {
	// lists are the tool definitions per node.
	lists map[string][]llm.Tool
	// chars are the compact JSON characters of each node's list as the
	// request carries it (what scenario.CallChars.Tools counts).
	chars map[string]int
}

// unscopedTools asks the agent built on reg for its tool lists: one turn
// of the information flow with an analyzer that names no object, so that
// the gatherer is offered the tools of every scope, as the pipeline builds
// them. It then gives the gatherer's list the original's shape.
func unscopedTools(ctx context.Context, reg *actions.Registry) (originalTools, error) {
	s, err := sim.New(sim.Options{Seed: 3})
	if err != nil {
		return originalTools{}, err
	}
	api, err := upgrade.New(upgrade.Config{BaseURL: "http://sim.invalid/api",
		HTTPClient: &http.Client{Transport: handlerTransport{s.Handler()}}})
	if err != nil {
		return originalTools{}, err
	}
	client := newInstantLLM()
	agent, err := pipeline.New(pipeline.Deps{LLM: client, API: api, Actions: reg, Logger: slog.New(slog.DiscardHandler)},
		pipeline.Settings{Model: "bench-model"})
	if err != nil {
		return originalTools{}, err
	}
	sess := pipeline.NewSession(checkpoint.NewSessionID(), scenario.FixedTime())
	if _, err := agent.Ask(ctx, sess, "Which experiments exist right now?"); err != nil {
		return originalTools{}, fmt.Errorf("a turn to list the tools: %w", err)
	}
	client.mu.Lock()
	lists := client.lists
	client.mu.Unlock()
	for _, node := range []string{pipeline.NodeAnalyzer, pipeline.NodeGatherer, pipeline.NodeResponder} {
		if len(lists[node]) == 0 {
			return originalTools{}, fmt.Errorf("the %s offered no tools", node)
		}
	}
	g, err := originalGatherer(lists[pipeline.NodeGatherer], reg)
	if err != nil {
		return originalTools{}, err
	}
	out := originalTools{lists: map[string][]llm.Tool{}, chars: map[string]int{}}
	for node, l := range lists {
		if node == pipeline.NodeGatherer {
			l = g
		}
		out.lists[node] = l
		if out.chars[node], err = wireChars(l); err != nil {
			return originalTools{}, err
		}
	}
	return out, nil
}

// originalGatherer turns the gatherer's unscoped list into the original's
// shape: get_action_schema becomes one get_<action>_schema per action (no
// arguments, "Parameters of <action>."), and set_action_needed's action
// enumerates every action.
func originalGatherer(tools []llm.Tool, reg *actions.Registry) ([]llm.Tool, error) {
	var names []string
	for _, n := range reg.InScope(actions.ObjectNone) {
		names = append(names, string(n))
	}
	var noArgs json.RawMessage
	for _, t := range tools {
		if t.Name == "get_core_terms" {
			noArgs = t.Parameters
		}
	}
	if noArgs == nil {
		return nil, fmt.Errorf("the gatherer offers no get_core_terms to copy an argument-less schema from")
	}
	var out []llm.Tool
	seen := map[string]bool{}
	for _, t := range tools {
		switch t.Name {
		case "get_action_schema":
			for _, n := range names {
				out = append(out, llm.Tool{Name: "get_" + n + "_schema", Description: "Parameters of " + n + ".", Parameters: noArgs})
			}
		case "set_action_needed":
			p, err := withActionEnum(t.Parameters, names)
			if err != nil {
				return nil, fmt.Errorf("set_action_needed: %w", err)
			}
			t.Parameters = p
			out = append(out, t)
		default:
			out = append(out, t)
		}
		seen[t.Name] = true
	}
	for _, want := range []string{"get_action_schema", "set_action_needed"} {
		if !seen[want] {
			return nil, fmt.Errorf("the gatherer's unscoped list has no %s", want)
		}
	}
	return out, nil
}

// withActionEnum gives the schema's "action" property the enum of names.
func withActionEnum(schema json.RawMessage, names []string) (json.RawMessage, error) {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	props, _ := s["properties"].(map[string]any)
	action, ok := props["action"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no action property")
	}
	delete(action, "description")
	action["enum"] = slices.Clone(names)
	return json.Marshal(s)
}

// wireChars is the compact JSON of a tool list as the go-openai client puts
// it in a request body, which is what the scripted server records.
func wireChars(tools []llm.Tool) (int, error) {
	wire := make([]openai.Tool, 0, len(tools))
	for _, t := range tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		wire = append(wire, openai.Tool{Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: t.Name, Description: t.Description, Strict: t.Strict, Parameters: params}})
	}
	b, err := json.Marshal(wire)
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// names of a node's original list, for tests and the -v listing.
func (o originalTools) names(node string) []string {
	var n []string
	for _, t := range o.lists[node] {
		n = append(n, t.Name)
	}
	return n
}

// callBaseline is the prompt characters the original design sends for one
// of our calls: the call's own messages, the node's whole unscoped tool
// list instead of the one the call offered, and the whole history instead
// of the window (dropped). A node the original had no list for (the
// structured-output node) keeps its own tools.
func (o originalTools) callBaseline(c scenarioCall, dropped int) int {
	node, _, _ := strings.Cut(c.node, " ") // "gatherer after 2 attempts"
	tools := c.tools
	if n, ok := o.chars[node]; ok {
		tools = n
	}
	return c.chars - c.tools + tools + dropped
}

// scenarioCall is one LLM request of a scenario step, as the scripted
// server recorded it.
type scenarioCall struct {
	node         string
	chars, tools int
}
