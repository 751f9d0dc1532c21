package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestExecutorStartsNoAttemptTooLate: an attempt that waited in the
// claimer's buffer is started only while its lease and its job's deadline
// still hold. Past its lease (the process was paused, say, and its
// heartbeats with it) another worker may have reclaimed the job and be
// running it; past the deadline the job must not start any more
// (ExpiresAt). Such an attempt is not started and, if it still holds its
// job, is given back as before its claim (the deadline's job then expires
// by ExpireOverdue). Before, the executor started it whatever the time.
func TestExecutorStartsNoAttemptTooLate(t *testing.T) {
	cases := []struct {
		name      string
		expiresIn time.Duration // 0: no deadline
		lease     time.Duration
		wait      time.Duration // in the buffer, by the queue's clock
		reclaimed bool          // another worker reclaimed and claimed the job meanwhile
		only      engine.Kind   // the case's engine; "": every engine
		wantRun   bool
		wantState Status
		wantTries int
	}{
		{"in time", 0, time.Hour, time.Second, false, "", true, StatusCompleted, 1},
		{"deadline passed while it waited", 2 * time.Second, time.Hour, 2 * time.Second, false, "", false, StatusPending, 0},
		{"lease passed while it waited", 0, time.Second, 2 * time.Second, false, "", false, StatusPending, 0},
		{"lease passed and the job claimed elsewhere", 0, time.Second, 2 * time.Second, true, "", false, StatusInProgress, 2},
		// MySQL compares whole seconds: Reclaim takes a lease_until of
		// 12:00:01 from 12:00:02 on, so at 12:00:01 the lease still holds.
		{"lease_until's second still holds on MySQL", 0, time.Second, time.Second, false, engine.MySQL, true, StatusCompleted, 1},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if c.only != "" && c.only != kind {
					t.Skipf("a case of %s", c.only)
				}
				ctx := context.Background()
				env := coreEnv(t, kind)
				q, clock := coreQueue(t, env)
				var opts []EnqueueOption
				if c.expiresIn > 0 {
					opts = append(opts, ExpiresIn(c.expiresIn))
				}
				id := mustEnqueue(t, q, testArgs{N: 1}, opts...)
				rows := mustClaim(t, q, nil, 1, c.lease)
				if len(rows) != 1 || rows[0].ID != id {
					t.Fatalf("claimed %v, want job %d", rows, id)
				}
				row := rows[0]
				clock.add(c.wait)
				if c.reclaimed {
					if n, err := q.Reclaim(ctx); err != nil || n != 1 {
						t.Fatalf("Reclaim: %d, %v; want 1", n, err)
					}
					if again := mustClaim(t, q, nil, 1, time.Hour); len(again) != 1 {
						t.Fatalf("claimed %d jobs after the reclaim, want 1", len(again))
					}
				}
				ran := false
				set := newInflightSet()
				ex := &executors{
					q: q, log: testdb.QuietLogger(), dbCtx: ctx,
					handlers: map[string]handlerFunc{"test": func(context.Context, *JobRow) error { ran = true; return nil }},
					attempts: set, released: &releaseList{},
					completer: newCompleter(q, testdb.QuietLogger(), newShutdownBudget(ctx), set, 10),
				}
				ex.work = ex.handle
				actx, cancel := context.WithCancelCause(ctx)
				a := &attempt{row: row, ref: row.ref(), ctx: actx, cancel: cancel, leaseEnd: *row.LeaseUntil}
				ex.attempts.add(a)
				ex.execute(a)
				flushReleased(ctx, q, ex)
				if ran != c.wantRun {
					t.Fatalf("the handler ran: %v, want %v", ran, c.wantRun)
				}
				if n := ex.attempts.len(); n != 0 {
					t.Errorf("%d attempts left in flight, want 0", n)
				}
				if c.wantRun {
					stop := make(chan struct{})
					close(stop)
					ex.completer.run(stop) // writes what was handed over, then returns
				}
				j := getJob(t, q, id)
				if j.Status != c.wantState || j.Attempts != c.wantTries {
					t.Fatalf("job is %s at %d attempts, want %s at %d", j.Status, j.Attempts, c.wantState, c.wantTries)
				}
				if c.expiresIn > 0 {
					if n, err := q.ExpireOverdue(ctx); err != nil || n != 1 {
						t.Fatalf("ExpireOverdue: %d, %v; want the given-back job expired", n, err)
					}
				}
			})
		}
	})
}

