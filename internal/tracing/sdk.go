package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// This file is the package's implementation of the OTel trace API
// (TracerProvider, Tracer, Span), in place of OTel's SDK: the SDK, its
// semconv packages and its self-observability instruments cost every
// command about 20 package inits and 20 page faults at start-up. It does
// for our spans what the SDK did with its defaults: random ids, parent and
// child from the context, the parent-based always-on sampler, the default
// span limits, the exception event of RecordError, the status rule (Ok
// wins, only Error keeps a description), and spans handed to a batch
// processor per exporter (batch.go). The records it hands over have the
// fields and JSON of the SDK's tracetest.SpanStub, which OTel's stdout
// exporter writes (fileexport.go); the test runs one span tree through
// both and compares the lines.

// The SDK's default span limits (sdk/trace SpanLimits). The
// OTEL_SPAN_*_LIMIT variables are not read: no span of ours comes near.
const (
	attributeCountLimit = 128
	eventCountLimit     = 128
	linkCountLimit      = 128
	attrsPerEventLimit  = 128
	attrsPerLinkLimit   = 128
)

// idGenerator makes trace and span ids, as the SDK's IDGenerator.
type idGenerator interface {
	NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID)
	NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID
}

// randomIDs is the SDK's default id generator: math/rand/v2's
// runtime-seeded source, never an all-zero (invalid) id.
type randomIDs struct{}

func (randomIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

func (r randomIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, r.NewSpanID(ctx, tid)
}

// resourceRecord is the resource of every span: its attributes (a set,
// sorted by key, as the SDK's resource) and schema URL. Its JSON is the
// set's, as the SDK's Resource.
type resourceRecord struct {
	attrs     attribute.Set
	schemaURL string
}

func (r *resourceRecord) MarshalJSON() ([]byte, error) { return r.attrs.MarshalJSON() }

// scopeRecord is an instrumentation scope, with the fields of the SDK's
// instrumentation.Scope.
type scopeRecord struct {
	Name       string
	Version    string
	SchemaURL  string
	Attributes attribute.Set
}

// eventRecord, linkRecord and statusRecord have the fields of the SDK's
// Event, Link and Status.
type eventRecord struct {
	Name                  string
	Attributes            []attribute.KeyValue
	DroppedAttributeCount int
	Time                  time.Time
}

type linkRecord struct {
	SpanContext           trace.SpanContext
	Attributes            []attribute.KeyValue
	DroppedAttributeCount int
}

type statusRecord struct {
	Code        codes.Code
	Description string
}

// spanRecord is an ended span, with the fields (names, order, JSON) of
// the SDK's tracetest.SpanStub, which is what OTel's stdout exporter
// encodes; InstrumentationLibrary repeats the scope, as there.
type spanRecord struct {
	Name                   string
	SpanContext            trace.SpanContext
	Parent                 trace.SpanContext
	SpanKind               trace.SpanKind
	StartTime              time.Time
	EndTime                time.Time
	Attributes             []attribute.KeyValue
	Events                 []eventRecord
	Links                  []linkRecord
	Status                 statusRecord
	DroppedAttributes      int
	DroppedEvents          int
	DroppedLinks           int
	ChildSpanCount         int
	Resource               *resourceRecord
	InstrumentationScope   scopeRecord
	InstrumentationLibrary scopeRecord
}

// spanExporter takes batches of ended spans (the SDK's SpanExporter, over
// our records).
type spanExporter interface {
	ExportSpans(ctx context.Context, spans []*spanRecord) error
	Shutdown(ctx context.Context) error
}

// tracerProvider makes the tracers of one process run.
type tracerProvider struct {
	embedded.TracerProvider

	resource   *resourceRecord
	ids        idGenerator
	processors []spanProcessor

	mu      sync.Mutex
	tracers map[scopeKey]*tracer
}

type scopeKey struct{ name, version, schemaURL string }

var _ trace.TracerProvider = (*tracerProvider)(nil)

func newTracerProvider(res *resourceRecord, ids idGenerator, processors ...spanProcessor) *tracerProvider {
	if ids == nil {
		ids = randomIDs{}
	}
	return &tracerProvider{resource: res, ids: ids, processors: processors, tracers: map[scopeKey]*tracer{}}
}

// Tracer returns the tracer of the named scope, the same one for the same
// name, version and schema URL.
func (p *tracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	c := trace.NewTracerConfig(opts...)
	k := scopeKey{name, c.InstrumentationVersion(), c.SchemaURL()}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.tracers[k]
	if t == nil {
		t = &tracer{provider: p, scope: scopeRecord{Name: name, Version: k.version, SchemaURL: k.schemaURL,
			Attributes: c.InstrumentationAttributes()}}
		p.tracers[k] = t
	}
	return t
}

// shutdown flushes every processor and stops its exporter.
func (p *tracerProvider) shutdown(ctx context.Context) error {
	var errs []error
	for _, b := range p.processors {
		errs = append(errs, b.shutdown(ctx))
	}
	return errors.Join(errs...)
}

type tracer struct {
	embedded.Tracer

	provider *tracerProvider
	scope    scopeRecord
}

// Start starts a span under ctx's span (a new trace without one, or with
// trace.WithNewRoot). As the SDK's parent-based sampler: a span whose
// parent is not sampled is not recorded either.
func (t *tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	c := trace.NewSpanStartConfig(opts...)
	if ctx == nil {
		ctx = context.Background()
	}
	if ps, ok := trace.SpanFromContext(ctx).(*span); ok {
		ps.addChild()
	}
	var psc trace.SpanContext
	if c.NewRoot() {
		ctx = trace.ContextWithSpanContext(ctx, psc)
	} else {
		psc = trace.SpanContextFromContext(ctx)
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if psc.TraceID().IsValid() {
		tid, sid = psc.TraceID(), t.provider.ids.NewSpanID(ctx, psc.TraceID())
	} else {
		tid, sid = t.provider.ids.NewIDs(ctx)
	}
	scc := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceState: psc.TraceState()}
	sampled := !psc.IsValid() || psc.IsSampled()
	if sampled {
		scc.TraceFlags = psc.TraceFlags() | trace.FlagsSampled
	} else {
		scc.TraceFlags = psc.TraceFlags() &^ trace.FlagsSampled
	}
	sc := trace.NewSpanContext(scc)
	if !sampled {
		ns := unsampled(sc)
		return trace.ContextWithSpan(ctx, ns), ns
	}
	start := c.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	s := &span{tracer: t, parent: psc, sc: sc, kind: trace.ValidateSpanKind(c.SpanKind()), name: name, start: start}
	for _, l := range c.Links() {
		s.AddLink(l)
	}
	s.SetAttributes(c.Attributes()...)
	return trace.ContextWithSpan(ctx, s), s
}

// unsampled is the non-recording span of an unsampled trace: the API's
// no-op span carrying the span context.
func unsampled(sc trace.SpanContext) trace.Span {
	return trace.SpanFromContext(trace.ContextWithSpanContext(context.Background(), sc))
}

// span is a recording span until it ends.
type span struct {
	embedded.Span

	tracer *tracer
	parent trace.SpanContext
	sc     trace.SpanContext
	kind   trace.SpanKind
	start  time.Time

	mu           sync.Mutex
	ended        bool
	name         string
	end          time.Time
	attrs        []attribute.KeyValue
	attrsDirty   bool
	droppedAttrs int
	events       []eventRecord
	droppedEvts  int
	links        []linkRecord
	droppedLinks int
	status       statusRecord
	children     int
}

var _ trace.Span = (*span)(nil)

func (s *span) SpanContext() trace.SpanContext { return s.sc }

func (s *span) TracerProvider() trace.TracerProvider { return s.tracer.provider }

func (s *span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

func (s *span) addChild() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.children++
	}
}

