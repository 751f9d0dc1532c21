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

// TestFailureOutlivesOutage: a handler's failure that the database refuses
// to record for a moment (a restart, a dropped connection, a statement
// refused: here a trigger refuses the first writes of it) is written once
// the database takes it again, as the handler asked: failed for good for a
// Permanent error, pending again after its backoff for another. The worker
// wrote it once and then left the job in_progress until Reclaim, which
// made it pending at once: a job whose handler failed it for good ran
// again, and the handler's error and the backoff were lost.
func TestFailureOutlivesOutage(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		cases := []struct {
			name    string
			err     error
			refused int // writes of the failure refused
			want    Status
		}{
			{"permanent, refused once", Permanent(errors.New("handler error: bad address")), 1, StatusFailed},
			{"retried, refused three times", errors.New("handler error: flaky"), 3, StatusPending},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				env := newTestEnv(t, kind)
				off := refuseRows(t, env, "UPDATE", "NEW.error LIKE 'handler error%'")
				var mu sync.Mutex
				writes := 0
				var hookErr error
				hook := func(query string, on sqlRunner) {
					if !strings.Contains(query, "-- name: FailJob ") {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					writes++
					if writes == c.refused+1 {
						// The database takes the write again, from this one on.
						var err error
						if on != nil {
							_, err = on.ExecContext(context.Background(), off)
						} else {
							_, err = env.db.ExecContext(context.Background(), off)
						}
						if err != nil {
							hookErr = err
						}
					}
				}
				logs := &testdb.LogRecorder{}
				q := env.queue(t, nil, WithLogger(slog.New(logs)), withStatementHook(hook))
				id := enqueue(t, q, emailArgs{To: "a@example.com"}, Policy(RetryPolicy{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour}))
				cfg := fastConfig()
				cfg.MaintenanceInterval = -1
				w := q.NewWorker(cfg)
				var runs atomic.Int32
				Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
					runs.Add(1)
					return c.err
				})
				stop, _ := startWorker(t, w)
				const gaveUp = "recording a failed attempt failed"
				waitUntil(t, 20*time.Second, "the failure written, or given up", func() bool {
					return getJob(t, q, id).Status != StatusInProgress && runs.Load() > 0 || logs.Count(slog.LevelError, gaveUp) > 0
				})
				if err := stop(10 * time.Second); err != nil {
					t.Fatalf("Run: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if hookErr != nil {
					t.Fatalf("turning the refusal off: %v", hookErr)
				}
				job := getJob(t, q, id)
				got := fmt.Sprintf("status %s, error %q, runs %d", job.Status, job.Error, runs.Load())
				want := fmt.Sprintf("status %s, error %q, runs 1", c.want, c.err.Error())
				if got != want {
					t.Errorf("after %d refused writes of the failure (%d in all): %s; want %s; logs: %q", c.refused, writes, got, want, logs.Lines(slog.LevelWarn))
				}
				if c.want == StatusPending && !job.ScheduledAt.After(time.Now().Add(30*time.Minute)) {
					t.Errorf("the retried job is scheduled at %v, want its backoff of an hour", job.ScheduledAt)
				}
			})
		}
	})
}