// TestBufferedAttemptLeaseLostNotCharged: an attempt claimed ahead that
// waited in the claimer's buffer while the heartbeater cancelled it (its
// lease could not be renewed: cancelUnrenewed, errLeaseRanOut) never ran,
// so it does not use up one of its job's attempts: the executor gives it
// back as the shutdown gives back the buffered attempts it cuts off
// (Queue.unclaim: pending as before the claim), fenced by its claim token,
// so that a job reclaimed and claimed by another worker meanwhile, or one
// cancelled meanwhile (the heartbeat found it lost: errLostJob), is left
// as it is. Before, the executor left the job in_progress to Reclaim,
// which counted the attempt: a job of one attempt failed for good without
// its handler ever running.
func TestBufferedAttemptLeaseLostNotCharged(t *testing.T) {
	const lease, interval = time.Minute, 20 * time.Second
	cases := []struct {
		name string
		// meanwhile: what happens to the job while the attempt waits, after
		// the heartbeater cancelled it.
		meanwhile func(t *testing.T, q *Queue, clock *fixedClock, id int64)
		wantCause error
		wantState Status
		wantTries int
		wantToken bool // the job holds a claim token (another worker's)
	}{
		{"lease could not be renewed", nil, errLeaseRanOut, StatusPending, 0, false},
		{"lease ran out, job reclaimed and claimed elsewhere", func(t *testing.T, q *Queue, clock *fixedClock, id int64) {
			clock.add(lease)
			if n, err := q.Reclaim(context.Background()); err != nil || n != 1 {
				t.Fatalf("Reclaim: %d, %v; want 1", n, err)
			}
			if again := mustClaim(t, q, nil, 1, time.Hour); len(again) != 1 || again[0].ID != id {
				t.Fatalf("claimed %v after the reclaim, want job %d", again, id)
			}
		}, errLeaseRanOut, StatusInProgress, 2, true},
		{"job cancelled, a heartbeat found it lost", nil, errLostJob, StatusFailed, 1, false},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				env := coreEnv(t, kind) // a table of its own: the case's Reclaim takes only its job
				q, clock := coreQueue(t, env)
				typ := "buffered"
				// Two attempts: Reclaim makes the second case's job
				// pending again rather than failed.
				id := mustEnqueue(t, q, testArgs{N: 1}, Type(typ), Policy(RetryPolicy{MaxAttempts: 2, BaseDelay: time.Second, MaxDelay: time.Second}))
				rows := mustClaim(t, q, []string{typ}, 1, lease)
				if len(rows) != 1 || rows[0].ID != id {
					t.Fatalf("claimed %v, want job %d", rows, id)
				}
				row := rows[0]
				ran := false
				set := newInflightSet()
				ex := &executors{
					q: q, log: testdb.QuietLogger(), dbCtx: ctx,
					handlers: map[string]handlerFunc{"test": func(context.Context, *JobRow) error { ran = true; return nil }},
					attempts: set, released: &releaseList{},
					completer: newCompleter(q, testdb.QuietLogger(), newShutdownBudget(ctx), set, 10),
				}
				ex.work = ex.handle
				actx, cancel := context.WithCancelCause(ctx)
				defer cancel(nil)
				a := &attempt{row: row, ref: row.ref(), ctx: actx, cancel: cancel, leaseEnd: *row.LeaseUntil}
				ex.attempts.add(a)
				h := &heartbeater{q: q, log: testdb.QuietLogger(), lease: lease, interval: interval, attempts: ex.attempts, poke: make(chan struct{}, 1)}

				// The heartbeater cancels the buffered attempt.
				if c.wantCause == errLostJob {
					if err := q.Cancel(ctx, id); err != nil {
						t.Fatalf("Cancel: %v", err)
					}
					h.renew(ctx, ex.attempts.toRenew(h.due()))
				} else {
					clock.add(lease - interval/2) // the renewal failed, the lease ends before the next one
					h.cancelUnrenewed(ex.attempts.toRenew(h.due()))
				}
				if cause := context.Cause(actx); !errors.Is(cause, c.wantCause) {
					t.Fatalf("the attempt's context ended with %v, want %v", cause, c.wantCause)
				}
				if c.meanwhile != nil {
					c.meanwhile(t, q, clock, id)
				}
				if d := ex.execute(a); d != notStarted {
					t.Errorf("execute returned %v, want notStarted", d)
				}
				flushReleased(ctx, q, ex)
				if ran {
					t.Fatal("the handler ran although its attempt was cancelled before it started")
				}
				if n := ex.attempts.len(); n != 0 {
					t.Errorf("%d attempts left in flight, want 0", n)
				}
				j := getJob(t, q, id)
				if j.Status != c.wantState || j.Attempts != c.wantTries || (j.ClaimToken != "") != c.wantToken {
					t.Fatalf("job is %s at %d attempts (claim token %q), want %s at %d (a token: %v)",
						j.Status, j.Attempts, j.ClaimToken, c.wantState, c.wantTries, c.wantToken)
				}
			})
		}
	})
}

// flushReleased writes what ex put on its releaseList, as the run's
// giver and its shutdown do.
func flushReleased(ctx context.Context, q *Queue, ex *executors) {
	(&run{q: q, log: testdb.QuietLogger(), dbCtx: ctx, released: ex.released}).releaseInterrupted()
}
