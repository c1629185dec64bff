package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// collector is an httptest OTLP/HTTP collector that keeps every request
// and answers with the statuses in answers, then 200.
type collector struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
	answers  []int
	header   http.Header
	delay    time.Duration
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
			b, _ = io.ReadAll(zr)
		}
	}
	c.mu.Lock()
	c.requests = append(c.requests, r)
	c.bodies = append(c.bodies, b)
	status := http.StatusOK
	if len(c.answers) > 0 {
		status, c.answers = c.answers[0], c.answers[1:]
	}
	delay := c.delay
	c.mu.Unlock()
	time.Sleep(delay)
	for k, v := range c.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status != http.StatusOK {
		// A collector that echoes the request, credentials included.
		_, _ = io.WriteString(w, "rejected: authorization was "+r.Header.Get("Authorization"))
		return
	}
	_, _ = io.WriteString(w, "{}")
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

// decode reads every body received as an ExportTraceServiceRequest with
// protojson, which rejects anything that is not OTLP's JSON encoding, and
// returns the spans by name with their resource.
func (c *collector) decode(t *testing.T) (map[string]*tracepb.Span, []*tracepb.ResourceSpans) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	spans := map[string]*tracepb.Span{}
	var all []*tracepb.ResourceSpans
	for _, b := range c.bodies {
		req := decodeOTLP(t, b)
		all = append(all, req.ResourceSpans...)
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name] = s
				}
			}
		}
	}
	return spans, all
}

