package tracing

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The types below are the OTLP JSON encoding of ExportTraceServiceRequest
// (opentelemetry-proto, collector/trace/v1): lowerCamelCase field names,
// trace and span ids as hex strings, 64-bit integers and times as decimal
// strings, enums as integers. The test decodes what they produce with
// protojson into the generated protobuf types.

type otlpRequest struct {
	ResourceSpans []*otlpResourceSpans `json:"resourceSpans"`
}

type otlpResourceSpans struct {
	Resource   otlpResource      `json:"resource"`
	ScopeSpans []*otlpScopeSpans `json:"scopeSpans"`
	SchemaURL  string            `json:"schemaUrl,omitempty"`
}

type otlpResource struct {
	Attributes []otlpKeyValue `json:"attributes,omitempty"`
}

type otlpScopeSpans struct {
	Scope     otlpScope  `json:"scope"`
	Spans     []otlpSpan `json:"spans"`
	SchemaURL string     `json:"schemaUrl,omitempty"`
}

type otlpScope struct {
	Name       string         `json:"name,omitempty"`
	Version    string         `json:"version,omitempty"`
	Attributes []otlpKeyValue `json:"attributes,omitempty"`
}

type otlpSpan struct {
	TraceID                string         `json:"traceId"`
	SpanID                 string         `json:"spanId"`
	TraceState             string         `json:"traceState,omitempty"`
	ParentSpanID           string         `json:"parentSpanId,omitempty"`
	Flags                  uint32         `json:"flags,omitempty"`
	Name                   string         `json:"name"`
	Kind                   int            `json:"kind"`
	StartTimeUnixNano      string         `json:"startTimeUnixNano"`
	EndTimeUnixNano        string         `json:"endTimeUnixNano"`
	Attributes             []otlpKeyValue `json:"attributes,omitempty"`
	DroppedAttributesCount uint32         `json:"droppedAttributesCount,omitempty"`
	Events                 []otlpEvent    `json:"events,omitempty"`
	DroppedEventsCount     uint32         `json:"droppedEventsCount,omitempty"`
	Links                  []otlpLink     `json:"links,omitempty"`
	DroppedLinksCount      uint32         `json:"droppedLinksCount,omitempty"`
	Status                 otlpStatus     `json:"status"`
}

type otlpEvent struct {
	TimeUnixNano           string         `json:"timeUnixNano"`
	Name                   string         `json:"name"`
	Attributes             []otlpKeyValue `json:"attributes,omitempty"`
	DroppedAttributesCount uint32         `json:"droppedAttributesCount,omitempty"`
}

type otlpLink struct {
	TraceID                string         `json:"traceId"`
	SpanID                 string         `json:"spanId"`
	TraceState             string         `json:"traceState,omitempty"`
	Attributes             []otlpKeyValue `json:"attributes,omitempty"`
	DroppedAttributesCount uint32         `json:"droppedAttributesCount,omitempty"`
	Flags                  uint32         `json:"flags,omitempty"`
}

type otlpStatus struct {
	Message string `json:"message,omitempty"`
	Code    int    `json:"code,omitempty"`
}

type otlpKeyValue struct {
	Key   string       `json:"key"`
	Value otlpAnyValue `json:"value"`
}

// otlpAnyValue is an AnyValue: exactly one of its fields is set, none for
// an empty value.
type otlpAnyValue struct {
	StringValue *string        `json:"stringValue,omitempty"`
	BoolValue   *bool          `json:"boolValue,omitempty"`
	IntValue    string         `json:"intValue,omitempty"`
	DoubleValue *otlpDouble    `json:"doubleValue,omitempty"`
	ArrayValue  *otlpValues    `json:"arrayValue,omitempty"`
	KvlistValue *otlpKeyValues `json:"kvlistValue,omitempty"`
	BytesValue  *[]byte        `json:"bytesValue,omitempty"`
}

type otlpValues struct {
	Values []otlpAnyValue `json:"values"`
}

type otlpKeyValues struct {
	Values []otlpKeyValue `json:"values"`
}

// otlpDouble is a double in proto3 JSON: NaN and the infinities are
// strings.
type otlpDouble float64

func (d otlpDouble) MarshalJSON() ([]byte, error) {
	f := float64(d)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Infinity"`), nil
	}
	return json.Marshal(f)
}

// OTLP's span flags: the low byte is the W3C trace flags; these say
// whether the parent is known to be remote and whether it is.
const (
	otlpFlagHasIsRemote = 0x100
	otlpFlagIsRemote    = 0x200
)

