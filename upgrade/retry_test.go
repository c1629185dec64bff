package upgrade

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/internal/retry"
)

var unavailable = reply{status: http.StatusServiceUnavailable, body: `{"name":"Error","message":"try later"}`}

// TestFlakyServerRetried: 503 twice then 200 is a success after exactly
// three requests, with two capped backoff waits in between.
func TestFlakyServerRetried(t *testing.T) {
	f := newFake(t, map[string][]reply{"GET /api/experiments": {unavailable, unavailable, {body: "[]"}}})
	c, sl := newClient(t, f.url(), nil)
	got, err := c.Experiments(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("got %v", got)
	}
	if n := f.count("GET /api/experiments"); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	waits := sl.Waits()
	if len(waits) != 2 {
		t.Fatalf("waits %v, want 2", waits)
	}
	for _, w := range waits {
		if w <= 0 || w > backoffMax {
			t.Errorf("wait %s outside (0, %s]", w, backoffMax)
		}
	}
}

// TestRetryAfterHonoured: 429 with Retry-After (seconds or HTTP date) waits
// what the server asked, capped.
func TestRetryAfterHonoured(t *testing.T) {
	clock := newSleeper().Now()
	tests := []struct {
		name       string
		retryAfter string
		want       time.Duration
	}{
		{"seconds", "7", 7 * time.Second},
		{"http date", clock.Add(12 * time.Second).Format(http.TimeFormat), 12 * time.Second},
		{"capped", "3600", maxRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, map[string][]reply{"POST /api/v6/assign": {
				{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": tt.retryAfter}, body: `{"message":"slow down"}`},
				{body: "[]"},
			}})
			c, sl := newClient(t, f.url(), func(cfg *Config) { cfg.MaxRetryTime = time.Hour })
			if _, err := c.Assign(t.Context(), "student-1", "assign-prog"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]time.Duration{tt.want}, sl.Waits()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	tests := map[string]time.Duration{
		"":                      0,
		"0":                     0,
		"-5":                    0,
		"3":                     3 * time.Second,
		" 3 ":                   3 * time.Second,
		"20":                    20 * time.Second,
		"21":                    maxRetryAfter,
		"999999999999999999999": maxRetryAfter, // a huge wait is clamped, never overflows
		"soon":                  0,
		now.Add(5 * time.Second).Format(http.TimeFormat):  5 * time.Second,
		now.Add(-5 * time.Second).Format(http.TimeFormat): 0,
		now.Add(time.Hour).Format(http.TimeFormat):        maxRetryAfter,
	}
	for in, want := range tests {
		if got := retry.After(http.Header{"Retry-After": {in}}, now, maxRetryAfter); got != want {
			t.Errorf("Retry-After %q = %s, want %s", in, got, want)
		}
	}
}

// TestWritesNeverRetried: admin writes and marks get one request even on a
// retryable status.
func TestWritesNeverRetried(t *testing.T) {
	fixture := readTestdata(t, "experiment-6.5.json")
	e := wantMathHints()
	tests := []struct {
		name  string
		route string
		call  func(context.Context, *Client) error
	}{
		{"create", "POST /api/experiments", func(ctx context.Context, c *Client) error { _, err := c.CreateExperiment(ctx, &e); return err }},
		{"update", "PUT /api/experiments/" + expID, func(ctx context.Context, c *Client) error { _, err := c.UpdateExperiment(ctx, &e); return err }},
		{"state", "POST /api/experiments/state", func(ctx context.Context, c *Client) error {
			_, err := c.SetState(ctx, expID, StateEnrolling)
			return err
		}},
		{"delete", "DELETE /api/experiments/" + expID, func(ctx context.Context, c *Client) error { _, err := c.DeleteExperiment(ctx, expID); return err }},
		{"mark", "POST /api/v6/mark", func(ctx context.Context, c *Client) error {
			_, err := c.Mark(ctx, "student-1", MarkRequest{Data: MarkData{Site: "SelectSection"}})
			return err
		}},
	}
	for _, tt := range tests {
		for _, rp := range []reply{unavailable, {status: 429, header: map[string]string{"Retry-After": "1"}}, {hangUp: true}} {
			f := newFake(t, map[string][]reply{
				"GET /api":                             {{body: healthBody}},
				"GET /api/experiments/single/" + expID: {{body: fixture}},
				tt.route:                               {rp, {body: fixture}},
			})
			c, sl := newClient(t, f.url(), nil)
			err := tt.call(t.Context(), c)
			if CategoryOf(err) == "" {
				t.Errorf("%s on %d (hang up %v): want an error, got %v", tt.name, rp.status, rp.hangUp, err)
			}
			if n := f.count(tt.route); n != 1 {
				t.Errorf("%s on %d (hang up %v): %d requests, want 1", tt.name, rp.status, rp.hangUp, n)
			}
			if len(sl.Waits()) != 0 {
				t.Errorf("%s: waited %v", tt.name, sl.Waits())
			}
		}
	}
}

// TestIdempotentCallsRetried: GETs and the read-only or idempotent POSTs
// recover from one 503 and from one dropped connection.
func TestIdempotentCallsRetried(t *testing.T) {
	fixture := readTestdata(t, "experiment-6.5.json")
	tests := []struct {
		name  string
		route string
		ok    string
		call  func(context.Context, *Client) error
	}{
		{"health", "GET /api", healthBody, func(ctx context.Context, c *Client) error { _, err := c.Health(ctx); return err }},
		{"metadata", "GET /api/experiments/contextMetaData", `{"contextMetadata":{}}`, func(ctx context.Context, c *Client) error { _, err := c.ContextMetadata(ctx); return err }},
		{"names", "GET /api/experiments/names", "[]", func(ctx context.Context, c *Client) error { _, err := c.ExperimentNames(ctx); return err }},
		{"single", "GET /api/experiments/single/" + expID, fixture, func(ctx context.Context, c *Client) error { _, err := c.Experiment(ctx, expID); return err }},
		{"paginated", "POST /api/experiments/paginated", `{"total":0,"nodes":[]}`, func(ctx context.Context, c *Client) error {
			_, err := c.ExperimentsPage(ctx, PageRequest{Take: 10})
			return err
		}},
		{"stats", "POST /api/stats/enrollment/detail", `{"id":"x"}`, func(ctx context.Context, c *Client) error { _, err := c.EnrollmentStats(ctx, expID); return err }},
		{"init", "POST /api/v6/init", `{"id":"u"}`, func(ctx context.Context, c *Client) error { _, err := c.Init(ctx, "u", InitRequest{}); return err }},
		{"assign", "POST /api/v6/assign", "[]", func(ctx context.Context, c *Client) error { _, err := c.Assign(ctx, "u", "assign-prog"); return err }},
	}
	for _, tt := range tests {
		for _, first := range []reply{unavailable, {status: 502}, {status: 504}, {hangUp: true}} {
			f := newFake(t, map[string][]reply{tt.route: {first, {body: tt.ok}}})
			c, _ := newClient(t, f.url(), nil)
			if err := tt.call(t.Context(), c); err != nil {
				t.Errorf("%s after %d (hang up %v): %v", tt.name, first.status, first.hangUp, err)
			}
			if n := f.count(tt.route); n != 2 {
				t.Errorf("%s after %d (hang up %v): %d requests, want 2", tt.name, first.status, first.hangUp, n)
			}
		}
	}
}

func TestServerErrorNotRetried(t *testing.T) {
	f := newFake(t, map[string][]reply{"GET /api/experiments": {{status: 500, body: `{"message":"bug"}`}, {body: "[]"}}})
	c, _ := newClient(t, f.url(), nil)
	if _, err := c.Experiments(t.Context()); CategoryOf(err) != CategoryAPI {
		t.Fatalf("want api error, got %v", err)
	}
	if n := f.count("GET /api/experiments"); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestRetriesBounded: the count bound and the total-time bound each stop
// the loop.
func TestRetriesBounded(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		f := newFake(t, map[string][]reply{"GET /api/experiments": {unavailable}})
		c, _ := newClient(t, f.url(), func(cfg *Config) { cfg.MaxRetries = 2 })
		_, err := c.Experiments(t.Context())
		if CategoryOf(err) != CategoryAPI {
			t.Fatalf("want api error, got %v", err)
		}
		if n := f.count("GET /api/experiments"); n != 3 {
			t.Errorf("%d requests, want 3", n)
		}
		if e := err.(*Error); e.Attempts != 3 {
			t.Errorf("Attempts %d, want 3", e.Attempts)
		}
	})
	t.Run("default count", func(t *testing.T) {
		f := newFake(t, map[string][]reply{"GET /api/experiments": {unavailable}})
		c, _ := newClient(t, f.url(), nil)
		_, _ = c.Experiments(t.Context())
		if n := f.count("GET /api/experiments"); n != defaultMaxRetries+1 {
			t.Errorf("%d requests, want %d", n, defaultMaxRetries+1)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		f := newFake(t, map[string][]reply{"GET /api/experiments": {unavailable}})
		c, _ := newClient(t, f.url(), func(cfg *Config) { cfg.MaxRetries = -1 })
		_, _ = c.Experiments(t.Context())
		if n := f.count("GET /api/experiments"); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("total time", func(t *testing.T) {
		busy := reply{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "1"}}
		f := newFake(t, map[string][]reply{"GET /api/experiments": {busy}})
		c, sl := newClient(t, f.url(), func(cfg *Config) { cfg.MaxRetries = 100; cfg.MaxRetryTime = 2500 * time.Millisecond })
		_, err := c.Experiments(t.Context())
		if CategoryOf(err) != CategoryUnknown { // 429 maps to unknown
			t.Fatalf("want the 429 error, got %v", err)
		}
		// waits at t=0 and t=1 fit the budget; a third would end at 3s > 2.5s.
		if n := f.count("GET /api/experiments"); n != 3 {
			t.Errorf("%d requests, want 3", n)
		}
		if diff := cmp.Diff([]time.Duration{time.Second, time.Second}, sl.Waits()); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
	})
}

// TestCancelWhileWaiting: a caller that gives up during a backoff gets the
// last failure, and errors.Is sees the cancellation.
func TestCancelWhileWaiting(t *testing.T) {
	f := newFake(t, map[string][]reply{"GET /api/experiments": {unavailable}})
	ctx, cancel := context.WithCancel(t.Context())
	c, _ := newClient(t, f.url(), func(cfg *Config) {
		cfg.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	})
	_, err := c.Experiments(ctx)
	if e, ok := err.(*Error); !ok || e.Status != http.StatusServiceUnavailable {
		t.Fatalf("want the 503 error, got %v", err)
	}
	if n := f.count("GET /api/experiments"); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancellation not visible in %v", err)
	}
}
