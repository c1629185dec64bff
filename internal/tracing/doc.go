// Package tracing turns on OpenTelemetry for one process: spans as JSON
// lines in a file (--trace, in the format of OTel's stdout exporter) and, when
// OTEL_EXPORTER_OTLP_ENDPOINT is set, over OTLP/HTTP in the protocol's JSON
// encoding, by this package's own exporter (otlp.go): OTel's otlptracehttp
// links grpc and protobuf, about 3 ms of package init for every command.
// The spans follow the GenAI semantic conventions of semconv v1.40.0, with
// the keys as constants (semconv.go), and HTTP calls become client spans
// through Transport (http.go), as otelhttp made them: both OTel packages
// do work at init that every command would pay for. For the same reason
// the OTel trace API is implemented here (sdk.go, batch.go,
// fileexport.go) rather than by OTel's SDK, whose semconv tables and
// self-observability instruments are built at init; the test compares
// the file with the SDK's and the stdout exporter's.
//
// The provider travels in the context, never in a global: code that makes
// spans calls Start with its context and gets OTel's no-op span when
// tracing is off, so a run without --trace pays one context lookup per
// span. The package must not install a global provider, nor do any work
// at init.
package tracing
