package mcpclient

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMetaStatus(t *testing.T) {
	tests := []struct {
		body    string
		want    JobStatus
		wantErr bool
	}{
		{body: `{"state":"running","done":3,"total":10,"message":"3 of 10"}`, want: JobStatus{State: StateRunning, Done: 3, Total: 10, Message: "3 of 10"}},
		{body: `{"status":"completed"}`, want: JobStatus{State: StateSucceeded}},
		{body: `{"state":"queued","progress":{"done":1,"total":2}}`, want: JobStatus{State: StateRunning, Done: 1, Total: 2}},
		{body: `{"state":"error","error":"disk full"}`, want: JobStatus{State: StateFailed, Message: "disk full"}},
		{body: `{"state":"Canceled"}`, want: JobStatus{State: StateCancelled}},
		{body: `{"state":"exploded"}`, wantErr: true},
		{body: `{}`, wantErr: true},
		{body: `job is running`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseMetaStatus(json.RawMessage(tt.body))
		if tt.wantErr {
			if !errors.Is(err, ErrBadStatus) {
				t.Errorf("parseMetaStatus(%s) error = %v, want ErrBadStatus", tt.body, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseMetaStatus(%s): %v", tt.body, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseMetaStatus(%s) (-want +got):\n%s", tt.body, diff)
		}
	}
}

func TestParseJobAdvert(t *testing.T) {
	tests := []struct {
		meta    map[string]any
		want    int
		wantErr bool
	}{
		{meta: nil, want: 0},
		{meta: map[string]any{"other": 1}, want: 0},
		{meta: map[string]any{MetaKeyJob: map[string]any{"version": float64(2)}}, want: 2},
		{meta: map[string]any{MetaKeyJob: map[string]any{"version": float64(0)}}, wantErr: true},
		{meta: map[string]any{MetaKeyJob: map[string]any{"version": 1.5}}, wantErr: true},
		{meta: map[string]any{MetaKeyJob: map[string]any{"version": "1"}}, wantErr: true},
		{meta: map[string]any{MetaKeyJob: true}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseJobAdvert(tt.meta)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseJobAdvert(%v) = %d, %v; want %d, error %v", tt.meta, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestServerEnvPassesOnlyTheAllowListAndConfiguredValues(t *testing.T) {
	t.Setenv("PATH", "/usr/bin")
	t.Setenv("HOME", "/home/u")
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("UPGRADE_API_TOKEN", "tok-secret")
	t.Setenv("MCP_FS_TOKEN", "fs-token")

	env := serverEnv(map[string]string{"FS_TOKEN": "${MCP_FS_TOKEN}", "HOME": "/srv", "PRICE": "$5"})
	for _, want := range []string{"PATH=/usr/bin", "HOME=/srv", "FS_TOKEN=fs-token", "PRICE=$5"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %q: %q", want, env)
		}
	}
	for _, kv := range env {
		if strings.Contains(kv, "secret") || kv == "HOME=/home/u" {
			t.Errorf("env has %q", kv)
		}
	}
}

func TestExpandVars(t *testing.T) {
	t.Setenv("MCP_T", "abc")
	tests := map[string]string{
		"Bearer ${MCP_T}":   "Bearer abc",
		"${MCP_T}-${MCP_T}": "abc-abc",
		"${MCP_UNSET_VAR}x": "x",
		"$MCP_T and $":      "$MCP_T and $",
		"${unterminated":    "${unterminated",
	}
	for in, want := range tests {
		if got := expandVars(in); got != want {
			t.Errorf("expandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 8}
	for _, s := range []string{"hello ", "wonderful ", "world"} {
		_, _ = b.Write([]byte(s))
	}
	if got := b.String(); got != "ul world" {
		t.Errorf("tail = %q", got)
	}
	var none *tailBuffer
	if none.String() != "" {
		t.Error("a nil tail is not empty")
	}
}
