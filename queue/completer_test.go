package queue

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// refusal makes the env's table refuse, by a trigger, every update that
// completes a job while it is on: a database whose completion writes fail
// for a while, on every engine, with everything else working.
type refusal struct {
	env *testEnv
	ctl string // the quoted control table
}

// refuseCompletions installs the trigger (off) on the env's table; it is
// removed when t ends.
func refuseCompletions(t *testing.T, env *testEnv) *refusal {
	t.Helper()
	return &refusal{env: env, ctl: installRefusal(t, env, "UPDATE", "NEW.status = 'completed'", false)}
}

// set turns the refusal on or off, in tx when it is not nil.
func (r *refusal) set(t *testing.T, tx sqlRunner, on bool) {
	t.Helper()
	v := 0
	if on {
		v = 1
	}
	q := r.env.sql("UPDATE " + r.ctl + " SET refuse = ?")
	var err error
	if tx != nil {
		_, err = tx.ExecContext(context.Background(), q, v)
	} else {
		_, err = r.env.db.ExecContext(context.Background(), q, v)
	}
	if err != nil {
		t.Fatalf("turning the completion refusal to %v: %v", on, err)
	}
}

// Messages of the completer that the tests wait for.
const (
	logCompleteRetry  = "completing jobs failed; trying again"
	logCompleteGiveUp = "completing jobs failed; they stay in_progress"
)

// claimN claims n jobs (in claims of up to maxClaim), failing the test if
// fewer are due.
func claimN(t *testing.T, q *Queue, n int) []*JobRow {
	t.Helper()
	var rows []*JobRow
	for len(rows) < n {
		got, err := q.claim(context.Background(), nil, min(n-len(rows), maxClaim), time.Minute)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(got) == 0 {
			t.Fatalf("claimed %d jobs, want %d", len(rows), n)
		}
		rows = append(rows, got...)
	}
	return rows
}

// holdJob opens a transaction on another pool that holds the job's row
// (on SQLite: the database's write lock), so that a completion of it waits
// until the transaction ends.
func holdJob(t *testing.T, env *testEnv, id int64) *sql.Tx {
	t.Helper()
	tx, err := env.newPool(t).BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(context.Background(), env.sql("UPDATE {t} SET error = error WHERE id = ?"), id); err != nil {
		t.Fatalf("holding job %d: %v", id, err)
	}
	return tx
}

// TestCompleterTakesResultsWhileItsWriteIsRetried: an executor hands its
// result to the completer and goes on, even while the completer's write
// fails and is retried. Before, the completer slept between tries, and once
// its channel (completeBatch results) was full every executor waited for
// the sleeps to end. Here the first write fails, the retry is held (the
// job's row locked), and more results than a worker of concurrency 64 may
// leave unwritten (completeBacklog, at least twice completeBatch) are handed
// over meanwhile: each is taken at once, and all are written once the
// database accepts completions again.
func TestCompleterTakesResultsWhileItsWriteIsRetried(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		refuse := refuseCompletions(t, env)
		logs := &testdb.LogRecorder{}
		events := newEventLog()
		q := env.queue(t, nil, WithLogger(slog.New(logs)), WithListener(events.listen))
		// More than the backlog of a worker of concurrency 64, so that
		// the completer is full while its write is held.
		n := max(2*completeBatch, completeBacklog(64)) + 2
		enqueueSeq(t, q, n)
		rows := claimN(t, q, n)
		refuse.set(t, nil, true)

		c := newCompleter(q, q.logger, newShutdownBudget(context.Background()), newInflightSet(), completeBacklog(64))
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); c.run(stop) }()
		defer func() {
			close(stop)
			waitFor(t, done, 30*time.Second, "the completer to return")
		}()
		c.add(completion{a: &attempt{row: rows[0], ref: rows[0].ref()}})
		waitUntil(t, 10*time.Second, "the first write to fail and be retried", func() bool { return logs.Count(slog.LevelDebug, logCompleteRetry) > 0 })
		hold := holdJob(t, env, rows[0].ID)

		added := make(chan struct{})
		go func() {
			defer close(added)
			for _, row := range rows[1:] {
				c.add(completion{a: &attempt{row: row, ref: row.ref()}})
			}
		}()
		waitFor(t, added, 10*time.Second, "the completer to take every result while its write is retried")
		if given := logs.Count(slog.LevelDebug, logCompleteGiveUp); given != 0 {
			t.Fatalf("the completer gave up on a write before the results were handed over (%d times): the test did not hold its retry", given)
		}
		if got := c.unwritten.Load(); got != int64(n) {
			t.Errorf("the completer holds %d unwritten results, want %d", got, n)
		}
		if !c.full() {
			t.Errorf("with %d results unwritten the completer is not full; the claimer would claim on", n)
		}
		if got := env.countWhere(t, "status = 'completed'"); got != 0 {
			t.Errorf("%d jobs completed while completions were refused", got)
		}

		refuse.set(t, hold, false)
		if err := hold.Commit(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "every job to be completed", func() bool { return env.countWhere(t, "status = 'completed'") == n })
		waitUntil(t, 10*time.Second, "the completer to settle every result", func() bool { return c.unwritten.Load() == 0 })
		if c.full() {
			t.Error("the completer is still full after writing everything")
		}
		if got := events.count(EventCompleted); got != n {
			t.Errorf("%d completed events, want %d", got, n)
		}
	})
}

