package main

import (
	"context"
	"fmt"
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

// helloHTTP is the floor of a Go program that speaks HTTPS and JSON, as
// upgrade-agent must: net/http, crypto/tls and encoding/json linked in
// (their inits take about 2.5 ms on the two-core machine).
const helloHTTP = `package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
)

var _, _, _ = http.Get, json.Marshal, tls.Client

func main() { fmt.Println("hello") }
`

// startupFigures builds upgrade-agent, two Go hello-worlds (plain, and
// with net/http, crypto/tls and encoding/json) and two floors (the HTTP
// hello-world with blank imports of every dependency the binary links, and
// of only the brief's chosen ones) in this run and times `upgrade-agent
// version` against them, alternating one process of each so that a change
// in the machine's load falls on all alike; then it reads the package init
// of all but the plain hello-world with GODEBUG=inittrace=1.
func startupFigures(ctx context.Context, root string, runs int) ([]row, error) {
	a, err := newAskSetup(ctx, root, "benchtable-startup-")
	if err != nil {
		return nil, err
	}
	defer a.close()
	hello, err := inittrace.BuildHello(ctx, a.tmp, "hello", helloWorld)
	if err != nil {
		return nil, err
	}
	helloNet, err := inittrace.BuildHello(ctx, a.tmp, "hellohttp", helloHTTP)
	if err != nil {
		return nil, err
	}
	// The dependency floor is built in a module that requires what ours
	// does (go.mod and go.sum copied): the versions are the binary's.
	helloDep, err := inittrace.BuildFloor(ctx, a.tmp, root)
	if err != nil {
		return nil, err
	}
	// The chosen floor likewise: the start-up below which no binary built
	// on cobra, go-openai and yaml v3 goes here.
	helloChosen, err := inittrace.BuildChosenFloor(ctx, a.tmp, root)
	if err != nil {
		return nil, err
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
	// One process of each, in turn, every round; the first rounds warm the
	// page cache.
	const warmup = 3
	bins := []struct {
		path string
		args []string
	}{{hello, nil}, {helloNet, nil}, {helloDep, nil}, {helloChosen, nil}, {a.bin, []string{"version"}}}
	walls := make([][]time.Duration, len(bins))
	for i := range runs + warmup {
		for j, b := range bins {
			d, err := timeOne(b.path, b.args...)
			if err != nil {
				return nil, err
			}
			if i >= warmup {
				walls[j] = append(walls[j], d)
			}
		}
	}
	floor, floorNet, floorDep, floorChosen, agent := walls[0], walls[1], walls[2], walls[3], walls[4]
	medAgent, medFloor, medNet, medDep := percentile(agent, 0.5), percentile(floor, 0.5), percentile(floorNet, 0.5), percentile(floorDep, 0.5)
	ratio := float64(medAgent) / float64(max(medFloor, time.Microsecond))
	depRatio := float64(medDep) / float64(max(medFloor, time.Microsecond))
	medChosen := percentile(floorChosen, 0.5)
	chosenRatio := float64(medChosen) / float64(max(medFloor, time.Microsecond))
	rows := []row{{fmt.Sprintf("`upgrade-agent version` against a Go hello-world built in the same run, both as `make build` builds (CGO_ENABLED=0), side by side, %d runs each (median wall; in brackets a hello-world linking net/http, crypto/tls and encoding/json)", runs),
		fmt.Sprintf("%s vs %s (%.1fx) [%s]", ms(medAgent), ms(medFloor), ratio, ms(medNet)), "<= 2x hello-world", pass(ratio <= 2)},
		{"the dependency floor: a hello-world linking, with blank imports, what the binary depends on (cobra, go-openai, yaml v3, pgx v5, gonum stat, the OTel trace API; next to the others in the same loop)",
			fmt.Sprintf("%s (%.1fx hello-world)", ms(medDep), depRatio), info, info},
		{"the chosen floor: the HTTP hello-world with blank imports of only the libraries the brief chose (cobra, go-openai, yaml v3), the start-up no binary built on them goes below here (same loop)",
			fmt.Sprintf("%s (%.2fx hello-world)", ms(medChosen), chosenRatio), "-", info}}

	r, err := inittrace.Measure(ctx, a.bin, []string{"version"}, a.env, runs, 0)
	if err != nil {
		return nil, err
	}
	rn, err := inittrace.Measure(ctx, helloNet, nil, a.env, runs, 0)
	if err != nil {
		return nil, err
	}
	rd, err := inittrace.Measure(ctx, helloDep, nil, a.env, runs, 0)
	if err != nil {
		return nil, err
	}
	rc, err := inittrace.Measure(ctx, helloChosen, nil, a.env, runs, 0)
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
	rows = append(rows, row{fmt.Sprintf("package init of `upgrade-agent version` (inittrace, all packages summed, best of %d runs; in brackets the HTTP hello-world's)", r.Runs),
		fmt.Sprintf("%.1f ms (%d inits%s) [%.1f ms]", r.Total(), len(r.Best), top, rn.Total()), "<= 3 ms", pass(r.Total() <= 3)},
		row{"package init of the dependency floor (same reading); in brackets each package's smallest time summed, for the binary and for the floor (what quality.TestPackageInitBudget reads)",
			fmt.Sprintf("%.1f ms (%d inits) [%.1f ms; %.1f ms]", rd.Total(), len(rd.Best), r.Within(""), rd.Within("")), info, info},
		row{fmt.Sprintf("package init of the chosen floor (best of %d runs, as the 3 ms row reads; in brackets the median run)", rc.Runs),
			fmt.Sprintf("%.1f ms (%d inits) [median %.1f ms]", rc.Total(), len(rc.Best), rc.Median()), "-", info},
		row{fmt.Sprintf("package init, median of %d runs (the 3 ms row reads the best): `upgrade-agent version`; the dependency floor; the chosen floor; the HTTP hello-world", r.Runs),
			fmt.Sprintf("%.1f ms; %.1f ms; %.1f ms; %.1f ms", r.Median(), rd.Median(), rc.Median(), rn.Median()), "-", info})
	return rows, nil
}
