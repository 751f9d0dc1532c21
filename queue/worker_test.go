package queue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// emailArgs is a typed job for the worker tests.
type emailArgs struct {
	To      string `json:"to"`
	Retries int    `json:"retries"`
}

func (emailArgs) Kind() string { return "email" }

// countArgs is a job whose payload does not decode into emailArgs.
type badEmailArgs struct {
	To int `json:"to"`
}

func (badEmailArgs) Kind() string { return "email" }

// otherArgs is a kind the test workers have no typed handler for.
type otherArgs struct {
	N int `json:"n"`
}

func (otherArgs) Kind() string { return "other" }

// ptrArgs is registered through a pointer type.
type ptrArgs struct {
	Name string `json:"name"`
}

func (*ptrArgs) Kind() string { return "ptr" }

// fastConfig is a worker configuration for tests: quick polling and
// maintenance, so that nothing waits on the defaults.
func fastConfig() WorkerConfig {
	return WorkerConfig{
		Concurrency:         4,
		Lease:               30 * time.Second,
		PollInterval:        20 * time.Millisecond,
		MaintenanceInterval: 100 * time.Millisecond,
		ShutdownTimeout:     5 * time.Second,
	}
}

func enqueue(t testing.TB, q *Queue, args JobArgs, opts ...EnqueueOption) int64 {
	t.Helper()
	id, err := q.Enqueue(context.Background(), args, opts...)
	if err != nil {
		t.Fatalf("Enqueue(%T): %v", args, err)
	}
	return id
}

func TestWorkerRunsTypedHandlers(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		events := newEventLog()
		q := env.queue(t, nil, WithListener(events.listen))
		w := q.NewWorker(fastConfig())
		got := make(chan *Job[emailArgs], 1)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			got <- job
			return nil
		})
		gotPtr := make(chan *Job[*ptrArgs], 1)
		Handle(w, func(ctx context.Context, job *Job[*ptrArgs]) error {
			gotPtr <- job
			return nil
		})
		id := enqueue(t, q, emailArgs{To: "a@example.com"}, Type("default"))
		pid := enqueue(t, q, &ptrArgs{Name: "p"})
		stop, _ := startWorker(t, w)

		job := waitFor(t, got, 5*time.Second, "the email handler")
		if job.ID != id || job.Args.To != "a@example.com" || job.Name != "email" || job.Attempts != 1 || job.Status != StatusInProgress || job.ClaimToken == "" {
			t.Errorf("handler got %+v args %+v; want job %d, To a@example.com, attempt 1, in_progress with a token", job.JobRow, job.Args, id)
		}
		pjob := waitFor(t, gotPtr, 5*time.Second, "the pointer handler")
		if pjob.ID != pid || pjob.Args == nil || pjob.Args.Name != "p" {
			t.Errorf("pointer handler got %+v", pjob.Args)
		}
		ev := events.next(t, EventCompleted, 10*time.Second)
		if ev.Job == nil || ev.Job.Status != StatusCompleted {
			t.Errorf("completed event %+v", ev)
		}
		waitUntil(t, 5*time.Second, "both jobs completed", func() bool {
			return getJob(t, q, id).Status == StatusCompleted && getJob(t, q, pid).Status == StatusCompleted
		})
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		row := getJob(t, q, id)
		if row.Attempts != 1 || row.ClaimToken != "" || row.LeaseUntil != nil || row.FinishedAt == nil {
			t.Errorf("completed row %+v: want attempts 1, no token or lease, finished_at set", row)
		}
		if n := events.count(EventClaimed); n != 2 {
			t.Errorf("heard %d claimed events, want 2", n)
		}
		if n := events.count(EventCompleted); n != 2 {
			t.Errorf("heard %d completed events, want 2", n)
		}
	})
}

