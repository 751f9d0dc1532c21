package queue

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestResultOutlivesOutage: a handler that returns while the database
// cannot be reached (a server restart, a failover, the network down: here
// a proxy between the pool and the server cuts every connection and
// refuses new ones) has its result written once the database is back, and
// its job does not run again. The completer, and the executor recording a
// failure, gave up after four tries within about a second ("… until
// Reclaim"), so every job that finished during an outage of more than a
// second ran a second time once its lease had passed (a failure's
// Permanent, RetryAfter and error text lost).
func TestResultOutlivesOutage(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		cases := []struct {
			name   string
			failed string // what the worker logs when the result's write fails
			err    error  // the handler's
			want   Status
		}{
			{"completed", "completing jobs failed", nil, StatusCompleted},
			{"failed for good", "recording a failed attempt failed", Permanent(errors.New("handler error: bad address")), StatusFailed},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				env := newTestEnv(t, kind)
				outage, url := testdb.NewOutage(t, kind)
				db := testdb.OpenURL(t, url)
				logs := &testdb.LogRecorder{}
				q := env.queue(t, db, WithLogger(slog.New(logs)))
				id := enqueue(t, env.queue(t, nil), testArgs{N: 1})
				cfg := fastConfig()
				cfg.MaintenanceInterval = -1 // no Reclaim: the job must not need one
				w := q.NewWorker(cfg)
				var runs atomic.Int32
				started, release := make(chan struct{}), make(chan struct{})
				Handle(w, func(ctx context.Context, job *Job[testArgs]) error {
					if runs.Add(1) == 1 {
						close(started)
					}
					<-release
					return c.err
				})
				stop, _ := startWorker(t, w)
				waitFor(t, started, 10*time.Second, "the handler to start")

				outage.Cut()
				close(release)
				// More tries than the worker made before it gave up (each
				// logged, at debug level at least), or its word that it
				// gave up.
				const gaveUp = "until Reclaim"
				waitUntil(t, 30*time.Second, "the result tried again and again during the outage", func() bool {
					return logs.Count(slog.LevelDebug, c.failed) > completeTries || logs.Count(slog.LevelWarn, gaveUp) > 0
				})
				if err := outage.Restore(); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, 30*time.Second, "the job to leave in_progress after the outage", func() bool {
					return getJob(t, env.queue(t, nil), id).Status != StatusInProgress
				})
				if err := stop(10 * time.Second); err != nil {
					t.Fatal(err)
				}
				job := getJob(t, env.queue(t, nil), id)
				if job.Status != c.want || job.Attempts != 1 || runs.Load() != 1 {
					t.Errorf("after the outage: status %s, attempts %d, the handler ran %d times; want %s, 1 attempt, 1 run; logs: %q",
						job.Status, job.Attempts, runs.Load(), c.want, logs.Lines(slog.LevelWarn))
				}
				if n := logs.Count(slog.LevelWarn, gaveUp); n > 0 {
					t.Errorf("the worker gave the result up %d times: %q", n, logs.Lines(slog.LevelWarn))
				}
			})
		}
	})
}

