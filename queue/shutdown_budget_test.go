package queue

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestShutdownReleaseWithinBudget (PostgreSQL, MySQL): at shutdown the
// release of a cut-off attempt whose row another transaction holds locked
// waits no longer than the shutdown's own time (ShutdownTimeout, then the
// grace of cut-off handlers): Run returns within it, the job stays
// in_progress under the attempt's claim, and once its lease has passed
// Reclaim takes it back. Before, the release waited up to dbCallTimeout
// (30 s) on the lock, and Run with it, whatever ShutdownTimeout said.
func TestShutdownReleaseWithinBudget(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := newTestEnv(t, kind)
		logs := &testdb.LogRecorder{}
		q := env.queue(t, nil, WithLogger(slog.New(logs)))
		cfg := fastConfig()
		cfg.Concurrency = 1
		cfg.Lease = 3 * time.Second
		cfg.MaintenanceInterval = -1 // the test runs Reclaim itself
		cfg.ShutdownTimeout = 100 * time.Millisecond
		w := q.NewWorker(cfg)
		w.abandonGrace = 500 * time.Millisecond
		started := make(chan int64, 1)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			started <- job.ID
			<-ctx.Done()
			return context.Cause(ctx)
		})
		id := enqueue(t, q, emailArgs{})
		stop, _ := startWorker(t, w)
		waitFor(t, started, 30*time.Second, "the handler to start")
		claimed := getJob(t, q, id)
		unlock := lockRow(t, env.db, env.tbl, id)
		t0 := time.Now()
		if err := stop(40 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// 0.6 s of budget; the rest is slack for a loaded machine.
		if took := time.Since(t0); took > 5*time.Second {
			t.Errorf("Run returned %v after the stop, with ShutdownTimeout %v and %v for cut-off handlers: the release waited on the locked row", took.Round(time.Millisecond), cfg.ShutdownTimeout, w.abandonGrace)
		}
		if n := logs.Count(slog.LevelError, "stay in_progress until Reclaim"); n == 0 {
			t.Error("no error logged for the release given up")
		}
		unlock()
		if j := getJob(t, q, id); j.Status != StatusInProgress || j.ClaimToken != claimed.ClaimToken {
			// Released after all (a statement the server went on with once
			// the lock was gone) is no harm; anything else is.
			if j.Status != StatusPending || !strings.Contains(j.Error, "interrupted") {
				t.Fatalf("job after Run: %s, token %q, error %q; want in_progress under the attempt's claim", j.Status, j.ClaimToken, j.Error)
			}
			return
		}
		waitUntil(t, 30*time.Second, "Reclaim to take the job back once its lease has passed", func() bool {
			if _, err := q.Reclaim(ctx); err != nil {
				t.Fatalf("Reclaim: %v", err)
			}
			return getJob(t, q, id).Status == StatusPending
		})
		if j := getJob(t, q, id); j.ClaimToken != "" || j.Attempts != 1 {
			t.Errorf("reclaimed job: token %q at %d attempts; want none at 1", j.ClaimToken, j.Attempts)
		}
	})
}