func TestWorkerFailures(t *testing.T) {
	type result struct {
		status    Status
		attempts  int
		errHas    string
		permanent bool
		// delay is the expected wait before the next attempt (pending only),
		// give or take a second (MySQL keeps whole seconds).
		delay time.Duration
	}
	cases := []struct {
		name    string
		policy  RetryPolicy
		handler func(ctx context.Context, job *Job[emailArgs]) error
		want    result
	}{
		{
			name:    "plain error is retried after the base delay",
			policy:  RetryPolicy{MaxAttempts: 3, BaseDelay: 40 * time.Second, MaxDelay: time.Hour},
			handler: func(ctx context.Context, job *Job[emailArgs]) error { return errors.New("smtp down") },
			want:    result{status: StatusPending, attempts: 1, errHas: "smtp down", delay: 40 * time.Second},
		},
		{
			name:    "plain error on the last attempt fails the job",
			policy:  RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Hour},
			handler: func(ctx context.Context, job *Job[emailArgs]) error { return errors.New("smtp down") },
			want:    result{status: StatusFailed, attempts: 1, errHas: "smtp down", permanent: true},
		},
		{
			name:    "permanent error fails at once",
			policy:  RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: time.Hour},
			handler: func(ctx context.Context, job *Job[emailArgs]) error { return Permanent(errors.New("no such mailbox")) },
			want:    result{status: StatusFailed, attempts: 1, errHas: "no such mailbox", permanent: true},
		},
		{
			name:   "retry after overrides the backoff",
			policy: RetryPolicy{MaxAttempts: 5, BaseDelay: time.Hour, MaxDelay: time.Hour},
			handler: func(ctx context.Context, job *Job[emailArgs]) error {
				return RetryAfter(7*time.Second, errors.New("rate limited"))
			},
			want: result{status: StatusPending, attempts: 1, errHas: "rate limited", delay: 7 * time.Second},
		},
		{
			name:    "panic is a failed attempt with its message",
			policy:  RetryPolicy{MaxAttempts: 2, BaseDelay: 30 * time.Second, MaxDelay: time.Hour},
			handler: func(ctx context.Context, job *Job[emailArgs]) error { panic("boom in handler") },
			want:    result{status: StatusPending, attempts: 1, errHas: "boom in handler", delay: 30 * time.Second},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachEngine(t, func(t *testing.T, kind engine.Kind) {
				env := newTestEnv(t, kind)
				events := newEventLog()
				q := env.queue(t, nil, WithListener(events.listen))
				w := q.NewWorker(fastConfig())
				Handle(w, tc.handler)
				id := enqueue(t, q, emailArgs{To: "x"}, Policy(tc.policy))
				before := q.now()
				stop, _ := startWorker(t, w)
				ev := events.next(t, EventFailed, 10*time.Second)
				if err := stop(10 * time.Second); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if ev.Job == nil || ev.Job.ID != id || ev.Err == nil || !strings.Contains(ev.Err.Error(), tc.want.errHas) || ev.Permanent != tc.want.permanent {
					t.Errorf("failed event %+v (err %v): want job %d, error with %q, permanent %v", ev, ev.Err, id, tc.want.errHas, tc.want.permanent)
				}
				row := getJob(t, q, id)
				if row.Status != tc.want.status || row.Attempts != tc.want.attempts || !strings.Contains(row.Error, tc.want.errHas) || row.ClaimToken != "" {
					t.Errorf("row: status %s attempts %d error %q token %q; want %s, %d, error with %q, no token",
						row.Status, row.Attempts, row.Error, row.ClaimToken, tc.want.status, tc.want.attempts, tc.want.errHas)
				}
				if tc.want.status == StatusPending {
					if row.FinishedAt != nil {
						t.Errorf("pending row has finished_at %v", row.FinishedAt)
					}
					wait := row.ScheduledAt.Sub(before)
					if wait < tc.want.delay-time.Second || wait > tc.want.delay+2*time.Second {
						t.Errorf("next attempt in %v, want about %v", wait, tc.want.delay)
					}
				} else if row.FinishedAt == nil {
					t.Errorf("%s row has no finished_at", row.Status)
				}
			})
		})
	}
}