func (s *span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.name = name
	}
}

// SetStatus keeps the SDK's order Unset < Error < Ok: a status never goes
// down, and only Error keeps its description.
func (s *span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.status.Code > code {
		return
	}
	st := statusRecord{Code: code}
	if code == codes.Error {
		st.Description = description
	}
	s.status = st
}

// SetAttributes adds attributes; a key set again keeps its first place
// and takes the last value. Past the count limit, new keys are dropped
// (and counted) while known keys still change.
func (s *span) SetAttributes(kvs ...attribute.KeyValue) {
	if len(kvs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if len(s.attrs)+len(kvs) > attributeCountLimit {
		s.dedupe()
		index := make(map[attribute.Key]int, len(s.attrs))
		for i, a := range s.attrs {
			index[a.Key] = i
		}
		for _, a := range kvs {
			if !a.Valid() {
				s.droppedAttrs++
				continue
			}
			if i, ok := index[a.Key]; ok {
				s.attrs[i] = a
			} else if len(s.attrs) < attributeCountLimit {
				index[a.Key] = len(s.attrs)
				s.attrs = append(s.attrs, a)
			} else {
				s.droppedAttrs++
			}
		}
		return
	}
	for _, a := range kvs {
		if !a.Valid() {
			s.droppedAttrs++
			continue
		}
		s.attrs = append(s.attrs, a)
		s.attrsDirty = true
	}
}

// dedupe keeps one attribute per key: the first place, the last value.
func (s *span) dedupe() {
	if !s.attrsDirty {
		return
	}
	index := make(map[attribute.Key]int, len(s.attrs))
	unique := make([]attribute.KeyValue, 0, len(s.attrs))
	for _, a := range s.attrs {
		if i, ok := index[a.Key]; ok {
			unique[i] = a
			continue
		}
		index[a.Key] = len(unique)
		unique = append(unique, a)
	}
	s.attrs, s.attrsDirty = unique, false
}

func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.addEvent(name, opts...)
	}
}

// addEvent keeps the newest eventCountLimit events, as the SDK's evicted
// queue.
func (s *span) addEvent(name string, opts ...trace.EventOption) {
	c := trace.NewEventConfig(opts...)
	e := eventRecord{Name: name, Attributes: c.Attributes(), Time: c.Timestamp()}
	if len(e.Attributes) > attrsPerEventLimit {
		e.DroppedAttributeCount = len(e.Attributes) - attrsPerEventLimit
		e.Attributes = e.Attributes[:attrsPerEventLimit]
	}
	if len(s.events) == eventCountLimit {
		s.events = append(s.events[:0:0], s.events[1:]...)
		s.droppedEvts++
	}
	s.events = append(s.events, e)
}

