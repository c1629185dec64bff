package upgrade

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Retry bounds. A CLI turn should fail within about a minute rather than
// hang; a single Retry-After beyond maxRetryAfter is clamped so a confused
// proxy cannot park the agent for an hour.
const (
	defaultMaxRetries   = 4
	defaultMaxRetryTime = time.Minute
	maxRetryAfter       = 20 * time.Second
	backoffInitial      = 250 * time.Millisecond
	backoffMax          = 4 * time.Second
)

// newBackOff is the capped exponential schedule between retries. The
// library's own Retry loop is not used because its timer cannot be replaced,
// and tests must not wait for real seconds; the client runs its loop with an
// injectable sleep and takes only the intervals from here.
func newBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = backoffInitial
	b.MaxInterval = backoffMax
	b.Multiplier = 2
	b.RandomizationFactor = 0.3
	b.Reset()
	return b
}

// retryableStatus lists the answers that mean "try again later": the
// gateway errors a restarting server or a load balancer produces, and rate
// limiting. A plain 500 is a server bug and retrying it would only repeat it.
func retryableStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
// It returns 0 when the header is absent or unreadable, and never more than
// maxRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0
	}
	return min(max(d, 0), maxRetryAfter)
}

// sleepContext waits d or until ctx ends, whichever comes first.
func sleepContext(ctx context.Context, d time.Duration) error {
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

// attemptResult is what one request produced, as the retry loop sees it.
type attemptResult struct {
	body       []byte
	err        *Error
	retryable  bool
	retryAfter time.Duration
}

// withRetries runs attempt until it succeeds, fails for good, or the budget
// (count and total time) is spent. Only calls marked idempotent get more than
// one attempt: admin writes must never be repeated blindly (durability.md).
func (c *Client) withRetries(ctx context.Context, idempotent bool, attempt func(n int) attemptResult) ([]byte, error) {
	maxAttempts := 1
	if idempotent {
		maxAttempts = c.maxRetries + 1
	}
	start := c.now()
	var bo backoff.BackOff
	for n := 1; ; n++ {
		res := attempt(n)
		if res.err == nil {
			return res.body, nil
		}
		res.err.Attempts = n
		if !res.retryable || n >= maxAttempts || ctx.Err() != nil {
			return nil, res.err
		}
		if bo == nil {
			bo = newBackOff()
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			return nil, res.err
		}
		if res.retryAfter > 0 {
			wait = res.retryAfter
		}
		if c.now().Sub(start)+wait > c.maxRetryTime {
			return nil, res.err
		}
		c.log.DebugContext(ctx, "upgrade retry", "method", res.err.Method, "url", res.err.URL,
			"attempt", n, "wait", wait, "cause", res.err.Error())
		if err := c.sleep(ctx, wait); err != nil {
			// The caller gave up while we waited: report the last real
			// failure, but let errors.Is see the cancellation too.
			res.err.Err = errors.Join(res.err.Err, err)
			return nil, res.err
		}
	}
}
