package tracing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// batchExporter keeps the size of every batch; its first export fails.
type batchExporter struct {
	mu      sync.Mutex
	batches []int
	stopped bool
}

func (e *batchExporter) ExportSpans(_ context.Context, spans []*spanRecord) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.batches = append(e.batches, len(spans))
	if len(e.batches) == 1 {
		return errors.New("collector down")
	}
	return nil
}

func (e *batchExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	return nil
}

func (e *batchExporter) sizes() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int{}, e.batches...)
}

// The batcher exports as the SDK's batch span processor: a full batch at
// once, the rest after the schedule delay, what is left at shutdown; a
// failed export is part of shutdown's error; spans of an unsampled trace
// and spans ended after shutdown are not exported.
func TestBatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exp := &batchExporter{}
		b := newBatcher(exp)
		tp := newTracerProvider(newResource(nil, "test"), nil, b)
		tr := tp.Tracer("test")
		ctx := context.Background()
		for range maxExportBatchSize + 1 {
			_, s := tr.Start(ctx, "s")
			s.End()
		}
		synctest.Wait()
		if got := exp.sizes(); len(got) != 1 || got[0] != maxExportBatchSize {
			t.Fatalf("batches %v, want one of %d at once", got, maxExportBatchSize)
		}
		time.Sleep(scheduleDelay)
		synctest.Wait()
		if got := exp.sizes(); len(got) != 2 || got[1] != 1 {
			t.Fatalf("batches %v, want the last span after %s", got, scheduleDelay)
		}
		_, s := tr.Start(ctx, "at shutdown")
		s.End()
		unsampledParent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
		_, u := tr.Start(trace.ContextWithRemoteSpanContext(ctx, unsampledParent), "unsampled")
		u.End()
		err := tp.shutdown(ctx)
		if err == nil || err.Error() != "collector down" {
			t.Errorf("shutdown: %v, want the failed export", err)
		}
		_, late := tr.Start(ctx, "late")
		late.End()
		synctest.Wait()
		if got := exp.sizes(); len(got) != 3 || got[2] != 1 || !exp.stopped {
			t.Errorf("batches %v (stopped %v), want the span at shutdown alone, then the exporter stopped", got, exp.stopped)
		}
	})
}
