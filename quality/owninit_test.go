package quality

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestOwnPackagesHaveNoInit builds the binary and fails for any package of
// this module the linker gave an init task (the ..inittask symbol: the
// package has init work, one line of GODEBUG=inittrace=1). Each costs
// 15-25 us on every command before main, plus what it does. No package of
// ours may have one: a package-level value is laid out at compile time
// (lazyre.Of for regular expressions, lazy.Value for computed tables,
// switches for fixed maps, functions for computed constants such as
// scenario.FixedTime).
func TestOwnPackagesHaveNoInit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildAgent(ctx, t)
	out, err := exec.CommandContext(ctx, goCommand(t), "tool", "nm", bin).Output()
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
		pkg := strings.TrimSuffix(f[len(f)-1], "..inittask")
		// The binary's own main package is ours too; the linker names it main.
		ours := pkg == "main"
		if rest, ok := strings.CutPrefix(pkg, mod); ok {
			pkg, ours = rest, true
		}
		if ours {
			t.Errorf("%s has init work: a package-level var computed at start (a map literal, regexp.MustCompile, "+
				"sync.OnceValue, errors of fmt.Errorf, a func() call) or an init function; "+
				"see docs/performance.md, \"Start-up\"; go tool objdump -s '%s%s.init' shows what it does", pkg, mod, pkg)
		}
	}
	if found == 0 {
		t.Fatal("no ..inittask symbol in the binary: the check no longer sees init tasks")
	}
}
