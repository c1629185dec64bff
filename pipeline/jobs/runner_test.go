package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

// clock is a settable time source shared by a runner and its workers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: fixedNow()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// harness is a runner whose workers run in goroutines of the test against
// an in-memory simulator, with an enrolling 50/50 experiment.
type harness struct {
	t      *testing.T
	srv    *sim.Server
	api    *upgrade.Client
	expID  string
	clock  *clock
	store  *Store
	runner *Runner

	mu      sync.Mutex
	spawns  int
	done    []chan error
	prepare func(n int, w *Worker) context.Context // per spawn, optional
	wg      sync.WaitGroup
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv, err := sim.Start(sim.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	api, err := upgrade.New(upgrade.Config{BaseURL: srv.URL(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, api: api, clock: newClock()}
	h.expID = createEnrolling(t, api)
	h.store = newTestStore(t, h.clock.Now)
	h.runner = &Runner{Store: h.store, Now: h.clock.Now, PollInterval: 2 * time.Millisecond, Spawn: h.spawn}
	// Workers must be gone before the simulator closes (cleanups run last
	// registered first).
	t.Cleanup(h.wg.Wait)
	return h
}

func createEnrolling(t testing.TB, api *upgrade.Client) string {
	t.Helper()
	ctx := context.Background()
	w := 50.0
	raw, err := actions.Run(ctx, api, actions.CreateExperimentParams{Name: "Balance", Context: "mathstream",
		DecisionPoints: []actions.DecisionPointParam{{Site: "lesson-stream", Target: "question-hint"}},
		Conditions:     []actions.ConditionParam{{Code: "question-hint-default", Weight: &w}, {Code: "question-hint-tutorbot", Weight: &w}}})
	if err != nil {
		t.Fatal(err)
	}
	var res actions.ExperimentResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if _, err := api.SetState(ctx, res.ID, upgrade.StateEnrolling); err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func (h *harness) params(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"num_users":%d,"context":"mathstream","site":"lesson-stream","target":"question-hint","experiment_id":%q}`, n, h.expID))
}

// spawn runs a worker in a goroutine, as the detached process would.
func (h *harness) spawn(_ context.Context, id string) (int, error) {
	h.mu.Lock()
	h.spawns++
	n := h.spawns
	done := make(chan error, 1)
	h.done = append(h.done, done)
	h.mu.Unlock()
	w := &Worker{Store: h.store, API: h.api, Now: h.clock.Now, Heartbeat: 5 * time.Millisecond, Concurrency: 8, BatchSize: 50}
	ctx := context.Background()
	if h.prepare != nil {
		ctx = h.prepare(n, w)
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		done <- w.Run(ctx, id)
	}()
	return os.Getpid(), nil
}

func (h *harness) spawnCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.spawns
}

// workerDone waits for the n-th worker (1-based) to return.
func (h *harness) workerDone(n int) error {
	h.mu.Lock()
	ch := h.done[n-1]
	h.mu.Unlock()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		h.t.Fatalf("worker %d did not stop", n)
		return nil
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out")
	}
}

// waitEnd waits (bounded) for the job to end.
func (h *harness) waitEnd(id string) actions.JobStatus {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := h.runner.Wait(ctx, id, time.Hour)
	if err != nil {
		h.t.Fatalf("wait for job %s: %v (status %+v)", id, err, st)
	}
	return st
}

// checkBalance checks that a succeeded job counted exactly n users and
// that the simulator knows exactly n distinct synthetic users of the job.
func (h *harness) checkBalance(id string, st actions.JobStatus, n int) actions.BalanceResult {
	h.t.Helper()
	if st.State != actions.JobSucceeded || st.Done != n || st.Total != n {
		h.t.Fatalf("status %+v, want succeeded %d/%d", st, n, n)
	}
	var res actions.BalanceResult
	if err := json.Unmarshal(st.Result, &res); err != nil {
		h.t.Fatalf("result: %v", err)
	}
	sum := res.Unassigned + res.Errors
	for _, c := range res.Conditions {
		sum += c.Count
	}
	if sum != n || res.Users != n || res.Errors != 0 || res.Unassigned != 0 {
		h.t.Errorf("result counts: users %d, sum %d, unassigned %d, errors %d; want %d assigned", res.Users, sum, res.Unassigned, res.Errors, n)
	}
	seen := map[string]bool{}
	for _, u := range h.srv.Sim().Users() {
		if strings.HasPrefix(u.ID, Key(id)+"-") {
			if seen[u.ID] {
				h.t.Errorf("user %s twice", u.ID)
			}
			seen[u.ID] = true
		}
	}
	if len(seen) != n {
		h.t.Errorf("simulator has %d users of job %s, want %d", len(seen), id, n)
	}
	stats, err := h.srv.Sim().EnrollmentStats(h.expID)
	if err != nil {
		h.t.Fatal(err)
	}
	if stats.Users != n {
		h.t.Errorf("simulator enrolled %d users, want %d", stats.Users, n)
	}
	return res
}

func TestJobCompletes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := h.runner.Start(ctx, "j1", "sess", "test_condition_balance", h.params(300)); err != nil {
		t.Fatal(err)
	}
	st := h.waitEnd("j1")
	res := h.checkBalance("j1", st, 300)
	if res.ExperimentID != h.expID || len(res.Conditions) != 2 {
		t.Errorf("result %+v", res)
	}
	rec, err := h.store.Load("j1")
	if err != nil {
		t.Fatal(err)
	}
	if tallyDone(t, rec) != 300 || rec.SessionID != "sess" || rec.Attempts != 1 || rec.HeartbeatAt == nil || rec.PID != os.Getpid() {
		t.Errorf("record %+v", rec)
	}
	if err := h.workerDone(1); err != nil {
		t.Errorf("worker: %v", err)
	}
	// Starting it again (a retried start after a crash) starts nothing.
	if err := h.runner.Start(ctx, "j1", "sess", "test_condition_balance", h.params(300)); err != nil || h.spawnCount() != 1 {
		t.Errorf("second start: err %v, %d spawns", err, h.spawnCount())
	}
}

// A worker killed after its second batch (its context ends without the
// record being touched, as with SIGKILL) is noticed through its stale
// heartbeat and restarted from the committed 100 users.
func TestKilledWorkerResumesFromLastBatch(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	firstCommit := -1
	h.prepare = func(n int, w *Worker) context.Context {
		wctx, kill := context.WithCancel(context.Background())
		t.Cleanup(kill)
		switch n {
		case 1:
			w.afterCommit = func(t actions.Progress) {
				if t.Done >= 100 {
					kill()
				}
			}
		case 2:
			w.afterCommit = func(t actions.Progress) {
				if firstCommit < 0 {
					firstCommit = t.Done
				}
			}
		}
		return wctx
	}
	if err := h.runner.Start(ctx, "j2", "sess", "test_condition_balance", h.params(300)); err != nil {
		t.Fatal(err)
	}
	if err := h.workerDone(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("killed worker returned %v", err)
	}
	rec, err := h.store.Load("j2")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != actions.JobRunning || rec.Progress.Done != 100 || tallyDone(t, rec) != 100 {
		t.Fatalf("after the kill: state %s, progress %+v", rec.State, rec.Progress)
	}

	// The heartbeat is still fresh: no restart yet.
	st, err := h.runner.Wait(ctx, "j2", 0)
	if err != nil || st.State != actions.JobRunning || st.Done != 100 || h.spawnCount() != 1 {
		t.Fatalf("fresh heartbeat: %+v %v, %d spawns", st, err, h.spawnCount())
	}
	h.clock.Advance(DefaultStaleAfter + time.Second)
	st, err = h.runner.Wait(ctx, "j2", 0)
	if err != nil || st.State != actions.JobRunning || h.spawnCount() != 2 {
		t.Fatalf("stale heartbeat: %+v %v, %d spawns", st, err, h.spawnCount())
	}
	st = h.waitEnd("j2")
	h.checkBalance("j2", st, 300)
	if err := h.workerDone(2); err != nil {
		t.Errorf("second worker: %v", err)
	}
	if firstCommit != 150 {
		t.Errorf("the restarted worker first committed %d users, want 150 (100 committed + one batch)", firstCommit)
	}
	if rec, _ := h.store.Load("j2"); rec.Attempts != 2 {
		t.Errorf("attempts %d, want 2", rec.Attempts)
	}
}

// A worker presumed dead that was only stuck must not commit once another
// worker has taken the job over.
func TestStuckWorkerIsFencedOff(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(open) // before the harness waits for its workers
	stuck := make(chan struct{})
	h.prepare = func(n int, w *Worker) context.Context {
		if n != 1 {
			return context.Background()
		}
		ctx, stop := context.WithCancel(context.Background())
		t.Cleanup(stop)
		w.Heartbeat = time.Hour // stuck: no heartbeats either
		w.afterCommit = func(t actions.Progress) {
			switch {
			case t.Done == 100:
				close(stuck)
				<-release
			case t.Done > 100:
				// Only reachable if a fenced worker could commit: stop
				// there, so that its commit stays in the record.
				stop()
			}
		}
		return ctx
	}
	if err := h.runner.Start(ctx, "j3", "sess", "test_condition_balance", h.params(300)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, stuck)
	h.clock.Advance(DefaultStaleAfter + time.Second)
	st := h.waitEnd("j3")
	h.checkBalance("j3", st, 300)
	before, err := h.store.Load("j3")
	if err != nil {
		t.Fatal(err)
	}
	open()
	if err := h.workerDone(1); err != nil {
		t.Errorf("fenced worker returned %v, want nil", err)
	}
	after, err := h.store.Load("j3")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("the fenced worker changed the record (-before +after):\n%s", d)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	committed := make(chan struct{})
	proceed := make(chan struct{})
	var proceedOnce sync.Once
	goOn := func() { proceedOnce.Do(func() { close(proceed) }) }
	t.Cleanup(goOn) // before the harness waits for its workers
	h.prepare = func(n int, w *Worker) context.Context {
		var once sync.Once
		w.afterCommit = func(actions.Progress) {
			once.Do(func() {
				close(committed)
				<-proceed
			})
		}
		return context.Background()
	}
	if err := h.runner.Start(ctx, "j4", "sess", "test_condition_balance", h.params(300)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, committed)
	rec, err := h.runner.Cancel(ctx, "j4")
	if err != nil || rec.State != actions.JobCancelled {
		t.Fatalf("cancel: %+v %v", rec, err)
	}
	goOn()
	if err := h.workerDone(1); err != nil {
		t.Errorf("cancelled worker returned %v", err)
	}
	st, err := h.runner.Wait(ctx, "j4", time.Hour)
	if err != nil || st.State != actions.JobCancelled || st.Done != 50 || !strings.Contains(st.Error, "cancelled") || st.ErrorType != actions.ErrTypeUnknown {
		t.Errorf("after cancel: %+v %v", st, err)
	}
	if _, err := h.runner.Cancel(ctx, "j4"); !errors.Is(err, ErrFinished) {
		t.Errorf("cancelling twice: %v, want ErrFinished", err)
	}
	if h.spawnCount() != 1 {
		t.Errorf("a cancelled job was restarted")
	}
}

func TestFailedJobReportsAPIError(t *testing.T) {
	h := newHarness(t)
	down, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	url := down.URL()
	_ = down.Close()
	dead, err := upgrade.New(upgrade.Config{BaseURL: url, MaxRetries: -1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.prepare = func(_ int, w *Worker) context.Context {
		w.API = dead
		return context.Background()
	}
	if err := h.runner.Start(context.Background(), "j5", "sess", "test_condition_balance", h.params(120)); err != nil {
		t.Fatal(err)
	}
	st := h.waitEnd("j5")
	if st.State != actions.JobFailed || st.ErrorType != "api" || st.Error == "" || st.Done != 0 {
		t.Errorf("status %+v, want failed with type api", st)
	}
	if err := h.workerDone(1); err != nil {
		t.Errorf("worker of a failed job returned %v", err)
	}
}

func TestErrorType(t *testing.T) {
	apiErr := &upgrade.Error{Category: upgrade.CategoryAPI, Message: "down"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"upgrade error", fmt.Errorf("wrapped: %w", &upgrade.Error{Category: upgrade.CategoryAuth}), "auth"},
		{"run error with a cause", &categorized{err: errors.New("every user failed"), cause: apiErr}, "api"},
		{"plain", errors.New("x"), "unknown"},
	}
	for _, tc := range tests {
		if got := errorType(tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// noSpawn records launches without running anything: a worker that never
// comes up.
type noSpawn struct {
	mu sync.Mutex
	n  int
}

func (s *noSpawn) spawn(context.Context, string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return 4242, nil
}

func (s *noSpawn) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func newBareRunner(t *testing.T, c *clock, alive func(int) bool) (*Runner, *noSpawn) {
	sp := &noSpawn{}
	return &Runner{Store: newTestStore(t, c.Now), Now: c.Now, Spawn: sp.spawn, Alive: alive, PollInterval: time.Millisecond}, sp
}

var balanceParamsJSON = json.RawMessage(`{"num_users":10,"context":"mathstream","site":"lesson-stream","target":"question-hint"}`)

func TestQueuedReportsRunningAndRestartsWhenStale(t *testing.T) {
	c := newClock()
	r, sp := newBareRunner(t, c, func(int) bool { return true })
	ctx := context.Background()
	if err := r.Start(ctx, "q1", "s", "test_condition_balance", balanceParamsJSON); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "q1", "s", "test_condition_balance", balanceParamsJSON); err != nil || sp.count() != 1 {
		t.Fatalf("second start: %v, %d spawns", err, sp.count())
	}
	st, err := r.Wait(ctx, "q1", 0)
	if err != nil || st.State != actions.JobRunning || st.Total != 10 {
		t.Fatalf("queued job: %+v %v", st, err)
	}
	if rec, _ := r.Store.Load("q1"); rec.State != actions.JobQueued || rec.PID != 4242 {
		t.Errorf("record %+v", rec)
	}
	c.Advance(DefaultStaleAfter + time.Second)
	// Start on a dead job restarts it too.
	if err := r.Start(ctx, "q1", "s", "test_condition_balance", balanceParamsJSON); err != nil || sp.count() != 2 {
		t.Fatalf("start of a dead job: %v, %d spawns", err, sp.count())
	}
}

func TestGoneProcessIsRestartedAtOnce(t *testing.T) {
	c := newClock()
	r, sp := newBareRunner(t, c, func(pid int) bool { return pid != 4242 })
	ctx := context.Background()
	if err := r.Start(ctx, "g1", "s", "test_condition_balance", balanceParamsJSON); err != nil {
		t.Fatal(err)
	}
	st, err := r.Wait(ctx, "g1", 0)
	if err != nil || st.State != actions.JobRunning || sp.count() != 2 {
		t.Errorf("wait: %+v %v, %d spawns (want a restart)", st, err, sp.count())
	}
}

func TestRestartsGiveUpWithoutProgress(t *testing.T) {
	c := newClock()
	r, sp := newBareRunner(t, c, func(pid int) bool { return pid != 4242 })
	ctx := context.Background()
	if err := r.Start(ctx, "g2", "s", "test_condition_balance", balanceParamsJSON); err != nil {
		t.Fatal(err)
	}
	st, err := r.Wait(ctx, "g2", time.Hour) // every poll finds the worker gone
	if err != nil || st.State != actions.JobFailed || !strings.Contains(st.Error, "without progress") {
		t.Errorf("wait: %+v %v", st, err)
	}
	if want := 1 + DefaultMaxStalls; sp.count() != want {
		t.Errorf("%d launches, want %d", sp.count(), want)
	}
}

func TestSpawnFailureFailsTheJob(t *testing.T) {
	c := newClock()
	r := &Runner{Store: newTestStore(t, c.Now), Now: c.Now,
		Spawn: func(context.Context, string) (int, error) { return 0, errors.New("no such file") }}
	err := r.Start(context.Background(), "f1", "s", "test_condition_balance", balanceParamsJSON)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("start: %v", err)
	}
	st, err := r.Wait(context.Background(), "f1", 0)
	if err != nil || st.State != actions.JobFailed || !strings.Contains(st.Error, "cannot start") {
		t.Errorf("status %+v %v", st, err)
	}
}

func TestStartRejectsBadInput(t *testing.T) {
	c := newClock()
	r, sp := newBareRunner(t, c, nil)
	ctx := context.Background()
	if err := r.Start(ctx, "../x", "s", "test_condition_balance", balanceParamsJSON); !errors.Is(err, ErrInvalidID) {
		t.Errorf("bad id: %v", err)
	}
	if err := r.Start(ctx, "b1", "s", "test_condition_balance", json.RawMessage(`{"num_users":"many"}`)); err == nil {
		t.Errorf("bad params accepted")
	}
	if _, err := r.Wait(ctx, "nothere", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("wait for a missing job: %v", err)
	}
	if sp.count() != 0 {
		t.Errorf("%d spawns for bad input", sp.count())
	}
}

func TestWaitReturnsRunningAfterD(t *testing.T) {
	r, _ := newBareRunner(t, newClock(), func(int) bool { return true })
	r.Now = nil // real time: Wait must give up after d
	r.Store.Now = nil
	ctx := context.Background()
	if err := r.Start(ctx, "w1", "s", "test_condition_balance", balanceParamsJSON); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st, err := r.Wait(ctx, "w1", 30*time.Millisecond)
	if err != nil || st.State != actions.JobRunning {
		t.Fatalf("wait: %+v %v", st, err)
	}
	if el := time.Since(start); el < 30*time.Millisecond || el > 5*time.Second {
		t.Errorf("Wait returned after %v, want about 30ms", el)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Wait(cctx, "w1", time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("wait with a cancelled context: %v", err)
	}
}

// tallyDone is the done count of a record's committed balance tally.
func tallyDone(t *testing.T, rec *Record) int {
	t.Helper()
	var tally actions.BalanceTally
	if err := json.Unmarshal(rec.Tally, &tally); err != nil {
		t.Fatalf("tally of job %s: %v (%s)", rec.ID, err, rec.Tally)
	}
	return tally.Done
}
