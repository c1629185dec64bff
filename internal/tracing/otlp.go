package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// otlpExporter sends spans to an OTLP/HTTP collector in the protocol's JSON
// encoding (POST {endpoint}/v1/traces, application/json). It replaces
// OTel's otlptracehttp, which links grpc and protobuf into the binary and
// costs every command about 3 ms of package init (docs/ARCHITECTURE.md,
// "Start-up"); the JSON mapping is a page of code.
type otlpExporter struct {
	cfg       otlpConfig
	shownURL  string // cfg.url without a password, for errors
	userAgent string
	client    *http.Client
	// backoff is the wait before the first retry; it doubles up to
	// maxBackoff. Tests shorten it.
	backoff, maxBackoff time.Duration
	attempts            int

	mu      sync.Mutex
	stopped bool
}

var _ spanExporter = (*otlpExporter)(nil)

// maxResponseBody is how much of a collector's answer is read.
const maxResponseBody = 64 << 10

func newOTLPExporter(cfg otlpConfig, version string) *otlpExporter {
	// Our own transport, set as net/http's default one is: another
	// package may have replaced or changed http.DefaultTransport.
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       cfg.tls,
	}
	shown := cfg.url
	if u, err := url.Parse(cfg.url); err == nil {
		shown = u.Redacted()
	}
	return &otlpExporter{
		cfg:       cfg,
		shownURL:  shown,
		userAgent: "upgrade-agent/" + version + " (OTLP/HTTP JSON exporter)",
		client:    &http.Client{Transport: tr, Timeout: cfg.timeout},
		backoff:   500 * time.Millisecond, maxBackoff: 4 * time.Second, attempts: 5,
	}
}

// ExportSpans sends one batch. Answers 429, 502, 503 and 504 and timed-out
// requests are tried again, at most attempts times in all, waiting as
// Retry-After says or with a doubling backoff, never past ctx's deadline.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []*spanRecord) error {
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped || len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(encodeSpans(spans))
	if err != nil {
		return fmt.Errorf("OTLP export: encoding spans: %w", err)
	}
	gz := false
	if e.cfg.gzip {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		if _, err := w.Write(body); err == nil && w.Close() == nil {
			body, gz = b.Bytes(), true
		}
	}
	wait := e.backoff
	for attempt := 1; ; attempt++ {
		retry, after, err := e.post(ctx, body, gz)
		if err == nil || !retry || attempt >= e.attempts {
			return err
		}
		if after > 0 {
			wait = after
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, e.maxBackoff)
	}
}

// post makes one request; retry says whether another may succeed, after
// is the collector's Retry-After.
func (e *otlpExporter) post(ctx context.Context, body []byte, gz bool) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("OTLP export: %w", err)
	}
	for k, v := range e.cfg.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", e.userAgent)
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		var ne net.Error
		timedOut := errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil
		return timedOut, 0, fmt.Errorf("OTLP export: %s", e.hide(err.Error()))
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return false, 0, partialSuccess(answer)
	}
	err = fmt.Errorf("OTLP export to %s: %s: %s", e.hide(e.shownURL), resp.Status, e.hide(excerpt(answer)))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, retryAfter(resp.Header.Get("Retry-After")), err
	}
	return false, 0, err
}

// hide replaces the headers' values in s: a collector or a proxy that
// echoes a request must not bring a credential into a warning.
func (e *otlpExporter) hide(s string) string {
	for _, v := range e.cfg.headers {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}

// excerpt is the start of a collector's error answer, on one line.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if s == "" {
		return "(empty answer)"
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// retryAfter reads a Retry-After of seconds or an HTTP date; 0 when none.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(min(s, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// partialSuccess reads an ExportTraceServiceResponse: a collector that
// took the request but rejected spans says so in partialSuccess.
func partialSuccess(answer []byte) error {
	var r struct {
		PartialSuccess *struct {
			RejectedSpans json.RawMessage `json:"rejectedSpans"`
			ErrorMessage  string          `json:"errorMessage"`
		} `json:"partialSuccess"`
	}
	if len(bytes.TrimSpace(answer)) == 0 || json.Unmarshal(answer, &r) != nil || r.PartialSuccess == nil {
		return nil
	}
	n, _ := strconv.ParseInt(strings.Trim(string(r.PartialSuccess.RejectedSpans), `"`), 10, 64)
	if n == 0 && r.PartialSuccess.ErrorMessage == "" {
		return nil
	}
	return fmt.Errorf("OTLP export: the collector rejected %d spans: %s", n, excerpt([]byte(r.PartialSuccess.ErrorMessage)))
}

// Shutdown stops further exports. The batcher has flushed its queue
// through ExportSpans before it calls Shutdown.
func (e *otlpExporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return ctx.Err()
}
