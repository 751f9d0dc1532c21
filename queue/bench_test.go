package queue

// Benchmarks per engine (go test -run '^$' -bench . ./queue/):
//
//	BenchmarkEnqueueMany   bulk enqueue in batches of 1000, with its allocations
//	                       per job (PostgreSQL: one COPY each, copy_postgres.go)
//	BenchmarkEnqueueConcurrent JOBQUEUE_BENCH_JOBS single Enqueues from 16
//	                       goroutines, and the insert statements per job (on
//	                       PostgreSQL, under 1: enqueue_combine.go)
//	BenchmarkClaimComplete claim 100 + complete 100, the worker's primitives alone
//	BenchmarkDrain         one worker (concurrency 8, 64) drains JOBQUEUE_BENCH_JOBS
//	                       (default 20 000) no-op jobs, completed rows kept; it
//	                       measures claiming ahead (claimer.go): without it a
//	                       worker of concurrency 8 claims 8 jobs per round trip.
//	                       It also reports the process's CPU and allocations per
//	                       job (the PostgreSQL claim scanned on pgx,
//	                       claim_postgres.go; the executor's hot path) and the
//	                       jobs per claim and per completion (claimAheadMin), and
//	                       how often the claimer found its completer full and
//	                       waited, per claim (completeBacklog: at concurrency 64
//	                       it waited after every other claim when the backlog
//	                       was completeBatch alone)
//	BenchmarkDrainClaimers PostgreSQL, MySQL: four workers of concurrency 16,
//	                       each on a pool of its own, against one of 64
//	                       (claims from several processes must not fight)
//	BenchmarkDrainVacuumBlocked PostgreSQL, concurrency 8: the drain with a
//	                       transaction held open (vacuum blocked) against one
//	                       without; it measures the claimer's watermark
//	                       (claim_cursor.go)
//	BenchmarkEnqueueToStart enqueue-to-start latency of single jobs enqueued 10 ms
//	                       apart to an idle worker (latency_bench_test.go): p50-ms,
//	                       p99-ms
//
// Each reports jobs/s, but BenchmarkEnqueueToStart. A server that cannot be reached skips its engine.

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// emptyTable deletes every row of the env's table.
func (e *testEnv) emptyTable(b testing.TB) {
	b.Helper()
	e.exec(b, "DELETE FROM {t}")
}

func BenchmarkEnqueueMany(b *testing.B) {
	for _, kind := range testdb.Kinds() {
		b.Run(string(kind), func(b *testing.B) {
			env := newTestEnv(b, kind)
			q := env.queue(b, nil, WithLogger(testdb.QuietLogger()))
			ctx := context.Background()
			batch := make([]JobArgs, 1000)
			for i := range batch {
				batch[i] = seqArgs{N: i}
			}
			jobs := 0
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			cpu0 := processCPU(b)
			for b.Loop() {
				if _, err := q.EnqueueMany(ctx, batch); err != nil {
					b.Fatal(err)
				}
				jobs += len(batch)
			}
			cpu := processCPU(b) - cpu0
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
			// pgCopyReader encodes a COPY row without allocating: what is
			// left is the payload's encoding. The client's CPU per job is
			// the time the server waits for rows (the machine is shared,
			// so it reads more steadily than jobs/s).
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(jobs), "allocs/job")
			b.ReportMetric(float64(cpu.Microseconds())/float64(jobs), "client-cpu-us/job")
		})
	}
}

