package queue

// Wake-ups across processes on SQLite. SQLite has no LISTEN, and a worker
// in another process than the enqueue found the job at its next poll
// (PollInterval; a p50 enqueue-to-start of about half a second with the
// default of 1 second). Instead, while a Worker runs on SQLite (unless
// WorkerConfig.PollOnly), it holds one connection of the queue's *sql.DB
// for itself and reads PRAGMA data_version there every few milliseconds
// (watchInterval). The number changes when another connection, of any
// process, has committed a change to the database file; reading it takes
// no lock that a writer waits for (in WAL mode a reader never holds up a
// writer, and the statement's read transaction ends with it). When it has
// changed, the watcher asks on the same connection whether a job that the
// worker's claim would take is due (DueJobExists, read only, one row of an
// index at most) and, only then, wakes the claimer, whose claim takes the
// write lock: the application's own writes to other tables, and the jobs
// of types this worker does not take, cost a read each, never a claim.
//
// The wake-up is a hint, as a notification is on PostgreSQL. It comes for
// every commit, whichever process or API made it (Enqueue, EnqueueTx at
// its commit, a row inserted by hand), and also for this process's own
// commits on other connections (its enqueues wake its workers directly
// too; the claimer takes a wake-up that came before its claim along with
// the claim). A due job that the claim does not take (one behind the
// claimer's watermark until its next full scan) makes each later commit
// of another connection wake the claimer for an empty claim, which writes
// nothing and so changes no data_version. Jobs that become due later, by
// their scheduled time, are found by polling as before.
//
// The watch needs WAL mode (jobqueue's own URLs open SQLite so): in the
// rollback journal modes every read takes a shared lock on the file that a
// committing writer must wait for, so there the worker polls (logged at
// info level).
//
// The check itself costs a few microseconds (it reads SQLite's shared
// memory, no file: BenchmarkSQLiteWatcherCheck), but waking a Go process
// every 2 ms costs about 2 % of a core however little it does then. So the
// watcher checks every dataVersionInterval while jobs come (it has found
// one due within dataVersionQuietAfter), and every dataVersionQuietInterval
// otherwise (watchInterval): a stream of jobs starts within about a
// millisecond each, the first job after a quiet spell within
// dataVersionQuietInterval, and an idle worker costs a fraction of a
// percent of a core. Commits that leave no job due (the worker's own
// leader and maintenance writes, the application's tables) do not keep it
// checking fast.

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jobqueue/jobqueue/db/sqlitegen"
)

// How often an idle SQLite worker's watcher reads PRAGMA data_version (see
// watchInterval): every dataVersionInterval while it finds jobs due after
// commits, every dataVersionQuietInterval once it has found none for
// dataVersionQuietAfter.
const (
	dataVersionInterval      = 2 * time.Millisecond
	dataVersionQuietInterval = 20 * time.Millisecond
	dataVersionQuietAfter    = time.Second
)

// watchInterval is how long the watcher waits before its next check, given
// how long ago a check last found a job due (or the watch started).
func watchInterval(sinceDue time.Duration) time.Duration {
	if sinceDue < dataVersionQuietAfter {
		return dataVersionInterval
	}
	return dataVersionQuietInterval
}

// dataVersionQuery reads the connection's data version. It and
// journalModeQuery are written here, not in sql/sqlite/queries.sql: sqlc
// cannot compile a PRAGMA (nor the table-valued pragma_data_version()).
const dataVersionQuery = "PRAGMA data_version"

// journalModeQuery reads the database's journal mode: the watch needs WAL,
// where a reader holds up no writer (in the rollback journal modes each
// read takes a shared lock on the file that a committing writer waits for).
const journalModeQuery = "PRAGMA journal_mode"

// sqliteWatcher is the Waker of a worker on SQLite: it watches the
// database's data version on a connection of its own and wakes the worker
// when another connection's commit has left a job due for it.
type sqliteWatcher struct {
	q     *Queue
	log   *slog.Logger
	types []string // the worker's types (all when empty), as its claim's
	wakeups
}