// decodeOTLP decodes an OTLP JSON body with protojson. OTLP's JSON
// differs from protobuf's canonical JSON in one point: trace and span ids
// are hex, not base64. As the specification tells receivers to, the ids
// are turned from hex (which must be valid, of the right length) into
// base64 first; the rest is protojson's, which rejects unknown fields,
// wrong types and bad enum values.
func decodeOTLP(t *testing.T, body []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var tree any
	if err := json.Unmarshal(body, &tree); err != nil {
		t.Fatalf("the body is not JSON: %v\n%s", err, body)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				size := map[string]int{"traceId": 16, "spanId": 8, "parentSpanId": 8}[k]
				if s, ok := e.(string); ok && size > 0 {
					b, err := hex.DecodeString(s)
					if err != nil || len(b) != size || strings.ToLower(s) != s {
						t.Fatalf("%s %q is not %d bytes in lower-case hex", k, s, size)
					}
					v[k] = base64.StdEncoding.EncodeToString(b)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(tree)
	canonical, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := protojson.Unmarshal(canonical, &req); err != nil {
		t.Fatalf("the body is not OTLP JSON: %v\n%s", err, body)
	}
	return &req
}

func attrMap(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

type testErr struct{}

func (testErr) Error() string { return "the model timed out" }

// TestOTLPJSONIsValidOTLP: spans made through the package reach a
// collector as OTLP/HTTP JSON that protojson decodes into the generated
// ExportTraceServiceRequest, with the ids, parents, kinds, times,
// attributes, events, status and resource they had.
func TestOTLPJSONIsValidOTLP(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := New(ctx, Options{Version: "1.2.3", Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL + "/otlp/",
		"OTEL_EXPORTER_OTLP_HEADERS":  "Authorization=Bearer%20s3cret-token , x-tenant=t1",
	})})
	if err != nil || p == nil {
		t.Fatalf("New: %v, %v", p, err)
	}
	tctx := With(ctx, p)
	rctx, root := Start(tctx, "invoke_agent upgrade-agent")
	root.SetAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.Int("upgrade_agent.turn", 3),
		attribute.Bool("upgrade_agent.usage.estimated", true), attribute.Float64("ratio", 0.25),
		attribute.Float64("nan", math.NaN()), attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop", "tool_calls"}),
		attribute.Int64Slice("ints", []int64{1, -2}), attribute.BoolSlice("bools", nil))
	_, chat := Start(rctx, "chat gpt-4.1-mini", trace.WithSpanKind(trace.SpanKindClient))
	chat.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", 2)))
	End(chat, testErr{})
	_, okSpan := Start(rctx, "responder")
	okSpan.SetStatus(codes.Ok, "")
	End(okSpan, nil)
	End(root, nil)
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if col.count() == 0 {
		t.Fatal("no request reached the collector")
	}
	r := col.requests[0]
	if r.Method != http.MethodPost || r.URL.Path != "/otlp/v1/traces" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s (%s), want POST /otlp/v1/traces (application/json)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
	}
	if r.Header.Get("Authorization") != "Bearer s3cret-token" || r.Header.Get("X-Tenant") != "t1" {
		t.Errorf("headers %v lack those of OTEL_EXPORTER_OTLP_HEADERS", r.Header)
	}
	spans, rss := col.decode(t)
	if len(rss) != 1 || len(rss[0].ScopeSpans) != 1 || len(spans) != 3 {
		t.Fatalf("%d resources, %d spans (%v), want 1 resource with one scope and 3 spans", len(rss), len(spans), spans)
	}
	res := attrMap(rss[0].Resource.Attributes)
	if res["service.name"].GetStringValue() != "upgrade-agent" || res["service.version"].GetStringValue() != "1.2.3" {
		t.Errorf("resource attributes %v", res)
	}
	if rss[0].SchemaUrl != "https://opentelemetry.io/schemas/"+SemconvVersion || rss[0].ScopeSpans[0].Scope.GetName() != "github.com/upgrade-agent/upgrade-agent" {
		t.Errorf("schema %q, scope %v", rss[0].SchemaUrl, rss[0].ScopeSpans[0].Scope)
	}
	rootPB, chatPB, okPB := spans["invoke_agent upgrade-agent"], spans["chat gpt-4.1-mini"], spans["responder"]
	if rootPB == nil || chatPB == nil || okPB == nil {
		t.Fatalf("spans %v", spans)
	}
	tid, sid := root.SpanContext().TraceID(), root.SpanContext().SpanID()
	if hex.EncodeToString(rootPB.TraceId) != tid.String() || hex.EncodeToString(rootPB.SpanId) != sid.String() || len(rootPB.ParentSpanId) != 0 {
		t.Errorf("root ids %x/%x parent %x, want %s/%s and none", rootPB.TraceId, rootPB.SpanId, rootPB.ParentSpanId, tid, sid)
	}
	for _, s := range []*tracepb.Span{chatPB, okPB} {
		if !bytes.Equal(s.TraceId, rootPB.TraceId) || !bytes.Equal(s.ParentSpanId, rootPB.SpanId) {
			t.Errorf("%s: trace %x parent %x, want the root's", s.Name, s.TraceId, s.ParentSpanId)
		}
	}
	if chatPB.Kind != tracepb.Span_SPAN_KIND_CLIENT || rootPB.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("kinds %v, %v", chatPB.Kind, rootPB.Kind)
	}
	if rootPB.StartTimeUnixNano == 0 || rootPB.EndTimeUnixNano < rootPB.StartTimeUnixNano {
		t.Errorf("root times %d..%d", rootPB.StartTimeUnixNano, rootPB.EndTimeUnixNano)
	}
	if rootPB.Flags&0x1 == 0 || rootPB.Flags&otlpFlagHasIsRemote == 0 {
		t.Errorf("root flags %#x, want sampled and has-is-remote", rootPB.Flags)
	}
	a := attrMap(rootPB.Attributes)
	if a["gen_ai.operation.name"].GetStringValue() != "invoke_agent" || a["upgrade_agent.turn"].GetIntValue() != 3 ||
		!a["upgrade_agent.usage.estimated"].GetBoolValue() || a["ratio"].GetDoubleValue() != 0.25 || !math.IsNaN(a["nan"].GetDoubleValue()) {
		t.Errorf("root attributes %v", a)
	}
	if fr := a["gen_ai.response.finish_reasons"].GetArrayValue().GetValues(); len(fr) != 2 || fr[1].GetStringValue() != "tool_calls" {
		t.Errorf("finish reasons %v", fr)
	}
	if ints := a["ints"].GetArrayValue().GetValues(); len(ints) != 2 || ints[1].GetIntValue() != -2 {
		t.Errorf("ints %v", ints)
	}
	if b := a["bools"].GetArrayValue(); b == nil || len(b.Values) != 0 {
		t.Errorf("an empty bool slice is %v, want an empty array", a["bools"])
	}
	if chatPB.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || chatPB.Status.GetMessage() != "the model timed out" ||
		attrMap(chatPB.Attributes)["error.type"].GetStringValue() != "tracing.testErr" {
		t.Errorf("chat status %v, attributes %v", chatPB.Status, chatPB.Attributes)
	}
	if len(chatPB.Events) != 1 || chatPB.Events[0].Name != "retry" || attrMap(chatPB.Events[0].Attributes)["attempt"].GetIntValue() != 2 ||
		chatPB.Events[0].TimeUnixNano < chatPB.StartTimeUnixNano {
		t.Errorf("chat events %v", chatPB.Events)
	}
	if okPB.Status.GetCode() != tracepb.Status_STATUS_CODE_OK || rootPB.Status.GetCode() != tracepb.Status_STATUS_CODE_UNSET {
		t.Errorf("statuses %v, %v", okPB.Status, rootPB.Status)
	}
}

