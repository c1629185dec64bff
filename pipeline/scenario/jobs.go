package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline"
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
	status pipeline.JobStatus
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
	if bp, ok := b.Typed().(actions.BalanceParams); ok {
		total = bp.NumUsers
	}
	r.jobs[jobID] = &stepJob{status: pipeline.JobStatus{ID: jobID, Action: action, State: "queued", Total: total}, params: params}
	return nil
}

// Wait runs the job to its end when d > 0 and reports it.
func (r *stepJobs) Wait(ctx context.Context, jobID string, d time.Duration) (pipeline.JobStatus, error) {
	r.mu.Lock()
	j, ok := r.jobs[jobID]
	if !ok {
		r.mu.Unlock()
		return pipeline.JobStatus{}, fmt.Errorf("job %s: unknown job", jobID)
	}
	if j.status.Terminal() || d <= 0 {
		st := j.status
		r.mu.Unlock()
		return st, nil
	}
	j.status.State = "running"
	r.mu.Unlock()

	result, err := r.run(ctx, j)

	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		j.status.State = "failed"
		j.status.Error = err.Error()
		j.status.ErrorType = string(upgrade.CategoryOf(err))
		if j.status.ErrorType == "" {
			j.status.ErrorType = "api"
		}
	} else {
		j.status.State = "succeeded"
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
	bp, ok := b.Typed().(actions.BalanceParams)
	if !ok {
		out, err := b.Execute(ctx, actions.Env{API: r.api}, j.status.ID)
		return out.Result, err
	}
	opts := actions.BalanceOptions{
		// One user at a time: the simulator's seeded draws then follow the
		// user order, so the counts are the same on every run.
		Concurrency: 1,
		UserPrefix:  "sim-" + j.status.ID + "-",
		Commit: func(t actions.BalanceTally) error {
			r.mu.Lock()
			j.status.Done = t.Done
			r.mu.Unlock()
			return nil
		},
	}
	tally, err := actions.RunBalance(ctx, r.api, bp, actions.BalanceTally{}, opts)
	if err != nil {
		return nil, err
	}
	res, err := actions.SummarizeBalance(ctx, r.api, bp, tally)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
