package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/upgrade-agent/upgrade-agent/internal/hostile"
)

func ptr[T any](v T) *T { return &v }

func TestParseValid(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	tests := []struct {
		name string
		yaml string
		want *Config
	}{
		{name: "empty file", yaml: "", want: &Config{File: file}},
		{name: "only comments", yaml: "# nothing\n", want: &Config{File: file}},
		{name: "null document", yaml: "~\n", want: &Config{File: file}},
		{
			name: "every key",
			yaml: `
state_dir: state
upgrade_url: http://localhost:3030/api
upgrade_token: tok
upgrade_timeout: 45s
client_api_key: key
client_api_secret: secret
llm: script:replies.yaml
llm_base_url: https://example.test/v1
model: gpt-4o-mini
azure_api_version: "2024-06-01"
llm_timeout: 2m
output: json
no_color: true
confirm: destructive
wait_jobs: 0s
output_schema: /abs/schema.json
conversational_outputs: true
max_auto_replies: 3
termination_words: [bye, TERMINATE]
replies:
  - pattern: "^thanks"
    reply: "You are welcome."
mcp_servers:
  - name: local
    command: ./bin/server
    args: ["-v"]
    env: {A: "1"}
  - name: path
    command: npx
  - name: remote
    url: https://mcp.example.test/mcp
    headers: {X-Team: a}
context_metadata: meta/contexts.json
sim_seed: 42
trace: traces/run.jsonl
trace_content: true
`,
			want: &Config{
				File:                  file,
				StateDir:              filepath.Join(dir, "state"),
				UpgradeURL:            "http://localhost:3030/api",
				UpgradeToken:          "tok",
				UpgradeTimeout:        45 * time.Second,
				ClientAPIKey:          "key",
				ClientAPISecret:       "secret",
				LLM:                   "script:" + filepath.Join(dir, "replies.yaml"),
				LLMBaseURL:            "https://example.test/v1",
				Model:                 "gpt-4o-mini",
				AzureAPIVersion:       "2024-06-01",
				LLMTimeout:            2 * time.Minute,
				Output:                "json",
				NoColor:               true,
				Confirm:               "destructive",
				WaitJobs:              ptr(time.Duration(0)),
				OutputSchema:          "/abs/schema.json",
				ConversationalOutputs: true,
				MaxAutoReplies:        ptr(3),
				TerminationWords:      []string{"bye", "TERMINATE"},
				Replies:               []Reply{{Pattern: "^thanks", Reply: "You are welcome.", Regexp: regexp.MustCompile("^thanks")}},
				MCPServers: []MCPServer{
					{Name: "local", Command: filepath.Join(dir, "bin/server"), Args: []string{"-v"}, Env: map[string]string{"A": "1"}},
					{Name: "path", Command: "npx"},
					{Name: "remote", URL: "https://mcp.example.test/mcp", Headers: map[string]string{"X-Team": "a"}},
				},
				ContextMetadata: filepath.Join(dir, "meta/contexts.json"),
				SimSeed:         ptr(int64(42)),
				Trace:           filepath.Join(dir, "traces/run.jsonl"),
				TraceContent:    true,
			},
		},
		{name: "openai spec is not a path", yaml: "llm: openai\n", want: &Config{File: file, LLM: "openai"}},
	}
	cmpRegexp := cmp.Comparer(func(a, b *regexp.Regexp) bool {
		return (a == nil) == (b == nil) && (a == nil || a.String() == b.String())
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml), file)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpRegexp); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const file = "/etc/ua/config.yaml"
	tests := []struct {
		name string
		yaml string
		want []string // one line per problem
	}{
		{
			name: "unknown key",
			yaml: "model: x\nmodle: y\n",
			want: []string{`config /etc/ua/config.yaml:2: modle: unknown key "modle"`},
		},
		{
			name: "unknown nested key",
			yaml: "replies:\n  - pattern: a\n    reply: b\n  - patern: c\n    reply: d\n",
			want: []string{`config /etc/ua/config.yaml:4: replies[1].patern: unknown key "patern"`},
		},
		{
			name: "bad duration",
			yaml: "upgrade_timeout: soon\n",
			want: []string{`config /etc/ua/config.yaml:1: upgrade_timeout: invalid duration "soon" (use Go syntax such as 30s, 2m or 1h30m)`},
		},
		{
			name: "number is not a duration",
			yaml: "\nllm_timeout: 30\n",
			want: []string{`config /etc/ua/config.yaml:2: llm_timeout: invalid duration "30" (use Go syntax such as 30s, 2m or 1h30m)`},
		},
		{
			name: "negative duration",
			yaml: "wait_jobs: -1s\n",
			want: []string{`config /etc/ua/config.yaml:1: wait_jobs: must not be negative`},
		},
		{
			name: "wrong type",
			yaml: "max_auto_replies: many\n",
			want: []string{`config /etc/ua/config.yaml:1: max_auto_replies: expected an integer, got "many"`},
		},
		{
			name: "list where a string goes",
			yaml: "model: [a, b]\n",
			want: []string{`config /etc/ua/config.yaml:1: model: expected a string, got a list`},
		},
		{
			name: "list item of the wrong type",
			yaml: "termination_words:\n  - bye\n  - [a]\n",
			want: []string{`config /etc/ua/config.yaml:3: termination_words[1]: expected a string, got a list`},
		},
		{
			name: "client key without secret",
			yaml: "model: m\nclient_api_key: k\n",
			want: []string{`config /etc/ua/config.yaml:2: client_api_key: needs client_api_secret as well`},
		},
		{
			name: "bad enum",
			yaml: "confirm: sometimes\n",
			want: []string{`config /etc/ua/config.yaml:1: confirm: "sometimes" is not one of always, destructive, never`},
		},
		{
			name: "bad output",
			yaml: "output: xml\n",
			want: []string{`config /etc/ua/config.yaml:1: output: "xml" is not one of text, json, yaml, wide, raw`},
		},
		{
			name: "bad url",
			yaml: "upgrade_url: localhost:3030\n",
			want: []string{`config /etc/ua/config.yaml:1: upgrade_url: "localhost:3030" is not an http or https URL (want http://HOST[:PORT]/PATH)`},
		},
		{
			name: "url without host",
			yaml: "llm_base_url: http:///v1\n",
			want: []string{`config /etc/ua/config.yaml:1: llm_base_url: "http:///v1" has no host (want http://HOST[:PORT]/PATH)`},
		},
		{
			name: "bad llm spec",
			yaml: "llm: claude\n",
			want: []string{`config /etc/ua/config.yaml:1: llm: "claude" is not one of openai, script:FILE, replay:FILE, record:FILE`},
		},
		{
			name: "llm spec without file",
			yaml: "llm: 'script:'\n",
			want: []string{`config /etc/ua/config.yaml:1: llm: "script:" names no file (want script:FILE)`},
		},
		{
			name: "bad regexp",
			yaml: "replies:\n  - pattern: '(['\n    reply: x\n",
			want: []string{"config /etc/ua/config.yaml:2: replies[0].pattern: invalid regular expression: error parsing regexp: missing closing ]: `[`"},
		},
		{
			name: "reply without reply",
			yaml: "replies:\n  - pattern: a\n",
			want: []string{`config /etc/ua/config.yaml:2: replies[0]: reply is required`},
		},
		{
			name: "mcp server with both",
			yaml: "mcp_servers:\n  - name: a\n    command: x\n    url: http://h/\n",
			want: []string{`config /etc/ua/config.yaml:2: mcp_servers[0]: has both command and url; keep one`},
		},
		{
			name: "mcp duplicate name",
			yaml: "mcp_servers:\n  - {name: a, command: x}\n  - {name: a, command: y}\n",
			want: []string{`config /etc/ua/config.yaml:3: mcp_servers[1].name: duplicate server name "a"`},
		},
		{
			name: "empty termination word",
			yaml: "termination_words: [bye, '']\n",
			want: []string{`config /etc/ua/config.yaml:1: termination_words[1]: must not be empty`},
		},
		{
			name: "syntax error",
			yaml: "model: x\n  bad: : y\n",
			want: []string{`config /etc/ua/config.yaml:2: invalid YAML: mapping values are not allowed in this context`},
		},
		{
			name: "duplicate key",
			yaml: "model: a\nmodel: b\n",
			want: []string{`config /etc/ua/config.yaml:2: model: mapping key "model" already defined at line 1`},
		},
		{
			name: "two documents",
			yaml: "model: a\n---\nmodel: b\n",
			want: []string{`config /etc/ua/config.yaml:2: only one YAML document is allowed`},
		},
		{
			name: "not a mapping",
			yaml: "- a\n- b\n",
			want: []string{`config /etc/ua/config.yaml:1: expected a mapping, got a list`},
		},
		{
			name: "several problems in line order",
			yaml: "output: xml\nconfirm: maybe\nupgrade_timeout: x\n",
			want: []string{
				`config /etc/ua/config.yaml:3: upgrade_timeout: invalid duration "x" (use Go syntax such as 30s, 2m or 1h30m)`,
			},
		},
		{
			name: "validation problems sorted",
			yaml: "output: xml\nconfirm: maybe\n",
			want: []string{
				`config /etc/ua/config.yaml:1: output: "xml" is not one of text, json, yaml, wide, raw`,
				`config /etc/ua/config.yaml:2: confirm: "maybe" is not one of always, destructive, never`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), file)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", cfg)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
			if diff := cmp.Diff(tt.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecretsNotInErrors(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, y := range []string{
		"upgrade_token: " + secret + "\nbogus: 1\n",
		"client_api_secret: " + secret + "\nconfirm: x\n",
		"upgrade_token: [" + secret + "]\n",
		"upgrade_url: http://user:" + secret + "@/api\n",
	} {
		_, err := Parse([]byte(y), "c.yaml")
		if err == nil {
			t.Fatalf("Parse(%q) succeeded", y)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error for %q leaks the secret: %v", y, err)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")

	cfg, err := Load(missing, false)
	if err != nil {
		t.Fatalf("Load(default, missing): %v", err)
	}
	if diff := cmp.Diff(&Config{}, cfg, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("missing default config (-want +got):\n%s", diff)
	}

	_, err = Load(missing, true)
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(explicit, missing) = %v, want a *config.Error wrapping fs.ErrNotExist", err)
	}
	if want := "config " + missing + ": file not found"; err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}

	present := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(present, []byte("model: m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(present, false)
	if err != nil {
		t.Fatalf("Load(present): %v", err)
	}
	if cfg.Model != "m" || cfg.File != present {
		t.Errorf("Load(present) = %+v", cfg)
	}
}

func TestValidateLLMSpec(t *testing.T) {
	for spec, ok := range map[string]bool{
		"openai": true, "script:a.yaml": true, "replay:/x/c.json": true, "record:c.json": true,
		"": false, "OpenAI": false, "script:": false, "script: ": false, "gpt": false, "file:x": false,
	} {
		if err := ValidateLLMSpec(spec); (err == nil) != ok {
			t.Errorf("ValidateLLMSpec(%q) = %v, want ok=%v", spec, err, ok)
		}
	}
}

// TestHostileConfig: an alias bomb, a cycle, a huge file and a named pipe
// are refused at once with the file (and line) named (issue 15.7).
func TestHostileConfig(t *testing.T) {
	for name, tt := range map[string]struct{ yaml, want string }{
		"bomb":  {"model: x\ntermination_words: " + hostile.AliasBomb(6, 9) + "\n", "config f.yaml:2: alias *l5 expands the document past 262144 values"},
		"cycle": {"mcp_servers: &s [{name: a, args: *s}]\n", "config f.yaml:1: alias *s refers to a value that contains it"},
		"huge":  {hostile.Huge(1 << 20), "config f.yaml: the document is 1048580 bytes, more than the 1 MiB allowed"},
	} {
		_, err := Parse([]byte(tt.yaml), "f.yaml")
		var ce *Error
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want %q", name, err, tt.want)
		}
	}
	fifo := filepath.Join(t.TempDir(), "config.yaml")
	hostile.FIFO(t, fifo)
	for _, explicit := range []bool{true, false} {
		err := hostile.Within(t, 10*time.Second, func() error { _, err := Load(fifo, explicit); return err })
		if err == nil || !strings.Contains(err.Error(), "is a named pipe (FIFO), not a regular file") {
			t.Errorf("fifo (explicit %v): %v", explicit, err)
		}
	}
}

func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"", "model: x\n", "replies:\n  - pattern: '(['\n", "a: [\n", "- 1\n", "upgrade_timeout: 1h\n",
		"mcp_servers: [{name: a, url: 'http://h'}]\n", "&a [*a]\n",
		"termination_words: " + hostile.AliasBomb(6, 9) + "\n", "replies: " + hostile.AliasBomb(3, 3) + "\n",
		"mcp_servers: &s [{name: a, args: *s}]\n", hostile.Huge(1 << 20),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse returned cfg=%v err=%v: exactly one must be set", cfg, err)
		}
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
		}
	})
}
