package main

import (
	"context"
	"database/sql"
	"fmt"
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

// benchOptions are bench's flags.
type benchOptions struct {
	jobs, workers, latencyJobs int
	processes, enqueuers       int
	force                      bool
}

func (a *app) benchCommand() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench --jobs N --workers W [--latency-jobs M] [--processes P] [--enqueuers K] [--force]",
		Short: "Measure enqueue rate, drain rate and enqueue-to-start latency; print one JSON line",
		Long: `bench measures the database with the table named by --table (default jobs),
which it drops and installs again first, so that every run starts from a fresh
table. A table that holds only jobs of earlier benches (type jobqueue_bench)
is dropped without asking; one that holds other jobs is refused unless --force
is given, and then EVERY JOB IN IT IS DELETED. Use --table to bench in a table
of its own, e.g. --table bench_jobs.

It enqueues N no-op jobs with the bulk API in batches of 1000 (enqueue rate;
with --enqueuers K, K goroutines each enqueue single jobs, one Enqueue per job),
then one worker with concurrency W drains them (with --processes P, P worker
processes of concurrency W each, started from this binary), keeping the
completed rows (drain rate); then, with the workers idle, it enqueues M single
jobs 10 ms apart and measures how long each takes to start (latency). It
prints one JSON line on stdout:

  {"system":"jobqueue","engine":"postgres|mysql|sqlite","jobs":N,"workers":W,
   "enqueue_jobs_per_s":X,"drain_jobs_per_s":Y,"latency_p50_ms":A,
   "latency_p99_ms":B,"completed":C,"duplicates":D}

completed counts the completed rows at the end (N + M); duplicates counts jobs
whose handler ran more than once (0 unless something is wrong). Progress goes
to stderr.`,
		Example: `  jobqueue bench --db postgres://postgres@127.0.0.1/test --table bench_jobs --jobs 20000 --workers 8
  jobqueue bench --db postgres://postgres@127.0.0.1/test --table bench_jobs --jobs 20000 --workers 16 --processes 4`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return a.bench(cmd.Context(), o)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&o.jobs, "jobs", 0, fmt.Sprintf("no-op jobs to enqueue and drain, 1 to %d (required)", maxBenchJobs))
	f.IntVar(&o.workers, "workers", 0, fmt.Sprintf("each worker's concurrency, 1 to %d (required)", queue.MaxConcurrency))
	f.IntVar(&o.latencyJobs, "latency-jobs", 200, fmt.Sprintf("single jobs enqueued 10 ms apart to measure enqueue-to-start latency, 0 to %d", maxBenchLatencyJobs))
	f.IntVar(&o.processes, "processes", 1, fmt.Sprintf("worker processes that drain, 1 to %d (more than 1: child processes of this binary)", maxBenchProcesses))
	f.IntVar(&o.enqueuers, "enqueuers", 0, fmt.Sprintf("goroutines that enqueue the jobs one Enqueue each, 0 to %d (0: bulk batches of 1000)", maxBenchEnqueuers))
	f.BoolVar(&o.force, "force", false, "delete every job already in the table first, not only earlier benches' jobs")
	cmd.MarkFlagRequired("jobs")
	cmd.MarkFlagRequired("workers")
	return cmd
}

// The largest counts bench takes: beyond them a run needs more memory
// (bench keeps an entry per job), processes or connections than a
// measurement is worth, and a mistyped number would exhaust the machine.
const (
	maxBenchJobs        = 10_000_000
	maxBenchLatencyJobs = 100_000
	maxBenchProcesses   = 64
	maxBenchEnqueuers   = 1000
)