// RecordError adds the "exception" event with exception.type (the
// error's package path and type name) and exception.message, as the SDK;
// it leaves the status alone.
func (s *span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil || !s.IsRecording() {
		return
	}
	opts = append(opts, trace.WithAttributes(exceptionType.String(typeString(err)), exceptionMessage.String(err.Error())))
	if c := trace.NewEventConfig(opts...); c.StackTrace() {
		opts = append(opts, trace.WithAttributes(exceptionStacktrace.String(stackTrace())))
	}
	s.AddEvent(exceptionEvent, opts...)
}

// The exception event's name and keys (semantic conventions).
const (
	exceptionEvent      = "exception"
	exceptionType       = attribute.Key("exception.type")
	exceptionMessage    = attribute.Key("exception.message")
	exceptionStacktrace = attribute.Key("exception.stacktrace")
)

func typeString(v any) string {
	t := reflect.TypeOf(v)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return fmt.Sprintf("%s.%s", t.PkgPath(), t.Name())
}

func stackTrace() string {
	b := make([]byte, 2048)
	return string(b[:runtime.Stack(b, false)])
}

func (s *span) AddLink(l trace.Link) {
	if !l.SpanContext.IsValid() && len(l.Attributes) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	r := linkRecord{SpanContext: l.SpanContext, Attributes: l.Attributes}
	if len(r.Attributes) > attrsPerLinkLimit {
		r.DroppedAttributeCount = len(r.Attributes) - attrsPerLinkLimit
		r.Attributes = r.Attributes[:attrsPerLinkLimit]
	}
	if len(s.links) == linkCountLimit {
		s.links = append(s.links[:0:0], s.links[1:]...)
		s.droppedLinks++
	}
	s.links = append(s.links, r)
}

// End ends the span (at most once) and hands its record to every
// processor. Deferred in a panicking function, it records the panic as an
// exception event first, as the SDK, and lets the panic go on.
func (s *span) End(opts ...trace.SpanEndOption) {
	end := s.start.Add(time.Since(s.start))
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	c := trace.NewSpanEndConfig(opts...)
	if recovered := recover(); recovered != nil {
		defer panic(recovered)
		eopts := []trace.EventOption{trace.WithAttributes(exceptionType.String(typeString(recovered)),
			exceptionMessage.String(fmt.Sprint(recovered)))}
		if c.StackTrace() {
			eopts = append(eopts, trace.WithAttributes(exceptionStacktrace.String(stackTrace())))
		}
		s.addEvent(exceptionEvent, eopts...)
	}
	if ts := c.Timestamp(); !ts.IsZero() {
		end = ts
	}
	s.ended, s.end = true, end
	rec := s.record()
	s.mu.Unlock()
	for _, b := range s.tracer.provider.processors {
		b.onEnd(rec)
	}
}

// record is the span's record; s.mu is held.
func (s *span) record() *spanRecord {
	r := &spanRecord{
		Name: s.name, SpanContext: s.sc, Parent: s.parent, SpanKind: s.kind, StartTime: s.start, EndTime: s.end,
		Status: s.status, DroppedAttributes: s.droppedAttrs, ChildSpanCount: s.children,
		Resource: s.tracer.provider.resource, InstrumentationScope: s.tracer.scope, InstrumentationLibrary: s.tracer.scope,
	}
	if len(s.attrs) > 0 {
		s.dedupe()
		r.Attributes = s.attrs
	}
	if len(s.events) > 0 {
		r.Events, r.DroppedEvents = s.events, s.droppedEvts
	}
	if len(s.links) > 0 {
		r.Links, r.DroppedLinks = s.links, s.droppedLinks
	}
	return r
}

// newResource is the resource the SDK made of ours (service.name,
// service.version, the schema URL) merged over the environment's:
// OTEL_RESOURCE_ATTRIBUTES (k=v pairs, values URL-decoded; a pair
// without = is left out) and OTEL_SERVICE_NAME, which ours override.
func newResource(getenv func(string) string, version string) *resourceRecord {
	var attrs []attribute.KeyValue
	if getenv != nil {
		if env := strings.TrimSpace(getenv("OTEL_RESOURCE_ATTRIBUTES")); env != "" {
			for _, pair := range strings.Split(env, ",") {
				k, v, ok := strings.Cut(pair, "=")
				if !ok {
					continue
				}
				val, err := url.PathUnescape(strings.TrimSpace(v))
				if err != nil {
					val = v
				}
				attrs = append(attrs, attribute.String(strings.TrimSpace(k), val))
			}
		}
		if name := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); name != "" {
			attrs = append(attrs, ServiceName.String(name))
		}
	}
	// In a set the last value of a key wins.
	attrs = append(attrs, ServiceName.String("upgrade-agent"), ServiceVersion.String(version))
	return &resourceRecord{attrs: attribute.NewSet(attrs...), schemaURL: SchemaURL}
}
