package tracing

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
)

// Transport wraps base (nil: http.DefaultTransport) so that HTTP calls
// made under a traced context become client spans with OTel's HTTP client
// conventions, as otelhttp made them: span "HTTP <method>", the request's
// attributes (http.request.method, url.full, server.address, ...), the W3C
// traceparent header, the response's status code, status error for a
// status of 400 and above or a failed call, and the span ends when the
// response body is read to its end or closed. Without a provider in the
// request's context the calls go straight to base.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	p := from(r.Context())
	if p == nil {
		return t.base.RoundTrip(r)
	}
	ctx, span := p.tracer.Start(r.Context(), "HTTP "+r.Method,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(requestAttrs(r)...))
	// A RoundTripper must not change the caller's request.
	r = r.Clone(ctx)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(r.Header))

	res, err := t.base.RoundTrip(r)
	if err == nil && res == nil {
		err = fmt.Errorf("http: RoundTripper implementation (%T) returned a nil *Response with a nil error", t.base)
	}
	if err != nil {
		spanError(span, err)
		span.End()
		return res, err
	}
	if res.Body == nil {
		res.Body = http.NoBody
	}
	span.SetAttributes(responseAttrs(res)...)
	span.SetStatus(httpStatus(res.StatusCode))
	res.Body = &spanBody{span: span, body: res.Body}
	return res, nil
}

// requestAttrs are the client span's attributes of r.
func requestAttrs(r *http.Request) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 6)
	switch m := r.Method; {
	case m == "":
		attrs = append(attrs, HTTPRequestMethod.String(httpRequestMethodOtherValue))
	case knownMethod(m):
		attrs = append(attrs, HTTPRequestMethod.String(m))
	case knownMethod(strings.ToUpper(m)):
		attrs = append(attrs, HTTPRequestMethod.String(strings.ToUpper(m)), HTTPRequestMethodOriginal.String(m))
	default:
		attrs = append(attrs, HTTPRequestMethod.String(httpRequestMethodOtherValue), HTTPRequestMethodOriginal.String(m))
	}
	var full, urlHost string
	if r.URL != nil {
		u := *r.URL
		u.User = nil // never the credentials
		full, urlHost = u.String(), u.Host
	}
	var host string
	port := -1
	for _, hostport := range []string{urlHost, r.Header.Get("Host")} {
		host, port = splitHostPort(hostport)
		if host != "" || port > 0 {
			break
		}
	}
	attrs = append(attrs, URLFull.String(full), ServerAddress.String(host))
	defaultPort := 80
	if r.URL != nil && r.URL.Scheme == "https" {
		defaultPort = 443
	}
	if port > 0 && port != defaultPort {
		attrs = append(attrs, ServerPort.Int(port))
	}
	return append(attrs, protocolAttrs(r.Proto)...)
}

// responseAttrs are the client span's attributes of res.
func responseAttrs(res *http.Response) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if res.StatusCode > 0 {
		attrs = append(attrs, HTTPResponseStatusCode.Int(res.StatusCode))
	}
	if res.StatusCode >= 400 || res.StatusCode < 100 {
		attrs = append(attrs, ErrorTypeKey.String(strconv.Itoa(res.StatusCode)))
	}
	return append(attrs, protocolAttrs(res.Proto)...)
}

// protocolAttrs are network.protocol.name (when it is not http) and
// network.protocol.version of a "HTTP/1.1"-style protocol.
func protocolAttrs(proto string) []attribute.KeyValue {
	name, version, _ := strings.Cut(proto, "/")
	name = strings.ToLower(name)
	var attrs []attribute.KeyValue
	if name != "" && name != "http" {
		attrs = append(attrs, NetworkProtocolName.String(name))
	}
	if version != "" {
		attrs = append(attrs, NetworkProtocolVersion.String(version))
	}
	return attrs
}

// httpStatus is a client span's status for an HTTP status code: an error
// from 400 on, unset below.
func httpStatus(code int) (codes.Code, string) {
	if code < 100 || code >= 600 {
		return codes.Error, fmt.Sprintf("Invalid HTTP status code %d", code)
	}
	if code >= 400 {
		return codes.Error, ""
	}
	return codes.Unset, ""
}

func knownMethod(m string) bool {
	switch m {
	case http.MethodConnect, http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodPatch, http.MethodPost, http.MethodPut, http.MethodTrace:
		return true
	}
	return false
}

// splitHostPort splits "host:port" ("[::1]:8080", "host"); port is -1
// when there is none or it does not parse.
func splitHostPort(hostport string) (string, int) {
	if !strings.HasPrefix(hostport, "[") && !strings.Contains(hostport, ":") {
		return hostport, -1
	}
	if strings.HasPrefix(hostport, "[") {
		end := strings.LastIndexByte(hostport, ']')
		if end < 0 {
			return "", -1
		}
		if !strings.Contains(hostport[end:], ":") {
			return hostport[1:end], -1
		}
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return host, -1
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return host, -1
	}
	return host, int(port)
}

// spanError records a failed call on span: status error with the
// (redacted) message and error.type.
func spanError(span trace.Span, err error) {
	span.SetAttributes(ErrorTypeKey.String(httpErrorType(err)))
	span.SetStatus(codes.Error, redact.String(err.Error()))
}

// httpErrorType is an error's error.type: what its ErrorType method says,
// else its Go type under fmt's wrappers.
func httpErrorType(err error) string {
	var et interface{ ErrorType() string }
	if errors.As(err, &et) {
		if s := et.ErrorType(); s != "" {
			return s
		}
	}
	return ErrorType(err)
}

// spanBody ends the call's span when the response body is read to its
// end or closed, and records a failed read on it.
type spanBody struct {
	span  trace.Span
	body  io.ReadCloser
	ended sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.end()
	case err != nil:
		spanError(b.span, err)
	}
	return n, err
}

func (b *spanBody) Close() error {
	b.end()
	return b.body.Close()
}

func (b *spanBody) end() { b.ended.Do(func() { b.span.End() }) }
