package tracing

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// seqIDs hands out ids from a counter, the same sequence on both sides of
// the comparison (it is an IDGenerator of the SDK and of ours).
type seqIDs struct {
	mu sync.Mutex
	n  uint64
}

func (g *seqIDs) next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	return g.n
}

func (g *seqIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[8:], 0xabc000+g.next())
	return tid, g.NewSpanID(ctx, tid)
}

func (g *seqIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], g.next())
	return sid
}

type chatErr struct{ msg string }

func (e *chatErr) Error() string { return e.msg }

// spanTree makes, through tr and the Provider in ctx, every kind of span
// and call the project's code makes, and more of the API: attributes at
// start and later (a key set twice, past the count limit), events, the
// exception event, statuses in every order, links, a new root, remote
// parents (sampled and not), a panic, and an HTTP client span through
// Transport. Times are given, but for what the SDK timestamps itself
// (the HTTP span, the panic's event), which compare blanks.
func spanTree(t *testing.T, ctx context.Context, tr trace.Tracer, url string) {
	t.Helper()
	at := func(ms int) time.Time {
		return time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	rctx, root := tr.Start(ctx, "invoke_agent upgrade-agent", trace.WithTimestamp(at(0)), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(GenAIOperationName.String("invoke_agent"), GenAIConversationID.String("s-1"), attribute.Int("upgrade_agent.turn", 1)))
	nctx, node := tr.Start(rctx, "analyzer", trace.WithTimestamp(at(1)), trace.WithAttributes(attribute.String("upgrade_agent.node", "analyzer")))
	_, chat := tr.Start(nctx, "chat gpt-4.1-mini", trace.WithTimestamp(at(2)), trace.WithSpanKind(trace.SpanKindClient))
	chat.SetAttributes(GenAIUsageInputTokens.Int(10), GenAIResponseFinishReasons.StringSlice([]string{"stop"}),
		attribute.Bool("upgrade_agent.usage.estimated", true), attribute.Float64("ratio", 0.5), attribute.Int64Slice("ints", []int64{1, 2}))
	chat.AddEvent("retry", trace.WithTimestamp(at(3)), trace.WithAttributes(attribute.Int("attempt", 2)))
	chat.RecordError(&chatErr{"the model timed out"}, trace.WithTimestamp(at(4)))
	chat.RecordError(nil)
	chat.SetStatus(codes.Error, "the model timed out")
	chat.SetAttributes(ErrorTypeKey.String("*tracing.chatErr"))
	chat.End(trace.WithTimestamp(at(5)))
	chat.SetAttributes(attribute.String("after", "end"))
	node.End(trace.WithTimestamp(at(6)))

	tctx, tool := tr.Start(rctx, "execute_tool x", trace.WithTimestamp(at(7)))
	tool.SetStatus(codes.Ok, "dropped description")
	tool.SetStatus(codes.Error, "too late")
	tool.SetName("execute_tool set_action_needed")
	tool.AddLink(trace.Link{SpanContext: chat.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", "caused by")}})
	tool.AddLink(trace.Link{})
	_, inner := tr.Start(tctx, "inner", trace.WithTimestamp(at(8)), trace.WithLinks(trace.Link{SpanContext: root.SpanContext()}))
	inner.SetStatus(codes.Error, "first")
	inner.SetStatus(codes.Unset, "")
	inner.End(trace.WithTimestamp(at(9)))
	tool.End(trace.WithTimestamp(at(10)))

	actx, action := tr.Start(rctx, "action create_experiment", trace.WithTimestamp(at(11)))
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url+"/api/experiments", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Transport: Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(res.Body)
	_ = res.Body.Close()
	End(action, errors.New("conflict"))

	_, many := tr.Start(rctx, "many", trace.WithTimestamp(at(12)))
	for i := range attributeCountLimit + 3 {
		many.SetAttributes(attribute.Int(fmt.Sprintf("k%03d", i), i))
	}
	many.SetAttributes(attribute.Int("k000", -1), attribute.KeyValue{})
	for i := range eventCountLimit + 2 {
		many.AddEvent(fmt.Sprintf("e%d", i), trace.WithTimestamp(at(13)))
	}
	many.End(trace.WithTimestamp(at(14)))

	func() {
		defer func() { _ = recover() }()
		_, p := tr.Start(rctx, "panics", trace.WithTimestamp(at(15)))
		defer p.End(trace.WithTimestamp(at(16)))
		panic("boom")
	}()

	_, newRoot := tr.Start(rctx, "new root", trace.WithNewRoot(), trace.WithTimestamp(at(17)))
	newRoot.End(trace.WithTimestamp(at(18)))

	tid, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
	psid, _ := trace.SpanIDFromHex("1112131415161718")
	ts, _ := trace.ParseTraceState("vendor=x")
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	_, fromRemote := tr.Start(trace.ContextWithRemoteSpanContext(ctx, remote), "from remote", trace.WithTimestamp(at(19)), trace.WithSpanKind(trace.SpanKindServer))
	fromRemote.End(trace.WithTimestamp(at(20)))
	notSampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid, Remote: true})
	nsctx, dropped := tr.Start(trace.ContextWithRemoteSpanContext(ctx, notSampled), "not sampled")
	if dropped.IsRecording() || trace.SpanContextFromContext(nsctx).IsSampled() || dropped.SpanContext().TraceID() != tid {
		t.Errorf("a child of an unsampled parent records or is sampled: %v", dropped.SpanContext())
	}
	dropped.End()

	root.SetAttributes(attribute.Int("upgrade_agent.turn", 2), attribute.String("upgrade_agent.status", "done"))
	root.SetStatus(codes.Ok, "")
	root.End(trace.WithTimestamp(at(30)))
	if root.IsRecording() {
		t.Error("an ended span still records")
	}
}

// readLines decodes a JSON-lines file.
func readLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// blankTimes replaces the times the SDK takes itself (and ours too) with
// "T" after checking that they are RFC 3339 times.
func blankTimes(t *testing.T, line map[string]any) {
	t.Helper()
	blank := func(m map[string]any, k string) {
		s, _ := m[k].(string)
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil || strings.HasPrefix(s, "0001") {
			t.Errorf("%s of %v is %q", k, line["Name"], s)
		}
		m[k] = "T"
	}
	switch line["Name"] {
	case "HTTP POST":
		blank(line, "StartTime")
		blank(line, "EndTime")
	case "action create_experiment":
		blank(line, "EndTime")
	case "panics":
		for _, e := range line["Events"].([]any) {
			blank(e.(map[string]any), "Time")
		}
	}
}

// The --trace file is what OTel's SDK with its stdout exporter wrote: the
// same span tree through both gives the same lines, field by field (with
// the same id sequence on both sides; the times the SDK takes itself are
// only checked to be times), and the same resource from
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME.
func TestTraceFileAsStdouttrace(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test, team = a%20b,broken,service.version=0")
	t.Setenv("OTEL_SERVICE_NAME", "overridden")
	var traceparents []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
		w.WriteHeader(http.StatusConflict)
	}))
	defer srv.Close()
	ctx := context.Background()
	const scope = "github.com/upgrade-agent/upgrade-agent"

	// The SDK and stdouttrace, set up as New set them up before.
	var want bytes.Buffer
	exp, err := stdouttrace.New(stdouttrace.WithWriter(&want))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(&seqIDs{}), sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewWithAttributes(SchemaURL, ServiceName.String("upgrade-agent"), ServiceVersion.String("1.2.3"))))
	sdkTracer := tp.Tracer(scope, trace.WithSchemaURL(SchemaURL))
	spanTree(t, With(ctx, &Provider{tracer: sdkTracer}), sdkTracer, srv.URL)
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// Ours, through New and its file.
	file := filepath.Join(t.TempDir(), "t.jsonl")
	p, err := New(ctx, Options{File: file, Version: "1.2.3", Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	p.tp.ids = &seqIDs{}
	spanTree(t, With(ctx, p), p.tracer, srv.URL)
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	wantLines, gotLines := readLines(t, want.Bytes()), readLines(t, got)
	if len(wantLines) != 11 || len(gotLines) != len(wantLines) {
		t.Fatalf("%d lines from ours, %d from the SDK (want 11):\n%s", len(gotLines), len(wantLines), got)
	}
	for i := range wantLines {
		blankTimes(t, wantLines[i])
		blankTimes(t, gotLines[i])
		if d := cmp.Diff(wantLines[i], gotLines[i]); d != "" {
			t.Errorf("line %d (%v) (-SDK +ours):\n%s", i+1, wantLines[i]["Name"], d)
		}
	}
	if len(traceparents) != 2 || traceparents[0] == "" || traceparents[0] != traceparents[1] {
		t.Errorf("traceparents %q, want the same one from both", traceparents)
	}
	// Byte for byte, times aside: the same keys in the same order.
	times := regexp.MustCompile(`"\d{4}-\d\d-\d\dT[^"]*"`)
	if w, g := times.ReplaceAll(want.Bytes(), []byte(`"T"`)), times.ReplaceAll(got, []byte(`"T"`)); !bytes.Equal(w, g) {
		t.Errorf("the lines differ:\nSDK:  %s\nours: %s", w, g)
	}
}
