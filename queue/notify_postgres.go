package queue

// LISTEN/NOTIFY on PostgreSQL: idle workers on every machine wake as soon
// as a job is enqueued anywhere, instead of at their next poll.
//
// The producer side: every Enqueue, EnqueueTx, EnqueueMany and
// EnqueueManyTx calls pg_notify on the channel named like the table (its
// name as the database stores it, lower case) with the jobs' type as
// payload (empty when one EnqueueMany mixes types). PostgreSQL delivers a
// notification when its transaction commits, so a rolled-back enqueue wakes
// nobody; but it also makes the commits of notifying transactions wait for
// one another (a database-wide lock held through each commit), which
// halved the rate of concurrent single Enqueues when every insert
// notified. Hence two paths:
//   - in a caller's transaction (EnqueueTx, EnqueueManyTx) the insert
//     statement itself notifies (InsertJobNotify, InsertJobsJSONNotify: no
//     extra round trip), so that the notification rides the caller's
//     commit;
//   - the enqueues the queue commits itself (Enqueue, EnqueueMany) insert
//     without notifying and then hand their type to the queue's pgNotifier,
//     which sends NotifyTypes off the caller's path, during a burst at most
//     one statement per announceGap (5 ms) for all the types enqueued
//     meanwhile, so a burst costs a few statements, not one per job, and
//     wakes idle workers within 5 ms;
//   - except the first single Enqueue after a quiet spell (nothing sent
//     within announceGap: pgNotifier.inline), whose insert notifies itself
//     (InsertJobNotify) and counts as the notifier's send: a separate
//     NOTIFY transaction, with its commit and WAL flush, would run while
//     the workers it wakes claim the job, and slowed those claims (the
//     enqueue-to-start latency of a lone job). That insert also commits
//     without waiting for the WAL flush and then waits for the flush in a
//     second transaction sent with it (enqueue_postgres_early.go), so that
//     its NOTIFY goes out, and workers claim the job, while the flush runs.
//
// The producer side lives in notify_postgres_send.go (pgNotifier,
// notifyPayload); this file holds the worker side and rawDBTX, which both
// use.
//
// The worker side is pgListener: while a Worker runs on PostgreSQL (unless
// WorkerConfig.PollOnly), it takes one connection of the queue's *sql.DB
// for itself, runs the generated ListenJobs (LISTEN "<table>") there, and
// waits for notifications through pgx (database/sql has no API for them).
// A notification of a type the worker takes becomes a wake-up of the
// worker's Waker channel. When the connection fails, the listener logs a
// warning and connects again with backoff; the worker keeps polling
// meanwhile, and after each (re)connection it claims once, since
// notifications sent while nobody listened are lost. The connection is
// discarded, not returned to the pool, when Run ends.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// errNotPgx: the pool's connections are not pgx's, so they cannot wait for
// notifications; listening stops for good (the worker polls).
var errNotPgx = errors.New("the driver's connection is not pgx's *stdlib.Conn, which LISTEN needs")

// pgListener is the Waker of a worker on PostgreSQL: it LISTENs on the
// table's channel on a dedicated connection and turns the notifications of
// the worker's types into wake-ups.
type pgListener struct {
	db  *sql.DB
	run *runner
	log *slog.Logger
	// types the worker takes; nil means every type.
	types map[string]bool
	wakeups
	// cancelled hears the ids of the notifications of Queue.Cancel, and
	// nil (any job may have been cancelled) when listening starts.
	cancelled func(ids []int64)
}

// wants reports whether a notification's payload (a job type, or empty for
// jobs of several types) concerns the worker.
func (l *pgListener) wants(payload string) bool {
	return l.types == nil || payload == "" || l.types[payload]
}

