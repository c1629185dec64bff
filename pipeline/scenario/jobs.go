package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
)

// stepJobs is the job runner scenarios use unless RunOptions.Jobs gives
// another. It runs in the test process and is deterministic on purpose: a
// job makes progress only while a turn waits on it (Wait with d > 0), and
// then runs to its end, one synthetic user at a time. So `wait_jobs: 0s`
// always suspends with 0 done and a waiting resume always finishes, which
// keeps transcripts byte-stable whatever the machine's speed. Real
// concurrency, detached workers and job records belong to the CLI's runner.
type stepJobs struct {
	api actions.API

	mu   sync.Mutex
	jobs map[string]*stepJob
}

type stepJob struct {
	status actions.JobStatus
	params json.RawMessage
}

func newStepJobs(api actions.API) *stepJobs {
	return &stepJobs{api: api, jobs: map[string]*stepJob{}}
}

// Start registers the job; starting the same id twice is a no-op, as a
// retried start after a crash must be.
func (r *stepJobs) Start(_ context.Context, jobID, _, action string, params json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.jobs[jobID]; ok {
		return nil
	}
	b, err := actions.Bind(action, params)
	if err != nil {
		return fmt.Errorf("start job %s: %w", jobID, err)
	}
	total := 0
	if job, ok := b.Job(); ok {
		total = job.Total()
	}
	r.jobs[jobID] = &stepJob{status: actions.JobStatus{ID: jobID, Action: action, State: actions.JobQueued, Total: total}, params: params}
	return nil
}

// Wait runs the job to its end when d > 0 and reports it.
func (r *stepJobs) Wait(ctx context.Context, jobID string, d time.Duration) (actions.JobStatus, error) {
	r.mu.Lock()
	j, ok := r.jobs[jobID]
	if !ok {
		r.mu.Unlock()
		return actions.JobStatus{}, fmt.Errorf("job %s: unknown job", jobID)
	}
	if j.status.Terminal() || d <= 0 {
		st := j.status
		r.mu.Unlock()
		return st, nil
	}
	j.status.State = actions.JobRunning
	r.mu.Unlock()

	result, err := r.run(ctx, j)

	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		j.status.State = actions.JobFailed
		j.status.Error = err.Error()
		j.status.ErrorType = string(upgrade.CategoryOf(err))
		if j.status.ErrorType == "" {
			j.status.ErrorType = actions.ErrTypeAPI
		}
	} else {
		j.status.State = actions.JobSucceeded
		j.status.Result = result
		j.status.Done = j.status.Total
	}
	return j.status, nil
}

func (r *stepJobs) run(ctx context.Context, j *stepJob) (json.RawMessage, error) {
	b, err := actions.Bind(j.status.Action, j.params)
	if err != nil {
		return nil, err
	}
	job, ok := b.Job()
	if !ok {
		out, err := b.Execute(ctx, actions.Env{API: r.api}, j.status.ID)
		return out.Result, err
	}
	return job.Run(ctx, actions.JobRun{
		API: r.api,
		Key: "sim-" + j.status.ID,
		// One unit at a time: the simulator's seeded draws then follow the
		// order of the work, so the result is the same on every run.
		Concurrency: 1,
		Commit: func(done int, _ json.RawMessage) error {
			r.mu.Lock()
			j.status.Done = done
			r.mu.Unlock()
			return nil
		},
	})
}