// TestWorkerCompletesAfterRefusedWrites: while the database refuses
// completions the worker keeps the results and tries again (with what
// finished meanwhile); once it accepts them, every job ends completed,
// each with one completed event, having run once.
func TestWorkerCompletesAfterRefusedWrites(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		refuse := refuseCompletions(t, env)
		refuse.set(t, nil, true)
		logs := &testdb.LogRecorder{}
		events := newEventLog()
		q := env.queue(t, nil, WithLogger(slog.New(logs)), WithListener(events.listen))
		const n = 20
		enqueueSeq(t, q, n)
		cfg := fastConfig()
		cfg.MaintenanceInterval = -1
		w := q.NewWorker(cfg)
		var mu sync.Mutex
		runs := map[int]int{}
		Handle(w, func(ctx context.Context, job *Job[seqArgs]) error {
			mu.Lock()
			runs[job.Args.N]++
			mu.Unlock()
			return nil
		})
		stop, _ := startWorker(t, w)
		waitUntil(t, 10*time.Second, "a completion to be refused and retried", func() bool { return logs.Count(slog.LevelDebug, logCompleteRetry) > 0 })
		refuse.set(t, nil, false)
		waitUntil(t, 30*time.Second, "every job to be completed", func() bool { return env.countWhere(t, "status = 'completed'") == n })
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if given := logs.Count(slog.LevelDebug, logCompleteGiveUp); given != 0 {
			t.Errorf("the worker gave up on %d completion writes", given)
		}
		if got := events.count(EventCompleted); got != n {
			t.Errorf("%d completed events, want %d", got, n)
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if runs[i] != 1 {
				t.Errorf("job %d ran %d times, want once", i, runs[i])
			}
		}
	})
}

// TestCompletionsOneAtATime: the completion statements of the workers of
// one queue run one at a time (completeGate). While the first worker's
// CompleteJobs is held in the statement hook, the second worker's
// completer, whose job has run, waits at the gate and sends nothing; once
// the first is let go, both jobs are completed. Not on SQLite, whose one
// writer runs one write at a time anyway: the held completion holds it, and
// the second job would never be claimed.
func TestCompletionsOneAtATime(t *testing.T) {
	t.Parallel()
	for _, kind := range []engine.Kind{engine.Postgres, engine.MySQL} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			testCompletionsOneAtATime(t, kind)
		})
	}
}

