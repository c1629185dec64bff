//go:build unix

package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/checkpoint"
	"github.com/upgrade-agent/upgrade-agent/pipeline"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// The kit of the crash tests: a loopback server that can hold a request at
// a chosen point and say when it got there, and a CLI process to kill
// there. A kill lands on an event (a request arrived, a write landed), not
// on a guessed time; the time-based kill points of some tests only widen
// the spread around those events.

// tap serves a handler on 127.0.0.1 and stops the requests a test chooses:
// on arrival (before the handler sees them) or once the handler has served
// them (the write landed, the answer has not left). A stopped request waits
// until the test releases it, or until its client goes away: a killed
// process drops its connections, and a request stopped on arrival then
// never reaches the handler.
type tap struct {
	srv *httptest.Server
	h   http.Handler

	mu     sync.Mutex
	stops  []*stop
	seen   []string // "METHOD path" of every request, in arrival order
	served []string // those that reached the handler
}

// stop is one point where the tap holds a request.
type stop struct {
	match  func(*http.Request) bool
	served bool   // hold after the handler served it
	skip   int    // let this many matching requests pass first
	after  string // only once a request "METHOD path-suffix" has been seen ("" = at once)
	// late: a request held on arrival reaches the handler when released
	// even if its client is gone by then, as a request a server has
	// read lands after the client died.
	late bool
	// watch: the request is not held; hit only says it arrived.
	watch  bool
	used   bool
	hit    chan struct{} // closed when the request is held
	free   chan struct{} // closed by release
	landed chan struct{} // closed when a late request has been served
	once   sync.Once
}

// Stop phases.
const (
	onArrival = false
	onServed  = true
)

func newTap(t *testing.T, h http.Handler) *tap {
	tp := &tap{h: h}
	tp.srv = httptest.NewServer(http.HandlerFunc(tp.serve))
	t.Cleanup(func() {
		tp.mu.Lock()
		for _, s := range tp.stops {
			s.release()
		}
		tp.mu.Unlock()
		tp.srv.Close()
	})
	return tp
}

// URL is the server's base URL.
func (tp *tap) URL() string { return tp.srv.URL }

// stopAt holds the first request that matches (after skip others), at the
// phase given. Requests after it pass.
func (tp *tap) stopAt(match func(*http.Request) bool, served bool, skip int) *stop {
	return tp.stopAfter("", match, served, skip)
}

// stopAfter is stopAt for requests that come after one "METHOD path-suffix".
func (tp *tap) stopAfter(after string, match func(*http.Request) bool, served bool, skip int) *stop {
	s := &stop{match: match, served: served, skip: skip, after: after,
		hit: make(chan struct{}), free: make(chan struct{}), landed: make(chan struct{})}
	tp.mu.Lock()
	tp.stops = append(tp.stops, s)
	tp.mu.Unlock()
	return s
}

func (s *stop) release() { s.once.Do(func() { close(s.free) }) }

// stopLate holds the first matching request on arrival and serves it only
// when released, whether or not its client is still there.
func (tp *tap) stopLate(match func(*http.Request) bool) *stop {
	s := tp.stopAt(match, onArrival, 0)
	tp.mu.Lock()
	s.late = true
	tp.mu.Unlock()
	return s
}

// requests lists what the tap has seen.
func (tp *tap) requests() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.seen...)
}

// seenLike reports whether seen holds a request "METHOD path-suffix".
func seenLike(seen []string, want string) bool {
	wm, wp, _ := strings.Cut(want, " ")
	for _, r := range seen {
		m, p, _ := strings.Cut(r, " ")
		if m == wm && strings.HasSuffix(p, wp) {
			return true
		}
	}
	return false
}

// count counts the requests seen with that method and a path ending in
// suffix.
func (tp *tap) count(method, suffix string) int {
	n := 0
	for _, r := range tp.requests() {
		if seenLike([]string{r}, method+" "+suffix) {
			n++
		}
	}
	return n
}