// check refuses flags out of range, as a usage error naming the flag and
// its range.
func (o benchOptions) check() error {
	for _, f := range []struct {
		flag     string
		n        int
		min, max int
	}{
		{"--jobs", o.jobs, 1, maxBenchJobs},
		{"--workers", o.workers, 1, queue.MaxConcurrency},
		{"--latency-jobs", o.latencyJobs, 0, maxBenchLatencyJobs},
		{"--processes", o.processes, 1, maxBenchProcesses},
		{"--enqueuers", o.enqueuers, 0, maxBenchEnqueuers},
	} {
		if err := checkRange(f.flag, f.n, f.min, f.max); err != nil {
			return err
		}
	}
	return nil
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

// newBenchCounter is a counter for a drain of jobs and latencyJobs latency jobs.
func newBenchCounter(jobs, latencyJobs int) *benchCounter {
	c := &benchCounter{
		runs: make(map[int64]int, jobs+latencyJobs), started: make(map[int64]time.Time, latencyJobs),
		drainN: int64(jobs), drainEnd: make(chan struct{}),
		latAll: int64(latencyJobs), latEnd: make(chan struct{}),
	}
	if latencyJobs == 0 {
		close(c.latEnd)
	}
	return c
}

// completed hears the queue's completed events.
func (c *benchCounter) completed(ev queue.Event) {
	if ev.Kind == queue.EventCompleted && ev.Job != nil && ev.Job.Name == (benchNoop{}).Kind() {
		c.drainedOne()
	}
}

// drainedOne counts one completed no-op job.
func (c *benchCounter) drainedOne() { c.drainedN(1) }

// drainedN counts n completed no-op jobs; the count that reaches the
// drain's jobs ends the drain.
func (c *benchCounter) drainedN(n int64) {
	if after := c.drained.Add(n); after >= c.drainN && after-n < c.drainN {
		close(c.drainEnd)
	}
}

func (a *app) bench(ctx context.Context, o benchOptions) error {
	db, k, name, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := freshTable(ctx, db, name, o.force); err != nil {
		return err
	}
	if o.processes == 1 {
		// Its one worker's connections, as each worker process opens its own.
		if err := warmPool(ctx, db, k, name); err != nil {
			return err
		}
	}
	c := newBenchCounter(o.jobs, o.latencyJobs)
	q, err := a.newQueue(ctx, db, name, queue.WithListener(c.completed))
	if err != nil {
		return err
	}
	defer q.Close()
	progress := func(format string, args ...any) { fmt.Fprintf(a.err, "bench: "+format+"\n", args...) }

	// The workers get ready (child processes started, connected) before the
	// clock of the drain starts.
	var drain benchDrainer = &benchInProcess{q: q, workers: o.workers, c: c}
	if o.processes > 1 {
		drain = &benchProcesses{a: a, n: o.processes, workers: o.workers, c: c}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if err := drain.prepare(runCtx); err != nil {
		return err
	}
	defer drain.stop()

	start := time.Now()
	if err := enqueueBench(ctx, q, o.jobs, o.enqueuers); err != nil {
		return err
	}
	enqueueSecs := time.Since(start).Seconds()
	progress("enqueued %d jobs in %.2fs", o.jobs, enqueueSecs)

	start = time.Now()
	runErr := drain.start()
	// Wait for every completion, or give up when none comes for a while.
	watch := time.NewTicker(time.Second)
	defer watch.Stop()
	lastCount, lastProgress := int64(0), time.Now()
wait:
	for {
		select {
		case <-c.drainEnd:
			break wait
		case err := <-runErr:
			return fmt.Errorf("a worker stopped while draining: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-watch.C:
			if n := c.drained.Load(); n != lastCount {
				lastCount, lastProgress = n, time.Now()
			} else if time.Since(lastProgress) > benchStall {
				return fmt.Errorf("draining stalled: %d of %d jobs completed and none for %v", n, o.jobs, benchStall)
			}
		}
	}
	drainSecs := time.Since(start).Seconds()
	progress("drained %d jobs in %.2fs with %d process(es) of %d workers", o.jobs, drainSecs, o.processes, o.workers)

	// With the workers idle, enqueue M single jobs 10 ms apart.
	enqueued := make(map[int64]time.Time, o.latencyJobs)
	for i := 0; i < o.latencyJobs; i++ {
		t := time.Now()
		id, err := q.Enqueue(ctx, benchLatency{N: i}, queue.Type(benchType))
		if err != nil {
			return err
		}
		enqueued[id] = t
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-c.latEnd:
	case <-time.After(time.Minute):
		return fmt.Errorf("only %d of %d latency jobs started within a minute", c.latN.Load(), o.latencyJobs)
	case err := <-runErr:
		return fmt.Errorf("a worker stopped during the latency phase: %v", err)
	}
	if err := drain.stop(); err != nil {
		return fmt.Errorf("stopping the workers: %w", err)
	}

	c.mu.Lock()
	lat := make([]float64, 0, o.latencyJobs)
	for id, t := range enqueued {
		lat = append(lat, float64(c.started[id].Sub(t).Microseconds())/1000)
	}
	var dups int64
	for _, n := range c.runs {
		if n > 1 {
			dups++
		}
	}
	seen := len(c.runs)
	c.mu.Unlock()
	if want := o.jobs + o.latencyJobs; seen != want {
		// Every job completed, so each ran: a count short of it means runs
		// went untold (a worker process's report lost), and duplicates
		// among them would go uncounted.
		return fmt.Errorf("the workers told of %d distinct jobs run, want %d: the duplicate count would be wrong", seen, want)
	}
	progress("measured enqueue-to-start latency of %d jobs", o.latencyJobs)
	stats, err := q.Stats(ctx, "")
	if err != nil {
		return err
	}
	return writeJSON(a.out, benchResult{
		System:          "jobqueue",
		Engine:          q.Engine(),
		Jobs:            o.jobs,
		Workers:         o.workers,
		EnqueueJobsPerS: round(float64(o.jobs)/enqueueSecs, 1),
		DrainJobsPerS:   round(float64(o.jobs)/drainSecs, 1),
		LatencyP50Ms:    round(percentile(lat, 0.50), 2),
		LatencyP99Ms:    round(percentile(lat, 0.99), 2),
		Completed:       stats[queue.StatusCompleted],
		Duplicates:      dups,
	})
}

// enqueueBench enqueues n no-op jobs: in bulk batches of benchBatch when
// enqueuers is 0, else from that many goroutines, one Enqueue per job.
func enqueueBench(ctx context.Context, q *queue.Queue, n, enqueuers int) error {
	if enqueuers == 0 {
		batch := make([]queue.JobArgs, 0, benchBatch)
		for i := 0; i < n; i++ {
			batch = append(batch, benchNoop{N: i})
			if len(batch) == benchBatch || i == n-1 {
				if _, err := q.EnqueueMany(ctx, batch, queue.Type(benchType)); err != nil {
					return err // the queue's error says "enqueue"
				}
				batch = batch[:0]
			}
		}
		return nil
	}
	var next atomic.Int64
	errs := make(chan error, enqueuers)
	var wg sync.WaitGroup
	for range enqueuers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if _, err := q.Enqueue(ctx, benchNoop{N: int(i)}, queue.Type(benchType)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when no enqueuer failed
}

// freshTable gives bench a fresh table (SPEC section 6): it drops the table
// and installs it again, so that no dead rows of earlier runs slow this one.
// A table that holds jobs other than earlier benches' is refused unless
// force.
func freshTable(ctx context.Context, db *sql.DB, name string, force bool) error {
	if err := migrations.Install(ctx, db, name); err != nil {
		return explainTableError(err, name)
	}
	q, err := queue.NewContext(ctx, db, queue.WithTable(name))
	if err != nil {
		return explainTableError(err, name)
	}
	total, err := countJobs(ctx, q, "")
	if err != nil {
		q.Close()
		return err
	}
	ours, err := countJobs(ctx, q, benchType)
	q.Close()
	if err != nil {
		return err
	}
	if ours != total && !force {
		return fmt.Errorf("table %s holds %s (%d of them not from an earlier bench) and bench drops and recreates its table: pass --table NAME for a table of its own, or --force to drop every job in %s", name, jobCount(total), total-ours, name)
	}
	if err := migrations.Uninstall(ctx, db, name); err != nil {
		return err
	}
	return migrations.Install(ctx, db, name)
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
