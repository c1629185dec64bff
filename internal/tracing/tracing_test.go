package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestOffWithoutFileOrEndpoint(t *testing.T) {
	p, err := New(context.Background(), Options{Getenv: env(nil)})
	if err != nil || p != nil {
		t.Fatalf("New without file or endpoint = %v, %v; want nil, nil", p, err)
	}
	ctx := With(context.Background(), p)
	if On(ctx) || TraceID(ctx) != "" {
		t.Fatal("tracing is on without a provider")
	}
	_, span := Start(ctx, "x")
	if span.IsRecording() {
		t.Fatal("a span records without a provider")
	}
}

func TestOTLPEndpoint(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " http://h:4318/ "}, "http://h:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}, "http://t/x"},
	} {
		if got := OTLPEndpoint(env(c.env)); got != c.want {
			t.Errorf("OTLPEndpoint(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, spans reach an OTLP/HTTP
// collector; here a local httptest server.
func TestSpansReachOTLPEndpoint(t *testing.T) {
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case got <- r.URL.Path + " " + string(b):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "t.jsonl")
	p, err := New(ctx, Options{File: file, Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL})})
	if err != nil || p == nil {
		t.Fatalf("New: %v, %v", p, err)
	}
	tctx := With(ctx, p)
	sctx, span := Start(tctx, "invoke_agent upgrade-agent")
	if TraceID(sctx) == "" {
		t.Error("no trace id under a started span")
	}
	span.End()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case req := <-got:
		if !strings.HasPrefix(req, "/v1/traces ") || !strings.Contains(req, "invoke_agent upgrade-agent") {
			t.Errorf("the collector got %q", req)
		}
	case <-ctx.Done():
		t.Fatal("no OTLP request reached the collector")
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `"Name":"invoke_agent upgrade-agent"`) {
		t.Errorf("the file exporter wrote %q (%v)", b, err)
	}
}

func TestUnwritableTraceFile(t *testing.T) {
	_, err := New(context.Background(), Options{File: filepath.Join(t.TempDir(), "no", "such", "dir", "t.jsonl"), Getenv: env(nil)})
	if err == nil || !strings.Contains(err.Error(), "trace file") {
		t.Fatalf("err = %v, want a trace file error", err)
	}
}