func (tp *tap) serve(w http.ResponseWriter, r *http.Request) {
	tp.mu.Lock()
	tp.seen = append(tp.seen, r.Method+" "+r.URL.Path)
	var s *stop
	for _, c := range tp.stops {
		if c.used || !c.match(r) || (c.after != "" && !seenLike(tp.seen[:len(tp.seen)-1], c.after)) {
			continue
		}
		if c.skip > 0 {
			c.skip--
			continue
		}
		c.used = true
		s = c
		break
	}
	tp.mu.Unlock()
	switch {
	case s == nil:
		tp.pass(w, r)
		return
	case s.watch:
		close(s.hit)
		tp.pass(w, r)
		return
	case s.late:
		close(s.hit)
		<-s.free
		tp.pass(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
		close(s.landed)
		return
	case !s.served:
		close(s.hit)
		select {
		case <-s.free:
		case <-r.Context().Done():
			return // the client is gone: the request never lands
		}
		tp.pass(w, r)
		return
	}
	rec := httptest.NewRecorder()
	tp.pass(rec, r)
	close(s.hit)
	select {
	case <-s.free:
	case <-r.Context().Done():
		return // landed, but the answer never leaves
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// pass hands a request to the handler, and counts it as served.
func (tp *tap) pass(w http.ResponseWriter, r *http.Request) {
	tp.mu.Lock()
	tp.served = append(tp.served, r.Method+" "+r.URL.Path)
	tp.mu.Unlock()
	tp.h.ServeHTTP(w, r)
}

// countServed counts the requests that reached the handler with that
// method and a path ending in suffix.
func (tp *tap) countServed(method, suffix string) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	n := 0
	for _, r := range tp.served {
		if seenLike([]string{r}, method+" "+suffix) {
			n++
		}
	}
	return n
}

// watchFor signals when the first matching request arrives, and lets it
// through.
func (tp *tap) watchFor(match func(*http.Request) bool) *stop {
	s := tp.stopAt(match, onArrival, 0)
	tp.mu.Lock()
	s.watch = true
	tp.mu.Unlock()
	return s
}

// simTap serves a fresh simulator behind a tap, with a client for the test
// to set the server up and change it as people would.
func simTap(t *testing.T, seed int64) (*sim.Sim, *tap, *upgrade.Client) {
	t.Helper()
	s, err := sim.New(sim.Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	tp := newTap(t, s.Handler())
	c, err := upgrade.New(upgrade.Config{BaseURL: tp.URL() + "/api"})
	if err != nil {
		t.Fatal(err)
	}
	return s, tp, c
}

// is matches requests by method and a path suffix ("" matches any path).
func is(method, suffix string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return r.Method == method && strings.HasSuffix(r.URL.Path, suffix)
	}
}

// within matches requests by method and a part of the path.
func within(method, part string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return r.Method == method && strings.Contains(r.URL.Path, part)
	}
}

// llmNode matches the LLM requests of one pipeline node.
func llmNode(node string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Header.Get("X-Upgrade-Agent-Node") == node }
}

// proc is a CLI process started in the background.
type proc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer // stdout and stderr
	done chan struct{}
	code int
}

// startAgent starts upgrade-agent (this test binary) without waiting for it.
func startAgent(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(exe, args...), done: make(chan struct{})}
	p.cmd.Args[0] = "upgrade-agent"
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone. It reports
// whether the process was still running (false: it had already exited).
func (p *proc) kill() bool {
	select {
	case <-p.done:
		return false
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return p.code == -1
}

// killAfterHit kills the process d after the stop is hit (a watch: the
// request went on); a process that exits first is left alone.
func (p *proc) killAfterHit(t *testing.T, s *stop, d time.Duration) bool {
	t.Helper()
	select {
	case <-s.hit:
	case <-p.done:
		return false
	case <-time.After(60 * time.Second):
		t.Fatalf("the process reached neither the stop nor its end:\n%s", p.out.String())
	}
	return p.killAfter(d)
}

// killAfter kills the process after d unless it exits first.
func (p *proc) killAfter(d time.Duration) bool {
	select {
	case <-p.done:
		return false
	case <-time.After(d): // the kill point is a time: that is what this test varies
		return p.kill()
	}
}

// killOn kills the process when the stop is hit; a process that exits
// first is left alone. It reports whether the kill landed at the stop.
func (p *proc) killOn(t *testing.T, s *stop) bool {
	t.Helper()
	select {
	case <-s.hit:
		return p.kill()
	case <-p.done:
		return false
	case <-time.After(60 * time.Second):
		t.Fatalf("the process reached neither the stop nor its end:\n%s", p.out.String())
		return false
	}
}

// wait waits, bounded, for the process to end and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(2 * time.Minute):
		t.Fatalf("the process did not end:\n%s", p.out.String())
		return -1
	}
}

