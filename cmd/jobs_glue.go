package cmd

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
)

// jobRunner is the detached job runner over the state dir: long actions
// run in a worker process the turn does not wait for beyond --wait-jobs.
func jobRunner(f *Factory) (*jobs.Runner, error) {
	r, err := openJobs(f)
	if err != nil {
		return nil, err
	}
	o := f.opts()
	r.Exec = jobs.Exec{Args: workerArgs(o), Env: workerEnv(o, os.Environ())}
	return r, nil
}

// workerArgs are the global flags that make a worker reach the same UpGrade
// and state dir as this process. No secret may go here: a command line is
// visible to every user of the machine.
func workerArgs(o *GlobalOptions) []string {
	cfg := o.ConfigFile
	if cfg != "" {
		if abs, err := filepath.Abs(cfg); err == nil {
			cfg = abs
		}
	}
	// An explicit --config= (empty) reads no file, so the worker cannot
	// pick up a default config this process did not read.
	args := []string{"--state-dir", o.StateDir, "--config=" + cfg}
	if o.UpgradeURL != "" && !urlHasUserinfo(o.UpgradeURL) {
		args = append(args, "--upgrade-url", o.UpgradeURL)
	}
	if o.UpgradeTimeout > 0 {
		args = append(args, "--upgrade-timeout", o.UpgradeTimeout.String())
	}
	if o.Verbose {
		args = append(args, "--verbose")
	}
	return args
}

func urlHasUserinfo(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.User != nil
}

// workerEnv is the worker's environment: this process's, without the
// settings the flags fix and without the LLM key the worker has no use
// for, plus the UpGrade token this process resolved (from whichever
// source), which reaches the worker only this way.
func workerEnv(o *GlobalOptions, base []string) []string {
	drop := map[string]bool{
		"UPGRADE_API_TOKEN": true, "UPGRADE_API_URL": true, "UPGRADE_AGENT_HOME": true,
		"UPGRADE_AGENT_CONFIG": true, "UPGRADE_API_TIMEOUT": true, "UPGRADE_AGENT_LLM": true,
		"OPENAI_API_KEY": true, "UPGRADE_AGENT_STORE": true,
	}
	env := make([]string, 0, len(base)+2)
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			env = append(env, kv)
		}
	}
	if o.UpgradeToken != "" {
		env = append(env, "UPGRADE_API_TOKEN="+o.UpgradeToken)
	}
	if o.Team.Store != "" {
		env = append(env, "UPGRADE_AGENT_STORE="+o.Team.Store) // never on the command line: it may hold a password
	}
	if o.UpgradeURL != "" && urlHasUserinfo(o.UpgradeURL) {
		env = append(env, "UPGRADE_API_URL="+o.UpgradeURL)
	}
	return env
}
