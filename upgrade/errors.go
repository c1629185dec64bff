package upgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"sort"
	"strings"
)

// Category is the kind of an UpGrade failure. The CLI maps it to an exit code
// and the agent reports it in the "errors[].type" field of its JSON output,
// so the values are part of the public interface (spec/cli.md).
type Category string

// The error categories of upgrade-api.md.
const (
	CategoryAPI        Category = "api"        // 5xx, network failure, unreadable answer
	CategoryAuth       Category = "auth"       // 401, 403
	CategoryValidation Category = "validation" // 400, 422, bad input caught before sending
	CategoryNotFound   Category = "not_found"  // 404
	CategoryUnknown    Category = "unknown"    // any other status
)

// Error is every failure the client returns. Status is 0 when no HTTP answer
// was received (network failure) or the request was refused before it was
// sent. Message never holds the admin token, the client secret or the JWT.
type Error struct {
	Category Category
	Status   int
	Method   string
	URL      string // with any user:password part redacted
	Message  string
	Err      error
	// Attempts is how many requests were sent (more than 1 after retries).
	Attempts int
}

// Error renders the failure in one line a person can act on.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Status > 0 {
		fmt.Fprintf(&b, "UpGrade %s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
		if e.Message != "" {
			b.WriteString(": ")
			b.WriteString(e.Message)
		}
	} else {
		switch {
		case e.Message != "":
			b.WriteString(e.Message)
		case e.Err != nil:
			b.WriteString(e.Err.Error())
		default:
			b.WriteString("UpGrade request failed")
		}
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (gave up after %d attempts)", e.Attempts)
	}
	return b.String()
}

// Unwrap gives access to the cause (a network error, a context error, a
// JSON error) for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// CategoryOf returns the category of the first *Error in err's chain, or ""
// when err is nil or not an UpGrade error.
func CategoryOf(err error) Category {
	var e *Error
	if errors.As(err, &e) {
		return e.Category
	}
	return ""
}

// categoryForStatus is the single place where HTTP statuses become
// categories (upgrade-api.md, Transport).
func categoryForStatus(status int) Category {
	switch {
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		return CategoryValidation
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return CategoryAuth
	case status == http.StatusNotFound:
		return CategoryNotFound
	case status >= 500 && status <= 599:
		return CategoryAPI
	}
	return CategoryUnknown
}

// maxMessageLen bounds how much of an unexpected answer ends up in an error
// message, so an HTML page or a huge body never floods the terminal.
const maxMessageLen = 300

// errorMessage extracts a short human message from an error answer: the
// server's JSON "message", the "Cannot GET /x" line of an HTML error page,
// or a trimmed plain-text body.
func errorMessage(status int, contentType string, body []byte) string {
	trimmed := strings.TrimSpace(string(body))
	if trimmed == "" {
		return ""
	}
	if strings.HasPrefix(trimmed, "{") {
		var se ServerError
		if json.Unmarshal(body, &se) == nil && se.Message != "" {
			msg := se.Message
			if details := validationDetails(body); details != "" {
				msg += " (" + details + ")"
			}
			return shorten(msg)
		}
	}
	if isHTML(contentType, trimmed) {
		// An HTML page means no controller answered: Express's default
		// handler for an unknown route, or a proxy's error page.
		if pre := between(trimmed, "<pre>", "</pre>"); pre != "" {
			msg := html.UnescapeString(strings.ReplaceAll(pre, "<br>", " "))
			if status == http.StatusNotFound {
				msg += " (unknown route: check that the base URL ends in /api)"
			}
			return shorten(msg)
		}
		if status == http.StatusNotFound {
			return "unknown route (HTML error page): check that the base URL ends in /api"
		}
		if title := between(trimmed, "<title>", "</title>"); title != "" {
			return shorten("HTML error page: " + html.UnescapeString(title))
		}
		return "HTML error page"
	}
	return shorten(trimmed)
}

// validationDetails renders the "errors" property of a validation answer
// when a server sends one (6.5 does not, but a proxy or the simulator may).
func validationDetails(body []byte) string {
	var v struct {
		Errors json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Errors) == 0 || string(v.Errors) == "null" {
		return ""
	}
	var list []struct {
		Property    string            `json:"property"`
		Constraints map[string]string `json:"constraints"`
	}
	if json.Unmarshal(v.Errors, &list) != nil {
		return ""
	}
	var parts []string
	for _, item := range list {
		keys := make([]string, 0, len(item.Constraints))
		for k := range item.Constraints {
			keys = append(keys, k)
		}
		sort.Strings(keys) // map order is random; messages must be stable
		for _, k := range keys {
			parts = append(parts, item.Constraints[k])
		}
		if len(item.Constraints) == 0 && item.Property != "" {
			parts = append(parts, item.Property+" is invalid")
		}
	}
	return strings.Join(parts, "; ")
}

func isHTML(contentType, body string) bool {
	if strings.Contains(strings.ToLower(contentType), "html") {
		return true
	}
	lower := strings.ToLower(body)
	return strings.HasPrefix(lower, "<!doctype html") || strings.HasPrefix(lower, "<html")
}

func between(s, open, close string) string {
	i := strings.Index(s, open)
	if i < 0 {
		return ""
	}
	rest := s[i+len(open):]
	j := strings.Index(rest, close)
	if j < 0 {
		return ""
	}
	return strings.TrimSpace(rest[:j])
}

func shorten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxMessageLen {
		return s
	}
	cut := maxMessageLen
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
