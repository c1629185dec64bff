package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/upgrade-agent/upgrade-agent/internal/redact"
	"github.com/upgrade-agent/upgrade-agent/internal/tracing"
)

// traceFlushTimeout bounds the flush at exit: an OTLP collector that does
// not answer must not hold the command.
const traceFlushTimeout = 5 * time.Second

// startTracing installs this run's tracer provider in c's context when
// --trace or OTEL_EXPORTER_OTLP_ENDPOINT asks for one. Nothing global is
// set: without them the context carries nothing and spans are no-ops.
func (f *Factory) startTracing(c *cobra.Command) error {
	o := f.opts()
	p, err := tracing.New(c.Context(), tracing.Options{File: o.Trace, Content: o.TraceContent,
		Getenv: f.Getenv, Version: version, Secrets: f.Secrets()})
	if err != nil {
		// A trace file that cannot be opened, or an OTEL_EXPORTER_OTLP_*
		// variable the exporter cannot use; the error names which.
		return &UsageError{Err: fmt.Errorf("tracing: %w", err)}
	}
	if p != nil {
		f.tracing = p
		c.SetContext(tracing.With(c.Context(), p))
	}
	return nil
}

// stopTracing flushes the spans; a failure is a warning, never the
// command's result.
func (f *Factory) stopTracing() {
	if f.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := f.tracing.Shutdown(ctx); err != nil {
		fmt.Fprintf(f.IO.ErrOut, "upgrade-agent: warning: writing the trace: %s\n", redact.String(err.Error(), f.Secrets()...))
	}
	f.tracing = nil
}
