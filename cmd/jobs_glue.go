package cmd

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
)

// configureJobs gives the agent the detached job runner over the state
// dir: long actions run in a worker process the turn does not wait for
// beyond --wait-jobs.
func configureJobs(f *Factory, a *pipeline.Agent, _ *checkpoint.FileStore) error {
	r, err := openJobs(f)
	if err != nil {
		return err
	}
	o := f.opts()
	r.Exec = jobs.Exec{Args: workerArgs(o), Env: workerEnv(o, os.Environ())}
	a.Jobs = r
	return nil
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
		"OPENAI_API_KEY": true,
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
	if o.UpgradeURL != "" && urlHasUserinfo(o.UpgradeURL) {
		env = append(env, "UPGRADE_API_URL="+o.UpgradeURL)
	}
	return env
}

// resumeJob continues a session suspended on a job. With wait > 0
// (resume --wait) it first waits for the job, showing progress, until it
// ends or wait has passed; then the agent checks the job once: finished,
// the turn completes; still running, the turn stays suspended (exit 11).
func resumeJob(ctx context.Context, f *Factory, env *turnEnv, sess *pipeline.Session, wait time.Duration) (*pipeline.Result, error) {
	ic := sess.CP.Interrupt
	if wait > 0 && ic != nil && ic.Kind == checkpoint.KindJob && ic.Job != nil && env.agent.Jobs != nil {
		if err := waitForJob(ctx, f, env.agent.Jobs, ic.Job.ID, wait); err != nil {
			return nil, jobInputError(err)
		}
	}
	res, err := env.agent.ResumeJob(ctx, sess, 0)
	if err != nil {
		return res, jobInputError(err)
	}
	return res, nil
}

// waitForJob polls the job about once a second until it ends or timeout
// has passed, showing its progress on stderr.
func waitForJob(ctx context.Context, f *Factory, jr pipeline.JobRunner, id string, timeout time.Duration) error {
	deadline := f.Now().Add(timeout)
	show := newJobProgress(f.IO.ErrOut, f.IO.StderrTTY, id, f.Now)
	defer show.finish()
	// The first check is immediate, so the progress shows at once.
	for first := true; ; first = false {
		step := min(time.Second, max(deadline.Sub(f.Now()), 0))
		if first {
			step = 0
		}
		st, err := jr.Wait(ctx, id, step)
		if err != nil {
			return fmt.Errorf("waiting for job %s: %w", id, err)
		}
		show.update(st)
		if st.Terminal() || !f.Now().Before(deadline) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// jobProgress shows a job's progress: a progress bar on a terminal, plain
// lines ("job ID: 120/500") otherwise, at most one a second, plus a final
// line when the job ends.
type jobProgress struct {
	w     io.Writer
	tty   bool
	id    string
	now   func() time.Time
	bar   *progressbar.ProgressBar
	last  time.Time
	shown string
}

func newJobProgress(w io.Writer, tty bool, id string, now func() time.Time) *jobProgress {
	return &jobProgress{w: w, tty: tty, id: id, now: now}
}

func (p *jobProgress) update(st pipeline.JobStatus) {
	if p.tty && st.Total > 0 {
		if p.bar == nil {
			p.bar = progressbar.NewOptions(st.Total,
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription("job "+p.id),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionSetWidth(30),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
			)
		}
		_ = p.bar.Set(st.Done)
		if st.Terminal() && st.State != jobs.StateSucceeded {
			_ = p.bar.Exit() // ends the bar's line
			p.bar = nil
			fmt.Fprintf(p.w, "job %s %s at %d/%d\n", p.id, st.State, st.Done, st.Total)
		}
		return
	}
	line := fmt.Sprintf("job %s: %d/%d", p.id, st.Done, st.Total)
	if st.Terminal() {
		line += " " + st.State
	}
	now := p.now()
	switch {
	case line == p.shown:
		return
	case !st.Terminal() && !p.last.IsZero() && now.Sub(p.last) < time.Second:
		return
	}
	fmt.Fprintln(p.w, line)
	p.shown, p.last = line, now
}

func (p *jobProgress) finish() {
	if p.bar != nil && !p.bar.IsFinished() {
		// Stopped early (timeout, Ctrl-C): end the bar's line.
		_ = p.bar.Exit()
	}
}
