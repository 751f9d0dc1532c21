package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// Tests of LISTEN/NOTIFY on PostgreSQL (notify_postgres.go). Every worker
// here runs on a pool of its own, as on another machine, with a poll
// interval of a minute: only a notification can make it claim within the
// seconds each test waits.

// wakeTimeout bounds how long a notified worker may take to start a job:
// well under the poll interval of a minute, so that only a wake-up starts
// it in time, and long enough for a machine slowed by the race detector
// and other tests (a wake-up is a NOTIFY or a lock, a claim and a handler;
// 3 s was too short there).
const wakeTimeout = 20 * time.Second

// claimCounter counts the claim statements a queue sends
// (withStatementHook), and keeps when the last one was about to be sent.
type claimCounter struct {
	n    atomic.Int64
	last atomic.Int64 // Unix nanoseconds
}

func (c *claimCounter) observe(query string, _ sqlRunner) {
	// PostgreSQL and MySQL claim with SKIP LOCKED; SQLite with ClaimJobs….
	if strings.Contains(query, "SKIP LOCKED") || strings.Contains(query, "-- name: ClaimJobs") {
		c.last.Store(time.Now().UnixNano())
		c.n.Add(1)
	}
}

// notifySetup is a table with a producer queue on one pool and a worker
// (of type "email", polling once a minute) on another: on PostgreSQL
// (newNotifySetup) or MySQL (wake_mysql_test.go).
type notifySetup struct {
	env      *testEnv
	producer *Queue
	claims   *claimCounter
	ran      chan int64
	warns    *testdb.LogRecorder
	stop     func(time.Duration) error
}

func newNotifySetup(t *testing.T, edit func(*testEnv, *WorkerConfig)) *notifySetup {
	t.Helper()
	return newWakeSetup(t, engine.Postgres, edit)
}

// newWakeSetup is newNotifySetup on an engine of kind.
func newWakeSetup(t *testing.T, kind engine.Kind, edit func(*testEnv, *WorkerConfig)) *notifySetup {
	t.Helper()
	env := newTestEnv(t, kind)
	s := &notifySetup{env: env, claims: &claimCounter{}, ran: make(chan int64, 10000), warns: &testdb.LogRecorder{}}
	s.producer = env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	wq := env.queue(t, env.newPool(t), WithLogger(slog.New(s.warns)), withStatementHook(s.claims.observe))
	// On MySQL the worker claims each time a wait runs out (10 s): an
	// hour keeps such claims out of the tests' quiet spells.
	wq.mysqlWaitSeconds = 3600
	cfg := fastConfig()
	cfg.Types = []string{"email"}
	cfg.PollInterval = time.Minute
	cfg.MaintenanceInterval = -1
	if edit != nil {
		edit(env, &cfg)
	}
	w := wq.NewWorker(cfg)
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { s.ran <- job.ID; return nil })
	s.stop, _ = startWorker(t, w)
	return s
}

// listenerPID waits until a session LISTENs on the env's table (its last
// statement was the LISTEN and it is idle) with a process id other than
// not, and returns that id.
func listenerPID(t *testing.T, env *testEnv, not int) int {
	t.Helper()
	var pid int
	waitUntil(t, 30*time.Second, "a session listening on the table", func() bool {
		pid = findListener(t, env, not)
		return pid != 0
	})
	return pid
}

// findListener returns the process id of a session listening on the env's
// table, other than not, or 0.
func findListener(t *testing.T, env *testEnv, not int) int {
	t.Helper()
	var pid int
	err := env.db.QueryRowContext(context.Background(),
		`SELECT pid FROM pg_stat_activity
		 WHERE datname = current_database() AND state = 'idle' AND pid <> $1
		   AND strpos(query, $2) > 0
		 LIMIT 1`, not, `LISTEN "`+env.tbl.Name+`"`).Scan(&pid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatalf("reading pg_stat_activity: %v", err)
	}
	return pid
}

// waitRan receives n job ids from ran within wakeTimeout.
func waitRan(t *testing.T, ran <-chan int64, n int, what string) {
	t.Helper()
	deadline := time.After(wakeTimeout)
	for i := 0; i < n; i++ {
		select {
		case <-ran:
		case <-deadline:
			t.Fatalf("%s: %d of %d jobs started within %v", what, i, n, wakeTimeout)
		}
	}
}

