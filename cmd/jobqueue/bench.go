package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// benchNoop is the job the drain phase runs: it does nothing.
type benchNoop struct {
	N int `json:"n"`
}

// Kind names the job.
func (benchNoop) Kind() string { return "bench_noop" }

// benchType is the type (queue) of every job bench enqueues; it tells them
// from other jobs when bench empties its table.
const benchType = "jobqueue_bench"

// benchLatency is the job of the latency phase.
type benchLatency struct {
	N int `json:"n"`
}

// Kind names the job.
func (benchLatency) Kind() string { return "bench_latency" }

// benchResult is the one JSON line bench prints (SPEC section 6).
type benchResult struct {
	System          string  `json:"system"`
	Engine          string  `json:"engine"`
	Jobs            int     `json:"jobs"`
	Workers         int     `json:"workers"`
	EnqueueJobsPerS float64 `json:"enqueue_jobs_per_s"`
	DrainJobsPerS   float64 `json:"drain_jobs_per_s"`
	LatencyP50Ms    float64 `json:"latency_p50_ms"`
	LatencyP99Ms    float64 `json:"latency_p99_ms"`
	Completed       int64   `json:"completed"`
	Duplicates      int64   `json:"duplicates"`
}

// benchBatch is the size of each bulk enqueue (SPEC section 6).
const benchBatch = 1000

// benchStall is how long bench waits for the next completion before it
// gives up on draining.
const benchStall = time.Minute

func (a *app) benchCommand() *cobra.Command {
	var jobs, workers, latencyJobs int
	var force bool
	cmd := &cobra.Command{
		Use:   "bench --jobs N --workers W [--latency-jobs M] [--force]",
		Short: "Measure enqueue rate, drain rate and enqueue-to-start latency; print one JSON line",
		Long: `bench measures the database with the table named by --table (default jobs),
which it installs if missing and empties first. Jobs of earlier benches (type
jobqueue_bench) are deleted; a table that holds other jobs is refused unless
--force is given, and then EVERY JOB IN IT IS DELETED. Use --table to bench in
a table of its own, e.g. --table bench_jobs.

It enqueues N no-op jobs with the bulk API in batches of 1000 (enqueue rate),
then one worker with concurrency W drains them, keeping the completed rows
(drain rate); then, with the worker idle, it enqueues M single jobs 10 ms apart
and measures the time from each enqueue to the start of its handler (p50, p99).
It prints one JSON line on stdout:

  {"system":"jobqueue","engine":"postgres|mysql|sqlite","jobs":N,"workers":W,
   "enqueue_jobs_per_s":X,"drain_jobs_per_s":Y,"latency_p50_ms":A,
   "latency_p99_ms":B,"completed":C,"duplicates":D}

completed counts the completed rows at the end (N + M); duplicates counts jobs
whose handler ran more than once (0 unless something is wrong). Progress goes
to stderr.`,
		Example: `  jobqueue bench --db postgres://postgres@127.0.0.1/test --table bench_jobs --jobs 20000 --workers 8`,
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if jobs < 1 || workers < 1 || latencyJobs < 0 {
				return usagef("--jobs and --workers must be at least 1 and --latency-jobs at least 0")
			}
			return a.bench(cmd.Context(), jobs, workers, latencyJobs, force)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&jobs, "jobs", 0, "no-op jobs to enqueue and drain (required)")
	f.IntVar(&workers, "workers", 0, "the worker's concurrency (required)")
	f.IntVar(&latencyJobs, "latency-jobs", 200, "single jobs enqueued 10 ms apart to measure enqueue-to-start latency")
	f.BoolVar(&force, "force", false, "delete every job already in the table first, not only earlier benches' jobs")
	cmd.MarkFlagRequired("jobs")
	cmd.MarkFlagRequired("workers")
	return cmd
}

// benchCounter records which jobs ran, how often, and when the latency jobs
// started.
type benchCounter struct {
	mu       sync.Mutex
	runs     map[int64]int
	started  map[int64]time.Time
	drained  atomic.Int64
	drainN   int64
	drainEnd chan struct{}
	latN     atomic.Int64
	latAll   int64
	latEnd   chan struct{}
}

func (c *benchCounter) ran(id int64, at time.Time, latency bool) {
	c.mu.Lock()
	c.runs[id]++
	if latency {
		c.started[id] = at
	}
	c.mu.Unlock()
	if latency && c.latN.Add(1) == c.latAll {
		close(c.latEnd)
	}
}

// completed hears the queue's completed events.
func (c *benchCounter) completed(ev queue.Event) {
	if ev.Kind == queue.EventCompleted && ev.Job != nil && ev.Job.Name == (benchNoop{}).Kind() {
		if c.drained.Add(1) == c.drainN {
			close(c.drainEnd)
		}
	}
}

