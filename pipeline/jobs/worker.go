package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// Why a worker stops before its job ends. Neither is a failure of the job.
var (
	errCancelled  = errors.New("the job was cancelled")
	errSuperseded = errors.New("another worker took the job over")
)

// Worker runs one job: the body of `upgrade-agent jobs work ID`. Set Store
// and API; the rest has defaults.
type Worker struct {
	Store *Store
	API   actions.API
	// Actions are the actions a job may be of; nil = the built-in set.
	Actions *actions.Registry

	Now       func() time.Time // nil = time.Now
	Heartbeat time.Duration    // 0 = DefaultHeartbeat
	// Concurrency and BatchSize tune the job's run (0 = its defaults).
	Concurrency int
	BatchSize   int
	// PID is recorded as the worker's process; 0 = this process.
	PID    int
	Logger *slog.Logger // nil = discard

	// afterCommit, in tests, runs after each committed batch.
	afterCommit func(actions.Progress)
}

// Key names what job id writes (actions.JobRun.Key): the same for every
// worker of the job, so a restarted worker continues where the last one
// committed and nothing is written under two names (the balance job's
// synthetic users are Key(id)-0, Key(id)-1, ...).
func Key(jobID string) string { return "job-" + jobID }

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now().UTC()
	}
	return time.Now().UTC()
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Run claims job id and works on it until it ends, is cancelled, or
// another worker takes it over. The job's own failures are recorded in the
// record and are not errors of Run; Run fails when the record cannot be
// read or written, or when ctx ends first (a signal that was not a
// cancellation): the record then keeps its last commit for a later restart.
func (w *Worker) Run(ctx context.Context, id string) error {
	token := newToken()
	pid := w.PID
	if pid == 0 {
		pid = os.Getpid()
	}
	rec, err := w.Store.Update(id, func(r *Record) error {
		if r.Terminal() {
			return errNoChange
		}
		now := w.now()
		r.State, r.Worker, r.PID, r.Host, r.HeartbeatAt = actions.JobRunning, token, pid, hostname.Get(), &now
		return nil
	})
	if err != nil {
		return err
	}
	if rec.Worker != token {
		w.logger().Info("job has already ended", "job", id, "state", rec.State)
		return nil
	}
	log := w.logger().With("job", id)
	log.Info("worker started", "action", rec.Action, "done", rec.Progress.Done, "total", rec.Progress.Total, "pid", pid)

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.heartbeat(runCtx, id, token, stop)
	}()
	result, runErr := w.work(runCtx, rec, token)
	stop(nil)
	wg.Wait()

	cause := context.Cause(runCtx)
	switch {
	case runErr == nil:
		return w.finish(id, token, func(r *Record) {
			r.State, r.Result, r.Error, r.ErrorType = actions.JobSucceeded, result, "", ""
			log.Info("job succeeded", "done", r.Progress.Done, "total", r.Progress.Total)
		})
	case errors.Is(runErr, errCancelled) || errors.Is(cause, errCancelled):
		log.Info("job cancelled")
		return nil
	case errors.Is(runErr, errSuperseded) || errors.Is(cause, errSuperseded):
		log.Info("another worker took the job over; stopping")
		return nil
	case ctx.Err() != nil:
		// Stopped from outside (a signal): if that was `jobs cancel`, the
		// record says so; otherwise it keeps the last commit and the job
		// is restarted by the next resume.
		if r, err := w.Store.Load(id); err == nil && r.State == actions.JobCancelled {
			log.Info("job cancelled")
			return nil
		}
		log.Warn("worker stopped before the job ended", "err", context.Cause(ctx))
		return fmt.Errorf("job %s: worker stopped: %w", id, ctx.Err())
	}
	typ := errorType(runErr)
	log.Warn("job failed", "err", runErr, "type", typ)
	return w.finish(id, token, func(r *Record) {
		r.State, r.Error, r.ErrorType = actions.JobFailed, runErr.Error(), typ
	})
}

// finish records the outcome if this worker still owns a running job.
func (w *Worker) finish(id, token string, set func(r *Record)) error {
	_, err := w.Store.Update(id, func(r *Record) error {
		if r.Worker != token || r.Terminal() {
			return errNoChange
		}
		set(r)
		return nil
	})
	return err
}

