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

// TestWorkerHeartbeatKeepsLongJob runs a job twice as long as its lease
// while Reclaim runs every 100 ms: heartbeats keep it. The queue's clock
// moves on in steps of a fifth of the lease, each once a heartbeat has
// renewed the lease from the clock's new time, so the job outlives its
// lease without the test waiting for it.
func TestWorkerHeartbeatKeepsLongJob(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		events := newEventLog()
		clock := &testClock{}
		q := env.queue(t, nil, WithListener(events.listen), withClock(clock.now))
		cfg := fastConfig()
		cfg.Lease = 10 * time.Second
		cfg.HeartbeatInterval = 300 * time.Millisecond
		w := q.NewWorker(cfg)
		var calls atomic.Int32
		started, finish := make(chan struct{}), make(chan struct{})
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			if calls.Add(1) == 1 {
				close(started)
			}
			select {
			case <-finish:
				return nil
			case <-ctx.Done():
				t.Errorf("handler cancelled: %v", context.Cause(ctx))
				return ctx.Err()
			}
		})
		id := enqueue(t, q, emailArgs{})
		startWorker(t, w)
		waitFor(t, started, 10*time.Second, "the handler to start")
		step := cfg.Lease / 5
		for moved := time.Duration(0); moved <= 2*cfg.Lease; moved += step {
			clock.advance(step)
			// Renewed from the clock's new time: more than Lease-1.5s ahead
			// (MySQL keeps whole seconds), which the lease before the step,
			// at most Lease-step+0.5s ahead, is not.
			waitUntil(t, 10*time.Second, "a heartbeat to renew the lease from the clock's new time", func() bool {
				row := getJob(t, q, id)
				return row.LeaseUntil != nil && row.LeaseUntil.Sub(clock.now()) > cfg.Lease-1500*time.Millisecond
			})
		}
		close(finish)
		events.next(t, EventCompleted, 10*time.Second)
		row := getJob(t, q, id)
		if row.Status != StatusCompleted || row.Attempts != 1 || calls.Load() != 1 {
			t.Errorf("long job: %s after %d attempts and %d calls; want completed after 1", row.Status, row.Attempts, calls.Load())
		}
		if n := events.count(EventReclaimed); n != 0 {
			events.mu.Lock()
			for _, ev := range events.events {
				if ev.Kind == EventReclaimed && ev.Count > 0 {
					t.Errorf("reclaim took %d jobs while the long job ran", ev.Count)
				}
			}
			events.mu.Unlock()
		}
	})
}

// handleUntilCancelled registers on w a handler of emailArgs that closes
// started when it starts (one job) and runs until its context ends, or
// until patience has passed: it sends that end's cause on cause (nil when
// patience ran out first).
func handleUntilCancelled(w *Worker, patience time.Duration) (started <-chan struct{}, cause <-chan error) {
	start := make(chan struct{})
	end := make(chan error, 1)
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
		close(start)
		select {
		case <-ctx.Done():
			end <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(patience):
			end <- nil
			return nil
		}
	})
	return start, end
}

// TestWorkerLostJobCancelsHandler takes the job away from a running attempt
// (as another process reclaiming it would) and expects the heartbeat to
// cancel the handler, and the worker to change nothing.
func TestWorkerLostJobCancelsHandler(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil)
		cfg := fastConfig()
		cfg.Lease = 3 * time.Second
		cfg.HeartbeatInterval = 100 * time.Millisecond
		cfg.MaintenanceInterval = -1
		w := q.NewWorker(cfg)
		started, cause := handleUntilCancelled(w, 10*time.Second)
		id := enqueue(t, q, emailArgs{})
		stop, _ := startWorker(t, w)
		waitFor(t, started, 30*time.Second, "the handler to start")
		env.exec(t, "UPDATE {t} SET claim_token = 'taken-by-another' WHERE id = ?", id)
		err := waitFor(t, cause, 30*time.Second, "the handler's context to be cancelled")
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("handler context cause %v, want ErrLeaseLost", err)
		}
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		row := getJob(t, q, id)
		if row.Status != StatusInProgress || row.ClaimToken != "taken-by-another" || row.Error != "" || row.Attempts != 1 {
			t.Errorf("row after the lost attempt: %+v; want it untouched", row)
		}
	})
}

