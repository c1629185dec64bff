package upgrade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
)

// TestStatusCategories: the mapping of upgrade-api.md, by status only, with
// the server's message kept in the text.
func TestStatusCategories(t *testing.T) {
	tests := []struct {
		status int
		want   Category
	}{
		{400, CategoryValidation},
		{422, CategoryValidation},
		{401, CategoryAuth},
		{403, CategoryAuth},
		{404, CategoryNotFound},
		{500, CategoryAPI},
		{501, CategoryAPI},
		{502, CategoryAPI},
		{503, CategoryAPI},
		{409, CategoryUnknown},
		{418, CategoryUnknown},
		{302, CategoryUnknown},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			msg := fmt.Sprintf("server says %d", tt.status)
			f := newFake(t, map[string][]reply{"GET /api/experiments/names": {{status: tt.status,
				body: fmt.Sprintf(`{"name":"SomeError","message":%q,"endPoint":"/api/experiments/names","errorCode":%d,"type":"x","request":{}}`, msg, tt.status)}}})
			c, _ := newClient(t, f.url(), func(cfg *Config) { cfg.MaxRetries = -1 })
			_, err := c.ExperimentNames(t.Context())
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not *Error", err, err)
			}
			got := struct {
				Cat           Category
				Status        int
				Method        string
				URL           string
				Message       string
				CategoryOfErr Category
			}{e.Category, e.Status, e.Method, e.URL, e.Message, CategoryOf(err)}
			want := got
			want.Cat, want.Status, want.Method, want.URL, want.Message, want.CategoryOfErr =
				tt.want, tt.status, "GET", f.url()+"/experiments/names", msg, tt.want
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !strings.Contains(err.Error(), msg) {
				t.Errorf("error text %q lacks the server message", err)
			}
		})
	}
}

func TestCategoryOf(t *testing.T) {
	wrapped := fmt.Errorf("listing: %w", &Error{Category: CategoryAuth})
	tests := []struct {
		err  error
		want Category
	}{
		{nil, ""},
		{errors.New("plain"), ""},
		{&Error{Category: CategoryNotFound}, CategoryNotFound},
		{wrapped, CategoryAuth},
	}
	for _, tt := range tests {
		if got := CategoryOf(tt.err); got != tt.want {
			t.Errorf("CategoryOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	cause := errors.New("dial tcp: refused")
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"http", &Error{Category: CategoryNotFound, Status: 404, Method: "GET", URL: "http://h/api/experiments/single/x", Message: "Experiment not found"},
			"UpGrade GET http://h/api/experiments/single/x: 404 Not Found: Experiment not found"},
		{"http without message", &Error{Status: 502, Method: "GET", URL: "http://h/api"}, "UpGrade GET http://h/api: 502 Bad Gateway"},
		{"network after retries", &Error{Category: CategoryAPI, Message: "cannot reach UpGrade at http://h/api: refused", Err: cause, Attempts: 5},
			"cannot reach UpGrade at http://h/api: refused (gave up after 5 attempts)"},
		{"only a cause", &Error{Err: cause}, "dial tcp: refused"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%s: Error() = %q, want %q", tt.name, got, tt.want)
		}
	}
	if !errors.Is(tests[2].err, cause) {
		t.Error("Unwrap does not reach the cause")
	}
}

// TestHTML404: an unknown route answers Express's HTML page; the error is
// not_found with a short message, never the HTML.
func TestHTML404(t *testing.T) {
	f := newFake(t, nil) // every route is unknown
	c, _ := newClient(t, f.url(), nil)
	_, err := c.Experiments(t.Context())
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error, got %v", err)
	}
	if e.Category != CategoryNotFound || e.Status != 404 {
		t.Errorf("category %q status %d, want not_found 404", e.Category, e.Status)
	}
	want := "Cannot GET /api/experiments (unknown route: check that the base URL ends in /api)"
	if e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	if strings.Contains(err.Error(), "<") {
		t.Errorf("HTML leaked into the error: %q", err)
	}
}