func testCompletionsOneAtATime(t *testing.T, kind engine.Kind) {
	env := newTestEnv(t, kind)
	release := make(chan struct{})
	var sent atomic.Int32 // CompleteJobs statements sent
	hook := func(query string, _ sqlRunner) {
		if strings.Contains(query, "-- name: CompleteJobs ") && sent.Add(1) == 1 {
			<-release
		}
	}
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(hook))
	// The first statement is held for as long as the test takes: the gate's
	// bound (completeGateWait, TestCompleteGate) must not let the second
	// pass it meanwhile, however slowly the second job comes.
	q.completes.wait = time.Hour
	for _, typ := range []string{"a", "b"} {
		w := q.NewWorker(WorkerConfig{Types: []string{typ}, Concurrency: 1, MaintenanceInterval: -1})
		Handle(w, func(ctx context.Context, job *Job[testArgs]) error { return nil })
		stop, _ := startWorker(t, w)
		t.Cleanup(func() { stop(10 * time.Second) })
	}
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the workers stop, should the test fail
	first := mustEnqueue(t, q, testArgs{N: 1}, Type("a"))
	waitUntil(t, 10*time.Second, "the first worker's completion to be sent", func() bool { return sent.Load() == 1 })
	second := mustEnqueue(t, q, testArgs{N: 2}, Type("b"))
	waitUntil(t, 10*time.Second, "the second worker's completer to wait at the gate", func() bool { return q.completes.waiting.Load() == 1 })
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d completion statements sent while the first ran, want 1", n)
	}
	letGo()
	for _, id := range []int64{first, second} {
		waitUntil(t, 10*time.Second, "both jobs to be completed", func() bool { return getJob(t, q, id).Status == StatusCompleted })
	}
	if n := sent.Load(); n != 2 {
		t.Errorf("%d completion statements in all, want 2", n)
	}
}

// TestCompleteGate: a completer enters a free gate; one that finds it held
// enters once the statement in flight leaves, and writes beside it
// (entering not) when it has waited its bound, at once when the
// statement in flight has held the gate that long already, or as soon as
// its worker stops.
func TestCompleteGate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		wait time.Duration // the gate's bound
		held time.Duration // how long the statement in flight has run (-1: none)
		// leave: the statement in flight leaves once the completer waits;
		// stop: the completer's worker stops then.
		leave, stop bool
		want        bool // the completer entered
	}{
		{"free", time.Hour, -1, false, false, true},
		{"held, then left", time.Hour, 0, true, false, true},
		{"held past the completer's bound", 50 * time.Millisecond, 0, false, false, false},
		{"held past the bound already", time.Hour, 2 * time.Hour, false, false, false},
		{"held, the worker stops", time.Hour, 0, false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := &completeGate{wait: c.wait}
			if c.held >= 0 {
				if !g.enter(nil) {
					t.Fatal("the first statement did not enter the free gate")
				}
				g.mu.Lock()
				g.since = g.since.Add(-c.held)
				g.mu.Unlock()
			}
			got, stop := make(chan bool, 1), make(chan struct{})
			go func() { got <- g.enter(stop) }()
			if c.leave || c.stop {
				waitUntil(t, 10*time.Second, "the completer to wait at the gate", func() bool { return g.waiting.Load() == 1 })
			}
			if c.leave {
				g.leave()
			}
			if c.stop {
				close(stop)
			}
			select {
			case entered := <-got:
				if entered != c.want {
					t.Errorf("enter = %v, want %v", entered, c.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the completer still waits at the gate after 30 s")
			}
		})
	}
}

// TestCompletionBesideStuckOne: a completion statement that waits on a row
// lock (an application's transaction holds the job's row) does not hold up
// the completions of the queue's other workers beyond completeGateWait:
// while it waits, the second worker's job is completed, and once the lock
// goes, the first one too. Not on SQLite, whose one writer makes every
// write wait behind the lock.
func TestCompletionBesideStuckOne(t *testing.T) {
	t.Parallel()
	for _, kind := range []engine.Kind{engine.Postgres, engine.MySQL} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, kind)
			var sent atomic.Int32 // CompleteJobs statements sent
			hook := func(query string, _ sqlRunner) {
				if strings.Contains(query, "-- name: CompleteJobs ") {
					sent.Add(1)
				}
			}
			q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(hook))
			started, finish := make(chan int64, 1), make(chan struct{})
			wa := q.NewWorker(WorkerConfig{Types: []string{"a"}, Concurrency: 1, MaintenanceInterval: -1})
			Handle(wa, func(ctx context.Context, job *Job[testArgs]) error {
				started <- job.ID
				<-finish
				return nil
			})
			wb := q.NewWorker(WorkerConfig{Types: []string{"b"}, Concurrency: 1, MaintenanceInterval: -1})
			Handle(wb, func(ctx context.Context, job *Job[testArgs]) error { return nil })
			for _, w := range []*Worker{wa, wb} {
				stop, _ := startWorker(t, w)
				t.Cleanup(func() { stop(10 * time.Second) })
			}
			first := mustEnqueue(t, q, testArgs{N: 1}, Type("a"))
			if id := <-started; id != first {
				t.Fatalf("worker a started job %d, want %d", id, first)
			}
			// The application's transaction takes the running job's row.
			unlock := lockRow(t, env.db, env.tbl, first)
			close(finish)
			waitUntil(t, 10*time.Second, "worker a's completion to be sent", func() bool { return sent.Load() == 1 })
			second := mustEnqueue(t, q, testArgs{N: 2}, Type("b"))
			waitUntil(t, 10*time.Second, "worker b's job to be completed while a's completion waits on the lock", func() bool {
				return getJob(t, q, second).Status == StatusCompleted
			})
			if st := getJob(t, q, first).Status; st != StatusInProgress {
				t.Errorf("job %d is %s while its row is locked, want in_progress", first, st)
			}
			unlock()
			waitUntil(t, 10*time.Second, "worker a's job to be completed once the lock is gone", func() bool {
				return getJob(t, q, first).Status == StatusCompleted
			})
		})
	}
}

