package quality

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/cmd"
)

// cli runs the real command line in process, with its own state dir and an
// environment that holds only what the test puts there.
type cli struct {
	t      *testing.T
	dir    string
	env    map[string]string
	inputs map[string]bool // files the test wrote itself
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	dir := t.TempDir()
	return &cli{t: t, dir: dir, inputs: map[string]bool{}, env: map[string]string{
		"UPGRADE_AGENT_HOME": filepath.Join(dir, "state"),
		"HOME":               filepath.Join(dir, "home"),
		"XDG_CONFIG_HOME":    filepath.Join(dir, "config"), // no config file unless a test writes one
		"NO_COLOR":           "1",
	}}
}

// result is one finished command line.
type result struct {
	args           []string
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return "upgrade-agent " + strings.Join(r.args, " ") + "\n--- stdout:\n" + r.stdout + "--- stderr:\n" + r.stderr
}

// run executes one command line; a minute bounds it whatever goes wrong.
func (c *cli) run(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := cmd.Run(ctx, args, &cmd.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		func(k string) string { return c.env[k] })
	r := result{args: args, code: code, stdout: out.String(), stderr: errOut.String()}
	noCrash(c.t, r)
	return r
}

// file writes a file in the test's folder and returns its path.
func (c *cli) file(name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.inputs[p] = true
	return p
}

// script writes an --llm script and returns the flag value.
func (c *cli) script(name, yaml string) string {
	return "script:" + c.file(name, yaml)
}

var crashPattern = regexp.MustCompile(`(?m)panic:|^goroutine \d+ \[|\.go:\d+ \+0x[0-9a-f]+|runtime error:|internal error:`)

// noCrash fails the test when a command printed a Go panic or stack trace.
func noCrash(t *testing.T, r result) {
	t.Helper()
	for _, s := range []string{r.stdout, r.stderr} {
		if m := crashPattern.FindString(s); m != "" {
			t.Errorf("a Go panic or stack trace (%q) in the output of\n%s", m, r)
		}
	}
}

var sessionLine = regexp.MustCompile(`(?m)^session: ([0-9a-z]+)$`)

// sessionOf is the new session a turn printed on stderr.
func sessionOf(t *testing.T, r result) string {
	t.Helper()
	m := sessionLine.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no session id in the output of\n%s", r)
	}
	return m[1]
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d:\n%s", r.code, code, r)
	}
}

func wantContains(t *testing.T, r result, subs ...string) {
	t.Helper()
	all := r.stdout + r.stderr
	for _, s := range subs {
		if !strings.Contains(all, s) {
			t.Errorf("%q not in the output of\n%s", s, r)
		}
	}
}

// decodeJSON decodes exactly one JSON value from s.
func decodeJSON(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
