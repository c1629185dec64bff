package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
)

// Default timings of Runner and Worker.
const (
	DefaultPollInterval = 150 * time.Millisecond
	DefaultStaleAfter   = 10 * time.Second
	DefaultHeartbeat    = time.Second
	// DefaultMaxStalls is how many restarts in a row that found no
	// progress since the previous launch are tolerated before the job is
	// failed: a worker that dies at once (a broken config, say) must not be
	// relaunched on every poll forever.
	DefaultMaxStalls = 5
	// WorkerArg0 is argv[0] of a worker process. A binary built by
	// testscript dispatches on filepath.Base(os.Args[0]), so the name
	// matters in tests; for the real binary it is only cosmetic.
	WorkerArg0 = "upgrade-agent"
)

// ErrFinished: the job has already ended, so there is nothing to cancel.
var ErrFinished = errors.New("the job has already ended")

// Exec says how to launch a detached worker process: Path Args... jobs
// work ID, with argv[0] set to Arg0.
type Exec struct {
	// Path is the executable; "" = this process's own (os.Executable).
	Path string
	// Arg0 is the worker's argv[0]; "" = WorkerArg0.
	Arg0 string
	// Args come before "jobs work ID": the global flags that make the
	// worker reach the same UpGrade and state dir as its parent. Never a
	// secret: command lines are visible to every user of the machine.
	Args []string
	// Env is the worker's whole environment (secrets go here); nil = this
	// process's environment.
	Env []string
}

// Runner implements actions.JobRunner with detached worker processes and
// records in a Store. Set Store; everything else has defaults.
type Runner struct {
	Store *Store
	Exec  Exec
	// Actions are the actions a job may be of; nil = the built-in set.
	Actions *actions.Registry
	// Spawn launches a worker for job id and returns its process id. nil
	// launches a detached process as Exec says; tests run Worker.Run in a
	// goroutine instead.
	Spawn func(ctx context.Context, id string) (pid int, err error)
	// Alive tells whether a worker's process still runs; nil checks the
	// process table.
	Alive func(pid int) bool

	Now          func() time.Time // nil = time.Now
	PollInterval time.Duration    // how often Wait reads the record; 0 = DefaultPollInterval
	StaleAfter   time.Duration    // heartbeat age that means dead; 0 = DefaultStaleAfter
	MaxStalls    int              // 0 = DefaultMaxStalls
	Logger       *slog.Logger     // nil = discard
}

var _ actions.JobRunner = (*Runner)(nil)

// NewRunner returns a Runner over store with the default settings.
func NewRunner(store *Store) *Runner { return &Runner{Store: store} }

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return r.Store.now()
}

func (r *Runner) pollInterval() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return DefaultPollInterval
}

func (r *Runner) staleAfter() time.Duration {
	if r.StaleAfter > 0 {
		return r.StaleAfter
	}
	return DefaultStaleAfter
}

func (r *Runner) maxStalls() int {
	if r.MaxStalls > 0 {
		return r.MaxStalls
	}
	return DefaultMaxStalls
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (r *Runner) alive(pid int) bool {
	if r.Alive != nil {
		return r.Alive(pid)
	}
	return processAlive(pid)
}

// Start records job jobID and launches its worker. Starting an id that
// already has a record starts nothing, unless that job's worker is dead:
// then it is restarted from its last committed batch. So a start retried
// after a crash never runs a job twice.
func (r *Runner) Start(ctx context.Context, jobID, sessionID, action string, params json.RawMessage) error {
	if err := checkID(jobID); err != nil {
		return err
	}
	b, err := bind(r.Actions, action, params)
	if err != nil {
		return fmt.Errorf("job %s: %w", jobID, err)
	}
	total := 0
	if job, ok := b.Job(); ok {
		total = job.Total()
	}
	rec := &Record{ID: jobID, SessionID: sessionID, Action: action, Params: params, State: actions.JobQueued,
		Progress: actions.Progress{Total: total}, CreatedAt: r.now()}
	existing, created, err := r.Store.Create(rec)
	if err != nil {
		return err
	}
	if !created {
		if existing.Terminal() || !r.dead(existing) {
			return nil
		}
		_, err := r.restart(ctx, jobID)
		return err
	}
	r.logger().Debug("job started", "job", jobID, "action", action, "total", total)
	return r.launch(ctx, jobID)
}

// launch starts a worker for a record that no worker holds.
func (r *Runner) launch(ctx context.Context, id string) error {
	pid, err := r.spawn(ctx, id)
	if err != nil {
		msg := fmt.Sprintf("cannot start the job's worker: %v", err)
		if _, uerr := r.Store.Update(id, func(rec *Record) error {
			if rec.Terminal() {
				return errNoChange
			}
			rec.State, rec.Error, rec.ErrorType = actions.JobFailed, msg, actions.ErrTypeUnknown
			return nil
		}); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return fmt.Errorf("job %s: %w", id, err)
	}
	_, err = r.Store.Update(id, func(rec *Record) error {
		rec.Attempts++
		if rec.Worker == "" && !rec.Terminal() {
			rec.PID, rec.Host = pid, hostname.Get() // until the worker claims the job and writes its own
		}
		return nil
	})
	return err
}

func (r *Runner) spawn(ctx context.Context, id string) (int, error) {
	if r.Spawn != nil {
		return r.Spawn(ctx, id)
	}
	path := r.Exec.Path
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return 0, fmt.Errorf("find the executable for the worker: %w", err)
		}
		path = exe
	}
	arg0 := r.Exec.Arg0
	if arg0 == "" {
		arg0 = WorkerArg0
	}
	args := append(append([]string(nil), r.Exec.Args...), "jobs", "work", id)
	env := r.Exec.Env
	if env == nil {
		env = os.Environ()
	}
	return spawnDetached(path, arg0, args, env, r.Store.LogPath(id))
}

