package queue

import (
	"context"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestIdleStopCancelsLockedClaim: a worker with no handler running, whose
// claim waits for a lock that another connection holds on the table
// (SQLite: the write lock, BEGIN IMMEDIATE; PostgreSQL: LOCK TABLE … IN
// ACCESS EXCLUSIVE MODE, which keeps out reads too; MySQL: LOCK TABLES …
// WRITE), returns from Run within a few seconds of its stop, the end of
// its ctx (ShutdownTimeout of a minute) or StopNow, the lock still held.
// The job that was due is neither lost nor left claimed: pending with no
// attempt counted, and the next worker runs it once the lock is released.
// Before, Run waited for the claim although no handler ran: up to its
// dbCallTimeout (30 s; on SQLite busy_timeout, 10 s, and the claim's
// retries) or the end of the shutdown's time (ShutdownTimeout and the
// grace of cut-off handlers after it, that grace alone after StopNow),
// whichever came first.
func TestIdleStopCancelsLockedClaim(t *testing.T) {
	const bound = 5 * time.Second // well under a claim's lock wait and the shutdown's time
	forEachStop(t, func(t *testing.T, sc stopCase) {
		forEachEngine(t, func(t *testing.T, kind engine.Kind) {
			env := newTestEnv(t, kind)
			claims := &claimHook{kind: kind}
			q := env.queue(t, nil, withStatementHook(claims.hook))
			id := enqueue(t, q, emailArgs{})
			lock := newTableLock(t, env)
			lock.pgMode = "ACCESS EXCLUSIVE"
			if err := lock.lock(); err != nil {
				t.Fatal(err)
			}
			sent := make(chan struct{})
			claims.beforeNext(func() { close(sent) })

			cfg := fastConfig()
			cfg.MaintenanceInterval = -1 // no leader: the claim alone meets the lock
			cfg.ShutdownTimeout = time.Minute
			w := q.NewWorker(cfg)
			w.abandonGrace = 2 * bound // the shutdown's time after StopNow
			started := make(chan int64, 1)
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
				started <- job.ID
				return nil
			})
			run := startStoppable(t, w)
			waitFor(t, sent, 10*time.Second, "the worker's claim to be sent")

			took := run.stop(t, sc, bound, "while its claim waits for the lock")
			if err := lock.unlock(); err != nil {
				t.Fatal(err)
			}
			if j := getJob(t, q, id); j.Status != StatusPending || j.Attempts != 0 {
				t.Errorf("after the stop (Run returned in %v) the job is %s, attempts %d; want pending, attempts 0", took, j.Status, j.Attempts)
			}
			select {
			case got := <-started:
				t.Fatalf("job %d started in the stopped worker", got)
			default:
			}

			// Nothing of the cancelled claim holds the job: the next
			// worker runs it.
			cfg.MaxJobs = 1
			next := q.NewWorker(cfg)
			Handle(next, func(ctx context.Context, job *Job[emailArgs]) error {
				started <- job.ID
				return nil
			})
			nextDone := make(chan error, 1)
			go func() { nextDone <- next.Run(context.Background()) }()
			if got := waitFor(t, started, 20*time.Second, "the next worker to run the job"); got != id {
				t.Errorf("the next worker ran job %d, want %d", got, id)
			}
			if err := waitFor(t, nextDone, 20*time.Second, "the next worker to return after MaxJobs"); err != nil {
				t.Errorf("the next worker's Run: %v", err)
			}
			if j := getJob(t, q, id); j.Status != StatusCompleted || j.Attempts != 1 {
				t.Errorf("after the next worker the job is %s, attempts %d; want completed, attempts 1", j.Status, j.Attempts)
			}
		})
	})
}
