package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrorKind classifies an LLM failure. The CLI maps kinds to exit codes
// (auth -> 3, everything else -> 1), and the retry loop decides from the kind
// whether another attempt can help.
type ErrorKind string

// The failure kinds.
const (
	KindAuth       ErrorKind = "auth"        // 401 or 403: the key is missing, wrong or not allowed
	KindRateLimit  ErrorKind = "rate_limit"  // 429 (retried, honouring Retry-After)
	KindServer     ErrorKind = "server"      // 5xx (500/502/503/504 retried)
	KindNetwork    ErrorKind = "network"     // no HTTP answer: refused, reset, DNS, timeout (retried)
	KindLength     ErrorKind = "length"      // finish_reason "length": the reply was cut at the token limit
	KindEmpty      ErrorKind = "empty"       // a 200 answer without any choice
	KindTruncated  ErrorKind = "truncated"   // a 200 answer whose body was cut off or is not valid JSON (retried)
	KindBadRequest ErrorKind = "bad_request" // 400, 404, 422...: the request itself is wrong; never retried
	KindCanceled   ErrorKind = "canceled"    // the caller's context ended
)

// describe is the human wording of a kind, used in Error().
func (k ErrorKind) describe() string {
	switch k {
	case KindAuth:
		return "authentication refused"
	case KindRateLimit:
		return "rate limited"
	case KindServer:
		return "server error"
	case KindNetwork:
		return "network error"
	case KindLength:
		return "reply cut off at the token limit (finish_reason length)"
	case KindEmpty:
		return "empty reply (no choices)"
	case KindTruncated:
		return "truncated or unreadable response"
	case KindBadRequest:
		return "request rejected"
	case KindCanceled:
		return "canceled"
	}
	return string(k)
}

// Error is every failure a Client returns (the cassette player included).
//
// Message and Error() never contain the API key: provider messages are
// redacted before they are stored here. Err keeps the original cause for
// errors.Is / errors.As (context.Canceled, net errors, ErrReplayMiss...).
type Error struct {
	Kind     ErrorKind
	Status   int    // HTTP status; 0 when no HTTP answer was received
	Provider string // who answered: the base URL's host, "script:FILE", "replay:FILE"
	Message  string // the provider's message or the cause, redacted
	Err      error
	// Attempts is how many HTTP requests were sent for this call.
	Attempts int
}

// Error renders the failure in one line naming the provider and the cause.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("LLM ")
	if e.Provider != "" {
		b.WriteString(e.Provider)
	} else {
		b.WriteString("provider")
	}
	b.WriteString(": ")
	b.WriteString(e.Kind.describe())
	if e.Status >= 300 { // a 200 with an unusable body says nothing more with its status
		fmt.Fprintf(&b, " (HTTP %d %s)", e.Status, http.StatusText(e.Status))
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, ", gave up after %d attempts", e.Attempts)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Kind == KindAuth {
		b.WriteString(" (check OPENAI_API_KEY, and OPENAI_BASE_URL for a non-OpenAI endpoint)")
	}
	return b.String()
}

// Unwrap gives access to the cause.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of the first *Error in err's chain, or "" when
// there is none.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// ErrNotConfigured is returned by FromSpec when no live endpoint is usable
// and no script or cassette was given. The CLI turns it into exit 2.
var ErrNotConfigured = errors.New("no LLM configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint), or run with --llm script:FILE or --llm replay:FILE")

// ErrInvalidSpec is wrapped by FromSpec for an --llm value it does not know.
var ErrInvalidSpec = errors.New("invalid --llm value")

// ErrReplayMiss is wrapped (inside an *Error of kind bad_request) when the
// cassette holds no answer for a request.
var ErrReplayMiss = errors.New("request not in cassette")