// agentIn runs one command line in this process, with the environment env
// and nothing else: the runs a test does not kill need no process of
// their own, and are much cheaper that way (under -race above all). Job
// workers it launches are still processes of their own.
func agentIn(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	return agentWith(t, nil, env, args...)
}

// agentWith is agentIn with factory options (a test's own action set).
func agentWith(t *testing.T, opts []FactoryOption, env []string, args ...string) (int, string, string) {
	t.Helper()
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Run(ctx, args, &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, func(k string) string { return vars[k] }, opts...)
	return code, out.String(), errOut.String()
}

// savedSession is a session's checkpoint and the pipeline state in it.
type savedSession struct {
	CP    *checkpoint.Checkpoint
	State *pipeline.State
}

// loadCheckpoint reads a session's checkpoint, failing the test when it
// does not load.
func loadCheckpoint(t *testing.T, state, id string) savedSession {
	t.Helper()
	store, err := checkpoint.OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := store.Load(id)
	if err != nil {
		t.Fatalf("checkpoint of %s: %v", id, err)
	}
	st, err := pipeline.DecodeState(cp)
	if err != nil {
		t.Fatalf("checkpoint of %s: %v", id, err)
	}
	return savedSession{CP: cp, State: st}
}

// waitUnlocked waits, bounded, until nobody holds the session's lock. A
// process killed while it forks a job worker leaves the lock's descriptor
// in the child for the instant before the child's exec closes it; a run
// started in that instant would exit 12, rightly.
func waitUnlocked(t *testing.T, state, id string) {
	t.Helper()
	store, err := checkpoint.OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the session lock to be free", func() bool {
		unlock, err := store.Lock(id)
		if err != nil {
			return false
		}
		unlock()
		return true
	})
}

// latestSession is the id of the most recently updated session.
func latestSession(t *testing.T, state string) string {
	t.Helper()
	store, err := checkpoint.OpenFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	id, err := store.Latest()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// decodeResult decodes the JSON output of ask or resume.
func decodeResult(t *testing.T, stdout string) pipeline.Result {
	t.Helper()
	var res pipeline.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("not a turn result: %v\n%s", err, stdout)
	}
	return res
}

// soak is how many kill points a test runs: n by default, more with
// UPGRADE_AGENT_CRASH_SOAK=N (a soak run; say 200).
func soak(n int) int {
	if v, err := strconv.Atoi(os.Getenv("UPGRADE_AGENT_CRASH_SOAK")); err == nil && v > n {
		return v
	}
	return n
}

// spread returns n kill times from 0 to upTo, denser at the start.
func spread(n int, upTo time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		f := float64(i) / float64(max(n-1, 1))
		out[i] = time.Duration(f * f * float64(upTo))
	}
	return out
}

// resumeUntilDone resumes a session, answering yes, until nothing is left
// to resume; every run must end in 0, 10 or 11 (10 and 11 are answered by
// the next run). It returns the outputs of the runs.
func resumeUntilDone(t *testing.T, env []string, id string, args ...string) []string {
	t.Helper()
	var outs []string
	for i := 0; i < 4; i++ {
		all := append([]string{"resume", id, "--answer", "yes"}, args...)
		code, o, e := agentIn(t, env, all...)
		outs = append(outs, o+e)
		switch {
		case code == 2 && strings.Contains(e, "nothing to resume"):
			return outs
		case code == 0, code == 10, code == 11:
			continue
		}
		t.Fatalf("resume: exit %d\n%s\n%s\nearlier runs:\n%s", code, o, e, strings.Join(outs, "\n---\n"))
	}
	t.Fatalf("still something to resume after 4 runs:\n%s", strings.Join(outs, "\n---\n"))
	return outs
}

// ctxTimeout is a bounded context for calls the test makes itself.
func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
