package llm

import (
	"context"
	"errors"
	"io"
	"sort"

	openai "github.com/sashabaranov/go-openai"
)

// stream runs one streaming attempt: text deltas go to req.OnText as they
// arrive, tool-call deltas are put back together by their index.
func (c *OpenAI) stream(ctx, actx context.Context, a *attempt, creq openai.ChatCompletionRequest, req Request) (*Response, result) {
	creq.Stream = true
	creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	s, err := c.client.CreateChatCompletionStream(actx, creq)
	if err != nil {
		return nil, c.classify(ctx, actx, a, err)
	}
	defer s.Close()

	var acc streamAccumulator
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r := c.classify(ctx, actx, a, err)
			if acc.emitted {
				// The caller has already shown part of this answer; a new
				// attempt would show a different one after it.
				r.retryable = false
			}
			return nil, r
		}
		acc.add(chunk, req.OnText)
	}
	if !acc.sawChoice {
		return nil, result{err: c.fail(KindEmpty, a.status, "the stream carried no choice", nil)}
	}
	if acc.finish == "" {
		// go-openai reports a stream cut before "data: [DONE]" as a normal
		// end; only the missing finish_reason gives it away.
		return nil, result{
			err:       c.fail(KindTruncated, a.status, "the stream ended without a finish_reason", nil),
			retryable: !acc.emitted,
		}
	}
	resp := acc.response()
	c.fillUsage(resp, req)
	if acc.finish == string(openai.FinishReasonLength) {
		return resp, result{err: c.fail(KindLength, a.status, lengthHint(req), nil)}
	}
	return resp, result{}
}

// streamAccumulator rebuilds a whole answer from stream chunks.
type streamAccumulator struct {
	content   []byte
	calls     map[int]*ToolCall // by the delta's index
	order     []int             // indexes in first-seen order, for index-less providers
	finish    string
	usage     Usage
	sawChoice bool
	emitted   bool
}

func (s *streamAccumulator) add(chunk openai.ChatCompletionStreamResponse, onText func(string)) {
	if chunk.Usage != nil {
		s.usage = fromWireUsage(chunk.Usage)
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue // only one choice is ever requested
		}
		s.sawChoice = true
		if ch.FinishReason != "" && ch.FinishReason != openai.FinishReasonNull {
			s.finish = string(ch.FinishReason)
		}
		if d := ch.Delta.Content; d != "" {
			s.content = append(s.content, d...)
			if onText != nil {
				onText(d)
				s.emitted = true
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			s.addCall(tc)
		}
	}
}

func (s *streamAccumulator) addCall(tc openai.ToolCall) {
	if s.calls == nil {
		s.calls = map[int]*ToolCall{}
	}
	var idx int
	switch {
	case tc.Index != nil:
		idx = *tc.Index
	case tc.ID != "":
		// No index (some servers send whole calls): a new id is a new call.
		idx = len(s.order)
		for _, i := range s.order {
			if s.calls[i].ID == tc.ID {
				idx = i
			}
		}
	case len(s.order) > 0:
		idx = s.order[len(s.order)-1]
	}
	cur, ok := s.calls[idx]
	if !ok {
		cur = &ToolCall{}
		s.calls[idx] = cur
		s.order = append(s.order, idx)
	}
	if tc.ID != "" {
		cur.ID = tc.ID
	}
	if tc.Function.Name != "" && cur.Name == "" {
		cur.Name = tc.Function.Name
	}
	cur.Arguments += tc.Function.Arguments
}

func (s *streamAccumulator) response() *Response {
	resp := &Response{Content: string(s.content), FinishReason: s.finish, Usage: s.usage}
	idx := append([]int(nil), s.order...)
	sort.Ints(idx)
	for _, i := range idx {
		resp.ToolCalls = append(resp.ToolCalls, *s.calls[i])
	}
	return resp
}
