// Package inittrace measures package initialisation of a Go binary as the
// runtime reports it with GODEBUG=inittrace=1: the start-up test of
// quality/ and the start-up row of cmd/benchtable read it the same way.
//
// It must not be imported by production code: it runs binaries.
package inittrace

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"
)

// Init is the clock time one package's init took, in milliseconds.
type Init struct {
	Package string
	Ms      float64
}

// Parse reads the runtime's trace lines ("init PKG @T ms, C ms clock, ...")
// from a process's stderr; other lines are skipped.
func Parse(stderr []byte) []Init {
	var out []Init
	for _, l := range strings.Split(string(stderr), "\n") {
		m := lineRE().FindStringSubmatch(l)
		if m == nil {
			continue
		}
		ms, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		out = append(out, Init{Package: m[1], Ms: ms})
	}
	return out
}

// lineRE is compiled per call of Parse's caller, never at init (the
// package measures init, and holds itself to it).
func lineRE() *regexp.Regexp {
	return regexp.MustCompile(`^init (\S+) @[0-9.]+ [mµn]?s, ([0-9.]+) ms clock`)
}

// Sum is the total of inits.
func Sum(inits []Init) float64 {
	var s float64
	for _, i := range inits {
		s += i.Ms
	}
	return s
}

// Report is what Measure saw over its runs.
type Report struct {
	Runs int
	// Best is the run with the smallest total: on a loaded machine the
	// others carry time the scheduler gave to other processes.
	Best []Init
	// Least is each package's smallest time over the runs, largest first.
	Least []Init
	// Totals is each run's total, in the order of the runs.
	Totals []float64
}

// Total is the best run's total.
func (r Report) Total() float64 { return Sum(r.Best) }

// Median is the median of the runs' totals (the lower middle one of an
// even number; 0 without runs): what a typical start pays, where Total is
// what one pays when nothing else is running.
func (r Report) Median() float64 {
	if len(r.Totals) == 0 {
		return 0
	}
	t := slices.Clone(r.Totals)
	slices.Sort(t)
	return stat.Quantile(0.5, stat.Empirical, t, nil)
}

// Without is the best run's total leaving out pkgs.
func (r Report) Without(pkgs ...string) float64 {
	var s float64
	for _, i := range r.Best {
		if !slices.Contains(pkgs, i.Package) {
			s += i.Ms
		}
	}
	return s
}

// Within is the sum of the smallest times (Least) of the packages whose
// import path starts with prefix: what one module's own inits cost, read
// steadily on a busy machine.
func (r Report) Within(prefix string) float64 {
	var s float64
	for _, i := range r.Least {
		if strings.HasPrefix(i.Package, prefix) {
			s += i.Ms
		}
	}
	return s
}

// Top formats the n largest of Least, "pkg 1.2 ms" per line.
func (r Report) Top(n int) string {
	var b strings.Builder
	for i, in := range r.Least {
		if i == n {
			fmt.Fprintf(&b, "  ... and %d more\n", len(r.Least)-n)
			break
		}
		fmt.Fprintf(&b, "  %6.3f ms  %s\n", in.Ms, in.Package)
	}
	return b.String()
}

// Measure runs bin with args and GODEBUG=inittrace=1 (env added to the
// process's environment) up to runs times, stopping early once a run's
// total is at most enough (0: never stop early).
func Measure(ctx context.Context, bin string, args, env []string, runs int, enough float64) (Report, error) {
	var r Report
	least := map[string]float64{}
	for range runs {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(slices.Clip(env), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return r, fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
		}
		inits := Parse(stderr.Bytes())
		if len(inits) == 0 {
			return r, fmt.Errorf("%s %s: no inittrace lines on stderr", bin, strings.Join(args, " "))
		}
		r.Runs++
		r.Totals = append(r.Totals, Sum(inits))
		for _, in := range inits {
			if v, ok := least[in.Package]; !ok || in.Ms < v {
				least[in.Package] = in.Ms
			}
		}
		if r.Best == nil || Sum(inits) < r.Total() {
			r.Best = inits
		}
		if enough > 0 && r.Total() <= enough {
			break
		}
	}
	r.Least = r.Least[:0]
	for p, ms := range least {
		r.Least = append(r.Least, Init{p, ms})
	}
	slices.SortFunc(r.Least, func(a, b Init) int {
		if a.Ms != b.Ms {
			if a.Ms > b.Ms {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Package, b.Package)
	})
	return r, nil
}