// TestOutageLoggedOnce: an idle worker whose database cannot be reached
// for a while (here a proxy cuts every connection and refuses new ones)
// says so once per role (its claims, its wait for other processes'
// enqueues), not at every try, says once that claims work again, and
// runs a job enqueued after the outage. The claimer logged an error at
// every try (twice: the claim, then the claimer), every 5 s at most, and
// the listener (the MySQL waiter) a warning at every try, every 30 s at
// most, for as long as the outage lasted.
func TestOutageLoggedOnce(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		outage, url := testdb.NewOutage(t, kind)
		db := testdb.OpenURL(t, url)
		logs := &testdb.LogRecorder{}
		q := env.queue(t, db, WithLogger(slog.New(logs)))
		cfg := fastConfig()
		cfg.MaintenanceInterval = -1 // no leader: its election logs a run of failures once itself (elector.attemptFailed)
		w := q.NewWorker(cfg)
		done := make(chan int, 1)
		Handle(w, func(ctx context.Context, job *Job[testArgs]) error {
			done <- job.Args.N
			return nil
		})
		startWorker(t, w)
		waker := map[engine.Kind]string{engine.Postgres: "listening for enqueues", engine.MySQL: "waiting for the enqueues of other processes"}[kind]
		waitUntil(t, 10*time.Second, "the worker's "+waker, func() bool { return logs.Count(slog.LevelDebug, waker) > 0 })

		outage.Cut()
		// Enough tries of each role to have logged each in a loop.
		waitUntil(t, 30*time.Second, "the worker to try again and again during the outage", func() bool {
			return logs.Count(slog.LevelDebug, "claiming jobs failed") >= 5 && logs.Count(slog.LevelDebug, waker+" failed") >= 3
		})
		if err := outage.Restore(); err != nil {
			t.Fatal(err)
		}
		enqueue(t, env.queue(t, nil), testArgs{N: 7})
		if got := waitFor(t, done, 30*time.Second, "the job enqueued after the outage to run"); got != 7 {
			t.Fatalf("ran job %d, want 7", got)
		}
		// The claim that ran it, or one before, said claims work again.
		if n := logs.Count(slog.LevelInfo, "claiming jobs again"); n != 1 {
			t.Errorf("the worker said %d times that it claims again, want once: %q", n, logs.Lines(slog.LevelInfo))
		}
		for _, part := range []string{"claim", waker} {
			if n := logs.Count(slog.LevelWarn, part); n != 1 {
				t.Errorf("%d warnings or errors about %q during one outage, want 1: %q", n, part, logs.Lines(slog.LevelWarn))
			}
		}
	})
}

// TestHeartbeatOutageLoggedOnce: while the database cannot be reached, a
// worker running a job warns once that it cannot renew the lease (the
// tries after at debug level), says once that it renews again when the
// database is back, and the job's lease is renewed then. It warned at
// every heartbeat (Lease/3 by default) for as long as the outage lasted.
func TestHeartbeatOutageLoggedOnce(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		outage, url := testdb.NewOutage(t, kind)
		db := testdb.OpenURL(t, url)
		logs := &testdb.LogRecorder{}
		q := env.queue(t, db, WithLogger(slog.New(logs)))
		cfg := fastConfig()
		cfg.MaintenanceInterval = -1
		cfg.Lease, cfg.HeartbeatInterval = 10*time.Second, 50*time.Millisecond
		w := q.NewWorker(cfg)
		started, release := make(chan struct{}), make(chan struct{})
		Handle(w, func(ctx context.Context, job *Job[testArgs]) error {
			close(started)
			<-release
			return nil
		})
		startWorker(t, w)
		defer close(release)
		id := enqueue(t, env.queue(t, nil), testArgs{N: 1})
		waitFor(t, started, 10*time.Second, "the handler to start")

		outage.Cut()
		const renewing = "renewing leases"
		waitUntil(t, 20*time.Second, "heartbeats to fail again and again during the outage", func() bool {
			return logs.Count(slog.LevelDebug, renewing+" failed") >= 4
		})
		before := getJob(t, env.queue(t, nil), id).LeaseUntil
		if err := outage.Restore(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 20*time.Second, "the lease renewed after the outage, and the worker saying it renews again", func() bool {
			l := getJob(t, env.queue(t, nil), id).LeaseUntil
			return l != nil && before != nil && l.After(*before) && logs.Count(slog.LevelInfo, renewing+" again") > 0
		})
		if n := logs.Count(slog.LevelWarn, renewing); n != 1 {
			t.Errorf("%d warnings about %q during one outage, want 1: %q", n, renewing, logs.Lines(slog.LevelWarn))
		}
		if n := logs.Count(slog.LevelInfo, renewing+" again"); n != 1 {
			t.Errorf("the worker said %d times that it renews leases again, want once: %q", n, logs.Lines(slog.LevelInfo))
		}
	})
}