// TestWorkerRetriesWithBackoff runs a job that fails twice then succeeds,
// moving the queue's clock past each backoff instead of waiting for it.
func TestWorkerRetriesWithBackoff(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		clock := &testClock{}
		events := newEventLog()
		claims := &claimCounter{}
		q := env.queue(t, nil, withClock(clock.now), WithListener(events.listen), withStatementHook(claims.observe))
		cfg := fastConfig()
		cfg.MaintenanceInterval = -1 // moving the clock must not reclaim anything
		w := q.NewWorker(cfg)
		var calls atomic.Int32
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			if n := calls.Add(1); int(n) != job.Attempts {
				t.Errorf("call %d saw attempt %d", n, job.Attempts)
			}
			if job.Attempts < 3 {
				return errors.New("transient")
			}
			return nil
		})
		// 10 s, then min(20 s, 15 s) = 15 s.
		id := enqueue(t, q, emailArgs{}, Policy(RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Second, MaxDelay: 15 * time.Second}))
		stop, _ := startWorker(t, w)
		for _, want := range []time.Duration{10 * time.Second, 15 * time.Second} {
			failedAt := q.now()
			ev := events.next(t, EventFailed, 10*time.Second)
			if ev.Permanent || ev.Job.Status != StatusPending {
				t.Fatalf("failed event %+v: want a retry", ev)
			}
			if wait := ev.Job.ScheduledAt.Sub(failedAt); wait < want-time.Second || wait > want+time.Second {
				t.Errorf("attempt %d: next attempt in %v, want %v", ev.Job.Attempts, wait, want)
			}
			// Nothing runs before the backoff passes: the worker claims
			// twice more (it polls every 20 ms) and leaves the job alone.
			seen := claims.n.Load()
			waitUntil(t, 10*time.Second, "the worker to claim twice more during the backoff", func() bool { return claims.n.Load() >= seen+2 })
			if got := getJob(t, q, id); got.Status != StatusPending || got.Attempts != ev.Job.Attempts {
				t.Fatalf("job is %s after %d attempts during its backoff, want pending after %d", got.Status, got.Attempts, ev.Job.Attempts)
			}
			clock.advance(want + time.Second)
		}
		events.next(t, EventCompleted, 10*time.Second)
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		row := getJob(t, q, id)
		if row.Status != StatusCompleted || row.Attempts != 3 || calls.Load() != 3 {
			t.Errorf("row %s after %d attempts, %d calls; want completed after 3", row.Status, row.Attempts, calls.Load())
		}
	})
}

func TestWorkerUnknownKindAndDecodeErrors(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		events := newEventLog()
		q := env.queue(t, nil, WithListener(events.listen))
		w := q.NewWorker(fastConfig())
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			t.Errorf("handler ran for a payload that does not decode: %+v", job.Args)
			return nil
		})
		policy := Policy(RetryPolicy{MaxAttempts: 5, BaseDelay: time.Hour, MaxDelay: time.Hour})
		unknown := enqueue(t, q, otherArgs{N: 1}, policy)
		bad := enqueue(t, q, badEmailArgs{To: 42}, policy)
		stop, _ := startWorker(t, w)
		got := map[int64]Event{}
		for len(got) < 2 {
			ev := events.next(t, EventFailed, 10*time.Second)
			got[ev.Job.ID] = ev
		}
		if err := stop(10 * time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}

		// Unknown kind: an error naming the kind, retried (another worker may
		// know the kind).
		ev := got[unknown]
		if !errors.Is(ev.Err, ErrUnknownKind) || !strings.Contains(ev.Err.Error(), `"other"`) || ev.Permanent {
			t.Errorf("unknown kind: event err %v permanent %v; want ErrUnknownKind naming \"other\", not permanent", ev.Err, ev.Permanent)
		}
		if row := getJob(t, q, unknown); row.Status != StatusPending || !strings.Contains(row.Error, `"other"`) {
			t.Errorf("unknown kind row: %s %q; want pending with the kind in the error", row.Status, row.Error)
		}
		// Undecodable payload: fails for good, naming the job's type.
		ev = got[bad]
		if !IsPermanent(ev.Err) || !ev.Permanent || !strings.Contains(ev.Err.Error(), "emailArgs") {
			t.Errorf("decode error: event err %v permanent %v; want a permanent error naming emailArgs", ev.Err, ev.Permanent)
		}
		if row := getJob(t, q, bad); row.Status != StatusFailed || row.Attempts != 1 || !strings.Contains(row.Error, "does not decode") {
			t.Errorf("decode error row: %s after %d attempts, %q; want failed after 1", row.Status, row.Attempts, row.Error)
		}
	})
}

