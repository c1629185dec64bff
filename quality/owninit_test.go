package quality

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mayInit are this module's packages that may still have init work in the
// binary: the action registry (pipeline/actions' init functions) and
// mcpclient, which are being made lazy on their own; pipeline's output
// node (jsonTypes, a map) and pipeline/scenario's FixedTime (a time.Date,
// which cmd/benchtable reads as a variable). Every other package lays out
// its package-level values at compile time: lazyre.Of for regular
// expressions, lazy.Value for computed tables, switches for maps.
var mayInit = []string{"pipeline/actions", "mcpclient", "pipeline", "pipeline/scenario"}

// TestOwnPackagesHaveNoInit builds the binary and lists the packages of
// this module the linker gave an init task (the ..inittask symbol: the
// package has init work, one line of GODEBUG=inittrace=1). Each costs
// 15-25 us on every command before main, plus what it does.
func TestOwnPackagesHaveNoInit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "upgrade-agent")
	if out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, goTool, "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	const mod = "github.com/upgrade-agent/upgrade-agent/"
	var found int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasSuffix(f[len(f)-1], "..inittask") {
			continue
		}
		found++
		pkg, ok := strings.CutPrefix(strings.TrimSuffix(f[len(f)-1], "..inittask"), mod)
		if ok && !slices.Contains(mayInit, pkg) {
			t.Errorf("%s has init work: a package-level var computed at start (a map literal, regexp.MustCompile, "+
				"sync.OnceValue, errors of fmt.Errorf, a func() call) or an init function; "+
				"see docs/performance.md, \"Start-up\"; go tool objdump -s '%s%s.init' shows what it does", pkg, mod, pkg)
		}
	}
	if found == 0 {
		t.Fatal("no ..inittask symbol in the binary: the check no longer sees init tasks")
	}
}
