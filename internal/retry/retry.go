// Package retry is the one bounded retry loop of the project, used by the
// LLM client and the UpGrade client: capped exponential backoff with
// jitter (cenkalti/backoff/v5 supplies the intervals), Retry-After honoured
// and clamped, a bound on attempts and on the total time, waits included,
// and an injectable clock and sleep so tests never wait for real.
//
// It decides nothing about what may be retried: the caller says, for each
// failure, whether it is worth another attempt.
package retry

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy bounds one retry loop.
type Policy struct {
	// MaxAttempts is the most attempts in all (1: no retry).
	MaxAttempts int
	// MaxTime bounds the whole loop, waits included: a wait that would
	// pass it is not made.
	MaxTime time.Duration
	// Initial and Max are the first and the largest backoff interval.
	Initial, Max time.Duration
	// Now and Sleep are the clock; nil means time.Now and a timer.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Settings are the timing options of a client that retries (the LLM
// client, the UpGrade client), so that both read their options by the same
// rules: zero means the client's default, a negative MaxRetries means no
// retry.
type Settings struct {
	// Timeout bounds one attempt.
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt.
	MaxRetries int
	// MaxRetryTime bounds the whole loop, waits included.
	MaxRetryTime time.Duration
	// Sleep waits between attempts; Now is the clock.
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
	// Log hears of attempts and retries.
	Log *slog.Logger
}

// WithDefaults fills what s leaves zero: Timeout, MaxRetries and
// MaxRetryTime from def, Sleep with Sleep, Now with time.Now, Log with a
// logger that discards. A negative MaxRetries becomes 0 (no retry).
func (s Settings) WithDefaults(def Settings) Settings {
	if s.Timeout <= 0 {
		s.Timeout = def.Timeout
	}
	switch {
	case s.MaxRetries == 0:
		s.MaxRetries = def.MaxRetries
	case s.MaxRetries < 0:
		s.MaxRetries = 0
	}
	if s.MaxRetryTime <= 0 {
		s.MaxRetryTime = def.MaxRetryTime
	}
	if s.Sleep == nil {
		s.Sleep = Sleep
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Policy is the loop these settings allow, for a call that may be
// retried, with the client's backoff intervals.
func (s Settings) Policy(initial, largest time.Duration) Policy {
	return Policy{MaxAttempts: max(s.MaxRetries, 0) + 1, MaxTime: s.MaxRetryTime, Initial: initial, Max: largest, Now: s.Now, Sleep: s.Sleep}
}

// Verdict is what the caller makes of a failed attempt.
type Verdict struct {
	// Retry: the failure is transient, another attempt may succeed.
	Retry bool
	// After is the server's Retry-After, which replaces the backoff.
	After time.Duration
}

// Result is how a loop ended.
type Result struct {
	// Attempts made.
	Attempts int
	// Err is the last attempt's error (nil: it succeeded).
	Err error
	// Budget: the loop stopped because the next wait would pass MaxTime.
	Budget bool
	// Canceled is the context's error when it ended during a wait.
	Canceled error
}

// Do runs try until it succeeds, fails with a verdict that says not to
// retry, or the attempts or the time are spent. onRetry, when set, hears of
// every wait before it starts.
func Do(ctx context.Context, p Policy, try func(n int) (Verdict, error), onRetry func(n int, wait time.Duration, err error)) Result {
	now := p.Now
	if now == nil {
		now = time.Now
	}
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	start := now()
	var bo *backoff.ExponentialBackOff
	var waited time.Duration
	for n := 1; ; n++ {
		v, err := try(n)
		if err == nil {
			return Result{Attempts: n}
		}
		if !v.Retry || n >= p.MaxAttempts || ctx.Err() != nil {
			return Result{Attempts: n, Err: err}
		}
		if bo == nil {
			bo = backoff.NewExponentialBackOff()
			bo.InitialInterval, bo.MaxInterval, bo.Multiplier, bo.RandomizationFactor = p.Initial, p.Max, 2, 0.3
			bo.Reset()
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			return Result{Attempts: n, Err: err}
		}
		if v.After > 0 {
			wait = v.After
		}
		// An injected Sleep passes no wall time, so the waits are counted
		// too: the budget holds in tests and real runs alike.
		if max(now().Sub(start), waited)+wait > p.MaxTime {
			return Result{Attempts: n, Err: err, Budget: true}
		}
		if onRetry != nil {
			onRetry(n, wait, err)
		}
		if serr := sleep(ctx, wait); serr != nil {
			return Result{Attempts: n, Err: err, Canceled: serr}
		}
		waited += wait
	}
}

// Sleep waits d or until ctx ends, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// After reads how long a server asks to wait: Azure's Retry-After-Ms, or
// Retry-After in seconds or as an HTTP date; clamped to limit, so a
// confused proxy cannot park a run for an hour; 0 when absent or
// unreadable.
func After(h http.Header, now time.Time, limit time.Duration) time.Duration {
	if h == nil {
		return 0
	}
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			d = time.Duration(min(ms/1000, limit.Seconds()) * float64(time.Second))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); d == 0 && v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil {
			if secs > 0 {
				d = time.Duration(min(secs, limit.Seconds()) * float64(time.Second))
			}
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	return min(max(d, 0), limit)
}