func TestWorkerHandleDefault(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil)
		w := q.NewWorker(fastConfig())
		typed := make(chan int64, 1)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { typed <- job.ID; return nil })
		caught := make(chan *JobRow, 1)
		w.HandleDefault(func(ctx context.Context, job *JobRow) error { caught <- job; return nil })
		other := enqueue(t, q, otherArgs{N: 7})
		email := enqueue(t, q, emailArgs{To: "t"})
		startWorker(t, w)
		row := waitFor(t, caught, 5*time.Second, "the catch-all handler")
		if row.ID != other || row.Name != "other" || !strings.Contains(string(row.Payload), `"n"`) {
			t.Errorf("catch-all got job %d %q %s; want %d other with its payload", row.ID, row.Name, row.Payload, other)
		}
		if id := waitFor(t, typed, 5*time.Second, "the typed handler"); id != email {
			t.Errorf("typed handler got job %d, want %d", id, email)
		}
	})
}

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
		started := make(chan struct{})
		cause := make(chan error, 1)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			close(started)
			select {
			case <-ctx.Done():
				cause <- context.Cause(ctx)
				return ctx.Err()
			case <-time.After(10 * time.Second):
				cause <- nil
				return nil
			}
		})
		id := enqueue(t, q, emailArgs{})
		stop, _ := startWorker(t, w)
		waitFor(t, started, 5*time.Second, "the handler to start")
		env.exec(t, "UPDATE {t} SET claim_token = 'taken-by-another' WHERE id = ?", id)
		err := waitFor(t, cause, 5*time.Second, "the handler's context to be cancelled")
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
		{name: "in-flight job finishes within the timeout", shutdownTimeout: 5 * time.Second, maxAttempts: 3, finishesInTime: true,
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
				logs := &logWatch{}
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
				if id := waitFor(t, started, 5*time.Second, "the first job"); id != first {
					t.Fatalf("first job run is %d, want %d", id, first)
				}
				t0 := time.Now()
				stopped := make(chan error, 1)
				go func() { stopped <- stop(10 * time.Second) }()
				if tc.finishesInTime {
					waitUntil(t, 5*time.Second, "the worker to wait for its running handler", func() bool {
						return logs.count("worker stopping: waiting for running handlers") > 0
					})
					close(finish)
				}
				if err := waitFor(t, stopped, 15*time.Second, "Run to return"); err != nil {
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

func TestWorkerLimits(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		t.Run("MaxJobs", func(t *testing.T) {
			env := newTestEnv(t, kind)
			q := env.queue(t, nil)
			cfg := fastConfig()
			cfg.Concurrency = 3
			cfg.MaxJobs = 4
			w := q.NewWorker(cfg)
			var calls atomic.Int32
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { calls.Add(1); return nil })
			for range 10 {
				enqueue(t, q, emailArgs{})
			}
			_, done := startWorker(t, w)
			if err := waitFor(t, done, 5*time.Second, "Run to return after MaxJobs"); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if c := calls.Load(); c != 4 {
				t.Errorf("%d handler calls, want 4", c)
			}
			if n := env.countWhere(t, "status = 'completed'"); n != 4 {
				t.Errorf("%d completed jobs, want 4", n)
			}
			if n := env.countWhere(t, "status = 'pending' AND attempts = 0"); n != 6 {
				t.Errorf("%d untouched pending jobs, want 6", n)
			}
		})
		t.Run("MaxRuntime", func(t *testing.T) {
			env := newTestEnv(t, kind)
			q := env.queue(t, nil)
			cfg := fastConfig()
			cfg.MaxRuntime = 300 * time.Millisecond
			w := q.NewWorker(cfg)
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
			t0 := time.Now()
			_, done := startWorker(t, w)
			if err := waitFor(t, done, 5*time.Second, "Run to return after MaxRuntime"); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if took := time.Since(t0); took < 300*time.Millisecond {
				t.Errorf("Run returned after %v, before MaxRuntime", took)
			}
		})
	})
}

