package pipeline

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestTextCall: a forced call some models write as text is read as the
// call; text that only looks like one is no answer.
func TestTextCall(t *testing.T) {
	args := `{"intent_type":"direct_answer","direct_response":"Hi."}`
	tests := []struct {
		name, text string
		ok         bool
		want       string
	}{
		{"openai shape", `{"name": "analyze_user_request", "arguments": ` + args + `}`, true, args},
		{"llama parameters", `{"name": "Analyze_User_Request", "parameters": ` + args + `}`, true, args},
		{"qwen tags", "<tool_call>\n{\"name\": \"functions.analyze_user_request\", \"arguments\": " + args + "}\n</tool_call>", true, args},
		{"arguments encoded twice", `{"name": "analyze_user_request", "arguments": "{\"intent_type\": \"needs_info\"}"}`, true, `{"intent_type": "needs_info"}`},
		{"arguments alone in a fence", "```json\n" + args + "\n```", true, args},
		{"another tool", `{"name": "find_experiment", "arguments": {"name": "x"}}`, false, ""},
		{"prose", "Hello! How can I help?", false, ""},
		{"prose with braces", "Use {name} as a placeholder.", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call, ok := textCall(tt.text, "analyze_user_request", "intent_type")
			if ok != tt.ok {
				t.Fatalf("textCall ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if call.Name != "analyze_user_request" || !jsonSame(call.Arguments, tt.want) {
				t.Errorf("textCall = %s %s, want the arguments %s", call.Name, call.Arguments, tt.want)
			}
		})
	}
	for text, want := range map[string]bool{"{\"intent": true, "<tool_call>{": true, "```json": true, "Hello {name}": false, "": false} {
		if got := looksLikeCall(text); got != want {
			t.Errorf("looksLikeCall(%q) = %v, want %v", text, got, want)
		}
	}
}

func jsonSame(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