// startListener starts, for a worker on PostgreSQL that is not PollOnly,
// the listener, and makes it the Waker of the run (forwarding the wake-ups
// of cfg.Waker, if one was given, into it). It returns a function that
// stops the listener and waits until its connection is closed. ctx ending
// stops it too. cancelled hears the ids of cancelled jobs (Queue.Cancel
// notifies the same channel), and nil whenever listening (re)starts, since
// notifications sent while nobody listened are lost.
func (r *run) startListener(ctx context.Context, cancelled func(ids []int64)) (stop func()) {
	// The listening connection and one for the worker.
	if !r.ownWakerAllowed("listening for enqueues (LISTEN)", 2) {
		return func() {}
	}
	l := &pgListener{
		db:        r.q.db,
		run:       r.q.run,
		log:       r.log.With("channel", r.q.table.Name),
		wakeups:   make(wakeups, 1),
		cancelled: cancelled,
	}
	if len(r.cfg.Types) > 0 {
		l.types = make(map[string]bool, len(r.cfg.Types))
		for _, t := range r.cfg.Types {
			l.types[t] = true
		}
	}
	return r.startWaker(ctx, l.wakeups, l.loop)
}

// loop listens until ctx ends, connecting again with backoff whenever the
// connection fails.
func (l *pgListener) loop(ctx context.Context) {
	keepSession(ctx, l.log, "listening for enqueues", l.session, func(err error) bool { return errors.Is(err, errNotPgx) })
}

// session takes a connection, LISTENs on it and turns notifications into
// wake-ups until ctx ends or the connection fails. The connection is
// discarded afterwards: a session that listens is never handed back to
// the pool.
func (l *pgListener) session(ctx context.Context, up func()) error {
	cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	conn, err := sessionConn(cctx, l.db, pgKeepIdleSession) // it waits idle between notifications
	cancel()
	if err != nil {
		return fmt.Errorf("taking a connection: %w", err)
	}
	defer discardConn(conn)
	cctx, cancel = context.WithTimeout(ctx, dbCallTimeout)
	err = pggen.New(rawDBTX{r: l.run, db: conn}).ListenJobs(cctx)
	cancel()
	if err != nil {
		return fmt.Errorf("LISTEN: %w", err)
	}
	return conn.Raw(func(dc any) error {
		sc, ok := engine.PgxConn(dc)
		if !ok {
			return fmt.Errorf("%w (it is %T)", errNotPgx, dc)
		}
		pc := sc.Conn()
		l.log.Debug("listening for enqueues", "pid", pc.PgConn().PID())
		up()
		// Jobs enqueued while nobody listened were not heard: claim once;
		// and jobs cancelled meanwhile: check the running attempts once.
		l.wake()
		if l.cancelled != nil {
			l.cancelled(nil)
		}
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			if n != nil {
				if ids, ok := parseCancelPayload(n.Payload); ok {
					if l.cancelled != nil {
						l.cancelled(ids)
					}
					if !l.types[n.Payload] { // not a type this worker takes
						continue
					}
				}
			}
			if n == nil || l.wants(n.Payload) {
				l.wake()
			}
		}
	})
}

// rawDBTX is the generated queries' DBTX on a dedicated connection or on
// the pool, with the table rewritten as by dbtx (dbtx.go) but no statement
// hook and no prepared statements.
type rawDBTX struct {
	r  *runner
	db pggen.DBTX
}

func (d rawDBTX) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	text, err := d.r.text(query)
	if err != nil {
		return nil, err
	}
	return explained(d.db.ExecContext(ctx, text, d.r.args(args)...))
}

func (d rawDBTX) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	text, err := d.r.text(query)
	if err != nil {
		return nil, err
	}
	return d.db.PrepareContext(ctx, text)
}

func (d rawDBTX) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	text, err := d.r.text(query)
	if err != nil {
		return nil, err
	}
	return explained(d.db.QueryContext(ctx, text, d.r.args(args)...))
}

func (d rawDBTX) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	text, err := d.r.text(query)
	if err != nil {
		return failedRow(ctx, err)
	}
	return explainedRow(ctx, d.db.QueryRowContext(ctx, text, d.r.args(args)...))
}
