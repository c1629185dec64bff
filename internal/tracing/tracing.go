package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
)

// SemconvVersion is the version of the semantic conventions the spans follow.
const SemconvVersion = "1.40.0"

// Options say where spans go.
type Options struct {
	// File receives the spans as JSON lines; "" for none.
	File string
	// Content records message and tool contents (redacted) on the spans.
	Content bool
	// Getenv reads OTEL_EXPORTER_OTLP_ENDPOINT,
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and the exporter's other
	// OTEL_EXPORTER_OTLP_* variables, and OTEL_RESOURCE_ATTRIBUTES and
	// OTEL_SERVICE_NAME for the resource (docs/tracing.md).
	Getenv func(string) string
	// Version is the tool's version, for the resource.
	Version string
	// Secrets are hidden from recorded contents.
	Secrets []string
}

// Provider is the process's tracer provider and what it writes to.
type Provider struct {
	tp      *tracerProvider
	tracer  trace.Tracer
	file    *os.File
	content bool
	red     redact.Redactor
}

// OTLPEndpoint is the OTLP/HTTP traces URL the environment names, "" when
// none: the traces endpoint as given, else the base endpoint + /v1/traces.
func OTLPEndpoint(getenv func(string) string) string {
	if getenv == nil {
		return ""
	}
	if u := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); u != "" {
		return u
	}
	if u := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); u != "" {
		return strings.TrimRight(u, "/") + "/v1/traces"
	}
	return ""
}

// New starts tracing as opts say; it returns nil (tracing off) when there
// is neither a file nor an OTLP endpoint.
func New(ctx context.Context, opts Options) (*Provider, error) {
	endpoint := OTLPEndpoint(opts.Getenv)
	if opts.File == "" && endpoint == "" {
		return nil, nil
	}
	p := &Provider{content: opts.Content, red: redact.New(opts.Secrets...)}
	var processors []spanProcessor
	if opts.File != "" {
		f, err := os.OpenFile(opts.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("trace file: %w", err)
		}
		p.file = f
		processors = append(processors, newBatcher(newFileExporter(f)))
	}
	if endpoint != "" {
		cfg, err := readOTLPConfig(opts.Getenv, endpoint)
		if err != nil {
			for _, b := range processors {
				_ = b.shutdown(ctx)
			}
			if p.file != nil {
				_ = p.file.Close()
			}
			return nil, fmt.Errorf("OTLP exporter: %w", err)
		}
		processors = append(processors, newBatcher(newOTLPExporter(cfg, opts.Version)))
	}
	p.tp = newTracerProvider(newResource(opts.Getenv, opts.Version), nil, processors...)
	p.tracer = p.tp.Tracer("github.com/upgrade-agent/upgrade-agent", trace.WithSchemaURL(SchemaURL))
	return p, nil
}

// Shutdown flushes the spans and closes the file. A nil Provider does
// nothing.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	err := p.tp.shutdown(ctx)
	if p.file != nil {
		err = errors.Join(err, p.file.Sync(), p.file.Close())
	}
	return err
}

type ctxKey struct{}

// With returns ctx carrying p; a nil p leaves tracing off.
func With(ctx context.Context, p *Provider) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, p)
}

func from(ctx context.Context) *Provider {
	p, _ := ctx.Value(ctxKey{}).(*Provider)
	return p
}

// On reports whether ctx carries a provider.
func On(ctx context.Context) bool { return from(ctx) != nil }

// Content reports whether contents are to be recorded.
func Content(ctx context.Context) bool {
	p := from(ctx)
	return p != nil && p.content
}

// Redact hides the configured secrets in s (for recorded contents).
func Redact(ctx context.Context, s string) string {
	if p := from(ctx); p != nil {
		return p.red.String(s)
	}
	return redact.String(s)
}

// Start starts a span of kind internal (or as opts say) under ctx's span;
// without a provider it returns ctx and a no-op span.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	p := from(ctx)
	if p == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return p.tracer.Start(ctx, name, opts...)
}

// End records err on span (status error and error.type) and ends it.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, redact.String(err.Error()))
		span.SetAttributes(ErrorTypeKey.String(ErrorType(err)))
	}
	span.End()
}

// ErrorType is the error.type of err: the Go type of the outermost error
// that is not a plain wrapper.
func ErrorType(err error) string {
	for err != nil {
		t := fmt.Sprintf("%T", err)
		if t != "*fmt.wrapError" && t != "*errors.joinError" && t != "*fmt.wrapErrors" {
			return t
		}
		next := errors.Unwrap(err)
		if next == nil {
			return t
		}
		err = next
	}
	return "_OTHER"
}

// TraceID is the id of the trace ctx's span belongs to, "" when tracing is
// off. The audit trail and changes record it.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// Attrs is a shorthand for a list of attributes.
type Attrs = []attribute.KeyValue
