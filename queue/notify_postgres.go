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
//
// A connection that stays up can still stop hearing enqueues: after a
// failover the old primary may be kept running fenced read-only
// (default_transaction_read_only on), accepting connections, and a
// listener left there waited for notifications no one sent while the
// worker only polled, until that connection broke. So the listener checks
// its server (ServerReadOnly, the test of target_session_attrs=read-write)
// when it starts and every pgListenCheckEvery; when the server accepts no
// writes it ends the session (logged once, as any failure of it) and
// listens again through the pool, whose new connections go to the new
// primary (a multi-host URL with target_session_attrs=read-write). The
// check also ends a session whose connection went silently dead (a
// network partition), which waited for notifications without end.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// errNotPgx: the pool's connections are not pgx's, so they cannot wait for
// notifications; listening stops for good (the worker polls).
var errNotPgx = errors.New("the driver's connection is not pgx's *stdlib.Conn, which LISTEN needs")

// errListenReadOnly: the LISTEN session's server accepts no writes, so no
// enqueue can notify it; the listener listens again through the pool.
var errListenReadOnly = errors.New("the listening connection's server accepts no writes (a standby, or an old primary fenced read-only after a failover), so no enqueue reaches it; listening again on a new connection of the pool (with several hosts in the postgres URL, target_session_attrs=read-write makes it reach the primary)")

// pgListenCheckEvery is how often the LISTEN session checks that its
// server still accepts writes (ServerReadOnly): one short statement, so
// that a listener left on a fenced old primary after a failover moves to
// the new one within this (see the top of this file).
const pgListenCheckEvery = 5 * time.Second

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

// session takes a connection, checks that its server accepts writes,
// LISTENs on it and turns notifications into wake-ups until ctx ends, the
// connection fails or its server stops accepting writes (checked every
// pgListenCheckEvery). The connection is discarded afterwards: a session
// that listens is never handed back to the pool.
func (l *pgListener) session(ctx context.Context, up func()) error {
	cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	conn, err := sessionConn(cctx, l.db, pgKeepIdleSession) // it waits idle between notifications
	cancel()
	if err != nil {
		return fmt.Errorf("taking a connection: %w", err)
	}
	defer discardConn(conn)
	if err := l.checkWritable(ctx, conn); err != nil {
		return err
	}
	cctx, cancel = context.WithTimeout(ctx, dbCallTimeout)
	err = pggen.New(rawDBTX{r: l.run, db: conn}).ListenJobs(cctx)
	cancel()
	if err != nil {
		return fmt.Errorf("LISTEN: %w", err)
	}
	for started := false; ; started = true {
		err := conn.Raw(func(dc any) error {
			sc, ok := engine.PgxConn(dc)
			if !ok {
				return fmt.Errorf("%w (it is %T)", errNotPgx, dc)
			}
			pc := sc.Conn()
			if !started {
				l.log.Debug("listening for enqueues", "pid", pc.PgConn().PID())
				up()
				// Jobs enqueued while nobody listened were not heard: claim
				// once; and jobs cancelled meanwhile: check the running
				// attempts once.
				l.wake()
				if l.cancelled != nil {
					l.cancelled(nil)
				}
			}
			return l.hear(ctx, pc)
		})
		if err != nil {
			return err
		}
		if err := l.checkWritable(ctx, conn); err != nil {
			return err
		}
	}
}

// checkWritable returns errListenReadOnly when the server of conn accepts
// no writes, and the error of the check when it fails.
func (l *pgListener) checkWritable(ctx context.Context, conn *sql.Conn) error {
	cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	readOnly, err := pggen.New(rawDBTX{r: l.run, db: conn}).ServerReadOnly(cctx)
	cancel()
	switch {
	case err != nil:
		return fmt.Errorf("checking that the server accepts writes: %w", err)
	case readOnly:
		return errListenReadOnly
	}
	return nil
}

// hear turns the notifications pc receives into wake-ups (and the ids of
// cancelled jobs into calls of l.cancelled) for pgListenCheckEvery, then
// returns nil; it returns the error of pc when it fails or ctx ends.
func (l *pgListener) hear(ctx context.Context, pc *pgx.Conn) error {
	wctx, cancel := context.WithTimeout(ctx, pgListenCheckEvery)
	defer cancel()
	for {
		n, err := pc.WaitForNotification(wctx)
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil && !pc.IsClosed() {
				return nil // time to check the server; the connection is fine
			}
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