// TestWorkerWakesAtOnce gives the worker a poll interval of an hour: an
// enqueue in the same process, or the Waker, must wake it.
func TestWorkerWakesAtOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil)
		waker := &chanWaker{ch: make(chan struct{}, 1)}
		cfg := fastConfig()
		cfg.PollInterval = time.Hour
		cfg.MaintenanceInterval = -1
		cfg.Waker = waker
		cfg.PollOnly = true // else PostgreSQL's NOTIFY wakes it (notify_postgres_test.go)
		w := q.NewWorker(cfg)
		ran := make(chan int64, 10)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { ran <- job.ID; return nil })
		// A job from another pool (no wake-up) that the first claim takes:
		// once it runs, that claim has returned and the worker, having
		// found less than it asked for, waits for its poll (an hour) or a
		// wake-up.
		other := env.queue(t, env.newPool(t))
		id := enqueue(t, other, emailArgs{})
		startWorker(t, w)
		if got := waitFor(t, ran, 5*time.Second, "the first claim's job"); got != id {
			t.Fatalf("ran job %d, want %d", got, id)
		}

		id = enqueue(t, q, emailArgs{})
		if got := waitFor(t, ran, 3*time.Second, "the enqueue to wake the worker"); got != id {
			t.Errorf("ran job %d, want %d", got, id)
		}

		// A producer elsewhere (another pool, so no in-process wake-up): only
		// the Waker tells the worker.
		id = enqueue(t, other, emailArgs{})
		select {
		case got := <-ran:
			t.Fatalf("job %d ran before any wake-up", got)
		case <-time.After(200 * time.Millisecond):
		}
		waker.ch <- struct{}{}
		if got := waitFor(t, ran, 3*time.Second, "the Waker to wake the worker"); got != id {
			t.Errorf("ran job %d, want %d", got, id)
		}
	})
}

// chanWaker is a Waker driven by the test.
type chanWaker struct{ ch chan struct{} }

func (c *chanWaker) Wakeups() <-chan struct{} { return c.ch }

func TestWorkerConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  WorkerConfig
		want string
	}{
		{"negative concurrency", WorkerConfig{Concurrency: -1}, "Concurrency"},
		{"lease under a second", WorkerConfig{Lease: 500 * time.Millisecond}, "Lease"},
		{"heartbeat not below lease", WorkerConfig{Lease: time.Second, HeartbeatInterval: time.Second}, "HeartbeatInterval"},
		{"negative max jobs", WorkerConfig{MaxJobs: -1}, "MaxJobs"},
		{"negative max runtime", WorkerConfig{MaxRuntime: -time.Second}, "MaxRuntime"},
		{"empty type", WorkerConfig{Types: []string{""}}, "type"},
		{"type too long", WorkerConfig{Types: []string{strings.Repeat("t", 65)}}, "type"},
	}
	env := newTestEnv(t, engine.SQLite)
	q := env.queue(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := q.NewWorker(tc.cfg)
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := w.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v; want an error about %s", err, tc.want)
			}
		})
	}
	// Defaults are sensible.
	cfg, err := WorkerConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Concurrency != DefaultConcurrency || cfg.Lease != DefaultLease || cfg.HeartbeatInterval != DefaultLease/3 || cfg.PollInterval != DefaultPollInterval {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestHandleRegistration(t *testing.T) {
	env := newTestEnv(t, engine.SQLite)
	q := env.queue(t, nil)
	mustPanic := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		fn()
	}
	w := q.NewWorker(fastConfig())
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
	mustPanic("a second handler for a kind", func() {
		Handle(w, func(ctx context.Context, job *Job[badEmailArgs]) error { return nil })
	})
	mustPanic("an empty kind", func() {
		Handle(w, func(ctx context.Context, job *Job[emptyKindArgs]) error { return nil })
	})
	mustPanic("a nil handler", func() { Handle[emailArgs](w, nil) })

	// Registering while Run is in progress is refused.
	var once sync.Once
	started := make(chan struct{})
	w2 := q.NewWorker(fastConfig())
	w2.HandleDefault(func(ctx context.Context, job *JobRow) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w2.Run(ctx) }()
	waitUntil(t, 5*time.Second, "Run to start", func() bool {
		w2.mu.Lock()
		defer w2.mu.Unlock()
		if w2.running {
			once.Do(func() { close(started) })
		}
		return w2.running
	})
	mustPanic("Handle during Run", func() {
		Handle(w2, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
	})
	if err := w2.Run(ctx); err == nil {
		t.Error("a second concurrent Run was accepted")
	}
	cancel()
	if err := waitFor(t, done, 10*time.Second, "Run to stop"); err != nil {
		t.Errorf("Run: %v", err)
	}
}

type emptyKindArgs struct{}

func (emptyKindArgs) Kind() string { return "" }

// TestWorkerTypesConcurrencyAndDeleteOnSuccess checks that a worker takes
// only jobs of its types, never runs more than Concurrency handlers at once,
// and that a queue deleting on success leaves no completed rows.
func TestWorkerTypesConcurrencyAndDeleteOnSuccess(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		events := newEventLog()
		q := env.queue(t, nil, WithDeleteOnSuccess(true), WithListener(events.listen))
		cfg := fastConfig()
		cfg.Types = []string{"mail", "sms"}
		cfg.Concurrency = 3
		w := q.NewWorker(cfg)
		var running, peak atomic.Int32
		// The first handlers wait until all three slots are busy at once,
		// so that the peak shows the worker runs 3 and no more.
		full := make(chan struct{})
		var fullOnce sync.Once
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			if job.Type != "mail" && job.Type != "sms" {
				t.Errorf("worker of types mail, sms ran a job of type %q", job.Type)
			}
			if n == 3 {
				fullOnce.Do(func() { close(full) })
			}
			select {
			case <-full:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		for i := range 12 {
			enqueue(t, q, emailArgs{Retries: i}, Type([]string{"mail", "sms"}[i%2]))
		}
		other := enqueue(t, q, emailArgs{}, Type("push"))
		startWorker(t, w)
		waitUntil(t, 10*time.Second, "the 12 jobs of the worker's types to be done", func() bool {
			return events.count(EventCompleted) == 12
		})
		if p := peak.Load(); p != 3 {
			t.Errorf("at most %d handlers ran at once with Concurrency 3; want 3", p)
		}
		if n := env.countWhere(t, "1 = 1"); n != 1 {
			t.Errorf("%d rows left, want only the job of the other type (completed rows deleted)", n)
		}
		if row := getJob(t, q, other); row.Status != StatusPending || row.Attempts != 0 {
			t.Errorf("job of another type: %s after %d attempts, want pending and untouched", row.Status, row.Attempts)
		}
	})
}

// TestWorkerAbandonsHandlersIgnoringCancel: a handler that ignores its
// cancelled context is left running; Run says so, and its job is neither
// released nor failed (it would run twice at once), but left for Reclaim.
func TestWorkerAbandonsHandlersIgnoringCancel(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		logs := &logWatch{}
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
		waitFor(t, started, 5*time.Second, "the handler to start")
		err := stop(5 * time.Second)
		if err == nil || !strings.Contains(err.Error(), "still running") {
			t.Errorf("Run: %v; want an error about handlers still running", err)
		}
		// Its late result must change nothing: once the executor has
		// taken it (it logs so), the row is as the attempt left it.
		close(release)
		waitUntil(t, 5*time.Second, "the executor to take the late result", func() bool {
			return logs.count("handler cancelled by shutdown") > 0
		})
		if row := getJob(t, q, id); row.Status != StatusInProgress || row.Error != "" {
			t.Errorf("abandoned job: %s, error %q; want in_progress, untouched", row.Status, row.Error)
		}
	})
}

