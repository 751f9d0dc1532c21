package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestGiveBacksInOutageDoNotHoldExecutors: attempts that an executor must
// not start (here their leases passed while they waited in the claimer's
// buffer) are given back in batches by the run's giver, off the
// executors' path: while the database hangs on the give-back (then refuses
// it once), one executor goes through all of them at once, and once the
// database takes writes again the giver, trying again, leaves every job
// pending with its attempt not counted. Before, the executor gave each
// back itself, one statement each bounded by 30 s: in an outage a worker
// holding hundreds of buffered attempts had its executors (and the
// claimer and the shutdown behind them) wait for each, one after another;
// here the executor stayed on the first while the give-back hung.
func TestGiveBacksInOutageDoNotHoldExecutors(t *testing.T) {
	const jobs = 40
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		off := refuseRows(t, env, "UPDATE", "NEW.status = 'pending'")
		outageOver := make(chan struct{})
		var endOutage sync.Once
		var calls atomic.Int32
		var hookMu sync.Mutex
		var hookErr error
		hook := func(query string, on sqlRunner) {
			if !strings.Contains(query, "-- name: UnclaimJobs ") {
				return
			}
			switch calls.Add(1) {
			case 1:
				<-outageOver // the database hangs on the first give-back, then refuses it
			case 2:
				// The database takes writes again, from this one on.
				var err error
				if on != nil {
					_, err = on.ExecContext(ctx, off)
				} else {
					_, err = env.db.ExecContext(ctx, off)
				}
				hookMu.Lock()
				hookErr = err
				hookMu.Unlock()
			}
		}
		q, clock := coreQueue(t, env, withStatementHook(hook))
		t.Cleanup(func() { endOutage.Do(func() { close(outageOver) }) })
		ids := map[int64]bool{}
		for i := range jobs {
			ids[mustEnqueue(t, q, testArgs{N: i})] = true
		}
		const lease = 30 * time.Second
		rows := mustClaim(t, q, nil, jobs, lease)
		if len(rows) != jobs {
			t.Fatalf("claimed %d jobs, want %d", len(rows), jobs)
		}
		clock.add(lease + 2*time.Second) // they waited in the buffer past their leases

		r := &run{q: q, log: testdb.QuietLogger(), dbCtx: ctx, released: newReleaseList()}
		stopGiver, giverDone := make(chan struct{}), make(chan struct{})
		go func() { defer close(giverDone); r.giveBacks(stopGiver) }()
		ran := atomic.Bool{}
		ex := &executors{
			q: q, log: testdb.QuietLogger(), dbCtx: ctx,
			handlers: map[string]handlerFunc{"test": func(context.Context, *JobRow) error { ran.Store(true); return nil }},
			attempts: newInflightSet(), released: r.released,
		}
		ex.work = ex.handle
		executed := make(chan struct{})
		var done atomic.Int32
		go func() {
			defer close(executed)
			for _, row := range rows {
				actx, cancel := context.WithCancelCause(ctx)
				a := &attempt{row: row, ref: row.ref(), ctx: actx, cancel: cancel, leaseEnd: *row.LeaseUntil}
				ex.attempts.add(a)
				ex.execute(a) // one executor, its buffered attempts one after another
				done.Add(1)
			}
		}()
		select {
		case <-executed:
		case <-time.After(20 * time.Second):
			t.Errorf("the executor went through %d of its %d attempts in 20 s while the give-back hung: it waits for the database", done.Load(), len(rows))
		}
		endOutage.Do(func() { close(outageOver) })
		<-executed
		if ran.Load() {
			t.Fatal("a handler ran although its lease had passed")
		}
		waitUntil(t, 30*time.Second, "the jobs given back once the database takes writes", func() bool {
			return env.countWhere(t, "status = 'pending' AND attempts = 0") == jobs
		})
		close(stopGiver)
		<-giverDone
		hookMu.Lock()
		defer hookMu.Unlock()
		if hookErr != nil {
			t.Fatalf("turning the refusal off: %v", hookErr)
		}
		if n := calls.Load(); n < 2 {
			t.Errorf("%d give-back statements, want the refused one tried again", n)
		}
		for _, row := range rows {
			j := getJob(t, q, row.ID)
			if j.Status != StatusPending || j.Attempts != 0 || j.ClaimToken != "" {
				t.Errorf("job %d is %s at %d attempts (token %q), want pending at 0", j.ID, j.Status, j.Attempts, j.ClaimToken)
			}
		}
	})
}

// TestStopEndsGiveBackOutageWait: a give-back kept through a database
// outage, whose wait before its next write has grown to
// completeOutageWait, is written again as soon as the worker stops (its
// shutdown's budget counts), not after that wait: the database back
// meanwhile, the job is pending, its attempt not counted, within a few
// seconds of the stop. Before, the giver slept out the outage's wait
// first (up to 5 s, while the handlers still running had their
// ShutdownTimeout), the job in_progress all along.
func TestStopEndsGiveBackOutageWait(t *testing.T) {
	const bound = 3 * time.Second // well under the outage's wait
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		outage, url := testdb.NewOutage(t, kind)
		logs := &testdb.LogRecorder{}
		q := env.queue(t, testdb.OpenURL(t, url), WithLogger(slog.New(logs)))
		direct := env.queue(t, nil)
		id := enqueue(t, direct, testArgs{N: 1})
		rows := mustClaim(t, direct, nil, 1, time.Minute)
		if len(rows) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(rows))
		}
		budget := newShutdownBudget(context.Background())
		defer budget.close()
		r := &run{q: q, log: slog.New(logs), dbCtx: context.Background(), released: newReleaseList(), budget: budget}
		stopGiver, giverDone := make(chan struct{}), make(chan struct{})
		go func() { defer close(giverDone); r.giveBacks(stopGiver) }()
		defer func() { close(stopGiver); <-giverDone }()

		outage.Cut()
		r.released.giveBack(rows[0], claimedLease(rows[0]), errors.New("jobqueue: claimed job not started: its lease passed"))
		longWait := fmt.Sprintf("retry_in=%v", completeOutageWait)
		waitUntil(t, 30*time.Second, "the give-back's wait through the outage to reach "+completeOutageWait.String(), func() bool {
			for _, line := range logs.Lines(slog.LevelDebug) {
				if strings.Contains(line, "giving back claimed jobs not started failed again") && strings.Contains(line, longWait) {
					return true
				}
			}
			return false
		})
		if err := outage.Restore(); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		budget.spendWithin(time.Minute) // the worker stops; its handlers have their ShutdownTimeout
		waitUntil(t, bound, "the job given back within "+bound.String()+" of the stop", func() bool {
			return getJob(t, direct, id).Status != StatusInProgress
		})
		if job := getJob(t, direct, id); job.Status != StatusPending || job.Attempts != 0 {
			t.Errorf("%v after the stop: status %s, attempts %d; want pending, 0", time.Since(stopped), job.Status, job.Attempts)
		}
	})
}
