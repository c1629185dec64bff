package cmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"

	"github.com/upgrade-agent/upgrade-agent/config"
)

// resolveFor parses args as global flags and resolves them against env.
func resolveFor(t *testing.T, args []string, env map[string]string) (*GlobalOptions, error) {
	t.Helper()
	var g globalFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	bindGlobalFlags(fs, &g)
	if err := fs.Parse(args); err != nil {
		return nil, &FlagError{Err: err}
	}
	return resolveGlobals(&g, fs.Changed, func(k string) string { return env[k] })
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestResolveGlobalsPrecedence(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	cfgFile := writeFile(t, filepath.Join(dir, "cfg", "config.yaml"), `
state_dir: cfgstate
upgrade_url: http://config.test/api
upgrade_token: config-token
upgrade_timeout: 10s
llm: replay:cassette.json
llm_base_url: http://config-llm.test/v1
model: config-model
output: yaml
no_color: true
`)
	xdgCfg := filepath.Join(dir, "xdg")
	xdgFile := writeFile(t, filepath.Join(xdgCfg, "upgrade-agent", "config.yaml"), "model: xdg-model\n")
	cfgDir := filepath.Dir(cfgFile)

	defaults := GlobalOptions{
		StateDir:       filepath.Join(home, ".local/state/upgrade-agent"),
		UpgradeTimeout: 30 * time.Second,
		LLMSpec:        "openai",
		Output:         "text",
	}
	fromConfig := GlobalOptions{
		ConfigFile:     cfgFile,
		StateDir:       filepath.Join(cfgDir, "cfgstate"),
		UpgradeURL:     "http://config.test/api",
		UpgradeToken:   "config-token",
		UpgradeTimeout: 10 * time.Second,
		LLMSpec:        "replay:" + filepath.Join(cfgDir, "cassette.json"),
		LLMBaseURL:     "http://config-llm.test/v1",
		Model:          "config-model",
		Output:         "yaml",
		NoColor:        true,
	}
	env := map[string]string{
		"UPGRADE_AGENT_HOME":  "/env/state",
		"UPGRADE_API_URL":     "https://env.test/api",
		"UPGRADE_API_TOKEN":   "env-token",
		"UPGRADE_API_TIMEOUT": "20s",
		"UPGRADE_AGENT_LLM":   "script:/env/script.yaml",
		"OPENAI_BASE_URL":     "http://env-llm.test/v1",
		"UPGRADE_AGENT_MODEL": "env-model",
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{"HOME": home}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	flags := []string{
		"--state-dir", "/flag/state", "--upgrade-url", "http://flag.test:8080/api", "--upgrade-token", "flag-token",
		"--upgrade-timeout", "5s", "--llm", "record:/flag/c.json", "--llm-base-url", "http://flag-llm.test/v1",
		"--model", "flag-model", "-o", "json", "-v", "--no-color",
	}

	tests := []struct {
		name string
		args []string
		env  map[string]string
		want GlobalOptions
	}{
		{name: "defaults", env: with(nil), want: defaults},
		{
			name: "XDG state home",
			env:  with(nil, "XDG_STATE_HOME", "/xdg/state"),
			want: func() GlobalOptions { o := defaults; o.StateDir = "/xdg/state/upgrade-agent"; return o }(),
		},
		{
			name: "relative XDG state home is ignored",
			env:  with(nil, "XDG_STATE_HOME", "rel"),
			want: defaults,
		},
		{
			name: "default config file in XDG_CONFIG_HOME",
			env:  with(nil, "XDG_CONFIG_HOME", xdgCfg),
			want: func() GlobalOptions { o := defaults; o.ConfigFile = xdgFile; o.Model = "xdg-model"; return o }(),
		},
		{name: "config file from the environment", env: with(nil, "UPGRADE_AGENT_CONFIG", cfgFile), want: fromConfig},
		{name: "config file from the flag", args: []string{"--config", cfgFile}, env: with(nil), want: fromConfig},
		{
			name: "flag beats the config variable",
			args: []string{"--config", ""},
			env:  with(nil, "UPGRADE_AGENT_CONFIG", cfgFile),
			want: defaults,
		},
		{
			name: "environment beats config",
			env:  with(env, "UPGRADE_AGENT_CONFIG", cfgFile),
			want: GlobalOptions{
				ConfigFile:     cfgFile,
				StateDir:       "/env/state",
				UpgradeURL:     "https://env.test/api",
				UpgradeToken:   "env-token",
				UpgradeTimeout: 20 * time.Second,
				LLMSpec:        "script:/env/script.yaml",
				LLMBaseURL:     "http://env-llm.test/v1",
				Model:          "env-model",
				Output:         "yaml", // no environment variable for the output
				NoColor:        true,
			},
		},
		{
			name: "flags beat everything",
			args: flags,
			env:  with(env, "UPGRADE_AGENT_CONFIG", cfgFile, "NO_COLOR", "1"),
			want: GlobalOptions{
				ConfigFile:     cfgFile,
				StateDir:       "/flag/state",
				UpgradeURL:     "http://flag.test:8080/api",
				UpgradeToken:   "flag-token",
				UpgradeTimeout: 5 * time.Second,
				LLMSpec:        "record:/flag/c.json",
				LLMBaseURL:     "http://flag-llm.test/v1",
				Model:          "flag-model",
				Output:         "json",
				Verbose:        true,
				NoColor:        true,
			},
		},
		{
			name: "NO_COLOR alone",
			env:  with(nil, "NO_COLOR", "1"),
			want: func() GlobalOptions { o := defaults; o.NoColor = true; return o }(),
		},
		{
			name: "zero timeout flag keeps zero",
			args: []string{"--upgrade-timeout", "0s"},
			env:  with(nil, "UPGRADE_API_TIMEOUT", "20s"),
			want: func() GlobalOptions { o := defaults; o.UpgradeTimeout = 0; return o }(),
		},
		{
			name: "no HOME: no state dir yet",
			env:  map[string]string{},
			want: func() GlobalOptions { o := defaults; o.StateDir = ""; return o }(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveFor(t, tt.args, tt.env)
			if err != nil {
				t.Fatalf("resolve: %v", err)
			}
			if got.Config == nil {
				t.Fatal("Config is nil")
			}
			if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(GlobalOptions{}, "Config", "Team")); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveGlobalsRelativeStateDir(t *testing.T) {
	got, err := resolveFor(t, []string{"--state-dir", "rel/state"}, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if want := filepath.Join(wd, "rel/state"); got.StateDir != want {
		t.Errorf("StateDir = %q, want %q", got.StateDir, want)
	}
}

func TestResolveGlobalsErrors(t *testing.T) {
	dir := t.TempDir()
	badCfg := writeFile(t, filepath.Join(dir, "bad.yaml"), "model: m\nupgrade_urll: http://x/api\n")
	badValue := writeFile(t, filepath.Join(dir, "badvalue.yaml"), "\n\nupgrade_timeout: soon\n")
	missing := filepath.Join(dir, "missing.yaml")

	type kind int
	const (
		flagErr kind = iota
		usageErr
		configErr
	)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		kind kind
		want string
	}{
		{"bad url flag", []string{"--upgrade-url", "localhost:3030"}, nil, flagErr,
			`invalid --upgrade-url: "localhost:3030" is not an http or https URL (want http://HOST[:PORT]/PATH)`},
		{"bad url env", nil, map[string]string{"UPGRADE_API_URL": "http://"}, usageErr,
			`invalid UPGRADE_API_URL: "http:" has no host (want http://HOST[:PORT]/PATH)`},
		{"bad llm base url env", nil, map[string]string{"OPENAI_BASE_URL": "api.openai.com"}, usageErr,
			`invalid OPENAI_BASE_URL: "api.openai.com" is not an http or https URL (want http://HOST[:PORT]/PATH)`},
		{"bad timeout flag", []string{"--upgrade-timeout", "soon"}, nil, flagErr,
			`invalid argument "soon" for "--upgrade-timeout" flag: time: invalid duration "soon"`},
		{"negative timeout flag", []string{"--upgrade-timeout", "-1s"}, nil, flagErr,
			`invalid --upgrade-timeout: must not be negative`},
		{"bad timeout env", nil, map[string]string{"UPGRADE_API_TIMEOUT": "30"}, usageErr,
			`invalid UPGRADE_API_TIMEOUT: "30" is not a duration (use Go syntax such as 30s or 2m)`},
		{"bad llm flag", []string{"--llm", "gpt-4"}, nil, flagErr,
			`invalid --llm: "gpt-4" is not one of openai, script:FILE, replay:FILE, record:FILE`},
		{"bad llm env", nil, map[string]string{"UPGRADE_AGENT_LLM": "script:"}, usageErr,
			`invalid UPGRADE_AGENT_LLM: "script:" names no file (want script:FILE)`},
		{"bad output", []string{"-o", "xml"}, nil, flagErr,
			`invalid --output: "xml" is not one of text, json, yaml, wide, raw`},
		{"unknown config key", []string{"--config", badCfg}, nil, configErr,
			"config " + badCfg + `:2: upgrade_urll: unknown key "upgrade_urll"`},
		{"bad config value", nil, map[string]string{"UPGRADE_AGENT_CONFIG": badValue}, configErr,
			"config " + badValue + `:3: upgrade_timeout: invalid duration "soon" (use Go syntax such as 30s, 2m or 1h30m)`},
		{"missing explicit config", []string{"--config", missing}, nil, configErr,
			"config " + missing + ": file not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolveFor(t, tt.args, tt.env)
			if err == nil {
				t.Fatal("resolve succeeded")
			}
			if err.Error() != tt.want {
				t.Errorf("message:\n got %s\nwant %s", err, tt.want)
			}
			var (
				fe *FlagError
				ue *UsageError
				ce *config.Error
			)
			switch tt.kind {
			case flagErr:
				if !errors.As(err, &fe) {
					t.Errorf("error %T is not a *FlagError", err)
				}
			case usageErr:
				if !errors.As(err, &ue) {
					t.Errorf("error %T is not a *UsageError", err)
				}
			case configErr:
				if !errors.As(err, &ce) {
					t.Errorf("error %T is not a *config.Error", err)
				}
			}
			if code := ExitCode(err); code != 2 {
				t.Errorf("ExitCode = %d, want 2", code)
			}
		})
	}
}

func TestDefaultConfigMissingIsFine(t *testing.T) {
	_, err := resolveFor(t, nil, map[string]string{"XDG_CONFIG_HOME": t.TempDir(), "HOME": "/nowhere"})
	if err != nil {
		t.Fatalf("a missing default config must be ignored: %v", err)
	}
}

func TestSecretsNeverInResolveErrors(t *testing.T) {
	// The token is accepted as is; a URL with a password is reported
	// without it.
	_, err := resolveFor(t, []string{"--upgrade-url", "ftp://user:hunter2-secret@host/api"}, nil)
	if err == nil || strings.Contains(err.Error(), "hunter2-secret") {
		t.Fatalf("error leaks the password or is missing: %v", err)
	}
}
