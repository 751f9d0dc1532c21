package queue

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// handlerEnd is how the handler of a shutdown test ends.
type handlerEnd int

const (
	endReleased  handlerEnd = iota // returns its context's cause once cancelled: released
	endCompleted                   // returns nil once cancelled: completed
	endFailed                      // fails (an error of its own) once the test lets it
)

// TestShutdownWritesWithinBudget (PostgreSQL, MySQL): at shutdown the
// write of an attempt's end whose row another transaction holds locked
// waits no longer than the shutdown's own time (ShutdownTimeout, then the
// grace of cut-off handlers; after MaxJobs, counted from when the last
// handler returned): Run returns nil within it, the job stays in_progress
// under the attempt's claim, and once its lease has passed Reclaim takes
// it back. Before, the release of a cut-off attempt waited up to
// dbCallTimeout (30 s) on the lock, and Run with it, whatever
// ShutdownTimeout said ("released" failed on both engines: Run returned
// after 30.1 s); and so did a completion on MySQL, whose first write
// waits for the lock until the completer's timeout ("completed" failed
// there: 31 s). The executor wrote a failure outside the budget: a
// stopped Run returned at the end of the grace saying that 0 handlers
// ignored their cancelled contexts while the write went on ("failed"),
// and a run that MaxJobs ended had no budget at all: no return within
// 40 s ("failed after MaxJobs": four tries of up to 30 s).
func TestShutdownWritesWithinBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		end     handlerEnd
		maxJobs int // 0: the test stops the worker
		// written is the job's status if the end is written after all,
		// by a statement the server went on with once the lock was gone.
		written Status
	}{
		{name: "released", end: endReleased, written: StatusPending},
		{name: "completed", end: endCompleted, written: StatusCompleted},
		{name: "failed", end: endFailed, written: StatusPending},
		{name: "failed after MaxJobs", end: endFailed, maxJobs: 1, written: StatusPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
				testShutdownWritesWithinBudget(t, kind, tc.end, tc.maxJobs, tc.written)
			})
		})
	}
}

// testShutdownWritesWithinBudget is one case of
// TestShutdownWritesWithinBudget.
func testShutdownWritesWithinBudget(t *testing.T, kind engine.Kind, end handlerEnd, maxJobs int, written Status) {
	ctx := context.Background()
	env := newTestEnv(t, kind)
	logs := &testdb.LogRecorder{}
	q := env.queue(t, nil, WithLogger(slog.New(logs)))
	cfg := fastConfig()
	cfg.Concurrency = 1
	cfg.Lease = 3 * time.Second
	cfg.MaintenanceInterval = -1 // the test runs Reclaim itself
	cfg.ShutdownTimeout = 100 * time.Millisecond
	cfg.MaxJobs = maxJobs
	w := q.NewWorker(cfg)
	w.abandonGrace = 500 * time.Millisecond
	started, proceed := make(chan int64, 1), make(chan struct{})
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
		started <- job.ID
		switch end {
		case endFailed:
			<-proceed
			return errors.New("handler error: the mail server refused the message")
		case endCompleted:
			<-ctx.Done()
			return nil // the rest of its work, done after the cancel
		default:
			<-ctx.Done()
			return context.Cause(ctx)
		}
	})
	id := enqueue(t, q, emailArgs{})
	stop, done := startWorker(t, w)
	waitFor(t, started, 30*time.Second, "the handler to start")
	claimed := getJob(t, q, id)
	unlock := lockRow(t, env.db, env.tbl, id)
	close(proceed) // a failure's write waits on the locked row
	t0 := time.Now()
	var err error
	if maxJobs > 0 {
		err = waitFor(t, done, 40*time.Second, "Run to return after its MaxJobs")
	} else {
		err = stop(40 * time.Second)
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// 0.6 s of budget (the completer's tries end with it); the rest is
	// slack for a loaded machine.
	if took := time.Since(t0); took > 6*time.Second {
		t.Errorf("Run returned %v after the stop, with ShutdownTimeout %v and %v for cut-off handlers: the write waited on the locked row", took.Round(time.Millisecond), cfg.ShutdownTimeout, w.abandonGrace)
	}
	if n := logs.Count(slog.LevelError, "in_progress until Reclaim"); n == 0 {
		t.Error("no error logged for the write given up")
	}
	if j := getJob(t, q, id); j.Status != StatusInProgress || j.ClaimToken != claimed.ClaimToken {
		t.Fatalf("job after Run, its row still locked: %s, token %q; want in_progress under the attempt's claim", j.Status, j.ClaimToken)
	}
	unlock()
	// A statement that the budget ended on the client's side may go on
	// in the server (until pgx's cancel request lands) and write the end
	// once the lock is gone: no harm, fenced by the claim token.
	var j *JobRow
	waitUntil(t, 30*time.Second, "Reclaim to take the job back once its lease has passed", func() bool {
		if _, err := q.Reclaim(ctx); err != nil {
			t.Fatalf("Reclaim: %v", err)
		}
		j = getJob(t, q, id)
		return j.Status == StatusPending || j.Status == written
	})
	if j.ClaimToken != "" || j.Attempts != 1 {
		t.Errorf("job %s: token %q at %d attempts; want none at 1", j.Status, j.ClaimToken, j.Attempts)
	}
}
