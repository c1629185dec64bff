package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

type fakeClock struct {
	now   time.Time
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return nil
}

func policy(c *fakeClock, attempts int, maxTime time.Duration) Policy {
	return Policy{MaxAttempts: attempts, MaxTime: maxTime, Initial: 100 * time.Millisecond, Max: time.Second, Now: c.Now, Sleep: c.Sleep}
}

var errTransient = errors.New("transient")

func TestDoRetriesTransientFailuresUntilSuccess(t *testing.T) {
	c := &fakeClock{}
	r := Do(context.Background(), policy(c, 5, time.Minute), func(n int) (Verdict, error) {
		if n < 3 {
			return Verdict{Retry: true}, errTransient
		}
		return Verdict{}, nil
	}, nil)
	if r.Err != nil || r.Attempts != 3 || len(c.waits) != 2 {
		t.Fatalf("got %+v, waits %v", r, c.waits)
	}
	for _, w := range c.waits {
		if w <= 0 || w > time.Second {
			t.Errorf("wait %v outside the backoff bounds", w)
		}
	}
}

func TestDoStopsOnAFinalFailureAndOnTheAttemptBound(t *testing.T) {
	c := &fakeClock{}
	final := errors.New("bad request")
	r := Do(context.Background(), policy(c, 5, time.Minute), func(int) (Verdict, error) { return Verdict{}, final }, nil)
	if !errors.Is(r.Err, final) || r.Attempts != 1 || len(c.waits) != 0 {
		t.Fatalf("a final failure was retried: %+v", r)
	}
	r = Do(context.Background(), policy(c, 3, time.Minute), func(int) (Verdict, error) { return Verdict{Retry: true}, errTransient }, nil)
	if r.Attempts != 3 || r.Budget {
		t.Fatalf("got %+v", r)
	}
}

func TestDoHonoursRetryAfterAndTheTimeBudget(t *testing.T) {
	c := &fakeClock{}
	var heard []time.Duration
	r := Do(context.Background(), policy(c, 10, 5*time.Second), func(int) (Verdict, error) {
		return Verdict{Retry: true, After: 2 * time.Second}, errTransient
	}, func(_ int, wait time.Duration, _ error) { heard = append(heard, wait) })
	if !r.Budget || r.Attempts != 3 || len(c.waits) != 2 || c.waits[0] != 2*time.Second {
		t.Fatalf("got %+v, waits %v", r, c.waits)
	}
	if len(heard) != 2 {
		t.Errorf("onRetry heard %v", heard)
	}
}

func TestDoReportsACancelDuringAWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := Policy{MaxAttempts: 5, MaxTime: time.Minute, Initial: time.Millisecond, Max: time.Millisecond,
		Sleep: func(context.Context, time.Duration) error { cancel(); return context.Canceled }}
	r := Do(ctx, p, func(int) (Verdict, error) { return Verdict{Retry: true}, errTransient }, nil)
	if !errors.Is(r.Canceled, context.Canceled) || !errors.Is(r.Err, errTransient) {
		t.Fatalf("got %+v", r)
	}
}

func TestAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		h    http.Header
		want time.Duration
	}{
		{nil, 0},
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{http.Header{"Retry-After": {"3600"}}, 20 * time.Second}, // clamped
		{http.Header{"Retry-After": {now.Add(4 * time.Second).Format(http.TimeFormat)}}, 4 * time.Second},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {"-2"}}, 0},
		{http.Header{"Retry-After": {"999999999999999999999"}}, 20 * time.Second}, // clamped, no overflow
		{http.Header{"Retry-After-Ms": {"1e30"}}, 20 * time.Second},
		{http.Header{"Retry-After-Ms": {"Inf"}}, 20 * time.Second},
		{http.Header{"Retry-After": {"NaN"}}, 0},
	}
	for _, tt := range tests {
		if got := After(tt.h, now, 20*time.Second); got != tt.want {
			t.Errorf("After(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestSettingsWithDefaults(t *testing.T) {
	def := Settings{Timeout: time.Minute, MaxRetries: 3, MaxRetryTime: 2 * time.Minute}
	got := Settings{}.WithDefaults(def)
	if got.Timeout != time.Minute || got.MaxRetries != 3 || got.MaxRetryTime != 2*time.Minute ||
		got.Sleep == nil || got.Now == nil || got.Log == nil {
		t.Errorf("zero settings: %+v", got)
	}
	if p := got.Policy(time.Second, 8*time.Second); p.MaxAttempts != 4 || p.MaxTime != 2*time.Minute || p.Max != 8*time.Second {
		t.Errorf("policy: %+v", p)
	}
	set := Settings{Timeout: time.Second, MaxRetries: -1, MaxRetryTime: time.Second}.WithDefaults(def)
	if set.Timeout != time.Second || set.MaxRetries != 0 || set.MaxRetryTime != time.Second {
		t.Errorf("explicit settings changed: %+v", set)
	}
	if p := set.Policy(time.Second, time.Second); p.MaxAttempts != 1 {
		t.Errorf("MaxRetries -1 allows %d attempts, want 1", p.MaxAttempts)
	}
}
