package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/upgrade-agent/upgrade-agent/pipeline/actions"
	"github.com/upgrade-agent/upgrade-agent/upgrade"
	"github.com/upgrade-agent/upgrade-agent/upgrade/sim"
)

const balanceUsers = 1000

// balanceFigures runs the condition-balance job for 1,000 users one user at
// a time and with the default pool, in the same run, against the in-memory
// simulator over loopback; then again with 1 ms added to every answer, the
// latency of a server across a network, which is what the pool is for.
func balanceFigures(ctx context.Context) ([]row, error) {
	var rows []row
	for _, v := range []struct {
		name   string
		delay  time.Duration
		rounds int
	}{{"bare loopback", 0, 3}, {"loopback + 1 ms per answer", time.Millisecond, 1}} {
		seq, pool, err := balanceRun(ctx, v.delay, v.rounds)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		speedup := seq.Seconds() / pool.Seconds()
		runs := "1 run each"
		if v.rounds > 1 {
			runs = fmt.Sprintf("median of %d interleaved runs each", v.rounds)
		}
		rows = append(rows, row{
			fmt.Sprintf("condition-balance job, %d users (3 calls each), %s: pool of %d vs one at a time", balanceUsers, v.name, actions.DefaultBalanceConcurrency),
			fmt.Sprintf("%s vs %s: %.1fx (%s)", ms(pool), ms(seq), speedup, runs), ">= 8x", pass(speedup >= 8)})
	}
	return rows, nil
}

func balanceRun(ctx context.Context, delay time.Duration, rounds int) (seq, pool time.Duration, err error) {
	s, err := sim.New(sim.Options{Seed: 42})
	if err != nil {
		return 0, 0, err
	}
	h := s.Handler()
	if delay > 0 {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(delay) // stands for network latency
			inner.ServeHTTP(w, r)
		})
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	c, err := upgrade.New(upgrade.Config{BaseURL: ts.URL + "/api", Timeout: 30 * time.Second})
	if err != nil {
		return 0, 0, err
	}
	// The job goes through the registry, as the agent's job runner does.
	expID, err := createExperiment(ctx, c, "Balance", "mathstream", "lesson-stream", "question-hint",
		[2]string{"question-hint-default", "question-hint-tutorbot"})
	if err != nil {
		return 0, 0, err
	}
	if _, err := c.SetState(ctx, expID, upgrade.StateEnrolling); err != nil {
		return 0, 0, err
	}
	timed := func(conc int, prefix string, users int) (time.Duration, error) {
		params, err := json.Marshal(map[string]any{"num_users": users, "context": "mathstream", "site": "lesson-stream",
			"target": "question-hint", "experiment_id": expID})
		if err != nil {
			return 0, err
		}
		b, err := actions.Bind("test_condition_balance", params)
		if err != nil {
			return 0, err
		}
		job, ok := b.Job()
		if !ok {
			return 0, fmt.Errorf("test_condition_balance is not a job")
		}
		var last struct {
			Done       int    `json:"done"`
			Errors     int    `json:"errors"`
			FirstError string `json:"first_error"`
		}
		commit := func(_ int, tally json.RawMessage) error { return json.Unmarshal(tally, &last) }
		start := time.Now()
		if _, err := job.Run(ctx, actions.JobRun{API: c, Key: prefix, Concurrency: conc, Commit: commit}); err != nil {
			return 0, err
		}
		if last.Done != users || last.Errors != 0 {
			return 0, fmt.Errorf("concurrency %d: %d of %d done, %d errors (%s)", conc, last.Done, users, last.Errors, last.FirstError)
		}
		return time.Since(start), nil
	}
	// Open the pool's connections first, as a long job would have them.
	if _, err := timed(0, "warm", 100); err != nil {
		return 0, 0, err
	}
	var seqs, pools []time.Duration
	for i := range rounds {
		d, err := timed(1, fmt.Sprintf("seq%d", i), balanceUsers)
		if err != nil {
			return 0, 0, err
		}
		seqs = append(seqs, d)
		if d, err = timed(0, fmt.Sprintf("pool%d", i), balanceUsers); err != nil {
			return 0, 0, err
		}
		pools = append(pools, d)
	}
	return percentile(seqs, 0.5), percentile(pools, 0.5), nil
}

// simulatorFigures loads POST /api/v6/assign of an in-memory simulator over
// loopback with eight clients on one keep-alive transport, the shape of the
// balance job, for the given window.
func simulatorFigures(ctx context.Context, window time.Duration) ([]row, error) {
	srv, err := sim.Start(sim.Options{Seed: 1})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	c, err := upgrade.New(upgrade.Config{BaseURL: srv.URL()})
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"Assign A", "Assign B"} {
		id, err := createExperiment(ctx, c, name, "assign-prog", "SelectSection", "absolute_value_plot_equality", [2]string{"control", "variant"})
		if err != nil {
			return nil, err
		}
		if _, err := c.SetState(ctx, id, upgrade.StateEnrolling); err != nil {
			return nil, err
		}
	}
	const users = 1000
	ids := make([]string, users)
	for i := range ids {
		ids[i] = fmt.Sprintf("rps-user-%d", i)
		class := fmt.Sprintf("class%d", i%40)
		if _, err := c.Init(ctx, ids[i], upgrade.InitRequest{Group: map[string][]string{"classId": {class}}, WorkingGroup: map[string]string{"classId": class}}); err != nil {
			return nil, err
		}
	}
	transport := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	url := srv.URL() + "/v6/assign"
	body := []byte(`{"context":"assign-prog"}`)

	var done, failed, next atomic.Int64
	deadline := time.Now().Add(window)
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				u := ids[int(next.Add(1))%users]
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					failed.Add(1)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("User-Id", u)
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := failed.Load(); n > 0 {
		return nil, fmt.Errorf("%d v6/assign requests failed", n)
	}
	rps := float64(done.Load()) / elapsed.Seconds()
	return []row{{"simulator POST v6/assign over loopback (8 keep-alive clients, 1,000 users, 2 running experiments)",
		fmt.Sprintf("%.0f requests/s (%d in %.1fs; load generator on the same cores)", rps, done.Load(), elapsed.Seconds()),
		">= 5,000 requests/s", pass(rps >= 5000)}}, nil
}
