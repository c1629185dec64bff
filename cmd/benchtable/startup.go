package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/inittrace"
)

// helloWorld is the floor a Go binary cannot go below on this machine: the
// runtime's start-up and fmt's init.
const helloWorld = `package main

import "fmt"

func main() { fmt.Println("hello") }
`

// startupFigures builds upgrade-agent and a Go hello-world in this run and
// times `upgrade-agent version` against it, alternating one process of
// each so that a change in the machine's load falls on both alike; then it
// reads the binary's package init with GODEBUG=inittrace=1.
func startupFigures(ctx context.Context, root string, runs int) ([]row, error) {
	a, err := newAskSetup(ctx, root, "benchtable-startup-")
	if err != nil {
		return nil, err
	}
	defer a.close()
	hello := filepath.Join(a.tmp, "hello")
	src := filepath.Join(a.tmp, "hellosrc")
	if err := os.MkdirAll(src, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(helloWorld), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n"), 0o600); err != nil {
		return nil, err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", hello, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build hello-world: %v\n%s", err, out)
	}
	timeOne := func(bin string, args ...string) (time.Duration, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = a.env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: %v\n%s", filepath.Base(bin), err, out)
		}
		return time.Since(start), nil
	}
	const warmup = 3
	var agent, floor []time.Duration
	for i := range runs + warmup {
		h, err := timeOne(hello)
		if err != nil {
			return nil, err
		}
		v, err := timeOne(a.bin, "version")
		if err != nil {
			return nil, err
		}
		if i >= warmup {
			floor, agent = append(floor, h), append(agent, v)
		}
	}
	medAgent, medFloor := percentile(agent, 0.5), percentile(floor, 0.5)
	ratio := float64(medAgent) / float64(max(medFloor, time.Microsecond))
	rows := []row{{fmt.Sprintf("`upgrade-agent version` against a Go hello-world built in the same run, side by side, %d runs each (median wall)", runs),
		fmt.Sprintf("%s vs %s (%.1fx)", ms(medAgent), ms(medFloor), ratio), "<= 2x hello-world", pass(ratio <= 2)}}

	r, err := inittrace.Measure(ctx, a.bin, []string{"version"}, a.env, runs, 0)
	if err != nil {
		return nil, err
	}
	top := ""
	for i, in := range r.Least {
		if i == 3 {
			break
		}
		top += fmt.Sprintf("; %s %.1f ms", filepath.Base(in.Package), in.Ms)
	}
	rows = append(rows, row{fmt.Sprintf("package init of `upgrade-agent version` (inittrace, all packages summed, best of %d runs)", r.Runs),
		fmt.Sprintf("%.1f ms (%d inits%s)", r.Total(), len(r.Best), top), "<= 3 ms", pass(r.Total() <= 3)})
	return rows, nil
}
