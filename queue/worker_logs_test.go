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

// TestWorkerMaintenanceLogsOnce: ExpireOverdue and Reclaim log what they
// did; the worker's maintenance logged it a second time at Info.
func TestWorkerMaintenanceLogsOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		var logs testdb.LogRecorder
		clock := &testClock{}
		q := env.queue(t, nil, WithLogger(slog.New(&logs)), withClock(clock.now))
		enqueue(t, q, emailArgs{To: "abandoned"})
		enqueue(t, q, otherArgs{N: 1}, ExpiresIn(time.Second))
		if rows, err := q.claim(context.Background(), nil, 1, time.Second); err != nil || len(rows) != 1 {
			t.Fatalf("claim: %d rows, %v; want 1", len(rows), err)
		}
		clock.advance(3 * time.Second) // the lease and the deadline pass
		cfg := fastConfig()
		cfg.Types = []string{"none"}
		w := q.NewWorker(cfg)
		stop, _ := startWorker(t, w)
		// Wait for the lines, not only the rows: a stop right after the
		// reclaim's commit showed could cancel the act while its commit's
		// answer was on its way, and the line (written once the act
		// returned) was never written (seen under -race in CI).
		waitUntil(t, 10*time.Second, "the maintenance to expire and reclaim, and say so", func() bool {
			return env.countWhere(t, "status = 'expired'") == 1 && env.countWhere(t, "status = 'pending'") == 1 &&
				logs.Count(slog.LevelInfo, "reclaim") > 0 && logs.Count(slog.LevelInfo, "expired") > 0
		})
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("stopping the worker: %v", err)
		}
		if n := logs.Count(slog.LevelInfo, "reclaim"); n != 1 {
			t.Errorf("%d log records at Info or above about reclaiming one attempt, want 1: %q", n, logs.Lines(slog.LevelInfo))
		}
		if n := logs.Count(slog.LevelInfo, "expired"); n != 1 {
			t.Errorf("%d log records at Info or above about expiring one job, want 1: %q", n, logs.Lines(slog.LevelInfo))
		}
	})
}

// TestWorkerFailedEventCarriesTheStoredError: the failed event's Job is
// the row as the event left it, so its Error is the text stored (valid
// UTF-8, no NUL), not the handler's raw error text.
func TestWorkerFailedEventCarriesTheStoredError(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		events := newEventLog()
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), WithListener(events.listen))
		id := enqueue(t, q, emailArgs{To: "x"})
		w := q.NewWorker(fastConfig())
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			return errors.New("bad \x00byte \xff")
		})
		startWorker(t, w)
		ev := events.next(t, EventFailed, 10*time.Second)
		row := getJob(t, q, id)
		if ev.Job.Error != row.Error || row.Error == "" {
			t.Errorf("failed event's Job.Error %q, stored error %q; want them equal", ev.Job.Error, row.Error)
		}
	})
}