// TestAnswerLostNotReportedLost: a result (a completion, a handler's
// failure) that the database carried out but whose answer was lost with the
// connection (the session killed, the server gone, just after the commit)
// is written again, and the write, refused since the job has ended
// already, is the result's own: the job ended as its attempt said, not as
// an attempt that had lost its job. The worker warned ("completion
// refused", "lost the job") and emitted EventLost for a job that its own
// attempt had ended.
func TestAnswerLostNotReportedLost(t *testing.T) {
	cases := []struct {
		name string
		// hook is the test hook after the result's write.
		hook func(func(error) error) Option
		// handler is the job's handler.
		handler func(context.Context, *Job[testArgs]) error
		// want is the job's status and the event of its end; warn the
		// warning that must not come.
		want     Status
		ended    EventKind
		warn     string
		whatLost string
	}{
		{
			name:     "completion",
			hook:     withAfterCompleteHook,
			handler:  func(ctx context.Context, job *Job[testArgs]) error { return nil },
			want:     StatusCompleted,
			ended:    EventCompleted,
			warn:     "completion refused",
			whatLost: "completion",
		},
		{
			name: "failure",
			hook: withAfterFailHook,
			handler: func(ctx context.Context, job *Job[testArgs]) error {
				return Permanent(errors.New("handler error: bad address"))
			},
			want:     StatusFailed,
			ended:    EventFailed,
			warn:     "lost the job",
			whatLost: "failure",
		},
		{
			// Retried an hour on, so that no claim takes the job before
			// the write again: the job holds the scheduled_at of the lost
			// write (failLanded).
			name: "retry",
			hook: withAfterFailHook,
			handler: func(ctx context.Context, job *Job[testArgs]) error {
				return RetryAfter(time.Hour, errors.New("handler error: try later"))
			},
			want:     StatusPending,
			ended:    EventFailed,
			warn:     "lost the job",
			whatLost: "failure",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, kind engine.Kind) {
				env := newTestEnv(t, kind)
				logs := &testdb.LogRecorder{}
				var lost atomic.Bool
				events := newEventLog()
				q := env.queue(t, nil, WithLogger(slog.New(logs)), WithListener(events.listen),
					tc.hook(func(err error) error {
						if err == nil && lost.CompareAndSwap(false, true) {
							return driver.ErrBadConn // carried out, the answer lost
						}
						return err
					}))
				id := enqueue(t, q, testArgs{N: 1})
				cfg := fastConfig()
				cfg.MaintenanceInterval = -1
				w := q.NewWorker(cfg)
				Handle(w, tc.handler)
				stop, _ := startWorker(t, w)
				waitUntil(t, 20*time.Second, "the job's attempt to end", func() bool {
					return events.count(tc.ended)+events.count(EventLost) > 0
				})
				if err := stop(10 * time.Second); err != nil {
					t.Fatal(err)
				}
				if !lost.Load() {
					t.Fatalf("no %s's answer was lost; the test shows nothing", tc.whatLost)
				}
				if job := getJob(t, q, id); job.Status != tc.want || job.Attempts != 1 {
					t.Errorf("job %d: status %s, attempts %d; want %s, 1", id, job.Status, job.Attempts, tc.want)
				}
				if e, l := events.count(tc.ended), events.count(EventLost); e != 1 || l != 0 {
					t.Errorf("%d %v and %d EventLost for a job its own attempt ended, want 1 and 0", e, tc.ended, l)
				}
				if n := logs.Count(slog.LevelWarn, tc.warn); n != 0 {
					t.Errorf("the worker warned %d times %q: %q", n, tc.warn, logs.Lines(slog.LevelWarn))
				}
			})
		})
	}
}

