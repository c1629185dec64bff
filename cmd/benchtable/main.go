// Command benchtable measures every performance figure of spec/quality.md in
// one run and prints them as one table, each with its target and a PASS or
// MISS mark. `make bench` runs it. Ratios (prompt tokens against the original
// design, the balance job pool against one call at a time) are measured in
// the same run, because a number from another run on a noisy machine means
// nothing.
//
// It is a measuring tool, not a test: it never fails on a MISS (the table
// says so), only when a measurement cannot be taken at all. It must not
// touch the caller's state dir or config: every run works in temp dirs.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// row is one line of the table.
type row struct {
	figure, measured, target, mark string
}

func pass(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// info marks a row that has no target of its own (context for the row above).
const info = "info"

type options struct {
	askRuns   int
	turns     int
	rpsWindow time.Duration
	scenarios string
	verbose   bool
	profile   string
	// flowsOnly measures the scenario flows alone (LLM calls, prompt
	// sizes), without the processes, stores and load figures.
	flowsOnly bool
	// startupOnly measures the start-up figures alone.
	startupOnly bool
}

func main() {
	var o options
	flag.IntVar(&o.askRuns, "ask-runs", 25, "how many `ask` processes to time")
	flag.IntVar(&o.turns, "turns", 1000, "length of the synthetic long session")
	flag.DurationVar(&o.rpsWindow, "rps-window", 2*time.Second, "how long to load the simulator with v6/assign")
	flag.StringVar(&o.scenarios, "scenarios", "scenarios", "folder of the scenario suite")
	flag.BoolVar(&o.verbose, "v", false, "list how every scenario step was classified, on stderr")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the long session to `file`")
	flag.BoolVar(&o.flowsOnly, "flows", false, "measure only the scenario flows (LLM calls, prompt sizes, token ratios against the original design)")
	flag.BoolVar(&o.startupOnly, "startup", false, "measure only the start-up figures (`version` against hello-worlds, package init)")
	flag.Parse()

	start := time.Now()
	rows, err := run(context.Background(), o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, rows, time.Since(start))
}

// run takes every measurement, logging progress to log.
func run(ctx context.Context, o options, log io.Writer) ([]row, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	var rows []row
	var steps io.Writer
	if o.verbose {
		steps = log
	}
	if o.flowsOnly {
		fmt.Fprintln(log, "benchtable: scenario suite only (LLM calls and prompt characters per flow)...")
		return scenarioFlows(ctx, filepath.Join(root, o.scenarios), steps)
	}
	if o.startupOnly {
		fmt.Fprintln(log, "benchtable: start-up only (`version` against hello-worlds, package init)...")
		return startupFigures(ctx, root, o.askRuns)
	}

	fmt.Fprintln(log, "benchtable: synthetic long session (prompt size, overhead, checkpoint)...")
	ls, err := longSession(ctx, o.turns, o.profile)
	if err != nil {
		return nil, fmt.Errorf("long session: %w", err)
	}

	fmt.Fprintln(log, "benchtable: scenario suite (LLM calls and prompt tokens per flow)...")
	fr, err := scenarioFlows(ctx, filepath.Join(root, o.scenarios), steps)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	rows = append(rows, fr...)
	rows = append(rows, ls.rows...)

	fmt.Fprintln(log, "benchtable: a scripted turn with tracing off and on...")
	tf, err := tracingFigures(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	rows = append(rows, tf...)

	fmt.Fprintln(log, "benchtable: whole `ask` processes...")
	ar, err := askProcesses(ctx, root, o.askRuns)
	if err != nil {
		return nil, fmt.Errorf("ask processes: %w", err)
	}
	rows = append(rows, ar...)

	fmt.Fprintln(log, "benchtable: start-up (`version` against a hello-world, package init)...")
	st, err := startupFigures(ctx, root, o.askRuns)
	if err != nil {
		return nil, fmt.Errorf("start-up: %w", err)
	}
	rows = append(rows, st...)

	fmt.Fprintln(log, "benchtable: checkpoint of the long session...")
	cr, err := checkpointFigures(ls)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	rows = append(rows, cr...)

	fmt.Fprintln(log, "benchtable: team store (PostgreSQL on loopback) against files...")
	tr, err := teamFigures(ctx, root, o.askRuns, ls)
	if err != nil {
		return nil, fmt.Errorf("team store: %w", err)
	}
	rows = append(rows, tr...)
	ls.cleanup()

	fmt.Fprintln(log, "benchtable: condition-balance job pool...")
	br, err := balanceFigures(ctx)
	if err != nil {
		return nil, fmt.Errorf("balance: %w", err)
	}
	rows = append(rows, br...)

	fmt.Fprintln(log, "benchtable: simulator v6/assign throughput...")
	sr, err := simulatorFigures(ctx, o.rpsWindow)
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	rows = append(rows, sr...)
	return rows, nil
}

// moduleRoot is the folder holding go.mod, from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory; run from the module")
		}
		dir = parent
	}
}

func printTable(w io.Writer, rows []row, took time.Duration) {
	fmt.Fprintf(w, "machine: %s\n\n", machine())
	head := row{"figure", "measured", "target", "mark"}
	width := [3]int{len(head.figure), len(head.measured), len(head.target)}
	for _, r := range rows {
		width[0] = max(width[0], len(r.figure))
		width[1] = max(width[1], len(r.measured))
		width[2] = max(width[2], len(r.target))
	}
	line := func(r row) {
		fmt.Fprintf(w, "| %-*s | %-*s | %-*s | %-4s |\n", width[0], r.figure, width[1], r.measured, width[2], r.target, r.mark)
	}
	line(head)
	fmt.Fprintf(w, "|-%s-|-%s-|-%s-|------|\n", strings.Repeat("-", width[0]), strings.Repeat("-", width[1]), strings.Repeat("-", width[2]))
	var miss int
	for _, r := range rows {
		line(r)
		if r.mark == "MISS" {
			miss++
		}
	}
	fmt.Fprintf(w, "\n%d figures, %d MISS; measured in %.0fs\n", len(rows), miss, took.Seconds())
}

// machine describes where the figures come from: cores, CPU model, Go.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	goVersion := runtime.Version()
	if out, err := exec.Command("go", "version").Output(); err == nil {
		goVersion = strings.TrimSpace(strings.TrimPrefix(string(out), "go version "))
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = fmt.Sprintf("; load average %s %s %s at the end", f[0], f[1], f[2])
		}
	}
	return fmt.Sprintf("%d CPUs (nproc), %s, %s/%s, %s%s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, goVersion, load)
}
