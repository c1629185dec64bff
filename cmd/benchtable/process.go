package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// askScript is the information flow as an `--llm script:FILE`: the same four
// calls as a real "list my experiments" turn.
const askScript = `- call:
    analyze_user_request: {intent_type: needs_info, confidence: 0.9, user_request_summary: List the experiments., reasoning: Needs the experiment names.}
- call:
    get_experiment_names: {}
- reply: I have the names.
- reply: There are no experiments yet.
`

// askProcesses builds the binary once and times whole `ask` processes
// against the embedded simulator, each in the same temp state dir (a new
// session each time, the simulator's data file persisted there).
func askProcesses(ctx context.Context, root string, runs int) ([]row, error) {
	if runs < 3 {
		return nil, fmt.Errorf("-ask-runs must be at least 3")
	}
	a, err := newAskSetup(ctx, root, "benchtable-ask-")
	if err != nil {
		return nil, err
	}
	defer a.close()
	walls, peakKiB, err := a.timeAsks(ctx, filepath.Join(a.tmp, "state"), nil, runs)
	if err != nil {
		return nil, err
	}
	med := percentile(walls, 0.5)
	rows := []row{
		{fmt.Sprintf("whole `ask` process, info flow (4 scripted calls on loopback, embedded simulator, checkpoints with fsync; state dir in %s), %d runs", os.TempDir(), runs),
			fmt.Sprintf("median %s, p90 %s", ms(med), ms(percentile(walls, 0.9))), "median <= 30 ms", pass(med <= 30*time.Millisecond)},
	}
	if shm, err := os.MkdirTemp("/dev/shm", "benchtable-ask-"); err == nil {
		defer os.RemoveAll(shm)
		w, _, err := a.timeAsks(ctx, filepath.Join(shm, "state"), nil, runs)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{"whole `ask` process, the same with the state dir on tmpfs (fsync nearly free)",
			fmt.Sprintf("median %s, p90 %s", ms(percentile(w, 0.5)), ms(percentile(w, 0.9))), "-", info})
	}
	if peakKiB > 0 {
		rows = append(rows, row{"whole `ask` process: peak RSS (ru_maxrss, largest of the runs)",
			fmt.Sprintf("%.1f MiB", float64(peakKiB)/1024), "<= 40 MiB", pass(peakKiB <= 40*1024)})
	} else {
		rows = append(rows, row{"whole `ask` process: peak RSS", "not available on this OS", "<= 40 MiB", "MISS"})
	}
	return rows, nil
}

// askSetup is the binary built once, the info flow's script and a clean
// environment, all in one temp dir, for timing whole processes.
type askSetup struct {
	tmp, bin, script string
	env              []string
}

// newAskSetup builds the binary of root into a new temp dir named with
// prefix; close removes it.
func newAskSetup(ctx context.Context, root, prefix string) (*askSetup, error) {
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	a := &askSetup{
		tmp:    tmp,
		bin:    filepath.Join(tmp, "upgrade-agent"),
		script: filepath.Join(tmp, "script.yaml"),
		env: []string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + tmp,
			"XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"), // no config file
			"NO_COLOR=1",
		},
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", a.bin, ".")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as `make build` builds it
	if out, err := build.CombinedOutput(); err != nil {
		a.close()
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	if err := os.WriteFile(a.script, []byte(askScript), 0o600); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

func (a *askSetup) close() { os.RemoveAll(a.tmp) }

// timeAsks runs `ask` runs times (after two warm-up runs that pay for the
// page cache and create the simulator's data file) in one state dir, a new
// session each time, with extraEnv added to the environment, and returns
// the wall times and the peak RSS in KiB.
func (a *askSetup) timeAsks(ctx context.Context, state string, extraEnv []string, runs int) ([]time.Duration, int64, error) {
	env := append(slices.Clip(a.env), extraEnv...)
	var walls []time.Duration
	var peakKiB int64
	const warmup = 2
	for i := range runs + warmup {
		cmd := exec.CommandContext(ctx, a.bin, "ask", "--state-dir", state, "--llm", "script:"+a.script, "List my experiments.")
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if err != nil {
			return nil, 0, fmt.Errorf("run %d: %v\nstdout: %s\nstderr: %s", i+1, err, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), "no experiments yet") {
			return nil, 0, fmt.Errorf("run %d: unexpected output %q", i+1, stdout.String())
		}
		if i < warmup {
			continue
		}
		walls = append(walls, wall)
		peakKiB = max(peakKiB, maxRSSKiB(cmd.ProcessState))
	}
	return walls, peakKiB, nil
}
