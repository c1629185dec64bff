package tracing

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// memProcessor keeps every ended span, as it ends.
type memProcessor struct {
	mu    sync.Mutex
	spans []*spanRecord
}

func (m *memProcessor) onEnd(r *spanRecord) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spans = append(m.spans, r)
}

func (*memProcessor) shutdown(context.Context) error { return nil }

func (m *memProcessor) GetSpans() []*spanRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*spanRecord{}, m.spans...)
}

// testProvider is a provider whose spans land in memory.
func testProvider(t *testing.T) (*Provider, *memProcessor) {
	t.Helper()
	exp := &memProcessor{}
	tp := newTracerProvider(newResource(nil, "test"), nil, exp)
	t.Cleanup(func() { _ = tp.shutdown(context.Background()) })
	return &Provider{tp: tp, tracer: tp.Tracer("test")}, exp
}

// httpSpan is what a client span says, for comparing ours with otelhttp's.
type httpSpan struct {
	Name        string
	Kind        trace.SpanKind
	Attrs       map[string]string
	Status      codes.Code
	Description string
	ChildOfTurn bool
	Propagated  bool // the server saw the span's id in traceparent
}

// call makes one request through rt under a traced turn span and returns
// the client span it made.
func call(t *testing.T, rt func(*Provider) http.RoundTripper, method, url string, seen *string) httpSpan {
	t.Helper()
	p, exp := testProvider(t)
	ctx, turn := p.tracer.Start(With(context.Background(), p), "turn")
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	*seen = ""
	res, err := (&http.Client{Transport: rt(p)}).Do(req)
	if err == nil {
		_, _ = io.ReadAll(res.Body)
		_ = res.Body.Close()
	}
	turn.End()
	var got *spanRecord
	spans := exp.GetSpans()
	for i := range spans {
		if spans[i].Name != "turn" {
			if got != nil {
				t.Fatalf("two client spans: %v", spans)
			}
			got = spans[i]
		}
	}
	if got == nil {
		t.Fatalf("no client span: %v", spans)
	}
	s := httpSpan{Name: got.Name, Kind: got.SpanKind, Attrs: map[string]string{}, Status: got.Status.Code,
		Description: got.Status.Description, ChildOfTurn: got.Parent.SpanID() == turn.SpanContext().SpanID(),
		Propagated: strings.Contains(*seen, got.SpanContext.SpanID().String())}
	for _, a := range got.Attributes {
		s.Attrs[string(a.Key)] = a.Value.String()
	}
	return s
}

// The transport makes the spans otelhttp made: same name, kind,
// attributes, status and traceparent, for a success, a client and a server
// error, an odd method and a failed connection.
func TestTransportSpansAsOtelhttp(t *testing.T) {
	var traceparent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent = r.Header.Get("traceparent")
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		case "/broken":
			w.WriteHeader(http.StatusBadGateway)
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() + "/x"
	_ = closed.Close()

	ours := func(*Provider) http.RoundTripper { return Transport(nil) }
	theirs := func(p *Provider) http.RoundTripper {
		return otelhttp.NewTransport(http.DefaultTransport, otelhttp.WithTracerProvider(p.tp),
			otelhttp.WithPropagators(propagation.TraceContext{}))
	}
	for _, tc := range []struct{ name, method, url string }{
		{"ok", http.MethodPost, srv.URL + "/api/experiments?x=1"},
		{"not found", http.MethodGet, srv.URL + "/missing"},
		{"server error", http.MethodDelete, srv.URL + "/broken"},
		{"lower-case method", "patch", srv.URL + "/api"},
		{"unknown method", "PURGE", srv.URL + "/api"},
		{"user info left out", http.MethodGet, strings.Replace(srv.URL, "http://", "http://user:secret@", 1) + "/api"},
		{"refused", http.MethodGet, refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := call(t, theirs, tc.method, tc.url, &traceparent)
			got := call(t, ours, tc.method, tc.url, &traceparent)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-otelhttp +ours):\n%s", d)
			}
			if !got.ChildOfTurn {
				t.Errorf("the client span is not a child of the turn span")
			}
			if tc.name != "refused" && !got.Propagated {
				t.Errorf("the server saw no traceparent of the client span")
			}
		})
	}
}

// The span ends when the body is closed, not before: a call whose body is
// still being read is still open.
func TestTransportSpanEndsWithTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "body")
	}))
	defer srv.Close()
	p, exp := testProvider(t)
	req, _ := http.NewRequestWithContext(With(context.Background(), p), http.MethodGet, srv.URL, nil)
	res, err := (&http.Client{Transport: Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans ended before the body was read", n)
	}
	_ = res.Body.Close()
	_ = res.Body.Close()
	if n := len(exp.GetSpans()); n != 1 {
		t.Errorf("%d spans after the body was closed twice, want 1", n)
	}
}

// Without a provider in the context the request goes straight through:
// no header added, the base transport sees the caller's request.
func TestTransportUntraced(t *testing.T) {
	var got *http.Request
	base := roundTrip(func(r *http.Request) (*http.Response, error) {
		got = r
		return nil, errors.New("stop")
	})
	req, _ := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
	_, _ = Transport(base).RoundTrip(req)
	if got != req || len(req.Header) != 0 {
		t.Errorf("untraced request changed: %v", req.Header)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRequestAttrs(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "https://upgrade.example.org:8443/api/experiments", nil)
	got := map[string]string{}
	for _, a := range requestAttrs(req) {
		got[string(a.Key)] = a.Value.String()
	}
	want := map[string]string{"http.request.method": "POST", "url.full": "https://upgrade.example.org:8443/api/experiments",
		"server.address": "upgrade.example.org", "server.port": "8443", "network.protocol.version": "1.1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	req, _ = http.NewRequest(http.MethodGet, "https://[::1]:443/", nil)
	keys := []string{}
	for _, a := range requestAttrs(req) {
		keys = append(keys, string(a.Key)+"="+a.Value.String())
	}
	sort.Strings(keys)
	if d := cmp.Diff([]string{"http.request.method=GET", "network.protocol.version=1.1", "server.address=::1", "url.full=https://[::1]:443/"}, keys); d != "" {
		t.Errorf("default port (-want +got):\n%s", d)
	}
}
