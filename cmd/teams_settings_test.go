package cmd

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/store/pgstore"
)

func TestResolveTeamSettings(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "config.yaml"), "store: postgres://cfg:cfgpw-123456@db.example/team\nactor: cfg-actor\napproval_ttl: 0s\n")
	const envURL = "postgresql://env:envpw-123456@127.0.0.1/team"
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		store string
		actor string
		ttl   time.Duration
	}{
		{"defaults", nil, map[string]string{"USER": "alice"}, "", "alice@", DefaultApprovalTTL},
		{"config", []string{"--config", cfg}, map[string]string{"USER": "alice"}, "postgres://cfg:cfgpw-123456@db.example/team", "cfg-actor", 0},
		{"environment over config", []string{"--config", cfg}, map[string]string{"UPGRADE_AGENT_STORE": envURL, "UPGRADE_AGENT_ACTOR": " ci@runner"},
			envURL, " ci@runner", 0},
		{"flag over environment", []string{"--config", cfg, "--store", "postgres://flag@localhost/x"}, map[string]string{"UPGRADE_AGENT_STORE": envURL},
			"postgres://flag@localhost/x", "cfg-actor", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := resolveFor(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if o.Team.Store != tt.store || !strings.HasPrefix(o.Team.Actor, tt.actor) || o.Team.ApprovalTTL != tt.ttl {
				t.Errorf("team settings %+v, want store %q actor %q... ttl %v", o.Team, tt.store, tt.actor, tt.ttl)
			}
		})
	}
}

func TestStoreSettingRefusedWithoutEchoingIt(t *testing.T) {
	for _, bad := range []string{"mysql://u:hunter2-secret@h/db", "hunter2-secret", "file:///tmp/x"} {
		_, err := resolveFor(t, nil, map[string]string{"UPGRADE_AGENT_STORE": bad})
		var ue *UsageError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "UPGRADE_AGENT_STORE") {
			t.Errorf("store %q: %v, want a usage error naming the variable and not the value", bad, err)
		}
	}
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "config.yaml"), "store: redis://u:hunter2-secret@h\n")
	if _, err := resolveFor(t, []string{"--config", cfg}, nil); err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), ":1") {
		t.Errorf("config store: %v, want an error naming the line, not the value", err)
	}
}

func TestStorePasswordIsASecret(t *testing.T) {
	o := &GlobalOptions{Team: TeamOptions{Store: "postgres://u:pw-0123456789@127.0.0.1/db"}}
	f, _, _ := testFactory(t, o, nil)
	found := false
	for _, s := range f.Secrets() {
		found = found || s == "pw-0123456789"
	}
	if !found {
		t.Error("the store password is not among the secrets the logger and stores redact")
	}
	if r := pgstore.Redacted(o.Team.Store); strings.Contains(r, "pw-0123456789") {
		t.Errorf("Redacted = %q", r)
	}
	env := workerEnv(o, []string{"UPGRADE_AGENT_STORE=postgres://stale@x/y"})
	args := workerArgs(o)
	if strings.Contains(strings.Join(args, " "), "pw-0123456789") {
		t.Errorf("worker args carry the store: %v", args)
	}
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, "UPGRADE_AGENT_STORE=") {
			n++
			if kv != "UPGRADE_AGENT_STORE="+o.Team.Store {
				t.Errorf("worker env %q", kv)
			}
		}
	}
	if n != 1 {
		t.Errorf("worker env has the store %d times, want once", n)
	}
}