func TestWorkerGracefulShutdown(t *testing.T) {
	cases := []struct {
		name            string
		shutdownTimeout time.Duration
		maxAttempts     int
		// obeysCancel: the handler returns ctx's error once cancelled; else
		// it finishes its work and returns nil.
		obeysCancel bool
		// finishesInTime: the test lets the handler finish its work once
		// the worker is stopping (before ShutdownTimeout); else the work
		// only ends when its context is cancelled.
		finishesInTime bool
		wantStatus     Status
		wantErr        string // in the row's error; "" means none
		wantCause      error
	}{
		{name: "in-flight job finishes within the timeout", shutdownTimeout: 30 * time.Second, maxAttempts: 3, finishesInTime: true,
			wantStatus: StatusCompleted},
		{name: "job that finishes its work after the cancel completes", shutdownTimeout: 50 * time.Millisecond, maxAttempts: 3,
			wantStatus: StatusCompleted, wantCause: ErrWorkerShutdown},
		{name: "job cut off by the timeout is released", shutdownTimeout: 50 * time.Millisecond, maxAttempts: 3, obeysCancel: true,
			wantStatus: StatusPending, wantErr: "interrupted", wantCause: ErrWorkerShutdown},
		{name: "no grace cancels at once and releases", shutdownTimeout: -1, maxAttempts: 3, obeysCancel: true,
			wantStatus: StatusPending, wantErr: "interrupted", wantCause: ErrWorkerShutdown},
		{name: "a cut-off last attempt fails by Reclaim's rule", shutdownTimeout: -1, maxAttempts: 1, obeysCancel: true,
			wantStatus: StatusFailed, wantErr: "interrupted", wantCause: ErrWorkerShutdown},
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
				w := q.NewWorker(cfg)
				started := make(chan int64, 10)
				finish := make(chan struct{}) // the test lets the work end
				var cause atomic.Value
				Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
					started <- job.ID
					select {
					case <-finish:
						return nil
					case <-ctx.Done():
						cause.Store(context.Cause(ctx))
						if tc.obeysCancel {
							return ctx.Err()
						}
						return nil // the rest of its work, done after the cancel
					}
				})
				policy := Policy(RetryPolicy{MaxAttempts: tc.maxAttempts, BaseDelay: time.Hour, MaxDelay: time.Hour})
				first := enqueue(t, q, emailArgs{}, policy)
				second := enqueue(t, q, emailArgs{}, policy)
				stop, _ := startWorker(t, w)
				if id := waitFor(t, started, 30*time.Second, "the first job"); id != first {
					t.Fatalf("first job run is %d, want %d", id, first)
				}
				t0 := time.Now()
				stopped := make(chan error, 1)
				go func() { stopped <- stop(30 * time.Second) }()
				if tc.finishesInTime {
					waitUntil(t, 30*time.Second, "the worker to wait for its running handler", func() bool {
						return logs.Count(slog.LevelDebug, "worker stopping: waiting for running handlers") > 0
					})
					close(finish)
				}
				if err := waitFor(t, stopped, 40*time.Second, "Run to return"); err != nil {
					t.Fatalf("Run after shutdown: %v", err)
				}
				if c, _ := cause.Load().(error); tc.finishesInTime && c != nil {
					t.Errorf("handler context cancelled (cause %v) although it finished within ShutdownTimeout", c)
				}
				if took := time.Since(t0); tc.shutdownTimeout < time.Second && took > 2*time.Second {
					t.Errorf("shutdown took %v with ShutdownTimeout %v", took, tc.shutdownTimeout)
				}
				got := getJob(t, q, first)
				if got.Status != tc.wantStatus || got.Attempts != 1 || got.ClaimToken != "" ||
					(tc.wantErr == "") != (got.Error == "") || !strings.Contains(got.Error, tc.wantErr) {
					t.Errorf("in-flight job: %s at attempt %d, token %q, error %q; want %s at attempt 1, no token, error with %q",
						got.Status, got.Attempts, got.ClaimToken, got.Error, tc.wantStatus, tc.wantErr)
				}
				if tc.wantStatus == StatusPending && got.ScheduledAt.After(q.now()) {
					t.Errorf("released job scheduled at %v, in the future; want it due at once", got.ScheduledAt)
				}
				if tc.wantCause != nil {
					c, _ := cause.Load().(error)
					if !errors.Is(c, tc.wantCause) {
						t.Errorf("handler context cause %v, want %v", c, tc.wantCause)
					}
				}
				// Stopping means no more claims.
				if got := getJob(t, q, second); got.Status != StatusPending || got.Attempts != 0 {
					t.Errorf("job queued behind: %s after %d attempts, want pending and never claimed", got.Status, got.Attempts)
				}
			})
		})
	}
}

