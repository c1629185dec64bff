package llmtest

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func post(t *testing.T, s *Server, body string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

const toolsBody = `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"delete Math Hints"}],
"tools":[{"type":"function","function":{"name":"a","parameters":{}}},{"type":"function","function":{"name":"b","parameters":{}}}],
"tool_choice":{"type":"function","function":{"name":"a"}},"parallel_tool_calls":false,"temperature":0}`

func TestServerRecordsAndAnswers(t *testing.T) {
	s := NewServer(t)
	s.Enqueue(Reply{
		ToolsOffered: []string{"b", "a"}, ToolChoice: "a", MessagesContain: []string{"Math Hints"},
		Calls: []Call{NewCall("a", map[string]int{"x": 1}), NewCall("b", `{"y":`)},
	})
	resp, body := post(t, s, toolsBody, map[string]string{NodeHeader: "analyzer"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != nil || len(c.Message.ToolCalls) != 2 ||
		c.Message.ToolCalls[0].ID != "call_1" || c.Message.ToolCalls[1].ID != "call_2" ||
		c.Message.ToolCalls[1].Function.Arguments != `{"y":` {
		t.Errorf("answer = %s", body)
	}
	// prompt: "system"+"be brief"+"user"+"delete Math Hints"+"a"+"{}"+"b"+"{}" = 41 chars
	if got.Usage.PromptTokens != 11 || got.Usage.CompletionTokens != 4 {
		t.Errorf("usage = %+v, want 11 prompt (41 chars) and 4 completion (14 chars)", got.Usage)
	}
	f := false
	temp := 0.0
	reqs := s.Requests()
	reqs[0].Body = nil
	want := []RecordedRequest{{
		Call: 1, Path: "/v1/chat/completions", Node: "analyzer", Model: "m",
		Messages:          []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "delete Math Hints"}},
		Tools:             []string{"a", "b"},
		ToolChoice:        "a",
		ParallelToolCalls: &f, Temperature: &temp,
	}}
	if diff := cmp.Diff(want, reqs); diff != "" {
		t.Errorf("Requests (-want +got):\n%s", diff)
	}
}

func TestServerFailures(t *testing.T) {
	s := NewServer(nil)
	defer s.Close()
	s.Enqueue(Reply{ToolsOffered: []string{"a"}, ToolChoice: "required", MessagesContain: []string{"Math Hints", "absent"},
		Text: "x", Source: "s.yaml:3"})
	resp, body := post(t, s, toolsBody, map[string]string{NodeHeader: "gatherer"})
	if resp.StatusCode != 400 {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	msg := errorMessage(t, body)
	for _, want := range []string{"call 1 (node gatherer, tools offered [a, b])", "reply #1 (s.yaml:3)",
		"tools_offered: want [a], got [a, b]", "tool_choice: want required, got a", `"absent" is not in the messages`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %s lacks %q", msg, want)
		}
	}
	// No reply left: the second call fails too, naming the last message.
	_, body = post(t, s, `{"model":"m","messages":[{"role":"user","content":"hello"}]}`, nil)
	msg = errorMessage(t, body)
	if want := `llmtest: call 2 (node (unnamed), tools offered []): no scripted reply left (1 reply scripted, all used); last message: user "hello"`; msg != want {
		t.Errorf("message = %s\nwant      %s", msg, want)
	}
	if n := len(s.Failures()); n != 2 {
		t.Errorf("%d failures, want 2", n)
	}
	err := s.Verify()
	if err == nil || !strings.Contains(err.Error(), "call 1 (node gatherer") || !strings.Contains(err.Error(), "call 2") {
		t.Errorf("Verify = %v", err)
	}
	s.Reset()
	if err := s.Verify(); err != nil {
		t.Errorf("Verify after Reset = %v", err)
	}
}

func errorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Error.Message
}

func TestServerVerifyUnused(t *testing.T) {
	s := NewServer(nil)
	defer s.Close()
	s.Enqueue(TextReply("used"), Reply{Calls: []Call{{Name: "find_experiment"}}, Source: "s.yaml:9"}, TextReply("also unused"))
	post(t, s, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	err := s.Verify()
	want := "llmtest: 2 scripted replies were never used (after 1 call):\n  #2 call find_experiment (s.yaml:9)\n  #3 reply \"also unused\""
	if err == nil || err.Error() != want {
		t.Errorf("Verify =\n%v\nwant\n%s", err, want)
	}
	if s.Pending() != 2 {
		t.Errorf("Pending = %d", s.Pending())
	}
}

func TestServerUnexpectedPath(t *testing.T) {
	s := NewServer(nil)
	defer s.Close()
	resp, err := http.Get(s.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || len(s.Failures()) != 1 {
		t.Errorf("status %d, failures %v", resp.StatusCode, s.Failures())
	}
}

// The stream must split text and arguments over several deltas and
// interleave two calls, or the client's reassembly is not exercised.
func TestServerStreamInterleavesCalls(t *testing.T) {
	s := NewServer(t)
	s.Enqueue(Reply{Text: "Looking both up.", Calls: []Call{
		NewCall("get_experiment_details", map[string]string{"experiment_id": "aaaa"}),
		NewCall("get_enrollment_details", map[string]string{"experiment_id": "bbbb"}),
	}})
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	resp, raw := post(t, s, body, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var texts, order []string
	var finish string
	var usage bool
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	var last string
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = line
		if line == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		if ch.Usage != nil && len(ch.Choices) == 0 {
			usage = true
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != "" {
				texts = append(texts, c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				if tc.Function.Arguments != "" {
					order = append(order, string(rune('0'+tc.Index))+tc.Function.Arguments)
				}
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if len(texts) < 2 || strings.Join(texts, "") != "Looking both up." {
		t.Errorf("text deltas %q", texts)
	}
	if len(order) < 4 || order[0][0] != '0' || order[1][0] != '1' || order[2][0] != '0' {
		t.Errorf("argument deltas not interleaved: %q", order)
	}
	if finish != "tool_calls" || !usage || last != "[DONE]" {
		t.Errorf("finish %q, usage chunk %v, last %q", finish, usage, last)
	}
}