// TestHeldCompletionKeepsLease: while a succeeded attempt's completion is
// held back (the database is slow, or the write is tried again:
// completeTries), the heartbeater goes on renewing the attempt's lease, so
// that the job is not reclaimed and run again although it succeeded. The
// completion statement is held by the statement hook while the queue's
// clock moves past the claim's lease. Before, the executor took the
// attempt out of the inflightSet when its handler returned, so no
// heartbeat renewed it: its lease passed, Reclaim made the job pending
// again, and a worker ran it a second time (the held completion was then
// refused). On PostgreSQL and MySQL, where the held statement waits on the
// server beside the heartbeats: SQLite's one writer (writeGated) holds
// every write, heartbeats too, behind a completion statement in flight.
func TestHeldCompletionKeepsLease(t *testing.T) {
	for _, kind := range []engine.Kind{engine.Postgres, engine.MySQL} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			testHeldCompletionKeepsLease(t, kind)
		})
	}
}

func testHeldCompletionKeepsLease(t *testing.T, kind engine.Kind) {
	const lease = time.Minute
	ctx := context.Background()
	env := newTestEnv(t, kind)
	release := make(chan struct{})
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	var sent atomic.Int32 // CompleteJobs statements sent
	hook := func(query string, _ sqlRunner) {
		if strings.Contains(query, "-- name: CompleteJobs") && sent.Add(1) == 1 {
			<-release
		}
	}
	clock := &testClock{}
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withClock(clock.now), withStatementHook(hook))
	w := q.NewWorker(WorkerConfig{Concurrency: 1, Lease: lease, HeartbeatInterval: 50 * time.Millisecond, MaintenanceInterval: -1})
	var runs atomic.Int32
	Handle(w, func(ctx context.Context, job *Job[testArgs]) error {
		runs.Add(1)
		return nil
	})
	stop, _ := startWorker(t, w)
	t.Cleanup(func() { stop(10 * time.Second) })
	t.Cleanup(letGo) // before the worker stops, should the test fail
	id := mustEnqueue(t, q, testArgs{N: 1})
	waitUntil(t, 15*time.Second, "the job's completion to be sent (and held)", func() bool { return sent.Load() == 1 })

	// The queue's clock passes the claim's lease while the completion is
	// held: only a renewal keeps the job from Reclaim.
	clock.advance(2 * lease)
	waitUntil(t, 15*time.Second, "a heartbeat to renew the lease of the attempt whose completion is held", func() bool {
		j := getJob(t, q, id)
		return j.Status == StatusInProgress && j.LeaseUntil != nil && j.LeaseUntil.After(clock.now())
	})
	if n, err := q.Reclaim(ctx); err != nil || n != 0 {
		t.Errorf("Reclaim: %d, %v; want 0 (the attempt succeeded, its completion is being written)", n, err)
	}
	letGo()
	waitUntil(t, 15*time.Second, "the job to be completed", func() bool { return getJob(t, q, id).Status == StatusCompleted })
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}