// BenchmarkEnqueueConcurrent: 16 goroutines of single Enqueue. On
// PostgreSQL those that arrive while combineSlots statements run go
// together (enqueue_combine.go): statements/job shows how far.
func BenchmarkEnqueueConcurrent(b *testing.B) {
	const enqueuers = 16
	n := testdb.BenchJobs(b)
	for _, kind := range testdb.Kinds() {
		b.Run(string(kind), func(b *testing.B) {
			env := newTestEnv(b, kind)
			var statements atomic.Int64
			count := func(query string, _ sqlRunner) {
				if strings.Contains(query, "-- name: InsertJob") {
					statements.Add(1)
				}
			}
			q := env.queue(b, nil, WithLogger(testdb.QuietLogger()), withStatementHook(count))
			ctx := context.Background()
			jobs := 0
			for b.Loop() {
				var next atomic.Int64
				errs := make(chan error, enqueuers)
				for range enqueuers {
					go func() {
						for i := next.Add(1); i <= int64(n); i = next.Add(1) {
							if _, err := q.Enqueue(ctx, seqArgs{N: int(i)}); err != nil {
								errs <- err
								return
							}
						}
						errs <- nil
					}()
				}
				for range enqueuers {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
				jobs += n
			}
			b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
			b.ReportMetric(float64(statements.Load())/float64(jobs), "statements/job")
		})
	}
}

func BenchmarkClaimComplete(b *testing.B) {
	const batch = 100
	for _, kind := range testdb.Kinds() {
		b.Run(string(kind), func(b *testing.B) {
			env := newTestEnv(b, kind)
			q := env.queue(b, nil, WithLogger(testdb.QuietLogger()))
			ctx := context.Background()
			jobs := 0
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				enqueueSeq(b, q, batch)
				b.StartTimer()
				rows, err := q.claim(ctx, nil, batch, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				refs := make([]attemptRef, len(rows))
				for i, r := range rows {
					refs[i] = attemptRef{ID: r.ID, Token: r.ClaimToken}
				}
				stale, err := q.complete(ctx, refs)
				if err != nil || len(stale) != 0 {
					b.Fatalf("complete: %v (%d stale)", err, len(stale))
				}
				jobs += len(rows)
			}
			b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

func BenchmarkDrain(b *testing.B) {
	n := testdb.BenchJobs(b)
	for _, kind := range testdb.Kinds() {
		for _, conc := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/concurrency=%d", kind, conc), func(b *testing.B) {
				env := newTestEnv(b, kind)
				var elapsed time.Duration
				var st drainStats
				for range b.N {
					b.StopTimer()
					env.emptyTable(b)
					enqueueSeq(b, env.queue(b, nil, WithLogger(testdb.QuietLogger())), n)
					d, s := drainWorkersStats(b, env, 1, conc, n, false)
					elapsed += d
					st.add(s)
				}
				jobs := float64(n * b.N)
				b.ReportMetric(jobs/elapsed.Seconds(), "jobs/s")
				// What the worker costs per job in this process (the
				// database's CPU is not counted), and the size of its
				// statements: every claim and completion has a fixed cost
				// (claimAheadMin).
				b.ReportMetric(float64(st.cpu.Microseconds())/jobs, "client-cpu-us/job")
				b.ReportMetric(float64(st.mallocs)/jobs, "allocs/job")
				if st.claims > 0 && st.completes > 0 {
					b.ReportMetric(jobs/float64(st.claims), "jobs/claim")
					b.ReportMetric(jobs/float64(st.completes), "jobs/complete")
					b.ReportMetric(float64(st.fullWaits)/float64(st.claims), "full-waits/claim")
				}
			})
		}
	}
}

// BenchmarkDrainClaimers (PostgreSQL, MySQL): each iteration drains
// JOBQUEUE_BENCH_JOBS jobs from a fresh table three times: with one worker
// of concurrency 64; with four workers of concurrency 16, each on a Queue
// and pool of its own (as bench --processes 4 --workers 16 runs them, in
// one process here); and with four workers of concurrency 16 on one Queue
// (the workers of one process, one per type, say). It reports the rates
// and their ratios to the first (4x16/1x64 is issue 9's goal: at least 1):
// four claimers on one table must not fight. It guards the claim-ahead cap
// (claimAheadMin, claimer.go): with a cap of 64, a worker of concurrency
// 16 claimed and completed in batches half the size of one of 64 (on
// MariaDB 40 to 80 jobs, against 120), and four of them drained slower
// than one; and the completions of one queue's workers one at a time
// (completeGate, completer.go), which the third setup's ratio shows.
func BenchmarkDrainClaimers(b *testing.B) {
	n := testdb.BenchJobs(b)
	for _, kind := range testdb.Kinds() {
		if kind == engine.SQLite {
			continue // one writer: several pools only queue for it
		}
		b.Run(string(kind), func(b *testing.B) {
			var one, four, shared time.Duration
			var oneSt, fourSt drainStats
			base := newTestEnv(b, kind)
			for range b.N {
				b.StopTimer()
				for _, setup := range []string{"1x64", "4x16", "4x16 one queue"} {
					env := base.freshTable(b)
					enqueueSeq(b, env.queue(b, nil, WithLogger(testdb.QuietLogger())), n)
					switch setup {
					case "1x64":
						d, st := drainWorkersStats(b, env, 1, 64, n, false)
						one += d
						oneSt.add(st)
					case "4x16":
						d, st := drainWorkersStats(b, env, 4, 16, n, false)
						four += d
						fourSt.add(st)
					default:
						d, _ := drainWorkersStats(b, env, 4, 16, n, true)
						shared += d
					}
				}
			}
			jobs := float64(n * b.N)
			b.ReportMetric(jobs/one.Seconds(), "jobs/s")
			b.ReportMetric(jobs/four.Seconds(), "4x16-jobs/s")
			b.ReportMetric(one.Seconds()/four.Seconds(), "4x16/1x64")
			b.ReportMetric(one.Seconds()/shared.Seconds(), "4x16-one-queue/1x64")
			// The size of the statements of each setup: every claim and
			// completion costs the server about as much whatever its size,
			// so four workers must claim and complete in batches about as
			// large as one's.
			b.ReportMetric(jobs/float64(max(oneSt.claims, 1)), "jobs/claim")
			b.ReportMetric(jobs/float64(max(oneSt.completes, 1)), "jobs/complete")
			b.ReportMetric(jobs/float64(max(fourSt.claims, 1)), "4x16-jobs/claim")
			b.ReportMetric(jobs/float64(max(fourSt.completes, 1)), "4x16-jobs/complete")
		})
	}
}

// BenchmarkDrainVacuumBlocked (PostgreSQL): each iteration drains
// JOBQUEUE_BENCH_JOBS jobs at concurrency 8 from a fresh table twice, once
// undisturbed and once while another session holds a transaction open (so
// vacuum can remove none of the dead index entries the claims leave at the
// head of the pending range), and reports both rates and their ratio
// (blocked/undisturbed, issue 9's goal: at least 0.8). It guards the
// claimer's watermark (claim_cursor.go): a claim that started from the
// beginning of the range would read every entry claimed before it.
func BenchmarkDrainVacuumBlocked(b *testing.B) {
	const conc = 8
	n := testdb.BenchJobs(b)
	var free, blocked time.Duration
	for range b.N {
		b.StopTimer()
		for _, hold := range []bool{false, true} {
			env := newTestEnv(b, engine.Postgres)
			enqueueSeq(b, env.queue(b, nil, WithLogger(testdb.QuietLogger())), n)
			if !hold {
				free += drainOnce(b, env, conc, n)
				continue
			}
			tx, err := env.newPool(b).BeginTx(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			var xid int64
			if err := tx.QueryRowContext(context.Background(), "SELECT txid_current()").Scan(&xid); err != nil {
				b.Fatal(err)
			}
			blocked += drainOnce(b, env, conc, n)
			if err := tx.Rollback(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n*b.N)/free.Seconds(), "jobs/s")
	b.ReportMetric(float64(n*b.N)/blocked.Seconds(), "blocked-jobs/s")
	b.ReportMetric(free.Seconds()/blocked.Seconds(), "blocked/undisturbed")
}

// drainOnce runs one worker of concurrency conc on env's table until it
// completed n jobs (the table holds n pending ones), with the benchmark's
// timer running, and returns how long that took. It fails when not all n
// ended completed.
func drainOnce(b *testing.B, env *testEnv, conc, n int) time.Duration {
	b.Helper()
	return drainWorkers(b, env, 1, conc, n)
}

// drainWorkers is drainOnce with workers workers of concurrency conc at once;
// with more than one, each has a Queue on a pool of its own, as worker
// processes would.
func drainWorkers(b *testing.B, env *testEnv, workers, conc, n int) time.Duration {
	b.Helper()
	d, _ := drainWorkersStats(b, env, workers, conc, n, false)
	return d
}

// drainStats is what one drain cost in the benchmark's process: its CPU
// time (user and system), the heap allocations, and how many claim and
// completion statements the queues sent.
type drainStats struct {
	cpu               time.Duration
	mallocs           uint64
	claims, completes int64
	fullWaits         int64 // the claimer found its completer full
}

func (s *drainStats) add(o drainStats) {
	s.cpu += o.cpu
	s.mallocs += o.mallocs
	s.claims += o.claims
	s.completes += o.completes
	s.fullWaits += o.fullWaits
}

// processCPU is the CPU time this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drainPoolConns is how many connections warmDrainPool opens for each
// worker: as many as the command line's worker keeps (cmd/jobqueue,
// workerConns).
const drainPoolConns = 6

// warmDrainPool warms drainPoolConns connections of db for each of workers
// workers on the env's table (engine.WarmPool, as bench does before its
// drain). Without it the four workers of BenchmarkDrainClaimers, each on a
// new pool, started their server sessions within the drain it times
// (PostgreSQL: 8 backends started during a drain of 20 000 jobs), while the
// one worker ran on the env's pool that had enqueued the jobs.
func warmDrainPool(b *testing.B, env *testEnv, db *sql.DB, workers int) {
	b.Helper()
	if err := engine.WarmPool(context.Background(), db, env.kind, env.table, drainPoolConns*workers); err != nil {
		b.Fatalf("warm the pool: %v", err)
	}
}

// drainWorkersStats is drainWorkers, also returning what the drain cost;
// with oneQueue the workers share one Queue on the env's pool instead (the
// workers of one process, one per type, say).
func drainWorkersStats(b *testing.B, env *testEnv, workers, conc, n int, oneQueue bool) (time.Duration, drainStats) {
	b.Helper()
	var completed, claims, completes, fullWaits atomic.Int64
	allDone := make(chan struct{}, 1)
	count := WithListener(func(ev Event) {
		if ev.Kind == EventCompleted && completed.Add(1) == int64(n) {
			allDone <- struct{}{}
		}
	})
	statements := withStatementHook(func(query string, _ sqlRunner) {
		switch {
		case strings.Contains(query, "name: ClaimJobs"), strings.Contains(query, "name: SelectDueJobs"):
			claims.Add(1)
		case strings.Contains(query, "name: CompleteJobs"):
			completes.Add(1)
		}
	})
	opts := []Option{WithLogger(testdb.QuietLogger()), count, statements, withCompleterFullHook(func() { fullWaits.Add(1) })}
	var shared *Queue
	var pools []*sql.DB // warmed: their idle connections go once drained
	if oneQueue {
		warmDrainPool(b, env, env.db, workers)
		pools = append(pools, env.db)
		shared = env.queue(b, nil, opts...)
	}
	ws := make([]*Worker, workers)
	for i := range ws {
		q := shared
		if q == nil {
			db := env.db
			if workers > 1 {
				db = env.newPool(b)
			}
			warmDrainPool(b, env, db, 1)
			pools = append(pools, db)
			q = env.queue(b, db, opts...)
		}
		ws[i] = q.NewWorker(WorkerConfig{Concurrency: conc, MaintenanceInterval: -1})
		Handle(ws[i], func(ctx context.Context, job *Job[seqArgs]) error { return nil })
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, workers)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := processCPU(b)
	b.StartTimer()
	t0 := time.Now()
	for _, w := range ws {
		go func() { done <- w.Run(ctx) }()
	}
	select {
	case <-allDone:
	case <-time.After(5 * time.Minute):
		b.Fatalf("drain of %d jobs did not finish in 5 minutes (%d completed)", n, completed.Load())
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	runtime.ReadMemStats(&ms1)
	cancel()
	for range ws {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	for _, db := range pools {
		// database/sql's default: the pools of earlier iterations live
		// until the benchmark ends, and their warmed connections would
		// take the server's max_connections. The env's pool serves the
		// next iteration's table (freshTable) and keeps a few; the
		// workers' own pools keep none.
		idle := 0
		if db == env.db {
			idle = 2
		}
		db.SetMaxIdleConns(idle)
	}
	if got := env.countWhere(b, "status = 'completed'"); got != n {
		b.Fatalf("%d jobs completed, want %d", got, n)
	}
	return elapsed, drainStats{cpu: cpu, mallocs: ms1.Mallocs - ms0.Mallocs, claims: claims.Load(), completes: completes.Load(), fullWaits: fullWaits.Load()}
}
