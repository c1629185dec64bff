package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// fileExporter writes each span as one JSON object per line, the format of
// OTel's stdout exporter (stdouttrace with its defaults: timestamps, no
// indentation), which --trace files have always had: spanRecord has the
// fields of the tracetest.SpanStub that exporter encodes. The test runs
// one span tree through the SDK with stdouttrace and through this package
// and compares the lines.
type fileExporter struct {
	mu      sync.Mutex
	enc     *json.Encoder
	stopped bool
}

func newFileExporter(w io.Writer) *fileExporter { return &fileExporter{enc: json.NewEncoder(w)} }

func (e *fileExporter) ExportSpans(ctx context.Context, spans []*spanRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	var errs []error
	for i, s := range spans {
		if err := e.enc.Encode(s); err != nil {
			errs = append(errs, fmt.Errorf("failed to encode span %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (e *fileExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	return nil
}
