package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// serveStream answers as server-sent events, the way OpenAI streams: a role
// delta, text split over several deltas, each tool call announced (id and
// name) and then its arguments in pieces interleaved across calls, a final
// finish_reason, and a usage chunk when the request asked for one.
func (s *Server) serveStream(w http.ResponseWriter, rec RecordedRequest, a answer) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)

	type delta struct {
		Role      string         `json:"role,omitempty"`
		Content   *string        `json:"content,omitempty"`
		ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	var events [][]byte
	add := func(choices []choice, usage *wireUsage) {
		b, _ := json.Marshal(map[string]any{
			"id": a.id, "object": "chat.completion.chunk", "created": created, "model": a.model,
			"choices": choices, "usage": usage,
		})
		events = append(events, b)
	}

	empty := a.reply.Fault != nil && a.reply.Fault.Kind == FaultEmptyChoices
	if !empty {
		add([]choice{{Delta: delta{Role: "assistant"}}}, nil)
		for _, p := range pieces(a.reply.Text, 3) {
			add([]choice{{Delta: delta{Content: &p}}}, nil)
		}
		args := make([][]string, len(a.reply.Calls))
		most := 0
		for i, c := range a.reply.Calls {
			idx := i
			add([]choice{{Delta: delta{ToolCalls: []wireToolCall{{Index: &idx, ID: a.ids[i], Type: "function",
				Function: wireFunction{Name: c.Name}}}}}}, nil)
			args[i] = pieces(c.Arguments, 3)
			most = max(most, len(args[i]))
		}
		for k := range most {
			for i := range a.reply.Calls {
				if k < len(args[i]) {
					idx := i
					add([]choice{{Delta: delta{ToolCalls: []wireToolCall{{Index: &idx,
						Function: wireFunction{Arguments: args[i][k]}}}}}}, nil)
				}
			}
		}
		finish := a.finishReason()
		add([]choice{{Delta: delta{}, FinishReason: &finish}}, nil)
	}
	if rec.IncludeUsage {
		add([]choice{}, a.usage())
	}

	truncated := a.reply.Fault != nil && a.reply.Fault.Kind == FaultTruncated
	if truncated {
		// Stop half-way, before finish_reason and [DONE]: a cut stream.
		events = events[:max(1, len(events)/2)]
	}
	for _, e := range events {
		if _, err := fmt.Fprintf(w, "data: %s\n\n", e); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	if !truncated {
		_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	}
}
