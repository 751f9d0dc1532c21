package queue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestWorkerStopNow: a handler that blocks until its context ends. Without
// StopNow, a stopping Run waits ShutdownTimeout before it cancels it; with
// StopNow (called during the grace, before ctx ended, once MaxJobs were
// claimed, once or twice)
// Run cancels it at once, with a cause wrapping ErrWorkerShutdown, and
// returns nil promptly; either way its job is released by Reclaim's rule
// (pending again now, its attempt counted; failed on its last attempt) and
// the job queued behind it is never started. A StopNow before Run does
// nothing to that Run.
func TestWorkerStopNow(t *testing.T) {
	const longGrace = 30 * time.Second
	cases := []struct {
		name            string
		shutdownTimeout time.Duration
		maxAttempts     int
		// stopNow: when StopNow is called: "" never, "grace" once the
		// worker waits for its handler, "before" while it runs (ctx not
		// ended).
		stopNow string
		twice   bool // StopNow is called twice
		// maxJobs: WorkerConfig.MaxJobs (Run waits for the handlers of the
		// jobs it claimed with no timeout).
		maxJobs    int
		wantStatus Status
	}{
		{name: "without StopNow Run waits for ShutdownTimeout", shutdownTimeout: time.Second, maxAttempts: 3,
			wantStatus: StatusPending},
		{name: "StopNow during the grace", shutdownTimeout: longGrace, maxAttempts: 3, stopNow: "grace",
			wantStatus: StatusPending},
		{name: "StopNow twice during the grace", shutdownTimeout: longGrace, maxAttempts: 3, stopNow: "grace", twice: true,
			wantStatus: StatusPending},
		{name: "StopNow before ctx ends", shutdownTimeout: longGrace, maxAttempts: 3, stopNow: "before",
			wantStatus: StatusPending},
		{name: "StopNow once MaxJobs were claimed", shutdownTimeout: longGrace, maxAttempts: 3, stopNow: "before", maxJobs: 1,
			wantStatus: StatusPending},
		{name: "StopNow on a last attempt fails it by Reclaim's rule", shutdownTimeout: longGrace, maxAttempts: 1, stopNow: "grace",
			wantStatus: StatusFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachEngine(t, func(t *testing.T, kind engine.Kind) {
				env := newTestEnv(t, kind)
				logs := &testdb.LogRecorder{}
				q := env.queue(t, nil, WithLogger(slog.New(logs)))
				cfg := fastConfig()
				cfg.Concurrency = 1
				cfg.ShutdownTimeout = tc.shutdownTimeout
				cfg.MaxJobs = tc.maxJobs
				w := q.NewWorker(cfg)
				w.StopNow() // no Run yet: nothing to stop, and no effect on the next Run
				started := make(chan int64, 10)
				var cause atomic.Value
				Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
					started <- job.ID
					<-ctx.Done()
					cause.Store(context.Cause(ctx))
					return ctx.Err()
				})
				policy := Policy(RetryPolicy{MaxAttempts: tc.maxAttempts, BaseDelay: time.Hour, MaxDelay: time.Hour})
				first := enqueue(t, q, emailArgs{}, policy)
				second := enqueue(t, q, emailArgs{}, policy)
				stop, done := startWorker(t, w)
				if id := waitFor(t, started, 10*time.Second, "the first job"); id != first {
					t.Fatalf("first job run is %d, want %d", id, first)
				}
				t0 := time.Now()
				stopped := make(chan error, 1)
				if tc.stopNow == "before" {
					if tc.maxJobs > 0 {
						select {
						case err := <-done:
							t.Fatalf("Run returned (%v) while the handler of its last job ran", err)
						case <-time.After(100 * time.Millisecond):
						}
					}
					w.StopNow()
					if tc.twice {
						w.StopNow()
					}
					t0 = time.Now()
				} else {
					go func() { stopped <- stop(longGrace + 10*time.Second) }()
				}
				if tc.stopNow == "grace" {
					waitUntil(t, 10*time.Second, "the worker to wait for its running handler", func() bool {
						return logs.Count(slog.LevelDebug, "worker stopping: waiting for running handlers") > 0
					})
					select {
					case err := <-done:
						t.Fatalf("Run returned (%v) before StopNow, in a grace of %v", err, tc.shutdownTimeout)
					default:
					}
					t0 = time.Now()
					w.StopNow()
					if tc.twice {
						go w.StopNow()
						w.StopNow()
					}
				}
				var runErr error
				if tc.stopNow == "before" {
					runErr = waitFor(t, done, 10*time.Second, "Run to return after StopNow")
				} else {
					runErr = waitFor(t, stopped, longGrace+15*time.Second, "Run to return")
				}
				if runErr != nil {
					t.Fatalf("Run: %v", runErr)
				}
				took := time.Since(t0)
				if tc.stopNow == "" && took < tc.shutdownTimeout {
					t.Errorf("Run returned %v after its ctx ended, before ShutdownTimeout %v", took, tc.shutdownTimeout)
				}
				if tc.stopNow != "" && took > 3*time.Second {
					t.Errorf("Run returned %v after StopNow; want at once, not after ShutdownTimeout %v", took, tc.shutdownTimeout)
				}
				if c, _ := cause.Load().(error); !errors.Is(c, ErrWorkerShutdown) {
					t.Errorf("handler context cause %v, want one wrapping ErrWorkerShutdown", c)
				}
				got := getJob(t, q, first)
				if got.Status != tc.wantStatus || got.Attempts != 1 || got.ClaimToken != "" || got.LeaseUntil != nil ||
					!strings.Contains(got.Error, "interrupted") {
					t.Errorf("cut-off job: %s at attempt %d, token %q, error %q; want %s at attempt 1, no token, error with \"interrupted\"",
						got.Status, got.Attempts, got.ClaimToken, got.Error, tc.wantStatus)
				}
				if tc.wantStatus == StatusPending && got.ScheduledAt.After(q.now()) {
					t.Errorf("released job scheduled at %v, in the future; want it due at once", got.ScheduledAt)
				}
				if got := getJob(t, q, second); got.Status != StatusPending || got.Attempts != 0 || got.ClaimToken != "" {
					t.Errorf("job queued behind: %s after %d attempts, token %q; want pending, never started", got.Status, got.Attempts, got.ClaimToken)
				}
			})
		})
	}
}