func (a *app) bench(ctx context.Context, jobs, workers, latencyJobs int, force bool) error {
	db, _, name, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrations.Install(ctx, db, name); err != nil {
		return explainTableError(err, name)
	}
	c := &benchCounter{
		runs: make(map[int64]int, jobs+latencyJobs), started: make(map[int64]time.Time, latencyJobs),
		drainN: int64(jobs), drainEnd: make(chan struct{}),
		latAll: int64(latencyJobs), latEnd: make(chan struct{}),
	}
	if latencyJobs == 0 {
		close(c.latEnd)
	}
	q, err := queue.New(db, queue.WithTable(name), queue.WithLogger(a.logger(slog.LevelWarn)), queue.WithListener(c.completed))
	if err != nil {
		return explainTableError(err, name)
	}
	defer q.Close()
	if err := emptyTable(ctx, q, force); err != nil {
		return err
	}
	progress := func(format string, args ...any) { fmt.Fprintf(a.err, "bench: "+format+"\n", args...) }

	// Enqueue N no-op jobs in batches of 1000.
	batch := make([]queue.JobArgs, 0, benchBatch)
	start := time.Now()
	for i := 0; i < jobs; i++ {
		batch = append(batch, benchNoop{N: i})
		if len(batch) == benchBatch || i == jobs-1 {
			if _, err := q.EnqueueMany(ctx, batch, queue.Type(benchType)); err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			batch = batch[:0]
		}
	}
	enqueueSecs := time.Since(start).Seconds()
	progress("enqueued %d jobs in %.2fs", jobs, enqueueSecs)

	// Drain them with one worker of concurrency W.
	w := q.NewWorker(queue.WorkerConfig{Concurrency: workers, Lease: time.Minute, ShutdownTimeout: 10 * time.Second})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[benchNoop]) error {
		c.ran(job.ID, time.Now(), false)
		return nil
	})
	queue.Handle(w, func(ctx context.Context, job *queue.Job[benchLatency]) error {
		c.ran(job.ID, time.Now(), true)
		return nil
	})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	start = time.Now()
	go func() { runErr <- w.Run(runCtx) }()
	// Wait for every completion, or give up when none comes for a while.
	watch := time.NewTicker(time.Second)
	defer watch.Stop()
	lastCount, lastProgress := int64(0), time.Now()
drain:
	for {
		select {
		case <-c.drainEnd:
			break drain
		case err := <-runErr:
			return fmt.Errorf("the worker stopped while draining: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-watch.C:
			if n := c.drained.Load(); n != lastCount {
				lastCount, lastProgress = n, time.Now()
			} else if time.Since(lastProgress) > benchStall {
				return fmt.Errorf("draining stalled: %d of %d jobs completed and none for %v", n, jobs, benchStall)
			}
		}
	}
	drainSecs := time.Since(start).Seconds()
	progress("drained %d jobs in %.2fs with %d workers", jobs, drainSecs, workers)

	// With the worker idle, enqueue M single jobs 10 ms apart.
	enqueued := make(map[int64]time.Time, latencyJobs)
	for i := 0; i < latencyJobs; i++ {
		t := time.Now()
		id, err := q.Enqueue(ctx, benchLatency{N: i}, queue.Type(benchType))
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		enqueued[id] = t
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-c.latEnd:
	case <-time.After(time.Minute):
		return fmt.Errorf("only %d of %d latency jobs started within a minute", c.latN.Load(), latencyJobs)
	case err := <-runErr:
		return fmt.Errorf("the worker stopped during the latency phase: %v", err)
	}
	stop()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("worker: %w", err)
	}

	c.mu.Lock()
	lat := make([]float64, 0, latencyJobs)
	for id, t := range enqueued {
		lat = append(lat, float64(c.started[id].Sub(t).Microseconds())/1000)
	}
	var dups int64
	for _, n := range c.runs {
		if n > 1 {
			dups++
		}
	}
	c.mu.Unlock()
	progress("measured enqueue-to-start latency of %d jobs", latencyJobs)
	stats, err := q.Stats(ctx, "")
	if err != nil {
		return err
	}
	return writeJSON(a.out, benchResult{
		System:          "jobqueue",
		Engine:          q.Engine(),
		Jobs:            jobs,
		Workers:         workers,
		EnqueueJobsPerS: round(float64(jobs)/enqueueSecs, 1),
		DrainJobsPerS:   round(float64(jobs)/drainSecs, 1),
		LatencyP50Ms:    round(percentile(lat, 0.50), 2),
		LatencyP99Ms:    round(percentile(lat, 0.99), 2),
		Completed:       stats[queue.StatusCompleted],
		Duplicates:      dups,
	})
}

// emptyTable makes sure q's table holds no job: it refuses unless force,
// and then deletes them all.
func emptyTable(ctx context.Context, q *queue.Queue, force bool) error {
	total, err := countJobs(ctx, q, "")
	if err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	// A table that holds only the jobs of earlier benches is emptied
	// without --force, so that bench can run again and again.
	ours, err := countJobs(ctx, q, benchType)
	if err != nil {
		return err
	}
	if ours != total && !force {
		return fmt.Errorf("table %s holds %d jobs (%d of them not from an earlier bench) and bench needs an empty table: pass --table NAME for a table of its own, or --force to delete every job in %s", q.Table(), total, total-ours, q.Table())
	}
	if _, err := q.Purge(ctx); err != nil {
		return fmt.Errorf("empty table %s: %w", q.Table(), err)
	}
	return nil
}

// countJobs is the number of jobs of type typ (every type when empty).
func countJobs(ctx context.Context, q *queue.Queue, typ string) (int64, error) {
	stats, err := q.Stats(ctx, typ)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, n := range stats {
		total += n
	}
	return total, nil
}

// percentile is the nearest-rank percentile p (0..1) of xs, 0 for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func round(x float64, places int) float64 {
	f := math.Pow(10, float64(places))
	return math.Round(x*f) / f
}
