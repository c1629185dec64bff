package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/upgrade-agent/upgrade-agent/config"
)

func testFactory(t *testing.T, opts *GlobalOptions, env map[string]string) (*Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var out, errOut bytes.Buffer
	f := NewFactory(&IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, func(k string) string { return env[k] })
	if opts.Config == nil {
		opts.Config = &config.Config{}
	}
	if opts.Output == "" {
		opts.Output = "text"
	}
	f.Opts = opts
	return f, &out, &errOut
}

func TestLoggerRedacts(t *testing.T) {
	const token, key = "tok-0123456789", "sk-abcdefghijkl"
	for _, verbose := range []bool{false, true} {
		f, _, errOut := testFactory(t, &GlobalOptions{UpgradeToken: token, Verbose: verbose}, map[string]string{"OPENAI_API_KEY": key})
		log := f.Logger()
		log.Debug("request with "+token, "authorization", "Bearer "+token, "url", "http://h/?k="+key)
		log.Warn("retry", "err", fmt.Errorf("failed with %s", key), "api_key", "whatever", "authorization", "none",
			"prompt_tokens", 12, "nested", map[string]string{"k": token})
		got := errOut.String()
		for _, secret := range []string{token, key, "whatever"} {
			if strings.Contains(got, secret) {
				t.Errorf("verbose=%v: log leaks %q:\n%s", verbose, secret, got)
			}
		}
		if !strings.Contains(got, "retry") || !strings.Contains(got, "prompt_tokens=12") || !strings.Contains(got, "authorization=none") {
			t.Errorf("verbose=%v: warning or harmless attribute missing:\n%s", verbose, got)
		}
		if debug := strings.Contains(got, "request with"); debug != verbose {
			t.Errorf("verbose=%v: debug record shown=%v:\n%s", verbose, debug, got)
		}
	}
}

func TestStateDirCreated0700(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "state")
	f, _, _ := testFactory(t, &GlobalOptions{StateDir: dir}, nil)
	got, err := f.StateDir()
	if err != nil || got != dir {
		t.Fatalf("StateDir() = %q, %v", got, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("state dir mode = %o, want 700", perm)
	}

	f, _, _ = testFactory(t, &GlobalOptions{}, nil)
	_, err = f.StateDir()
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "UPGRADE_AGENT_HOME") {
		t.Errorf("no state dir: %v, want a usage error naming UPGRADE_AGENT_HOME", err)
	}
}

func TestSessionsKnowTheSecrets(t *testing.T) {
	f, _, _ := testFactory(t, &GlobalOptions{StateDir: t.TempDir(), UpgradeToken: "tok-0123456789"}, map[string]string{"OPENAI_API_KEY": "sk-abcdefghijkl"})
	s, err := f.fileSessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Secrets) != 2 {
		t.Errorf("store secrets = %d values, want the token and the key", len(s.Secrets))
	}
}

func TestUpgradeEmbeddedSimulator(t *testing.T) {
	state := t.TempDir()
	f, out, errOut := testFactory(t, &GlobalOptions{StateDir: state}, nil)
	ctx := context.Background()
	c, done, err := f.Upgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Health(ctx)
	done()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version == "" {
		t.Errorf("health: %+v", info)
	}
	want := "upgrade-agent: using the embedded UpGrade simulator (state in " + filepath.Join(state, "sim") + "); set UPGRADE_API_URL for a real server\n"
	if errOut.String() != want {
		t.Errorf("stderr = %q, want %q", errOut.String(), want)
	}
	if out.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", out.String())
	}
}

func TestUpgradeBadContextMetadataIsUsage(t *testing.T) {
	meta := filepath.Join(t.TempDir(), "meta.json")
	if err := os.WriteFile(meta, []byte(`{"ctx": {"CONDITIONS": 3}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _, _ := testFactory(t, &GlobalOptions{StateDir: t.TempDir(), Config: &config.Config{ContextMetadata: meta}}, nil)
	_, _, err := f.Upgrade(context.Background())
	if ExitCode(err) != 2 || !strings.Contains(err.Error(), "meta.json") {
		t.Errorf("err = %v (exit %d), want exit 2 naming the file", err, ExitCode(err))
	}
}
