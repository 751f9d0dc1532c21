package jobqueueotel_test

// BenchmarkDrainTelemetry: what the telemetry costs a worker. Per engine,
// one worker (concurrency 8) drains JOBQUEUE_BENCH_JOBS (default 20 000)
// no-op jobs with the telemetry off, and then as many with it on (the
// order swapped every iteration), so that both see the same machine:
//
//	go test -run '^$' -bench DrainTelemetry -benchtime 3x ./otel/
//
// It reports off_jobs/s and on_jobs/s (each its best drain: the machine
// may be shared), on/off_best (their ratio; 0.9 means on costs 10 %) and
// on/off_median (the median of the ratios of the drains run side by side). "on" is every
// span sampled and recorded (a batch span processor with an exporter that
// drops them) and every instrument aggregated (SDK meter with a manual
// reader), the most a service pays. A server that cannot be reached skips
// its engine.
//
// BenchmarkTelemetryPerAttempt is the telemetry's own cost per attempt
// (its work span and the measurements of a claim and a completion),
// without a database.

import (
	"context"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	jobqueueotel "github.com/jobqueue/jobqueue/otel"
	"github.com/jobqueue/jobqueue/queue"
)

func BenchmarkDrainTelemetry(b *testing.B) {
	n := testdb.BenchJobs(b)
	for _, kind := range testdb.Kinds() {
		b.Run(string(kind), func(b *testing.B) {
			e := testdb.New(b, kind)
			off := newDrainer(b, e, n, nil)
			on := newDrainer(b, e, n, sdkTelemetry(b).QueueOptions())
			var offs, ons []time.Duration
			var offCPU, onCPU time.Duration
			for b.Loop() {
				run := func(d *drainer, took *[]time.Duration, cpu *time.Duration) {
					wall, used := d.drain(b)
					*took = append(*took, wall)
					*cpu += used
				}
				if len(offs)%2 == 0 {
					run(off, &offs, &offCPU)
					run(on, &ons, &onCPU)
				} else {
					run(on, &ons, &onCPU)
					run(off, &offs, &offCPU)
				}
			}
			// The machine is shared: report the best drain of each (the
			// least disturbed) and the median of the pairs' ratios.
			ratios := make([]float64, len(offs))
			for i := range offs {
				ratios[i] = offs[i].Seconds() / ons[i].Seconds()
			}
			b.ReportMetric(float64(n)/slices.Min(offs).Seconds(), "off_jobs/s")
			b.ReportMetric(float64(n)/slices.Min(ons).Seconds(), "on_jobs/s")
			b.ReportMetric(slices.Min(offs).Seconds()/slices.Min(ons).Seconds(), "on/off_best")
			b.ReportMetric(median(ratios), "on/off_median")
			// The CPU this process used per job, on over off: what the
			// telemetry costs whatever else the machine runs (the database
			// servers' CPU is not in it; SQLite's is).
			b.ReportMetric(onCPU.Seconds()/offCPU.Seconds(), "cpu_on/off")
			jobs := float64(n * len(offs))
			b.ReportMetric(float64(offCPU.Microseconds())/jobs, "off_cpu_µs/job")
			b.ReportMetric(float64(onCPU.Microseconds())/jobs, "on_cpu_µs/job")
		})
	}
}

// median is the median of xs (not empty).
func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// BenchmarkTelemetryPerAttempt measures what the telemetry adds to one
// attempt: the work span around a handler, the wait measured at its claim,
// and the count and duration of its completion.
func BenchmarkTelemetryPerAttempt(b *testing.B) {
	tel := sdkTelemetry(b)
	ctx := context.Background()
	row := &queue.JobRow{ID: 42, Name: "task", Type: "default", Attempts: 1, ScheduledAt: time.Now()}
	next := func(context.Context, *queue.JobRow) error { return nil }
	for b.Loop() {
		tel.Listen(queue.Event{Kind: queue.EventClaimed, Job: row})
		if err := tel.WorkMiddleware(ctx, row, next); err != nil {
			b.Fatal(err)
		}
		tel.Listen(queue.Event{Kind: queue.EventCompleted, Job: row, Outcome: queue.OutcomeCompleted, Duration: time.Millisecond})
	}
}

// sdkTelemetry is telemetry fully on: every span sampled and recorded (a
// batch processor, an exporter that drops them), every instrument
// aggregated (SDK meter, manual reader).
func sdkTelemetry(b *testing.B) *jobqueueotel.Telemetry {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			b.Error(err)
		}
		if err := mp.Shutdown(context.Background()); err != nil {
			b.Error(err)
		}
	})
	tel, err := jobqueueotel.New(jobqueueotel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	return tel
}

// drainer drains n jobs at a time from a table of its own, through a queue
// opened with its options.
type drainer struct {
	e         *testdb.Env
	n         int
	q         *queue.Queue
	tbl       engine.Table
	completed atomic.Int64
	allDone   chan struct{}
}

// newDrainer opens a queue with opts on a fresh table of e.
func newDrainer(b *testing.B, e *testdb.Env, n int, opts []queue.Option) *drainer {
	d := &drainer{e: e, n: n, allDone: make(chan struct{}, 1)}
	d.q, d.tbl = openQueue(b, e, append(opts, queue.WithListener(func(ev queue.Event) {
		if ev.Kind == queue.EventCompleted && d.completed.Add(1) == int64(n) {
			d.allDone <- struct{}{}
		}
	}))...)
	return d
}

// drain empties the table, enqueues n jobs (untimed), and returns how long
// one worker (concurrency 8) took to run them all, and the CPU time the
// process used meanwhile.
func (d *drainer) drain(b *testing.B) (wall, cpu time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	if _, err := d.e.DB.ExecContext(ctx, "DELETE FROM "+d.tbl.Quoted()); err != nil {
		b.Fatal(err)
	}
	batch := make([]queue.JobArgs, 1000)
	for i := range batch {
		batch[i] = task{Do: "ok"}
	}
	for left := d.n; left > 0; left -= len(batch) {
		if _, err := d.q.EnqueueMany(ctx, batch[:min(left, len(batch))]); err != nil {
			b.Fatal(err)
		}
	}
	d.completed.Store(0)
	w := d.q.NewWorker(queue.WorkerConfig{Concurrency: 8, MaintenanceInterval: -1})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[task]) error { return nil })
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	cpu0 := processCPU(b)
	t0 := time.Now()
	go func() { done <- w.Run(runCtx) }()
	select {
	case <-d.allDone:
	case <-time.After(5 * time.Minute):
		b.Fatalf("drain of %d jobs did not finish in 5 minutes (%d completed)", d.n, d.completed.Load())
	}
	wall = time.Since(t0)
	cpu = processCPU(b) - cpu0
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return wall, cpu
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