// TestWorkerServesEveryTypeEnqueueAccepts: a type is up to 64 characters
// (VARCHAR(64)), not bytes. WorkerConfig counted bytes, so a worker could
// not be configured for a type of 64 two-byte characters that Enqueue
// accepts, and its jobs were never run.
func TestWorkerServesEveryTypeEnqueueAccepts(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(quietTestLogger()))
		typ := strings.Repeat("é", maxTypeLen)
		id := enqueue(t, q, emailArgs{To: "a"}, Type(typ))
		cfg := fastConfig()
		cfg.Types = []string{typ}
		w := q.NewWorker(cfg)
		ran := make(chan int64, 1)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			ran <- job.ID
			return nil
		})
		_, done := startWorker(t, w)
		select {
		case got := <-ran:
			if got != id {
				t.Fatalf("ran job %d, want %d", got, id)
			}
		case err := <-done:
			t.Fatalf("Run returned %v before running the job of type %q", err, typ)
		case <-time.After(10 * time.Second):
			t.Fatal("the job was not run within 10s")
		}
	})
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
		ctx := context.Background()
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(quietTestLogger()))
		id := enqueue(t, q, emailArgs{To: "slow"})
		cfg := fastConfig()
		cfg.Concurrency = 1
		cfg.Lease = 2 * time.Second
		cfg.HeartbeatInterval = 200 * time.Millisecond
		cfg.MaintenanceInterval = -1
		w := q.NewWorker(cfg)
		started := make(chan struct{})
		cancelled := make(chan error, 1)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			close(started)
			select {
			case <-ctx.Done():
				cancelled <- context.Cause(ctx)
				return ctx.Err()
			case <-time.After(15 * time.Second):
				cancelled <- nil
				return nil
			}
		})
		stop, _ := startWorker(t, w)
		waitFor(t, started, 10*time.Second, "the handler to start")

		// Lock the job's row from another pool so that every heartbeat
		// times out.
		other := env.newPool(t)
		tx, err := other.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, env.sql("UPDATE {t} SET error = error WHERE id = ?"), id); err != nil {
			t.Fatal(err)
		}
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

// TestWorkerWithMoreSlotsThanOneClaimTakes: one claim takes at most
// maxClaim jobs. A worker with more free slots than that took a full claim
// of maxClaim for a short one ("nothing more is due") and went idle until
// its next poll while jobs were waiting.
func TestWorkerWithMoreSlotsThanOneClaimTakes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil, WithLogger(quietTestLogger()))
		jobs := maxClaim + maxClaim/2
		enqueueSeq(t, q, jobs)
		cfg := fastConfig()
		cfg.Concurrency = maxClaim + maxClaim/2
		cfg.PollInterval = time.Hour // only "work remains" may claim again
		cfg.MaintenanceInterval = -1
		w := q.NewWorker(cfg)
		var ran atomic.Int64
		Handle(w, func(ctx context.Context, job *Job[seqArgs]) error {
			ran.Add(1)
			return nil
		})
		startWorker(t, w)
		waitUntil(t, 15*time.Second, "every job to run", func() bool { return ran.Load() == int64(jobs) })
	})
}

// logCounter is a slog handler that counts the records whose message
// contains a word.
type logCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Level >= slog.LevelInfo {
		c.msgs = append(c.msgs, r.Message)
	}
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }

func (c *logCounter) count(word string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if strings.Contains(strings.ToLower(m), word) {
			n++
		}
	}
	return n
}

// TestWorkerMaintenanceLogsOnce: ExpireOverdue and Reclaim log what they
// did; the worker's maintenance logged it a second time at Info.
func TestWorkerMaintenanceLogsOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		var logs logCounter
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
		waitUntil(t, 10*time.Second, "the maintenance to expire and reclaim", func() bool {
			return env.countWhere(t, "status = 'expired'") == 1 && env.countWhere(t, "status = 'pending'") == 1
		})
		stop(10 * time.Second)
		if n := logs.count("reclaim"); n != 1 {
			t.Errorf("%d log records at Info or above about reclaiming one attempt, want 1: %q", n, logs.msgs)
		}
		if n := logs.count("expired"); n != 1 {
			t.Errorf("%d log records at Info or above about expiring one job, want 1: %q", n, logs.msgs)
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
		q := env.queue(t, nil, WithLogger(quietTestLogger()), WithListener(events.listen))
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
