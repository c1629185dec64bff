// Package jobstest is the conformance suite of job records on a shared
// store: every backend of jobs.Store (the state dir's files, PostgreSQL)
// runs it. It lives beside pipeline/jobs, not in checkpoint/storetest, so
// that checkpoint and its suite import nothing from the pipeline.
package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/pipeline/jobs"
)

// Harness says how to reach one kind of store: a spec names one store (a
// state dir, a database URL); every Open of it is another handle, as
// another process or machine would have.
type Harness struct {
	// Fresh makes a new, empty store and returns its spec.
	Fresh func(t *testing.T) string
	// Open returns a new job store on it.
	Open func(t *testing.T, spec string) *jobs.Store
}

// Run runs the suite: records created once, commits from several handles
// ordered, and a stale worker taken over from its last committed batch.
func Run(t *testing.T, h Harness) {
	t.Run("JobClaimHeartbeatTakeover", func(t *testing.T) { testTakeover(t, h) })
}

func testTakeover(t *testing.T, h Harness) {
	spec := h.Fresh(t)
	a, b := h.Open(t, spec), h.Open(t, spec)
	rec := &jobs.Record{ID: "job1", SessionID: "s", Action: "test_condition_balance", Params: json.RawMessage(`{}`),
		State: actions.JobQueued, Progress: actions.Progress{Total: 400}}
	if _, created, err := a.Create(rec); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if old, created, err := b.Create(&jobs.Record{ID: "job1", Action: "other", State: actions.JobQueued}); err != nil || created || old.Action != "test_condition_balance" {
		t.Fatalf("second create: %+v %v %v, want the first record kept", old, created, err)
	}
	// Worker A claims and commits batches; then its machine is gone.
	old := time.Now().UTC()
	if _, err := a.Update("job1", func(r *jobs.Record) error {
		r.State, r.Worker, r.PID, r.HeartbeatAt, r.Attempts = actions.JobRunning, "token-a", 0, &old, 1
		r.Progress.Done = 120
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Commits from two handles at once are ordered: none is lost.
	var wg sync.WaitGroup
	for _, s := range []*jobs.Store{a, b} {
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Update("job1", func(r *jobs.Record) error { r.Progress.Done++; return nil }); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	got, err := b.Load("job1")
	if err != nil || got.Progress.Done != 140 {
		t.Fatalf("after 20 concurrent commits: %+v %v, want done 140", got, err)
	}
	// Another machine's resume finds the heartbeat stale and takes over
	// from the last committed batch, fencing worker A off.
	var spawned []string
	r := jobs.NewRunner(b)
	r.StaleAfter = 5 * time.Second
	r.Now = func() time.Time { return time.Now().Add(time.Minute) } // a minute without a sign of life
	r.Spawn = func(_ context.Context, id string) (int, error) { spawned = append(spawned, id); return 0, nil }
	st, err := r.Wait(context.Background(), "job1", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = a.Load("job1")
	if len(spawned) != 1 || got.Worker != "" || got.LaunchDone != 140 || st.Done != 140 || got.Attempts != 2 {
		t.Fatalf("takeover: spawned %v, record %+v, status %+v; want one relaunch from 140 with worker A fenced off", spawned, got, st)
	}
	list, err := a.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %v %v", list, err)
	}
	if _, err := a.Load("nosuch"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
}