// heartbeat refreshes heartbeat_at until ctx ends, and stops the run when
// the job was cancelled or handed to another worker.
func (w *Worker) heartbeat(ctx context.Context, id, token string, stop context.CancelCauseFunc) {
	every := w.Heartbeat
	if every <= 0 {
		every = DefaultHeartbeat
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := w.Store.Update(id, func(r *Record) error {
			if err := owned(r, token); err != nil {
				return err
			}
			now := w.now()
			r.HeartbeatAt = &now
			return nil
		})
		if errors.Is(err, errCancelled) || errors.Is(err, errSuperseded) {
			stop(err)
			return
		}
		if err != nil {
			w.logger().Warn("heartbeat", "job", id, "err", err)
		}
	}
}

// owned says whether the worker holding token may still write to r.
func owned(r *Record, token string) error {
	switch {
	case r.State == actions.JobCancelled:
		return errCancelled
	case r.Worker != token || r.Terminal():
		return errSuperseded
	}
	return nil
}

// work runs the action and returns its result: a job body from its
// committed tally, committing after every batch; any other action once.
func (w *Worker) work(ctx context.Context, rec *Record, token string) (json.RawMessage, error) {
	b, err := bind(w.Actions, rec.Action, rec.Params)
	if err != nil {
		return nil, err
	}
	api := &recordingAPI{API: w.API}
	job, ok := b.Job()
	if !ok {
		// An action with no job body has no batches to resume from: it
		// runs once, inline in this worker.
		out, err := b.Execute(ctx, actions.Env{API: api}, rec.ID)
		return out.Result, api.categorize(err)
	}
	run := actions.JobRun{API: api, Key: Key(rec.ID), Tally: rec.Tally, Concurrency: w.Concurrency, BatchSize: w.BatchSize,
		Commit: func(done int, tally json.RawMessage) error {
			var p actions.Progress
			_, err := w.Store.Update(rec.ID, func(r *Record) error {
				if err := owned(r, token); err != nil {
					return err
				}
				now := w.now()
				p = actions.Progress{Done: done, Total: r.Progress.Total}
				r.Tally, r.Progress, r.HeartbeatAt = tally, p, &now
				return nil
			})
			if err == nil && w.afterCommit != nil {
				w.afterCommit(p)
			}
			return err
		}}
	res, err := job.Run(ctx, run)
	return res, api.categorize(err)
}

// errorType is the error_type of a failed job: the UpGrade category, else
// unknown.
func errorType(err error) string {
	if c := upgrade.CategoryOf(err); c != "" {
		return string(c)
	}
	var ce *categorized
	if errors.As(err, &ce) {
		if c := upgrade.CategoryOf(ce.cause); c != "" {
			return string(c)
		}
	}
	return actions.ErrTypeUnknown
}

// categorized is a run error together with the UpGrade error behind it.
type categorized struct{ err, cause error }

func (e *categorized) Error() string { return e.err.Error() }
func (e *categorized) Unwrap() error { return e.err }

// recordingAPI remembers the first UpGrade error the job's users met, so
// that a job that reports their failures in its own words ("every user of
// 0..49 failed") keeps the cause's category for error_type.
type recordingAPI struct {
	actions.API
	mu    sync.Mutex
	first error
}

// categorize attaches the first UpGrade error met to a run error that has
// no category of its own.
func (a *recordingAPI) categorize(err error) error {
	if err == nil || upgrade.CategoryOf(err) != "" {
		return err
	}
	if first := a.firstError(); first != nil {
		return &categorized{err: err, cause: first}
	}
	return err
}

func (a *recordingAPI) note(err error) {
	if err == nil || upgrade.CategoryOf(err) == "" {
		return
	}
	a.mu.Lock()
	if a.first == nil {
		a.first = err
	}
	a.mu.Unlock()
}

func (a *recordingAPI) firstError() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first
}

func (a *recordingAPI) Init(ctx context.Context, userID string, req upgrade.InitRequest) (*upgrade.InitResponse, error) {
	r, err := a.API.Init(ctx, userID, req)
	a.note(err)
	return r, err
}

func (a *recordingAPI) Assign(ctx context.Context, userID, appContext string) ([]upgrade.Assignment, error) {
	r, err := a.API.Assign(ctx, userID, appContext)
	a.note(err)
	return r, err
}

func (a *recordingAPI) Mark(ctx context.Context, userID string, req upgrade.MarkRequest) (*upgrade.MarkResponse, error) {
	r, err := a.API.Mark(ctx, userID, req)
	a.note(err)
	return r, err
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// bind binds a job's params to its action in reg (nil: the built-in set).
func bind(reg *actions.Registry, action string, params json.RawMessage) (*actions.Bound, error) {
	if reg == nil {
		return actions.Bind(action, params)
	}
	return reg.Bind(action, params)
}
