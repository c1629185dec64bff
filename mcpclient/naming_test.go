package mcpclient_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/mcpclient"
)

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestQualifiedName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		server, tool string
		want         string // exact, when the name needs no repair
		wantPrefix   string // otherwise: kept part before the hash
	}{
		{server: "upgrade", tool: "lookup", want: "mcp__upgrade__lookup"},
		{server: "up-grade_2", tool: "get-Item_3", want: "mcp__up-grade_2__get-Item_3"},
		{server: "fs", tool: "files.read", wantPrefix: "mcp__fs__files_read_"},
		{server: "fs", tool: "naïve tool", wantPrefix: "mcp__fs__na__ve_tool_"},
		{server: "fs", tool: long, wantPrefix: "mcp__fs__" + strings.Repeat("x", 64-9-9) + "_"},
		{server: "s", tool: strings.Repeat("y", 64-len("mcp__s__")), want: "mcp__s__" + strings.Repeat("y", 64-len("mcp__s__"))},
	}
	for _, tt := range tests {
		got := mcpclient.QualifiedName(tt.server, tt.tool)
		if !toolNameRE.MatchString(got) {
			t.Errorf("QualifiedName(%q, %q) = %q: not a valid function name", tt.server, tt.tool, got)
		}
		if again := mcpclient.QualifiedName(tt.server, tt.tool); again != got {
			t.Errorf("QualifiedName(%q, %q) is not stable: %q then %q", tt.server, tt.tool, got, again)
		}
		switch {
		case tt.want != "" && got != tt.want:
			t.Errorf("QualifiedName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		case tt.wantPrefix != "" && (!strings.HasPrefix(got, tt.wantPrefix) || len(got) != len(tt.wantPrefix)+8):
			t.Errorf("QualifiedName(%q, %q) = %q, want %q + 8 hex digits", tt.server, tt.tool, got, tt.wantPrefix)
		}
	}
	if a, b := mcpclient.QualifiedName("fs", "a.b"), mcpclient.QualifiedName("fs", "a_b"); a == b {
		t.Errorf("a.b and a_b share the name %q", a)
	}
	if a, b := mcpclient.QualifiedName("fs", long+"1"), mcpclient.QualifiedName("fs", long+"2"); a == b {
		t.Errorf("two long names that differ at the end share the name %q", a)
	}
}

func TestIdempotencyKey(t *testing.T) {
	k := mcpclient.IdempotencyKey("effect-1", "reports", "long_report")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(k) {
		t.Errorf("key %q: want 32 hex digits", k)
	}
	if k != mcpclient.IdempotencyKey("effect-1", "reports", "long_report") {
		t.Error("the key is not deterministic")
	}
	for _, other := range [][3]string{
		{"effect-2", "reports", "long_report"},
		{"effect-1", "other", "long_report"},
		{"effect-1", "reports", "echo"},
		{"effect-1r", "eports", "long_report"}, // separators matter
	} {
		if mcpclient.IdempotencyKey(other[0], other[1], other[2]) == k {
			t.Errorf("IdempotencyKey%v collides with the key of effect-1/reports/long_report", other)
		}
	}
}

func TestServerConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     mcpclient.ServerConfig
		wantErr string // "" = valid
	}{
		{"stdio", mcpclient.ServerConfig{Name: "fs", Command: "mcp-fs", Args: []string{"--root", "."}, Env: map[string]string{"A": "b"}}, ""},
		{"http", mcpclient.ServerConfig{Name: "remote_1", URL: "https://mcp.example.test/mcp", Headers: map[string]string{"Authorization": "Bearer x"}}, ""},
		{"empty name", mcpclient.ServerConfig{Command: "x"}, "name is empty"},
		{"bad characters", mcpclient.ServerConfig{Name: "my server", Command: "x"}, "letters, digits"},
		{"double underscore", mcpclient.ServerConfig{Name: "a__b", Command: "x"}, `"__"`},
		{"neither", mcpclient.ServerConfig{Name: "x"}, "either command"},
		{"both", mcpclient.ServerConfig{Name: "x", Command: "c", URL: "http://127.0.0.1/"}, "not both"},
		{"bad scheme", mcpclient.ServerConfig{Name: "x", URL: "ftp://host/"}, "http or https"},
		{"no host", mcpclient.ServerConfig{Name: "x", URL: "http:///mcp"}, "http or https"},
		{"env on url", mcpclient.ServerConfig{Name: "x", URL: "http://127.0.0.1/", Env: map[string]string{"A": "b"}}, "apply to a command"},
		{"headers on command", mcpclient.ServerConfig{Name: "x", Command: "c", Headers: map[string]string{"A": "b"}}, "apply to a url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