// TestGiveBackOutlivesOutage: claimed attempts a worker must not start
// (given back by the run's giver) that it gives back while the database
// cannot be reached are given back once it can be: pending, the attempt
// not counted. The giver gave up after four tries within about a second
// ("they stay in_progress until Reclaim"), and Reclaim then counted the
// attempt that never ran.
func TestGiveBackOutlivesOutage(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		outage, url := testdb.NewOutage(t, kind)
		logs := &testdb.LogRecorder{}
		q := env.queue(t, testdb.OpenURL(t, url), WithLogger(slog.New(logs)))
		direct := env.queue(t, nil)
		id := enqueue(t, direct, testArgs{N: 1})
		rows := mustClaim(t, direct, nil, 1, time.Minute)
		if len(rows) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(rows))
		}
		r := &run{q: q, log: slog.New(logs), dbCtx: context.Background(), released: newReleaseList()}
		stopGiver, giverDone := make(chan struct{}), make(chan struct{})
		go func() { defer close(giverDone); r.giveBacks(stopGiver) }()
		defer func() { close(stopGiver); <-giverDone }()

		outage.Cut()
		r.released.giveBack(rows[0], claimedLease(rows[0]), errors.New("jobqueue: claimed job not started: its lease passed"))
		const failed, gaveUp = "giving back claimed jobs not started failed", "until Reclaim"
		waitUntil(t, 30*time.Second, "the give-back tried again and again during the outage", func() bool {
			return logs.Count(slog.LevelDebug, failed) > completeTries || logs.Count(slog.LevelWarn, gaveUp) > 0
		})
		if err := outage.Restore(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "the job to leave in_progress after the outage", func() bool {
			return getJob(t, direct, id).Status != StatusInProgress
		})
		if job := getJob(t, direct, id); job.Status != StatusPending || job.Attempts != 0 {
			t.Errorf("after the outage: status %s, attempts %d; want pending, 0", job.Status, job.Attempts)
		}
		if n := logs.Count(slog.LevelWarn, failed); n != 1 {
			t.Errorf("%d warnings or errors about the give-back during one outage, want 1: %q", n, logs.Lines(slog.LevelWarn))
		}
	})
}

// TestLostAnswerOfAnotherAttemptNotLanded: a completion whose answer was
// lost (written again after the database came back) finds its job
// completed by another attempt with the same attempts count, as after a
// failover that lost the first attempt's claim (a claim does not wait for
// replication): the job went back to pending on the new primary, ran
// again and completed. The first attempt's completion is refused, and it
// is the lost attempt's (EventLost, the warning), not a completion of its
// own. Before, a completed job whose attempts matched was taken for the
// lost write's work: both attempts were reported completed (CI's failover
// test saw 11 jobs "completed" twice under synchronous replication). The
// test hook after the first write leaves the row as that other attempt
// would (completed, the same attempts, its own finished_at) and loses the
// write's answer.
func TestLostAnswerOfAnotherAttemptNotLanded(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		env := newTestEnv(t, kind)
		logs := &testdb.LogRecorder{}
		var lost atomic.Bool
		var id int64
		other := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
		hookErr := make(chan error, 1)
		events := newEventLog()
		q := env.queue(t, nil, WithLogger(slog.New(logs)), WithListener(events.listen),
			withAfterCompleteHook(func(err error) error {
				if !lost.CompareAndSwap(false, true) {
					return err
				}
				// Another attempt completed the job (attempts 1 too).
				_, xerr := env.db.ExecContext(context.Background(),
					env.sql("UPDATE {t} SET status = 'completed', claim_token = NULL, lease_until = NULL, finished_at = ? WHERE id = ?"), other, id)
				hookErr <- xerr
				return driver.ErrBadConn // this write's answer lost
			}))
		id = enqueue(t, q, testArgs{N: 1})
		cfg := fastConfig()
		cfg.MaintenanceInterval = -1
		w := q.NewWorker(cfg)
		Handle(w, func(ctx context.Context, job *Job[testArgs]) error { return nil })
		stop, _ := startWorker(t, w)
		waitUntil(t, 20*time.Second, "the attempt to end", func() bool {
			return events.count(EventCompleted)+events.count(EventLost) > 0
		})
		if err := stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if !lost.Load() {
			t.Fatal("no completion's answer was lost; the test shows nothing")
		}
		if err := <-hookErr; err != nil {
			t.Fatalf("completing the job as another attempt: %v", err)
		}
		if job := getJob(t, q, id); job.Status != StatusCompleted || job.Attempts != 1 {
			t.Errorf("job %d: status %s, attempts %d; want completed, 1", id, job.Status, job.Attempts)
		}
		if c, l := events.count(EventCompleted), events.count(EventLost); c != 0 || l != 1 {
			t.Errorf("%d EventCompleted and %d EventLost for an attempt whose job another completed, want 0 and 1", c, l)
		}
		if n := logs.Count(slog.LevelWarn, "completion refused"); n != 1 {
			t.Errorf("the worker warned %d times \"completion refused\", want once: %q", n, logs.Lines(slog.LevelWarn))
		}
	})
}
