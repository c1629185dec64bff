package llmtest

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/upgrade-agent/upgrade-agent/internal/hostile"
)

func TestParseScript(t *testing.T) {
	data, err := os.ReadFile("testdata/script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseScript(data, "testdata/script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Reply{
		{
			ToolsOffered: []string{"analyze_user_request"}, ToolChoice: "analyze_user_request",
			Calls: []Call{{Name: "analyze_user_request",
				Arguments: `{"intent_type":"needs_info","confidence":0.95,"user_request_summary":"delete Math Hints","reasoning":"destructive action"}`}},
			Source: "testdata/script.yaml:2",
		},
		{
			MessagesContain: []string{"Math Hints"},
			// Order as written in the YAML, not sorted: the agent sees
			// parallel calls in the order the model produced them.
			Calls: []Call{
				{Name: "set_action_needed", Arguments: `{"action":"delete_experiment","reasoning":"user asked"}`},
				{Name: "find_experiment", Arguments: `{"name":"Math Hints"}`},
				{Name: "set_action_params", Arguments: `{"action_params":{"experiment_id":"{{experiment:Math Hints}}","tags":["a",2,true,null]}}`},
			},
			Source: "testdata/script.yaml:6",
		},
		{
			Calls: []Call{
				{Name: "get_experiment_details", Arguments: `{"experiment_id":"a"}`},
				{Name: "get_experiment_details", Arguments: `{"experiment_id":"b"}`},
			},
			Source: "testdata/script.yaml:11",
		},
		{Calls: []Call{{Name: "set_action_params", Arguments: `{"action_params": `}}, Source: "testdata/script.yaml:14"},
		{Fault: &Fault{Kind: FaultStatus, Status: 429, RetryAfter: "1"}, Source: "testdata/script.yaml:15"},
		{Fault: &Fault{Kind: FaultReset}, Source: "testdata/script.yaml:16"},
		{Fault: &Fault{Kind: FaultStatus, Status: 503}, Source: "testdata/script.yaml:17"},
		{Fault: &Fault{Kind: FaultLength}, Text: "partial", Source: "testdata/script.yaml:18"},
		{Text: "I am about to delete Math Hints.\nReply yes to go ahead.\n", Source: "testdata/script.yaml:20"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseScript (-want +got):\n%s", diff)
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "- reply: hi\n- cal:\n    x: {}\n", `s.yaml:2: unknown key "cal" in a scripted reply`},
		{"unknown key in raw_call", "- raw_call: {name: x, args: y}\n", `s.yaml:1: unknown key "args" in raw_call`},
		{"not a list", "reply: hi\n", "s.yaml:1: a script is a list of replies"},
		{"nothing to answer", "- tool_choice: auto\n", "s.yaml:1: a scripted reply needs reply, call, calls, raw_call or fault"},
		{"scalar arguments", "- call:\n    x: hello\n", "s.yaml:2: arguments of x: want a mapping"},
		{"calls item with two tools", "- calls:\n    - {a: {}, b: {}}\n", "s.yaml:2: calls: each item names exactly one tool"},
		{"duplicate key", "- reply: a\n  reply: b\n", `s.yaml:2: key "reply" appears twice`},
		{"bad fault", "- fault: explode\n", `s.yaml:1: unknown fault "explode"`},
		{"bad status", "- fault: {status: 200}\n", "s.yaml:1: fault.status: want 400..599, got 200"},
		{"fault with reply", "- fault: reset\n  reply: hi\n", "s.yaml:1: fault reset cannot carry reply or calls"},
		{"yaml syntax", "- reply: [\n", "s.yaml: yaml: line"},
		{"infinite float", "- call:\n    x: {v: .inf}\n", "s.yaml:2: value \".inf\" cannot be written as JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScript([]byte(tt.yaml), "s.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseScriptEmpty(t *testing.T) {
	for _, src := range []string{"", "# nothing\n", "~\n"} {
		got, err := ParseScript([]byte(src), "e.yaml")
		if err != nil || len(got) != 0 {
			t.Errorf("ParseScript(%q) = %v, %v; want no replies", src, got, err)
		}
	}
}

// A scenario file decodes its `llm:` items with yaml.v3 directly; the line
// must survive so the scenario runner can name file:line.
func TestReplyUnmarshalYAMLInDocument(t *testing.T) {
	var doc struct {
		Steps []struct {
			Say string  `yaml:"say"`
			LLM []Reply `yaml:"llm"`
		} `yaml:"steps"`
	}
	src := "steps:\n  - say: hi\n    llm:\n      - reply: hello\n      - calll: {}\n"
	err := yaml.Unmarshal([]byte(src), &doc)
	var se *ScriptError
	if !errors.As(err, &se) || se.Line != 5 || !strings.Contains(se.Error(), `line 5: unknown key "calll"`) {
		t.Fatalf("error = %v, want a *ScriptError at line 5", err)
	}
	src = "steps:\n  - say: hi\n    llm:\n      - call: {b: {x: 1}, a: {}}\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	want := []Reply{{Calls: []Call{{Name: "b", Arguments: `{"x":1}`}, {Name: "a", Arguments: "{}"}}, Source: "line 4"}}
	if diff := cmp.Diff(want, doc.Steps[0].LLM); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

// TestScriptAliasBomb: a script whose arguments expand to half a million
// values is refused before any of it is rendered, naming the file and
// line; so is a reply handed over by another decoder. (Half a million, not
// the 387 million of issue 15.7: unbounded code expands this one in a
// moment, so the test fails instead of exhausting the machine.)
func TestScriptAliasBomb(t *testing.T) {
	src := "- reply: first\n- call: {analyze_user_request: " + hostile.AliasBomb(6, 9) + "}\n"
	err := hostile.Within(t, 10*time.Second, func() error { _, err := ParseScript([]byte(src), "bomb.yaml"); return err })
	var se *ScriptError
	if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "bomb.yaml:2: alias *l5 expands the document past 262144 values") {
		t.Fatalf("error = %v", err)
	}
	var doc struct {
		LLM []Reply `yaml:"llm"`
	}
	src = "llm:\n  - call: {a: " + hostile.AliasBomb(6, 9) + "}\n"
	err = hostile.Within(t, 10*time.Second, func() error { return yaml.Unmarshal([]byte(src), &doc) })
	if err == nil || !strings.Contains(err.Error(), "line 2: alias *l5 expands the document past") {
		t.Fatalf("UnmarshalYAML: %v", err)
	}
	if _, err := ParseScript([]byte(hostile.Huge(1<<20)), "huge.yaml"); err == nil || !strings.Contains(err.Error(), "more than the 1 MiB allowed") {
		t.Fatalf("huge: %v", err)
	}
}

func FuzzParseScript(f *testing.F) {
	seed, _ := os.ReadFile("testdata/script.yaml")
	f.Add(seed)
	f.Add([]byte("- call: {a: {b: [1, {c: *x}]}}\n"))
	f.Add([]byte("- &x {reply: hi}\n- *x\n"))
	f.Add([]byte("- call: {a: &x {b: *x}}\n"))
	f.Add([]byte("- call: {analyze_user_request: " + hostile.AliasBomb(6, 9) + "}\n"))
	f.Add([]byte("- call: {a: " + hostile.AliasBomb(3, 3) + "}\n"))
	f.Add([]byte(hostile.Huge(1 << 20)))
	f.Fuzz(func(t *testing.T, data []byte) {
		replies, err := ParseScript(data, "f.yaml")
		if err != nil {
			return
		}
		for _, r := range replies {
			for _, c := range r.Calls {
				if c.Name == "" {
					t.Fatalf("call without a name in %q", data)
				}
			}
		}
	})
}
