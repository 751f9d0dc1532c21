package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// handleUntilCut registers on w a handler of A's jobs that sends each
// job's id on started as it starts, runs until its context ends and sends
// that end's cause on cut (buffered for one).
func handleUntilCut[A JobArgs](w *Worker) (started <-chan int64, cut <-chan error) {
	starts := make(chan int64, 10)
	cuts := make(chan error, 1)
	Handle(w, func(ctx context.Context, job *Job[A]) error {
		starts <- job.ID
		<-ctx.Done()
		cuts <- context.Cause(ctx)
		return ctx.Err()
	})
	return starts, cuts
}

// handleHeldAfterCut is handleUntilCut whose handler, once cut, returns
// only after letReturn (called at the test's end at the latest): a
// handler still running keeps a late claim going (TestIdleStopCancelsLockedClaim
// tells what happens once none runs).
func handleHeldAfterCut[A JobArgs](t *testing.T, w *Worker) (started <-chan int64, cut <-chan error, letReturn func()) {
	starts := make(chan int64, 10)
	cuts := make(chan error, 1)
	mayReturn := make(chan struct{})
	var once sync.Once
	letReturn = func() { once.Do(func() { close(mayReturn) }) }
	t.Cleanup(letReturn)
	Handle(w, func(ctx context.Context, job *Job[A]) error {
		starts <- job.ID
		<-ctx.Done()
		cuts <- context.Cause(ctx)
		<-mayReturn
		return ctx.Err()
	})
	return starts, cuts, letReturn
}

// checkGivenBack waits for Run's result on done after StopNow, and checks
// that no handler started (started, of handleUntilCut) after the stop and
// that job id, which a claim in flight took, was given back: pending,
// attempts 0.
func checkGivenBack(t *testing.T, q *Queue, done <-chan error, started <-chan int64, id int64) {
	t.Helper()
	if err := waitFor(t, done, 30*time.Second, "Run to return"); err != nil {
		t.Errorf("Run: %v", err)
	}
	select {
	case other := <-started:
		t.Errorf("job %d started after StopNow", other)
	default:
	}
	if j := getJob(t, q, id); j.Status != StatusPending || j.Attempts != 0 {
		t.Errorf("job %d, taken by the claim in flight, is %s, attempts %d; want pending, attempts 0 (given back)", id, j.Status, j.Attempts)
	}
}

// claimHook runs a function of the test in the claimer, just before its
// next claim statement is sent (it is a queue's withStatementHook).
type claimHook struct {
	kind engine.Kind

	mu   sync.Mutex
	next func()
}

// isClaim reports whether query is the first statement of a claim of
// kind's that reads the table.
func isClaim(kind engine.Kind, query string) bool {
	if kind == engine.MySQL {
		return strings.Contains(query, "-- name: SelectDueJobs") || strings.Contains(query, "-- name: SelectClaimFrontier")
	}
	return strings.Contains(query, "-- name: ClaimJobs")
}

// hook is the queue's statement hook.
func (c *claimHook) hook(query string, _ sqlRunner) {
	if !isClaim(c.kind, query) {
		return
	}
	c.mu.Lock()
	fn := c.next
	c.next = nil
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// beforeNext sets fn to run before the next claim statement is sent.
func (c *claimHook) beforeNext(fn func()) {
	c.mu.Lock()
	c.next = fn
	c.mu.Unlock()
}

// tableLock holds a lock on env's table that no claim can pass (SQLite:
// the write lock; PostgreSQL: LOCK TABLE … IN SHARE MODE, or pgMode, in a
// transaction; MySQL: LOCK TABLES … WRITE), on a connection of its own.
type tableLock struct {
	env  *testEnv
	conn *sql.Conn
	// pgMode is PostgreSQL's lock mode; "" is SHARE (reads pass it).
	pgMode string
	// table is the quoted name of the table locked on PostgreSQL and
	// MySQL; "" is env's (SQLite locks the whole database).
	table string
}

// newTableLock opens the connection of a lock on env's table, released
// and closed when the test ends.
func newTableLock(t *testing.T, env *testEnv) *tableLock {
	t.Helper()
	conn, err := env.newPool(t).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l := &tableLock{env: env, conn: conn}
	t.Cleanup(func() {
		if err := l.unlock(); err != nil {
			t.Error(err)
		}
		if err := conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
			t.Error(err)
		}
	})
	return l
}