// dead reports whether a job that should be running has lost its worker:
// the worker's process is gone, it has shown no life for StaleAfter, or no
// worker was ever launched for it.
func (r *Runner) dead(rec *Record) bool {
	if rec.State != actions.JobRunning && rec.State != actions.JobQueued {
		return false
	}
	if rec.PID > 0 && onThisHost(rec) && !r.alive(rec.PID) {
		return true
	}
	if rec.State == actions.JobQueued && rec.Attempts == 0 && rec.PID == 0 && rec.Worker == "" {
		// Start writes the record, then launches the worker and counts the
		// attempt. Only the process that holds the session started it, and
		// it has returned (or died) by the time anyone else asks: a record
		// left like this was never launched. Waiting StaleAfter for a
		// heartbeat that cannot come would only stall the resume. (Should
		// a worker have been spawned just before its starter died, its
		// claim and the relaunched worker's fence each other off: only one
		// commits.)
		return true
	}
	return r.now().Sub(rec.lastSign()) > r.staleAfter()
}

// restart hands a job whose worker is dead to a new worker, which continues
// from the last committed batch. Clearing the claim token fences the old
// worker in case it was only slow: it can no longer commit.
func (r *Runner) restart(ctx context.Context, id string) (*Record, error) {
	relaunch := false
	rec, err := r.Store.Update(id, func(rec *Record) error {
		if rec.Terminal() || !r.dead(rec) {
			return errNoChange // another process restarted it meanwhile
		}
		if rec.Progress.Done > rec.LaunchDone {
			rec.Stalls = 0
		}
		rec.Stalls++
		if rec.Stalls > r.maxStalls() {
			rec.State, rec.ErrorType = actions.JobFailed, actions.ErrTypeUnknown
			rec.Error = fmt.Sprintf("the job's worker stopped %d times in a row without progress (at %d of %d); see %s",
				rec.Stalls, rec.Progress.Done, rec.Progress.Total, r.Store.LogPath(id))
			return nil
		}
		rec.LaunchDone = rec.Progress.Done
		rec.State, rec.Worker, rec.PID = actions.JobQueued, "", 0
		relaunch = true
		return nil
	})
	if err != nil || !relaunch {
		return rec, err
	}
	r.logger().Info("restarting the worker of a job", "job", id, "done", rec.Progress.Done, "total", rec.Progress.Total)
	if err := r.launch(ctx, id); err != nil {
		// launch has marked the job failed; the record says why.
		r.logger().Warn("restarting a job failed", "job", id, "err", err)
	}
	return r.Store.Load(id)
}

// Wait polls job jobID until it ends or d has passed, and returns its
// status; d = 0 checks once. A job whose worker died is restarted (and
// reported running).
func (r *Runner) Wait(ctx context.Context, jobID string, d time.Duration) (actions.JobStatus, error) {
	if err := checkID(jobID); err != nil {
		return actions.JobStatus{}, err
	}
	deadline := r.now().Add(d)
	for {
		rec, err := r.Store.Load(jobID)
		if err != nil {
			return actions.JobStatus{}, err
		}
		if !rec.Terminal() && r.dead(rec) {
			if rec, err = r.restart(ctx, jobID); err != nil {
				return actions.JobStatus{}, err
			}
		}
		left := deadline.Sub(r.now())
		if rec.Terminal() || d <= 0 || left <= 0 {
			return rec.Status(), nil
		}
		t := time.NewTimer(min(r.pollInterval(), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return rec.Status(), ctx.Err()
		case <-t.C:
		}
	}
}

// Cancel marks job jobID cancelled and sends its worker SIGTERM; the worker
// also notices the mark at its next heartbeat or commit. A job that has
// already ended is returned unchanged with ErrFinished.
func (r *Runner) Cancel(_ context.Context, jobID string) (*Record, error) {
	finished := false
	rec, err := r.Store.Update(jobID, func(rec *Record) error {
		if rec.Terminal() {
			finished = true
			return errNoChange
		}
		rec.State, rec.ErrorType = actions.JobCancelled, actions.ErrTypeUnknown
		rec.Error = fmt.Sprintf("cancelled with `upgrade-agent jobs cancel` after %d of %d", rec.Progress.Done, rec.Progress.Total)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if finished {
		return rec, fmt.Errorf("job %s is %s: %w", jobID, rec.State, ErrFinished)
	}
	// Only a worker that showed life recently is signalled: an old pid
	// may by now belong to some unrelated process.
	if hb := rec.HeartbeatAt; rec.PID > 0 && onThisHost(rec) && hb != nil && r.now().Sub(*hb) <= r.staleAfter() && r.alive(rec.PID) {
		if err := signalWorker(rec.PID, sigTerm); err != nil {
			r.logger().Debug("signalling the worker", "job", jobID, "pid", rec.PID, "err", err)
		}
	}
	return rec, nil
}

// Stale reports whether a job that should be running has lost its worker
// (for `jobs show`).
func (r *Runner) Stale(rec *Record) bool { return r.dead(rec) }