// TestWorkerAbandonsHandlersIgnoringCancel: a handler that ignores its
// cancelled context is left running; Run says so, and its job is neither
// released nor failed (it would run twice at once), but left for Reclaim.
func TestWorkerAbandonsHandlersIgnoringCancel(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		logs := &testdb.LogRecorder{}
		q := env.queue(t, nil, WithLogger(slog.New(logs)))
		cfg := fastConfig()
		cfg.ShutdownTimeout = -1
		w := q.NewWorker(cfg)
		w.abandonGrace = 100 * time.Millisecond
		started := make(chan struct{})
		release := make(chan struct{})
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			close(started)
			<-release // deaf to ctx
			return errors.New("too late")
		})
		id := enqueue(t, q, emailArgs{})
		stop, _ := startWorker(t, w)
		waitFor(t, started, 30*time.Second, "the handler to start")
		err := stop(30 * time.Second)
		if err == nil || !strings.Contains(err.Error(), "still running") {
			t.Errorf("Run: %v; want an error about handlers still running", err)
		}
		// Its late result must change nothing: once the executor has
		// taken it (it logs so), the row is as the attempt left it.
		close(release)
		waitUntil(t, 30*time.Second, "the executor to take the late result", func() bool {
			return logs.Count(slog.LevelDebug, "handler cancelled by shutdown") > 0
		})
		if row := getJob(t, q, id); row.Status != StatusInProgress || row.Error != "" {
			t.Errorf("abandoned job: %s, error %q; want in_progress, untouched", row.Status, row.Error)
		}
	})
}

// shortLeaseConfig is a worker's configuration whose lease (2 s, renewed
// every 200 ms) runs out soon once heartbeats fail: one handler at a time,
// and no maintenance, so nothing reclaims the job.
func shortLeaseConfig() WorkerConfig {
	cfg := fastConfig()
	cfg.Concurrency = 1
	cfg.Lease = 2 * time.Second
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.MaintenanceInterval = -1
	return cfg
}

// TestWorkerCancelsAttemptWhoseLeaseRunsOut: while heartbeats fail (here
// the row is locked by another transaction, as a database that does not
// answer would do), the attempt's lease runs out and another worker may
// reclaim the job and run it while this handler still runs. The worker
// cancels the handler once it can no longer renew the lease in time (cause
// wrapping ErrLeaseLost) and records nothing for the attempt. Before, the
// handler ran on, its heartbeats failing, however long it took.
func TestWorkerCancelsAttemptWhoseLeaseRunsOut(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		id := enqueue(t, q, emailArgs{To: "slow"})
		cfg := shortLeaseConfig()
		w := q.NewWorker(cfg)
		started, cancelled := handleUntilCancelled(w, 15*time.Second)
		stop, _ := startWorker(t, w)
		waitFor(t, started, 10*time.Second, "the handler to start")

		// Lock the job's row from another pool so that every heartbeat
		// times out.
		tx := holdJob(t, env, id)
		lockedAt := time.Now()
		cause := waitFor(t, cancelled, 8*time.Second, "the handler to be cancelled once its lease could not be renewed")
		if !errors.Is(cause, ErrLeaseLost) {
			t.Fatalf("handler cancelled with cause %v, want one wrapping ErrLeaseLost", cause)
		}
		if waited := time.Since(lockedAt); waited > cfg.Lease+time.Second {
			t.Errorf("cancelled %v after heartbeats began to fail; the lease is %v", waited, cfg.Lease)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		// Nothing was recorded for the attempt: once the worker has stopped
		// (every result it had is settled), the job is still in_progress,
		// left for Reclaim.
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if row := getJob(t, q, id); row.Status != StatusInProgress || row.Error != "" || row.Attempts != 1 {
			t.Errorf("row after the cancelled attempt: %+v; want it in_progress and untouched", row)
		}
	})
}

// TestWorkerCompletesAttemptDoneAfterLeaseRanOut: a handler whose lease
// could not be renewed (heartbeats failed: here another transaction holds
// the job's row) is cancelled; when it still returns nil it has done its
// work, and the worker writes its completion, fenced by its claim token
// (refused if the job was reclaimed meanwhile). Before, the result was
// dropped: the job stayed in_progress until Reclaim, which ran the work
// again.
func TestWorkerCompletesAttemptDoneAfterLeaseRanOut(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
		id := enqueue(t, q, emailArgs{To: "slow"})
		cfg := shortLeaseConfig()
		w := q.NewWorker(cfg)
		started := make(chan struct{})
		cancelled := make(chan error, 1)
		release := make(chan struct{})
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			close(started)
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			<-release // the work is done once the row is free again
			return nil
		})
		stop, _ := startWorker(t, w)
		waitFor(t, started, 10*time.Second, "the handler to start")

		tx := holdJob(t, env, id)
		cause := waitFor(t, cancelled, 8*time.Second, "the handler to be cancelled once its lease could not be renewed")
		if !errors.Is(cause, errLeaseRanOut) {
			t.Fatalf("handler cancelled with cause %v, want errLeaseRanOut", cause)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		close(release)
		waitUntil(t, 10*time.Second, "the job done after its lease ran out to be completed", func() bool {
			return getJob(t, q, id).Status == StatusCompleted
		})
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if row := getJob(t, q, id); row.Attempts != 1 || row.ClaimToken != "" {
			t.Errorf("completed job %+v; want it completed at its first attempt, token cleared", row)
		}
	})
}
