package jobqueueotel_test

// BenchmarkDrainTelemetry: what the telemetry costs a worker. Per engine,
// one worker (concurrency 8) drains JOBQUEUE_BENCH_JOBS (default 20 000)
// no-op jobs, with the telemetry off and on, side by side in one run:
//
//	go test -run '^$' -bench DrainTelemetry -count 3 ./otel/
//
// "on" is every span sampled and recorded (a batch span processor with an
// exporter that drops them) and every instrument aggregated (SDK meter with
// a manual reader), the most a service pays. Each reports jobs/s; compare
// on with off of the same engine and run. A server that cannot be reached
// skips its engine.

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

// benchJobs is the number of jobs drained per iteration.
func benchJobs(b *testing.B) int {
	if s := os.Getenv("JOBQUEUE_BENCH_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("JOBQUEUE_BENCH_JOBS=%q is not a positive number", s)
		}
		return n
	}
	return 20000
}

func BenchmarkDrainTelemetry(b *testing.B) {
	n := benchJobs(b)
	for _, kind := range testdb.Kinds() {
		b.Run(string(kind), func(b *testing.B) {
			e := testdb.New(b, kind)
			for _, on := range []bool{false, true} {
				name := "off"
				if on {
					name = "on"
				}
				b.Run(name, func(b *testing.B) {
					var opts []queue.Option
					if on {
						tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
						mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
						b.Cleanup(func() {
							tp.Shutdown(context.Background())
							mp.Shutdown(context.Background())
						})
						tel, err := jobqueueotel.New(jobqueueotel.Config{TracerProvider: tp, MeterProvider: mp})
						if err != nil {
							b.Fatal(err)
						}
						opts = tel.QueueOptions()
					}
					drainBench(b, e, n, opts)
				})
			}
		})
	}
}

// drainBench times the drain of n jobs by a worker of a queue opened with
// opts on a fresh table of e, b.N times, and reports jobs/s.
func drainBench(b *testing.B, e *testdb.Env, n int, opts []queue.Option) {
	var completed atomic.Int64
	allDone := make(chan struct{}, 1)
	q, tbl := openQueue(b, e, append(opts, queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventCompleted && completed.Add(1) == int64(n) {
			allDone <- struct{}{}
		}
	}))...)
	ctx := context.Background()
	batch := make([]queue.JobArgs, 1000)
	for i := range batch {
		batch[i] = task{Do: "ok"}
	}
	var elapsed time.Duration
	for range b.N {
		b.StopTimer()
		if _, err := e.DB.ExecContext(ctx, "DELETE FROM "+tbl.Quoted()); err != nil {
			b.Fatal(err)
		}
		for left := n; left > 0; left -= len(batch) {
			if _, err := q.EnqueueMany(ctx, batch[:min(left, len(batch))]); err != nil {
				b.Fatal(err)
			}
		}
		completed.Store(0)
		w := q.NewWorker(queue.WorkerConfig{Concurrency: 8, MaintenanceInterval: -1})
		queue.Handle(w, func(ctx context.Context, job *queue.Job[task]) error { return nil })
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		b.StartTimer()
		t0 := time.Now()
		go func() { done <- w.Run(runCtx) }()
		select {
		case <-allDone:
		case <-time.After(5 * time.Minute):
			b.Fatalf("drain of %d jobs did not finish in 5 minutes (%d completed)", n, completed.Load())
		}
		elapsed += time.Since(t0)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "jobs/s")
}