// TestOTLPJSONValues: each attribute type, and a remote parent and a
// link, decode with protojson to the values they had.
func TestOTLPJSONValues(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
	psid, _ := trace.SpanIDFromHex("1112131415161718")
	sid, _ := trace.SpanIDFromHex("2122232425262728")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid, Remote: true})
	stub := &spanRecord{
		Name: "s", SpanKind: trace.SpanKindConsumer, Parent: parent,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
		StartTime:   time.Unix(1, 5), EndTime: time.Unix(2, 0),
		Attributes: []attribute.KeyValue{
			attribute.Int64("big", math.MaxInt64), attribute.Float64("inf", math.Inf(-1)),
			attribute.Float64Slice("fs", []float64{1.5}), attribute.BoolSlice("bs", []bool{true, false}),
			{Key: "bytes", Value: attribute.ByteSliceValue([]byte{0, 255})},
			{Key: "map", Value: attribute.MapValue(attribute.String("k", "v"))},
			{Key: "slice", Value: attribute.SliceValue(attribute.IntValue(7), attribute.StringValue("x"))},
			{Key: "empty"},
		},
		Links:             []linkRecord{{SpanContext: parent, Attributes: []attribute.KeyValue{attribute.String("why", "caused by")}}},
		DroppedAttributes: 2,
	}
	body, err := json.Marshal(encodeSpans([]*spanRecord{stub}))
	if err != nil {
		t.Fatal(err)
	}
	req := decodeOTLP(t, body)
	s := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
	if s.Kind != tracepb.Span_SPAN_KIND_CONSUMER || s.StartTimeUnixNano != 1_000_000_005 || s.EndTimeUnixNano != 2_000_000_000 ||
		hex.EncodeToString(s.ParentSpanId) != "1112131415161718" || s.Flags != 0x1|otlpFlagHasIsRemote|otlpFlagIsRemote ||
		s.DroppedAttributesCount != 2 {
		t.Errorf("span %v", s)
	}
	a := attrMap(s.Attributes)
	if a["big"].GetIntValue() != math.MaxInt64 || !math.IsInf(a["inf"].GetDoubleValue(), -1) ||
		a["fs"].GetArrayValue().GetValues()[0].GetDoubleValue() != 1.5 || a["bs"].GetArrayValue().GetValues()[1].GetBoolValue() ||
		!bytes.Equal(a["bytes"].GetBytesValue(), []byte{0, 255}) || attrMap(a["map"].GetKvlistValue().GetValues())["k"].GetStringValue() != "v" ||
		a["slice"].GetArrayValue().GetValues()[0].GetIntValue() != 7 || a["empty"] == nil || a["empty"].Value != nil {
		t.Errorf("attributes %v", a)
	}
	if len(s.Links) != 1 || hex.EncodeToString(s.Links[0].SpanId) != "1112131415161718" || attrMap(s.Links[0].Attributes)["why"].GetStringValue() != "caused by" {
		t.Errorf("links %v", s.Links)
	}
}

func testExporter(t *testing.T, url string, headers map[string]string) *otlpExporter {
	t.Helper()
	e := newOTLPExporter(otlpConfig{url: url, headers: headers, timeout: 2 * time.Second}, "test")
	e.backoff, e.maxBackoff = time.Millisecond, 2*time.Millisecond
	return e
}

func oneSpan() []*spanRecord {
	return []*spanRecord{{Name: "s"}}
}