func TestErrorMessageExtraction(t *testing.T) {
	long := strings.Repeat("x", 1000)
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        string
	}{
		{"json message", 400, "application/json", `{"name":"BadRequestError","message":"Invalid body, check 'errors' property","errorCode":400}`,
			"Invalid body, check 'errors' property"},
		{"json with validation details", 400, "application/json",
			`{"message":"Invalid body, check 'errors' property","errors":[{"property":"name","constraints":{"isNotEmpty":"name should not be empty","isString":"name must be a string"}}]}`,
			"Invalid body, check 'errors' property (name should not be empty; name must be a string)"},
		{"html 404", 404, "text/html", readTestdata(t, "express-404.html"), "Cannot GET /api/nope (unknown route: check that the base URL ends in /api)"},
		{"html 404 without pre", 404, "text/html", "<html><body>nothing</body></html>", "unknown route (HTML error page): check that the base URL ends in /api"},
		{"html 502 from a proxy", 502, "text/html", "<html><head><title>502 Bad Gateway</title></head><body><h1>bad</h1></body></html>", "HTML error page: 502 Bad Gateway"},
		{"html sniffed without content type", 500, "", "<!DOCTYPE html><html><pre>Internal &amp; broken</pre></html>", "Internal & broken"},
		{"plain text", 503, "text/plain", "  upstream\n connect error  ", "upstream connect error"},
		{"empty", 500, "", "", ""},
		{"json without message", 500, "application/json", `{"error":"x"}`, `{"error":"x"}`},
		{"long body shortened", 500, "text/plain", long, long[:maxMessageLen] + "..."},
	}
	for _, tt := range tests {
		if got := errorMessage(tt.status, tt.contentType, []byte(tt.body)); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestConnectionRefused: category api and the message of quality.md.
func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr + "/api"
	c, sl := newClient(t, base, nil)
	_, err = c.Experiments(t.Context())
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error, got %v", err)
	}
	if e.Category != CategoryAPI || e.Status != 0 {
		t.Errorf("category %q status %d, want api 0", e.Category, e.Status)
	}
	prefix := "cannot reach UpGrade at " + base + ": "
	if !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("error %q does not start with %q", err, prefix)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("cause lost: %v", err)
	}
	// GETs are retried on network errors: 1 + 4 attempts, 4 waits.
	if e.Attempts != 5 || len(sl.Waits()) != 4 {
		t.Errorf("attempts %d waits %v, want 5 attempts and 4 waits", e.Attempts, sl.Waits())
	}
}

// TestBaseURLPasswordHidden: a user:password in the base URL never shows in
// error text.
func TestBaseURLPasswordHidden(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, _ := newClient(t, "http://admin:hunter2@"+addr+"/api", func(cfg *Config) { cfg.MaxRetries = -1 })
	_, err = c.Experiments(t.Context())
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("password in error or no error: %v", err)
	}
	var e *Error
	if errors.As(err, &e) && strings.Contains(e.URL, "hunter2") {
		t.Errorf("password in Error.URL: %s", e.URL)
	}
}