// startSQLiteWatcher starts, for a worker on SQLite that is not PollOnly,
// not behind a transaction pooler, and whose pool allows more than one
// connection (ownWakerAllowed), the watcher, and makes it the Waker of the
// run (forwarding the wake-ups of cfg.Waker, if one was given, into it). It
// returns a function that stops the watcher and waits until its connection
// is given back. ctx ending stops it too.
func (r *run) startSQLiteWatcher(ctx context.Context) (stop func()) {
	// The watching connection and one for the worker.
	if !r.ownWakerAllowed("watching the database for the commits of other processes", 2) {
		return func() {}
	}
	w := &sqliteWatcher{q: r.q, log: r.log, types: r.cfg.Types, wakeups: make(wakeups, 1)}
	return r.startWaker(ctx, w.wakeups, func(ctx context.Context) {
		keepSession(ctx, w.log, "watching for the commits of other processes", w.session, func(error) bool { return false })
	})
}

// session takes a connection and watches its data version until ctx ends
// or a statement fails. The connection is discarded afterwards.
func (w *sqliteWatcher) session(ctx context.Context, up func()) error {
	cctx, cancel := context.WithTimeout(ctx, dbCallTimeout)
	defer cancel()
	conn, err := w.q.db.Conn(cctx)
	if err != nil {
		return fmt.Errorf("taking a connection: %w", err)
	}
	defer discardConn(conn)
	var stmts connStmts
	defer stmts.close()
	dw, err := w.startWatch(cctx, conn, &stmts)
	if err != nil {
		return err
	}
	cancel()
	w.log.Debug("started watching for the commits of other processes")
	up()

	// Jobs committed while nobody watched were not seen here: claim once.
	w.wake()
	dueAt := time.Now()
	timer := time.NewTimer(dataVersionInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		due, err := dw.check(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		case due:
			dueAt = time.Now()
			w.wake()
		}
		timer.Reset(watchInterval(time.Since(dueAt)))
	}
}

// dataWatch is one session's watch: its statements on the connection and
// the data version it read last.
type dataWatch struct {
	version *sql.Stmt
	gen     *sqlitegen.Queries
	due     sqlitegen.DueJobExistsParams // Now set at each check
	now     func() time.Time
	last    int64
}

// startWatch prepares the watch's statements on conn (the probe's in
// stmts, which the caller closes) and reads the data version a first time.
// It returns an errPollsOnly error if the database is not in WAL mode.
func (w *sqliteWatcher) startWatch(ctx context.Context, conn *sql.Conn, stmts *connStmts) (*dataWatch, error) {
	var mode string
	if err := conn.QueryRowContext(ctx, journalModeQuery).Scan(&mode); err != nil {
		return nil, fmt.Errorf("reading %s: %w", journalModeQuery, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, fmt.Errorf("%w: the database's journal mode is %s, not WAL, and there a read every %v would hold up the writers' commits (open it with _pragma=journal_mode(WAL), as jobqueue's own URLs do)", errPollsOnly, mode, dataVersionInterval)
	}
	version, err := stmts.stmt(ctx, conn, dataVersionQuery)
	if err != nil {
		return nil, fmt.Errorf("preparing %s: %w", dataVersionQuery, err)
	}
	one, many := claimFilter(w.types)
	dw := &dataWatch{
		version: version, gen: sqlitegen.New(w.q.run.onHeld(conn, stmts)),
		due: sqlitegen.DueJobExistsParams{Type: one, Types: many}, now: w.q.now,
	}
	if err := version.QueryRowContext(ctx).Scan(&dw.last); err != nil {
		return nil, fmt.Errorf("reading %s: %w", dataVersionQuery, err)
	}
	return dw, nil
}

// check reads the data version and, if it has changed since the last
// check, reports whether a job the worker's claim would take is due.
func (dw *dataWatch) check(ctx context.Context) (bool, error) {
	var v int64
	if err := dw.version.QueryRowContext(ctx).Scan(&v); err != nil {
		return false, fmt.Errorf("reading %s: %w", dataVersionQuery, err)
	}
	if v == dw.last {
		return false, nil
	}
	dw.last = v
	dw.due.Now = dw.now()
	due, err := dw.gen.DueJobExists(ctx, dw.due)
	if err != nil {
		return false, fmt.Errorf("looking for due jobs: %w", err)
	}
	return due, nil
}