// lock takes the lock (from any goroutine).
func (l *tableLock) lock() error {
	var stmts []string
	table := l.table
	if table == "" {
		table = l.env.tbl.Quoted()
	}
	switch l.env.kind {
	case engine.SQLite:
		stmts = []string{"BEGIN IMMEDIATE"}
	case engine.Postgres:
		mode := l.pgMode
		if mode == "" {
			mode = "SHARE"
		}
		stmts = []string{"BEGIN", "LOCK TABLE " + table + " IN " + mode + " MODE"}
	case engine.MySQL:
		stmts = []string{"LOCK TABLES " + table + " WRITE"}
	}
	for _, stmt := range stmts {
		if _, err := l.conn.ExecContext(context.Background(), stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// unlock releases the lock, if held.
func (l *tableLock) unlock() error {
	undo := "ROLLBACK"
	if l.env.kind == engine.MySQL {
		undo = "UNLOCK TABLES"
	}
	_, err := l.conn.ExecContext(context.Background(), undo)
	if err != nil && l.env.kind != engine.MySQL && strings.Contains(err.Error(), "no transaction") {
		return nil // not held
	}
	return err
}

// TestStopDoesNotWaitForLockedClaim: a worker runs a handler that waits
// for its context, and its next claim waits for a lock the test holds on
// the table. A stop (Run's ctx ends) cancels the handler once
// ShutdownTimeout has passed, StopNow at once, and Run returns within the
// shutdown's time (ShutdownTimeout and the grace of cut-off handlers after
// it), the lock still held; the job is not lost (released, or in_progress
// under its lease for Reclaim). Before, the stop waited for the claim in
// flight first: up to dbCallTimeout (30 s; on SQLite busy_timeout, 10 s,
// and the claim's retries).
func TestStopDoesNotWaitForLockedClaim(t *testing.T) {
	const (
		abandon = time.Second     // the grace of cut-off handlers (abandonGrace)
		slack   = 3 * time.Second // well under a claim's lock wait
	)
	cases := []struct {
		name    string
		grace   time.Duration // ShutdownTimeout
		stopNow bool          // StopNow, else the end of Run's ctx
	}{
		{name: "the grace starts at the stop", grace: 200 * time.Millisecond},
		{name: "StopNow cancels the handlers at once", grace: time.Hour, stopNow: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachEngine(t, func(t *testing.T, kind engine.Kind) {
				env := newTestEnv(t, kind)
				claims := &claimHook{kind: kind}
				q := env.queue(t, nil, withStatementHook(claims.hook))
				cfg := fastConfig()
				cfg.Concurrency = 2 // a free slot: the claimer goes on claiming
				cfg.PollInterval = time.Millisecond
				cfg.ShutdownTimeout = tc.grace
				w := q.NewWorker(cfg)
				w.abandonGrace = abandon
				started, cut := handleUntilCut[emailArgs](w)
				id := enqueue(t, q, emailArgs{})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- w.Run(ctx) }()
				waitFor(t, started, 10*time.Second, "the handler to start")

				// The next claim is sent once the table is locked: it waits.
				lock := newTableLock(t, env)
				locked := make(chan error, 1)
				claims.beforeNext(func() { locked <- lock.lock() })
				if err := waitFor(t, locked, 10*time.Second, "the table to be locked before a claim"); err != nil {
					t.Fatal(err)
				}
				bound := slack
				if tc.stopNow {
					w.StopNow()
				} else {
					cancel()
					bound += tc.grace
				}
				if cause := waitFor(t, cut, bound, "the handler to be cancelled"); !errors.Is(cause, ErrWorkerShutdown) {
					t.Errorf("the handler's context ended with %v, want ErrWorkerShutdown", cause)
				}
				if err := waitFor(t, done, abandon+slack, "Run to return within the shutdown's time"); err != nil {
					t.Errorf("Run: %v", err)
				}
				if err := lock.unlock(); err != nil {
					t.Fatal(err)
				}

				if job := getJob(t, q, id); job.Attempts != 1 || (job.Status != StatusPending && job.Status != StatusInProgress) {
					t.Errorf("the cut-off job is %s, attempts %d; want pending (released) or in_progress (left to Reclaim), attempts 1", job.Status, job.Attempts)
				}
				if n := len(started); n != 0 {
					t.Errorf("%d more handler(s) started after the stop", n)
				}
			})
		})
	}
}

// TestStopGivesBackWhatTheClaimInFlightTook: the worker's claim is held
// (before it is sent) when StopNow comes, and a job is enqueued
// meanwhile. StopNow cancels the running handler without waiting for the
// claim; once the claim goes on and takes the new job (while the cut-off
// handler has not returned yet: once no handler runs the claim in flight
// is cancelled, TestIdleStopCancelsLockedClaim), that job is given back,
// never started (pending, attempts 0), and told to listeners as given
// back; the cut-off job is released (pending, attempts 1).
func TestStopGivesBackWhatTheClaimInFlightTook(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		claims := &claimHook{kind: kind}
		events := newEventLog()
		q := env.queue(t, nil, withStatementHook(claims.hook), WithListener(events.listen))
		cfg := fastConfig()
		cfg.Concurrency = 2
		cfg.PollInterval = time.Millisecond
		cfg.ShutdownTimeout = time.Hour
		w := q.NewWorker(cfg)
		started, cut, letReturn := handleHeldAfterCut[emailArgs](t, w)
		first := enqueue(t, q, emailArgs{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		waitFor(t, started, 10*time.Second, "the first handler to start")

		held, gate := make(chan struct{}), make(chan struct{})
		var once sync.Once
		open := func() { once.Do(func() { close(gate) }) }
		defer open()
		claims.beforeNext(func() {
			close(held)
			<-gate
		})
		waitFor(t, held, 10*time.Second, "a claim to be held")
		// Due a minute ago: the held claim took its clock before it was
		// held, and a job due at its enqueue was not due yet for it (it
		// was taken only when the claim looked again from the start, which
		// a claim that already started there does not: the test failed
		// then, under load).
		second := enqueue(t, q, emailArgs{}, At(time.Now().Add(-time.Minute)))
		w.StopNow()
		if cause := waitFor(t, cut, 5*time.Second, "StopNow to cancel the handler while the claim is held"); !errors.Is(cause, ErrWorkerShutdown) {
			t.Errorf("the handler's context ended with %v, want ErrWorkerShutdown", cause)
		}
		open()
		waitUntil(t, 10*time.Second, fmt.Sprintf("job %d, taken by the late claim, to be given back", second), func() bool {
			events.mu.Lock()
			defer events.mu.Unlock()
			for _, ev := range events.events {
				if ev.Kind == EventFailed && ev.GivenBack && ev.Job.ID == second {
					return true
				}
			}
			return false
		})
		letReturn()
		checkGivenBack(t, q, done, started, second)
		if job := getJob(t, q, first); job.Status != StatusPending || job.Attempts != 1 {
			t.Errorf("the cut-off job is %s, attempts %d; want pending, attempts 1 (released)", job.Status, job.Attempts)
		}
	})
}

// TestStopDoesNotWaitForTakenOffer (PostgreSQL, whose enqueues run an idle
// worker's offered claim): the worker's offer is taken, as by an enqueue
// whose claim has not told its outcome, while a handler runs. StopNow
// cancels the handler at once; the job the taken claim then reports
// (before the cut-off handler returns: once none runs, the run waits a
// second at most for it) is given back (pending, attempts 0), never
// started. Before, the stop waited for the taken claim's outcome first,
// up to dbCallTimeout.
func TestStopDoesNotWaitForTakenOffer(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	posted := offerPosts(q)
	// PollOnly and a poll interval of an hour: only this process's
	// enqueues wake the worker.
	w := q.NewWorker(WorkerConfig{Concurrency: 2, PollInterval: time.Hour, PollOnly: true, Lease: time.Minute, ShutdownTimeout: time.Hour})
	started, cut, letReturn := handleHeldAfterCut[testArgs](t, w)
	ctx := context.Background()
	first := mustEnqueue(t, q, testArgs{N: 1})
	_, done := startWorker(t, w)
	if id := waitFor(t, started, 10*time.Second, "the first handler to start"); id != first {
		t.Fatalf("job %d started, want %d", id, first)
	}
	waitFor(t, posted, 10*time.Second, "the idle worker's offer")
	var o *claimOffer
	waitUntil(t, 10*time.Second, "the worker's offer on the board", func() bool {
		o = q.offers.take("")
		return o != nil
	})
	second := mustEnqueue(t, q, testArgs{N: 2}) // the board is empty: wakes the worker
	w.StopNow()
	if cause := waitFor(t, cut, 5*time.Second, "StopNow to cancel the handler while the taken claim is untold"); !errors.Is(cause, ErrWorkerShutdown) {
		t.Errorf("the handler's context ended with %v, want ErrWorkerShutdown", cause)
	}
	rows, err := q.claimAfter(ctx, q.st, o.types, o.max, o.lease, o.after)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != second {
		t.Fatalf("the taken claim took %v, want job %d", rows, second)
	}
	o.settle(rows, nil)
	waitUntil(t, 10*time.Second, fmt.Sprintf("job %d, taken by the claim, to be given back", second), func() bool {
		return getJob(t, q, second).Status == StatusPending
	})
	letReturn()
	checkGivenBack(t, q, done, started, second)
}
