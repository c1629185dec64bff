package tracing

import (
	"context"
	"errors"
	"sync"
	"time"
)

// spanProcessor receives every ended span of a provider.
type spanProcessor interface {
	onEnd(*spanRecord)
	shutdown(ctx context.Context) error
}

// The SDK's batch span processor defaults (sdk/trace
// BatchSpanProcessorOptions); the OTEL_BSP_* variables are not read.
const (
	maxQueueSize       = 2048
	maxExportBatchSize = 512
	scheduleDelay      = 5 * time.Second
	exportTimeout      = 30 * time.Second
)

// batcher queues ended spans and hands them to its exporter in batches,
// as the SDK's batch span processor: when maxExportBatchSize are waiting,
// every scheduleDelay, and at shutdown, which exports everything queued
// and then stops the exporter. A full queue drops spans (silently, as
// the SDK); spans that end
// after shutdown are dropped. Each exporter has its own batcher, so a slow
// collector never holds the trace file.
type batcher struct {
	exp   spanExporter
	queue chan *spanRecord
	stop  chan struct{}
	done  chan struct{}

	stopOnce sync.Once
	mu       sync.Mutex
	stopped  bool
	// errs are the exports that failed in the background (the SDK logged
	// them through OTel's global error handler); shutdown returns them.
	errs []error
}

func newBatcher(exp spanExporter) *batcher {
	b := &batcher{exp: exp, queue: make(chan *spanRecord, maxQueueSize), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *batcher) onEnd(r *spanRecord) {
	if !r.SpanContext.IsSampled() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	select {
	case b.queue <- r:
	default: // full: dropped, as the SDK drops it
	}
}

func (b *batcher) run() {
	defer close(b.done)
	timer := time.NewTimer(scheduleDelay)
	defer timer.Stop()
	batch := make([]*spanRecord, 0, maxExportBatchSize)
	export := func() {
		if len(batch) > 0 {
			ctx, cancel := context.WithTimeoutCause(context.Background(), exportTimeout, errors.New("processor export timeout"))
			b.fail(b.exp.ExportSpans(ctx, batch))
			cancel()
			clear(batch)
			batch = batch[:0]
		}
		timer.Reset(scheduleDelay)
	}
	for {
		select {
		case <-b.stop:
			for {
				select {
				case r := <-b.queue:
					batch = append(batch, r)
					if len(batch) == maxExportBatchSize {
						export()
					}
				default:
					export()
					return
				}
			}
		case <-timer.C:
			export()
		case r := <-b.queue:
			batch = append(batch, r)
			if len(batch) >= maxExportBatchSize {
				if !timer.Stop() {
					select {
					case <-timer.C:
					default:
					}
				}
				export()
			}
		}
	}
}

// maxKeptErrors bounds the background export errors kept for shutdown.
const maxKeptErrors = 3

func (b *batcher) fail(err error) {
	if err == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errs) < maxKeptErrors {
		b.errs = append(b.errs, err)
	}
}

// shutdown exports what is queued and stops the exporter, within ctx; it
// returns the failed exports, the exporter's shutdown error, or ctx's
// error when ctx ends first.
func (b *batcher) shutdown(ctx context.Context) error {
	var err error
	b.stopOnce.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		wait := make(chan error, 1)
		go func() {
			close(b.stop)
			<-b.done
			wait <- b.exp.Shutdown(ctx)
		}()
		select {
		case err = <-wait:
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		err = errors.Join(append(append([]error{}, b.errs...), err)...)
	})
	return err
}