// TestOTLPRetries: 429/502/503/504 are tried again, a bounded number of
// times; other failures are not; Retry-After beyond the deadline stops at
// once; no error carries a header's value.
func TestOTLPRetries(t *testing.T) {
	ctx := context.Background()
	secret := map[string]string{"Authorization": "Bearer s3cret-token"}
	t.Run("recovers", func(t *testing.T) {
		col := &collector{answers: []int{503, 429}}
		srv := httptest.NewServer(col)
		defer srv.Close()
		if err := testExporter(t, srv.URL, secret).ExportSpans(ctx, oneSpan()); err != nil || col.count() != 3 {
			t.Errorf("err %v after %d requests, want nil after 3", err, col.count())
		}
	})
	t.Run("bounded", func(t *testing.T) {
		col := &collector{answers: []int{503, 503, 503, 503, 503, 503, 503}}
		srv := httptest.NewServer(col)
		defer srv.Close()
		err := testExporter(t, srv.URL, secret).ExportSpans(ctx, oneSpan())
		if err == nil || col.count() != 5 || !strings.Contains(err.Error(), "503") {
			t.Errorf("err %v after %d requests, want a 503 error after 5", err, col.count())
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows a header's value: %v", err)
		}
	})
	t.Run("not retried", func(t *testing.T) {
		col := &collector{answers: []int{400}}
		srv := httptest.NewServer(col)
		defer srv.Close()
		err := testExporter(t, srv.URL, secret).ExportSpans(ctx, oneSpan())
		if err == nil || col.count() != 1 || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "[REDACTED]") {
			t.Errorf("err %v after %d requests, want one request and an error without the token", err, col.count())
		}
	})
	t.Run("retry-after past the deadline", func(t *testing.T) {
		col := &collector{answers: []int{503}, header: http.Header{"Retry-After": {"30"}}}
		srv := httptest.NewServer(col)
		defer srv.Close()
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		start := time.Now()
		err := testExporter(t, srv.URL, nil).ExportSpans(dctx, oneSpan())
		if err == nil || col.count() != 1 || time.Since(start) > time.Second {
			t.Errorf("err %v after %d requests in %s, want an error at once", err, col.count(), time.Since(start))
		}
	})
	t.Run("timeout", func(t *testing.T) {
		col := &collector{delay: 300 * time.Millisecond}
		srv := httptest.NewServer(col)
		defer srv.Close()
		e := testExporter(t, srv.URL, nil)
		e.client.Timeout, e.attempts = 20*time.Millisecond, 2
		if err := e.ExportSpans(ctx, oneSpan()); err == nil || col.count() != 2 {
			t.Errorf("err %v after %d requests, want a timeout after 2", err, col.count())
		}
	})
	t.Run("partial success", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"partialSuccess":{"rejectedSpans":"1","errorMessage":"too old"}}`)
		}))
		defer srv.Close()
		if err := testExporter(t, srv.URL, nil).ExportSpans(ctx, oneSpan()); err == nil || !strings.Contains(err.Error(), "rejected 1 spans: too old") {
			t.Errorf("err %v, want the rejected spans", err)
		}
	})
	t.Run("after shutdown", func(t *testing.T) {
		col := &collector{}
		srv := httptest.NewServer(col)
		defer srv.Close()
		e := testExporter(t, srv.URL, nil)
		if err := e.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.ExportSpans(ctx, oneSpan()); err != nil || col.count() != 0 {
			t.Errorf("export after shutdown: %v, %d requests", err, col.count())
		}
	})
}

// TestOTLPGzipAndTLS: OTEL_EXPORTER_OTLP_COMPRESSION=gzip compresses the
// body; OTEL_EXPORTER_OTLP_CERTIFICATE is the CA an https collector is
// checked against; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as is.
func TestOTLPGzipAndTLS(t *testing.T) {
	col := &collector{}
	srv := httptest.NewTLSServer(col)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := New(ctx, Options{Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/custom",
		"OTEL_EXPORTER_OTLP_COMPRESSION":     "gzip",
		"OTEL_EXPORTER_OTLP_CERTIFICATE":     ca,
		"OTEL_EXPORTER_OTLP_TIMEOUT":         "5000",
	})})
	if err != nil {
		t.Fatal(err)
	}
	_, span := Start(With(ctx, p), "over tls")
	span.End()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if col.count() != 1 || col.requests[0].URL.Path != "/custom" || col.requests[0].Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("%d requests %v", col.count(), col.requests)
	}
	if spans, _ := col.decode(t); spans["over tls"] == nil {
		t.Errorf("spans %v", spans)
	}
}

// TestOTLPConfigErrors: a variable the exporter cannot use is an error
// naming it; a header's value never shows.
func TestOTLPConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://x/y"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "5s"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "-1"}, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_COMPRESSION"},
		{map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key s3cret-token"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 1"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b,bad key=s3cret-token"}, "OTEL_EXPORTER_OTLP_TRACES_HEADERS: entry 2"},
		{map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "k=%zzs3cret-token"}, "the value of k"},
		{map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": filepath.Join(dir, "none.pem")}, "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_KEY": filepath.Join(dir, "k.pem")}, "go together"},
	} {
		m := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}
		for k, v := range c.env {
			m[k] = v
		}
		p, err := New(context.Background(), Options{Getenv: env(m)})
		if err == nil {
			_ = p.Shutdown(context.Background())
			t.Errorf("%v: no error", c.env)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: error %q, want one naming %q without the header's value", c.env, err, c.want)
		}
	}
	// Certificates with an http:// endpoint contradict each other.
	ca := filepath.Join(dir, "ca.pem")
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	srv.Close()
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), Options{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": ca})})
	if err == nil || !strings.Contains(err.Error(), "not https") {
		t.Errorf("certificate with an http endpoint: %v", err)
	}
	if _, err := parseOTLPHeaders("a=1,,b=2"); err != nil {
		t.Errorf("an empty entry: %v", err)
	}
}
