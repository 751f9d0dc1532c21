package queue

import (
	"context"
	"errors"
	"runtime"
	"strings"
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

		job := waitFor(t, got, 30*time.Second, "the email handler")
		if job.ID != id || job.Args.To != "a@example.com" || job.Name != "email" || job.Attempts != 1 || job.Status != StatusInProgress || job.ClaimToken == "" {
			t.Errorf("handler got %+v args %+v; want job %d, To a@example.com, attempt 1, in_progress with a token", job.JobRow, job.Args, id)
		}
		pjob := waitFor(t, gotPtr, 30*time.Second, "the pointer handler")
		if pjob.ID != pid || pjob.Args == nil || pjob.Args.Name != "p" {
			t.Errorf("pointer handler got %+v", pjob.Args)
		}
		ev := events.next(t, EventCompleted, 10*time.Second)
		if ev.Job == nil || ev.Job.Status != StatusCompleted {
			t.Errorf("completed event %+v", ev)
		}
		waitUntil(t, 30*time.Second, "both jobs completed", func() bool {
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
			// The attempt fails between these two readings of the clock,
			// however long the claim and the handler take on a busy
			// machine: the next attempt is due want after it (MySQL keeps
			// whole seconds; a second of slack either way).
			failedFrom := q.now()
			ev := events.next(t, EventFailed, 30*time.Second)
			failedBy := q.now()
			if ev.Permanent || ev.Job.Status != StatusPending {
				t.Fatalf("failed event %+v: want a retry", ev)
			}
			if at := ev.Job.ScheduledAt; at.Before(failedFrom.Add(want-time.Second)) || at.After(failedBy.Add(want+time.Second)) {
				t.Errorf("attempt %d: next attempt at %v, %v after the attempt could have begun and %v after it had failed; want %v",
					ev.Job.Attempts, at, at.Sub(failedFrom), at.Sub(failedBy), want)
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
		row := waitFor(t, caught, 30*time.Second, "the catch-all handler")
		if row.ID != other || row.Name != "other" || !strings.Contains(string(row.Payload), `"n"`) {
			t.Errorf("catch-all got job %d %q %s; want %d other with its payload", row.ID, row.Name, row.Payload, other)
		}
		if id := waitFor(t, typed, 30*time.Second, "the typed handler"); id != email {
			t.Errorf("typed handler got job %d, want %d", id, email)
		}
	})
}

// TestHandlerGoexit: a handler that ends its goroutine without returning
// (runtime.Goexit, which t.FailNow calls) fails its attempt, and the
// worker keeps its slot: the next job runs. The attempt stayed in_progress
// with its lease renewed for the whole run, and the worker of one slot ran
// nothing more.
func TestHandlerGoexit(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		q := env.queue(t, nil)
		cfg := fastConfig()
		cfg.Concurrency = 1
		w := q.NewWorker(cfg)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
			if job.Args.To == "goexit" {
				runtime.Goexit()
			}
			return nil
		})
		once := Policy(RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second})
		exited := enqueue(t, q, emailArgs{To: "goexit"}, once)
		next := enqueue(t, q, emailArgs{To: "next"}, once)
		stop, _ := startWorker(t, w)
		waitUntil(t, 20*time.Second, "both jobs to finish", func() bool {
			return getJob(t, q, exited).Status == StatusFailed && getJob(t, q, next).Status == StatusCompleted
		})
		if j := getJob(t, q, exited); !strings.Contains(j.Error, "runtime.Goexit") {
			t.Errorf("the exited attempt's error: %v", j.Error)
		}
		if err := stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	})
}