// encodeSpans groups spans by resource, then by instrumentation scope, in
// the order they come.
func encodeSpans(spans []*spanRecord) otlpRequest {
	var req otlpRequest
	type resKey struct {
		attrs     attribute.Distinct
		schemaURL string
	}
	byRes := map[resKey]*otlpResourceSpans{}
	type scopeSpansKey struct {
		res   resKey
		scope scopeKey
		attrs attribute.Distinct
	}
	byScope := map[scopeSpansKey]*otlpScopeSpans{}
	empty := &resourceRecord{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource
		if res == nil {
			res = empty
		}
		rk := resKey{res.attrs.Equivalent(), res.schemaURL}
		rs := byRes[rk]
		if rs == nil {
			rs = &otlpResourceSpans{Resource: otlpResource{Attributes: keyValues(res.attrs.ToSlice())}, SchemaURL: res.schemaURL}
			byRes[rk] = rs
			req.ResourceSpans = append(req.ResourceSpans, rs)
		}
		scope := s.InstrumentationScope
		sk := scopeSpansKey{rk, scopeKey{scope.Name, scope.Version, scope.SchemaURL}, scope.Attributes.Equivalent()}
		ss := byScope[sk]
		if ss == nil {
			ss = &otlpScopeSpans{Scope: otlpScope{Name: scope.Name, Version: scope.Version,
				Attributes: keyValues(scope.Attributes.ToSlice())}, SchemaURL: scope.SchemaURL}
			byScope[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, encodeSpan(s))
	}
	return req
}

func encodeSpan(s *spanRecord) otlpSpan {
	sc, parent := s.SpanContext, s.Parent
	tid, sid := sc.TraceID(), sc.SpanID()
	out := otlpSpan{
		TraceID:                hex.EncodeToString(tid[:]),
		SpanID:                 hex.EncodeToString(sid[:]),
		TraceState:             sc.TraceState().String(),
		Flags:                  spanFlags(sc.TraceFlags(), parent),
		Name:                   s.Name,
		Kind:                   spanKind(s.SpanKind),
		StartTimeUnixNano:      unixNano(s.StartTime.UnixNano()),
		EndTimeUnixNano:        unixNano(s.EndTime.UnixNano()),
		Attributes:             keyValues(s.Attributes),
		DroppedAttributesCount: count(s.DroppedAttributes),
		DroppedEventsCount:     count(s.DroppedEvents),
		DroppedLinksCount:      count(s.DroppedLinks),
		Status:                 status(s.Status),
	}
	if psid := parent.SpanID(); psid.IsValid() {
		out.ParentSpanID = hex.EncodeToString(psid[:])
	}
	for _, ev := range s.Events {
		out.Events = append(out.Events, otlpEvent{TimeUnixNano: unixNano(ev.Time.UnixNano()), Name: ev.Name,
			Attributes: keyValues(ev.Attributes), DroppedAttributesCount: count(ev.DroppedAttributeCount)})
	}
	for _, l := range s.Links {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out.Links = append(out.Links, otlpLink{TraceID: hex.EncodeToString(ltid[:]), SpanID: hex.EncodeToString(lsid[:]),
			TraceState: l.SpanContext.TraceState().String(), Attributes: keyValues(l.Attributes),
			DroppedAttributesCount: count(l.DroppedAttributeCount), Flags: spanFlags(l.SpanContext.TraceFlags(), l.SpanContext)})
	}
	return out
}

func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | otlpFlagHasIsRemote
	if parent.IsRemote() {
		f |= otlpFlagIsRemote
	}
	return f
}

// spanKind maps OTel Go's kinds to OTLP's SpanKind numbers.
func spanKind(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

// status maps OTel Go's codes (Unset 0, Error 1, Ok 2) to OTLP's
// StatusCode (Unset 0, Ok 1, Error 2).
func status(s statusRecord) otlpStatus {
	out := otlpStatus{Message: s.Description}
	switch s.Code {
	case codes.Ok:
		out.Code = 1
	case codes.Error:
		out.Code = 2
	}
	return out
}

func unixNano(n int64) string { return strconv.FormatInt(max(n, 0), 10) }

func count(n int) uint32 { return uint32(min(max(n, 0), math.MaxUint32)) }

func keyValues(kvs []attribute.KeyValue) []otlpKeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]otlpKeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = otlpKeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)}
	}
	return out
}

func anyValue(v attribute.Value) otlpAnyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return otlpAnyValue{BoolValue: &b}
	case attribute.INT64:
		return otlpAnyValue{IntValue: strconv.FormatInt(v.AsInt64(), 10)}
	case attribute.FLOAT64:
		d := otlpDouble(v.AsFloat64())
		return otlpAnyValue{DoubleValue: &d}
	case attribute.STRING:
		s := v.AsString()
		return otlpAnyValue{StringValue: &s}
	case attribute.BYTESLICE:
		b := append([]byte{}, v.AsByteSlice()...)
		return otlpAnyValue{BytesValue: &b}
	case attribute.MAP:
		return otlpAnyValue{KvlistValue: &otlpKeyValues{Values: nonNil(keyValues(v.AsMap()))}}
	case attribute.EMPTY:
		return otlpAnyValue{}
	}
	var vals []otlpAnyValue
	switch v.Type() {
	case attribute.BOOLSLICE:
		vals = anyValues(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		vals = anyValues(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		vals = anyValues(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		vals = anyValues(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		vals = anyValues(v.AsSlice(), func(e attribute.Value) attribute.Value { return e })
	default:
		s := "INVALID"
		return otlpAnyValue{StringValue: &s}
	}
	return otlpAnyValue{ArrayValue: &otlpValues{Values: nonNil(vals)}}
}

// anyValues is the OTLP values of the items of a slice attribute.
func anyValues[T any](xs []T, wrap func(T) attribute.Value) []otlpAnyValue {
	var out []otlpAnyValue
	for _, x := range xs {
		out = append(out, anyValue(wrap(x)))
	}
	return out
}

// nonNil makes an empty list [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
