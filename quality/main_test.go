package quality

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/upgrade-agent/upgrade-agent/cmd"
)

// TestMain lets this test binary stand in for the upgrade-agent binary: a
// job started by a command run in process launches its detached worker as
// os.Executable() with argv[0] "upgrade-agent", which lands here and runs
// the real command line in a process of its own.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"upgrade-agent": func() { os.Exit(cmd.Execute()) },
	})
}