// TestPerRequestTimeout: a server that never answers is cut off after
// Config.Timeout, as an api error naming the limit.
func TestPerRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := newFake(t, nil)
	srv.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	c, _ := newClient(t, srv.url(), func(cfg *Config) { cfg.Timeout = 50 * time.Millisecond; cfg.MaxRetries = -1 })
	_, err := c.ExperimentNames(t.Context())
	if CategoryOf(err) != CategoryAPI || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want api error wrapping DeadlineExceeded, got %v", err)
	}
	want := "UpGrade at " + srv.url() + " did not answer GET /experiments/names within 50ms"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestCancelledContext(t *testing.T) {
	f := newFake(t, map[string][]reply{"GET /api/experiments": {{body: "[]"}}})
	c, sl := newClient(t, f.url(), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Experiments(ctx)
	if !errors.Is(err, context.Canceled) || CategoryOf(err) != CategoryAPI {
		t.Fatalf("want api error wrapping Canceled, got %v", err)
	}
	if len(sl.Waits()) != 0 {
		t.Errorf("retried a cancelled call: waits %v", sl.Waits())
	}
}

// TestHTMLSuccessPage: a base URL that points at the web frontend answers
// 200 with HTML; the error says what to fix.
func TestHTMLSuccessPage(t *testing.T) {
	f := newFake(t, map[string][]reply{"GET /api/experiments": {{body: "<!doctype html><html><body>UpGrade</body></html>"}}})
	c, _ := newClient(t, f.url(), nil)
	_, err := c.Experiments(t.Context())
	if CategoryOf(err) != CategoryAPI || !strings.Contains(err.Error(), "HTML page instead of JSON") {
		t.Errorf("got %v", err)
	}
}

// TestSetStateUnknownExperiment: the server would answer 500 to the state
// change; the client asks first and reports not_found without writing.
func TestSetStateUnknownExperiment(t *testing.T) {
	f := newFake(t, map[string][]reply{
		"GET /api/experiments/single/" + expID: {{status: 404, body: `{"name":"NotFoundError","message":"Experiment not found","errorCode":404}`}},
		"POST /api/experiments/state":          {{status: 500, body: `{"name":"QueryFailedError","message":"Cannot read properties of undefined","errorCode":500}`}},
	})
	c, _ := newClient(t, f.url(), nil)
	_, err := c.SetState(t.Context(), expID, StateEnrolling)
	if CategoryOf(err) != CategoryNotFound {
		t.Fatalf("category %q, want not_found (err %v)", CategoryOf(err), err)
	}
	if n := f.count("POST /api/experiments/state"); n != 0 {
		t.Errorf("state change sent %d times for an unknown experiment", n)
	}
}

func TestLocalValidation(t *testing.T) {
	f := newFake(t, nil)
	c, _ := newClient(t, f.url(), nil)
	ctx := t.Context()
	calls := map[string]func() error{
		"unknown state":       func() error { _, err := c.SetState(ctx, expID, "bogus"); return err },
		"empty state id":      func() error { _, err := c.SetState(ctx, " ", StateEnrolling); return err },
		"empty single id":     func() error { _, err := c.Experiment(ctx, ""); return err },
		"update without id":   func() error { _, err := c.UpdateExperiment(ctx, &Experiment{}); return err },
		"nil create":          func() error { _, err := c.CreateExperiment(ctx, nil); return err },
		"empty delete id":     func() error { _, err := c.DeleteExperiment(ctx, ""); return err },
		"empty stats id":      func() error { _, err := c.EnrollmentStats(ctx, ""); return err },
		"init without user":   func() error { _, err := c.Init(ctx, "", InitRequest{}); return err },
		"assign without user": func() error { _, err := c.Assign(ctx, "", "assign-prog"); return err },
		"mark without user":   func() error { _, err := c.Mark(ctx, "", MarkRequest{Data: MarkData{Site: "s"}}); return err },
		"mark without site":   func() error { _, err := c.Mark(ctx, "u", MarkRequest{}); return err },
	}
	for name, call := range calls {
		if err := call(); CategoryOf(err) != CategoryValidation {
			t.Errorf("%s: category %q, want validation (err %v)", name, CategoryOf(err), err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent for invalid input", n)
	}
}

// TestInvalidExperimentID: the server answers 400 to a non-UUID id; the
// category stays validation and the message says what is wrong.
func TestInvalidExperimentID(t *testing.T) {
	f := newFake(t, map[string][]reply{
		"GET /api/experiments/single/math-hints": {{status: 400, body: `{"name":"BadRequestError","message":"Validation failed (uuid is expected)","errorCode":400}`}},
		"DELETE /api/experiments/math-hints":     {{status: 400, body: `{"name":"BadRequestError","message":"Validation failed (uuid is expected)","errorCode":400}`}},
	})
	c, _ := newClient(t, f.url(), nil)
	for name, call := range map[string]func() error{
		"get":       func() error { _, err := c.Experiment(t.Context(), "math-hints"); return err },
		"set state": func() error { _, err := c.SetState(t.Context(), "math-hints", StateEnrolling); return err },
		"delete":    func() error { _, err := c.DeleteExperiment(t.Context(), "math-hints"); return err },
	} {
		err := call()
		if CategoryOf(err) != CategoryValidation {
			t.Errorf("%s: category %q, want validation", name, CategoryOf(err))
		}
		if err == nil || !strings.Contains(err.Error(), `"math-hints" is not a valid experiment id`) {
			t.Errorf("%s: error %v does not explain the id", name, err)
		}
	}
}

// TestSecretsNeverInErrorsOrLogs: a server that echoes the credentials it
// received cannot make them appear in error text or debug logs.
func TestSecretsNeverInErrorsOrLogs(t *testing.T) {
	const token, secret = "tok-SECRET-4242", "cs-SECRET-1717"
	jwt := clientJWT("key-1", secret)
	var echo http.HandlerFunc = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"name":"UnauthorizedError","message":"rejected %s (secret %s)","errorCode":401}`, r.Header.Get("Authorization"), secret)
	}
	f := newFake(t, nil)
	f.srv.Config.Handler = echo
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, _ := newClient(t, f.url(), func(cfg *Config) {
		cfg.Token, cfg.ClientAPIKey, cfg.ClientAPISecret, cfg.Logger = token, "key-1", secret, logger
	})
	_, err1 := c.Experiments(t.Context())
	_, err2 := c.Assign(t.Context(), "student-1", "assign-prog")
	for _, err := range []error{err1, err2} {
		if CategoryOf(err) != CategoryAuth {
			t.Errorf("category %q, want auth", CategoryOf(err))
		}
		text := fmt.Sprintf("%v %+v", err, err)
		for _, s := range []string{token, secret, jwt} {
			if strings.Contains(text, s) {
				t.Errorf("credential %q in error %q", s, text)
			}
		}
		if !strings.Contains(text, redact.Mark) {
			t.Errorf("error %q does not show the redaction", text)
		}
	}
	out := logs.String()
	for _, s := range []string{token, secret, jwt} {
		if strings.Contains(out, s) {
			t.Errorf("credential %q in logs:\n%s", s, out)
		}
	}
	for _, want := range []string{"method=GET", "path=/experiments", "status=401", "duration=", "path=/v6/assign", "authorization=\"bearer [REDACTED]\""} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" = valid
	}{
		{"ok", Config{BaseURL: "http://127.0.0.1:3030/api"}, ""},
		{"ok https with trailing slash", Config{BaseURL: "https://upgrade.example.org/api/"}, ""},
		{"empty", Config{}, "base URL is empty"},
		{"ftp", Config{BaseURL: "ftp://h/api"}, "scheme must be http or https"},
		{"no scheme", Config{BaseURL: "localhost:3030/api"}, "scheme must be http or https"},
		{"no host", Config{BaseURL: "http:///api"}, "no host"},
		{"query", Config{BaseURL: "http://h/api?x=1"}, "query or fragment"},
		{"unparseable", Config{BaseURL: "http://h:port/api"}, "invalid UpGrade base URL"},
		{"negative timeout", Config{BaseURL: "http://h/api", Timeout: -time.Second}, "must not be negative"},
		{"key without secret", Config{BaseURL: "http://h/api", ClientAPIKey: "k"}, "set together"},
		{"secret without key", Config{BaseURL: "http://h/api", ClientAPISecret: "s"}, "set together"},
	}
	for _, tt := range tests {
		c, err := New(tt.cfg)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		case tt.want != "" && CategoryOf(err) != CategoryValidation:
			t.Errorf("%s: category %q, want validation", tt.name, CategoryOf(err))
		case tt.want == "" && strings.HasSuffix(c.BaseURL(), "/"):
			t.Errorf("%s: BaseURL %q keeps a trailing slash", tt.name, c.BaseURL())
		}
	}
}

// TestSharedKeepAliveClient: clients without their own http.Client share one
// pooled transport sized for the balance job's parallelism.
func TestSharedKeepAliveClient(t *testing.T) {
	a, _ := New(Config{BaseURL: "http://127.0.0.1:1/api"})
	b, _ := New(Config{BaseURL: "http://127.0.0.1:2/api"})
	if a.hc != b.hc {
		t.Fatal("clients do not share the http.Client")
	}
	tr, ok := a.hc.Transport.(*http.Transport)
	if !ok || tr.MaxIdleConnsPerHost < 64 {
		t.Errorf("transport %T MaxIdleConnsPerHost too small", a.hc.Transport)
	}
	own := &http.Client{}
	c, _ := New(Config{BaseURL: "http://127.0.0.1:1/api", HTTPClient: own})
	if c.hc != own {
		t.Error("Config.HTTPClient ignored")
	}
}

// TestEmptyAnswerIsAnError: a 2xx answer with no body where data is due is
// a broken answer (an API error), never an empty list; only the single
// experiment read takes it as "not found", as older servers meant it.
func TestEmptyAnswerIsAnError(t *testing.T) {
	f := newFake(t, map[string][]reply{
		"GET /api/experiments":          {{status: 200}},
		"GET /api/experiments/single/x": {{status: 200}},
	})
	c, _ := newClient(t, f.url(), nil)
	list, err := c.Experiments(t.Context())
	if CategoryOf(err) != CategoryAPI || list != nil || !strings.Contains(err.Error(), "empty body") {
		t.Errorf("Experiments on an empty answer = %v, %v; want an API error naming the empty body", list, err)
	}
	if _, err := c.Experiment(t.Context(), "x"); CategoryOf(err) != CategoryNotFound {
		t.Errorf("Experiment on an empty answer: %v, want not found", err)
	}
}
