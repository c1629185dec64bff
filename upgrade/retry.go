package upgrade

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/upgrade-agent/upgrade-agent/internal/retry"
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
	var body []byte
	var last *Error
	policy := c.timing.Policy(backoffInitial, backoffMax)
	if !idempotent {
		policy.MaxAttempts = 1
	}
	r := retry.Do(ctx, policy, func(n int) (retry.Verdict, error) {
		res := attempt(n)
		if res.err == nil {
			body = res.body
			return retry.Verdict{}, nil
		}
		last = res.err
		last.Attempts = n
		return retry.Verdict{Retry: res.retryable, After: res.retryAfter}, last
	}, func(n int, wait time.Duration, _ error) {
		c.timing.Log.DebugContext(ctx, "upgrade retry", "method", last.Method, "url", last.URL,
			"attempt", n, "wait", wait, "cause", last.Error())
	})
	switch {
	case r.Err == nil:
		return body, nil
	case r.Canceled != nil:
		// The caller gave up while we waited: report the last real
		// failure, but let errors.Is see the cancellation too.
		last.Err = errors.Join(last.Err, r.Canceled)
	}
	return nil, last
}