// waitClaims waits until the worker has sent at least n claims and the
// last one has finished: the server has begun a statement since the
// statement hook saw it, and runs no claim on the table (on MySQL only the
// latter: the processlist has no statement start finer than a second). The
// worker claims once when it starts and once after each LISTEN (MySQL:
// each wait's start; for what it may have missed), so waitClaims(t, 2)
// after the LISTEN waits until it is idle.
func (s *notifySetup) waitClaims(t *testing.T, n int64) {
	t.Helper()
	waitUntil(t, 30*time.Second, fmt.Sprintf("the worker to claim %d times", n), func() bool { return s.claims.n.Load() >= n })
	if s.env.kind == engine.MySQL {
		waitUntil(t, 30*time.Second, "the worker's last claim to finish", func() bool { return !mysqlClaimRunning(t, s.env) })
		return
	}
	waitUntil(t, 30*time.Second, "the worker's last claim to finish", func() bool {
		var done bool
		sent := time.Unix(0, s.claims.last.Load())
		if err := s.env.db.QueryRowContext(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			                WHERE datname = current_database() AND pid <> pg_backend_pid() AND query_start >= $1)
			    AND NOT EXISTS (SELECT 1 FROM pg_stat_activity
			                WHERE datname = current_database() AND state <> 'idle'
			                  AND strpos(query, 'SKIP LOCKED') > 0 AND strpos(query, $2) > 0)`,
			sent, s.env.tbl.Quoted()).Scan(&done); err != nil {
			t.Fatalf("reading pg_stat_activity: %v", err)
		}
		return done
	})
}

// quiet checks that for d no job starts and the worker sends no claim.
func (s *notifySetup) quiet(t *testing.T, d time.Duration, what string) {
	t.Helper()
	before := s.claims.n.Load()
	select {
	case id := <-s.ran:
		t.Fatalf("%s: job %d started", what, id)
	case <-time.After(d):
	}
	if n := s.claims.n.Load() - before; n != 0 {
		t.Fatalf("%s: the worker claimed %d times, want no wake-up", what, n)
	}
}

// wakeCase is an enqueue of a test of wake-ups: do enqueues and returns
// how many jobs the worker must start.
type wakeCase struct {
	name string
	do   func() int
}

// ownCommitCases are the enqueues that p commits itself, of type email:
// Enqueue (one job) and EnqueueMany (three).
func ownCommitCases(t *testing.T, p *Queue) []wakeCase {
	ctx := context.Background()
	return []wakeCase{
		{"Enqueue", func() int {
			if _, err := p.Enqueue(ctx, emailArgs{}, Type("email")); err != nil {
				t.Fatal(err)
			}
			return 1
		}},
		{"EnqueueMany", func() int {
			if _, err := p.EnqueueMany(ctx, []JobArgs{emailArgs{}, emailArgs{}, emailArgs{}}, Type("email")); err != nil {
				t.Fatal(err)
			}
			return 3
		}},
	}
}

// callerTxCases are the enqueues of p, of type email, in a transaction on
// s's table that the caller commits (EnqueueTx, one job; EnqueueManyTx,
// two) or rolls back (one job each). Before the commit or rollback, s must
// stay quiet for 300 ms: nothing is visible yet.
func callerTxCases(t *testing.T, s *notifySetup, p *Queue) []wakeCase {
	ctx := context.Background()
	inTx := func(commit bool, fn func(tx *sql.Tx) error) {
		t.Helper()
		tx, err := s.env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		s.quiet(t, 300*time.Millisecond, "before the commit")
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	one := func(tx *sql.Tx) error { _, err := p.EnqueueTx(ctx, tx, emailArgs{}, Type("email")); return err }
	many := func(n int) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := p.EnqueueManyTx(ctx, tx, slices.Repeat([]JobArgs{emailArgs{}}, n), Type("email"))
			return err
		}
	}
	return []wakeCase{
		{"EnqueueTx committed", func() int { inTx(true, one); return 1 }},
		{"EnqueueManyTx committed", func() int { inTx(true, many(2)); return 2 }},
		{"EnqueueTx rolled back", func() int { inTx(false, one); return 0 }},
		{"EnqueueManyTx rolled back", func() int { inTx(false, many(1)); return 0 }},
	}
}

// TestNotifyWakesWorkersOfOtherPools: an enqueue of any kind on one pool
// makes an idle worker on another pool start the job at once, when its
// transaction commits; a rolled-back one, or one of a type the worker does
// not take, does not even wake it.
func TestNotifyWakesWorkersOfOtherPools(t *testing.T) {
	t.Parallel()
	s := newNotifySetup(t, nil)
	ctx := context.Background()
	listenerPID(t, s.env, 0)
	s.waitClaims(t, 2) // the claim at start and the one after listening
	p := s.producer
	for _, c := range append(append(ownCommitCases(t, p), callerTxCases(t, s, p)...), []wakeCase{
		{"another type", func() int {
			if _, err := p.Enqueue(ctx, emailArgs{}, Type("sms")); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
	}...) {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Now()
			n := c.do()
			if n == 0 {
				s.quiet(t, 500*time.Millisecond, c.name)
				return
			}
			waitRan(t, s.ran, n, c.name)
			t.Logf("%s: %d job(s) started %v after the call began (transactions commit after 300ms)", c.name, n, time.Since(t0))
		})
	}
	if n := s.env.countWhere(t, "status = 'completed'"); n != 7 {
		t.Errorf("%d jobs completed, want 7", n)
	}
	if n := s.env.countWhere(t, "status = 'pending'"); n != 1 {
		t.Errorf("%d jobs pending, want 1 (the sms job)", n)
	}
}

// TestListenerReconnects: when the listening session is killed, the worker
// warns, listens again on a new session (claiming once, for what it missed
// meanwhile) and is woken by enqueues again.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	s := newNotifySetup(t, nil)
	ctx := context.Background()
	pid := listenerPID(t, s.env, 0)
	s.waitClaims(t, 2) // the claim at start and the one after listening
	var killed bool
	if err := s.env.db.QueryRowContext(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
	}
	// Enqueued while nobody may be listening: found by the claim that
	// follows the new LISTEN.
	if _, err := s.producer.Enqueue(ctx, emailArgs{}, Type("email")); err != nil {
		t.Fatal(err)
	}
	waitRan(t, s.ran, 1, "the job enqueued as the session died")
	again := listenerPID(t, s.env, pid)
	if s.warns.Count(slog.LevelWarn, "listening for enqueues failed") == 0 {
		t.Errorf("no warning about the lost session; warnings: %q", s.warns.Lines(slog.LevelWarn))
	}
	s.waitClaims(t, 3) // and the one after listening again
	s.quiet(t, 300*time.Millisecond, "idle after reconnecting")
	t0 := time.Now()
	if _, err := s.producer.Enqueue(ctx, emailArgs{}, Type("email")); err != nil {
		t.Fatal(err)
	}
	waitRan(t, s.ran, 1, "an enqueue after reconnecting")
	t.Logf("session %d killed, listening again on %d; woken %v after the enqueue", pid, again, time.Since(t0))
}

// TestPollOnly: a worker with PollOnly does not listen and finds the jobs
// of other pools by polling only.
func TestPollOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		poll   time.Duration
		starts bool // within wakeTimeout
	}{
		{"poll every minute", time.Minute, false},
		{"poll every 300ms", 300 * time.Millisecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A job enqueued before the worker starts is taken by its first
			// claim; once it ran, that claim has returned and the worker
			// waits for its next poll.
			var seed int64
			s := newNotifySetup(t, func(env *testEnv, cfg *WorkerConfig) {
				cfg.PollOnly = true
				cfg.PollInterval = c.poll
				producer := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
				seed = enqueue(t, producer, emailArgs{}, Type("email"))
			})
			if got := waitFor(t, s.ran, wakeTimeout, "the job of the first claim"); got != seed {
				t.Fatalf("ran job %d, want %d", got, seed)
			}
			if _, err := s.producer.Enqueue(context.Background(), emailArgs{}, Type("email")); err != nil {
				t.Fatal(err)
			}
			if c.starts {
				waitRan(t, s.ran, 1, "polling")
			} else {
				select {
				case id := <-s.ran:
					t.Fatalf("job %d started without polling or listening", id)
				case <-time.After(time.Second):
				}
			}
			if pid := findListener(t, s.env, 0); pid != 0 {
				t.Errorf("session %d listens on the table of a PollOnly worker", pid)
			}
		})
	}
}

// TestListenerEndsWithRun: the listening session is closed (not handed
// back to the pool) when Run returns; a Waker of the config still wakes
// the worker while it listens; a pool of one connection does not listen
// (the worker needs that connection) and still works.
func TestListenerEndsWithRun(t *testing.T) {
	t.Parallel()
	t.Run("closed", func(t *testing.T) {
		t.Parallel()
		s := newNotifySetup(t, nil)
		pid := listenerPID(t, s.env, 0)
		if err := s.stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, fmt.Sprintf("session %d to end", pid), func() bool {
			var n int
			if err := s.env.db.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
	})
	t.Run("Waker too", func(t *testing.T) {
		t.Parallel()
		waker := &chanWaker{ch: make(chan struct{}, 1)}
		s := newNotifySetup(t, func(_ *testEnv, cfg *WorkerConfig) { cfg.Waker = waker })
		listenerPID(t, s.env, 0)
		s.waitClaims(t, 2) // the claim at start and the one after listening
		// A row written without the queue notifies nobody...
		s.env.exec(t, `INSERT INTO {t} (name, type, payload, status, attempts, max_attempts, base_delay, max_delay, scheduled_at, created_at)
			VALUES ('email', 'email', '{}', 'pending', 0, 3, 1, 1, now() AT TIME ZONE 'UTC' - interval '1 second', now() AT TIME ZONE 'UTC')`)
		s.quiet(t, 300*time.Millisecond, "a row inserted by hand")
		// ... but the config's Waker wakes the worker.
		waker.ch <- struct{}{}
		waitRan(t, s.ran, 1, "the config's Waker")
	})
	t.Run("one connection", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, engine.Postgres)
		db := env.newPool(t)
		db.SetMaxOpenConns(1)
		q := env.queue(t, db, WithLogger(testdb.QuietLogger()))
		cfg := fastConfig()
		cfg.MaintenanceInterval = -1
		w := q.NewWorker(cfg)
		ran := make(chan int64, 1)
		Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { ran <- job.ID; return nil })
		startWorker(t, w)
		id := enqueue(t, q, emailArgs{})
		if got := waitFor(t, ran, wakeTimeout, "the job on a one-connection pool"); got != id {
			t.Errorf("ran job %d, want %d", got, id)
		}
		if pid := findListener(t, env, 0); pid != 0 {
			t.Errorf("session %d listens although the pool has one connection", pid)
		}
	})
}
