package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// The claim session on MySQL: a claimer's own connection at READ
// COMMITTED with autocommit off, the table's claim mutex its claims take
// turns through, and the frontier a busy claim starts from. The claim
// itself (claimIn) is in store_mysql_attempts.go.

// claimSession holds a connection from the pool for one claimer's claims,
// its session set once to READ COMMITTED with autocommit off (connect): a
// claim's transaction then begins with its first statement that reads the
// table (the frontier's SELECT or the locking SELECT) and ends with COMMIT,
// two round trips less than a claim on the pool (BeginTx with an isolation
// level sends SET TRANSACTION and START TRANSACTION first). START
// TRANSACTION's round trip was 0.15 ms of an idle worker's claim of 1.7 ms
// on MariaDB (1.51-1.56 against 1.66-1.70 ms, medians of 400;
// docs/performance.md). The claim mutex's GET_LOCK and RELEASE_LOCK read no
// table, and COMMIT does not release them. It returns nil, nil when the
// pool has too few connections free (roomForClaimSession): with fewer, the
// claimer's connection would starve the heartbeats, the completions and
// the handlers, so claims then run on the pool, setting their level each.
// A pooled queue (WithTransactionPooling) keeps its claim sessions: ProxySQL,
// MySQL's multiplexing pooler, replays a client session's isolation level
// and autocommit on whichever server connection serves it, and keeps a
// session that took a user lock on one server connection (sysown/proxysql,
// lib/MySQL_Session.cpp and lib/mysql_connection.cpp; not run here).
func (s mysqlStore) claimSession(ctx context.Context) (claimSession, error) {
	if !roomForClaimSession(s.r.db.Stats()) {
		return nil, nil
	}
	cs := &mysqlClaimSession{s: s, mutex: true, mutexWait: claimMutexWait, turns: newClaimTurns()}
	if err := cs.connect(ctx); err != nil {
		return nil, err
	}
	return cs, nil
}

// connect opens the session's connection: READ COMMITTED, and autocommit
// off unless the server is a Galera node (wsrep_on). Galera rolls back a
// local transaction that a replicated one conflicts with (a brute-force
// abort) between two of its statements and reports it to the session's
// next command as a deadlock, which the claimer retries. That this holds
// for a transaction that autocommit off began as for one begun by START
// TRANSACTION was not established, so on Galera each claim still begins
// with START TRANSACTION (explicitBegin), as before autocommit was turned
// off. Nor does the session take the claim mutex there: a Galera node's
// user locks are the node's own, not the cluster's (MariaDB 10.11's nodes
// take GET_LOCK, others refuse it), so a mutex would order the claims of
// one node only.
func (cs *mysqlClaimSession) connect(ctx context.Context) error {
	conn, err := sessionConn(ctx, cs.s.r.db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
	if err != nil {
		return fmt.Errorf("the claim connection: %w", err)
	}
	var wsrep int
	err = conn.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&wsrep)
	switch {
	case isMySQLError(err, mysqlUnknownSystemVariable):
		wsrep = 0 // MySQL without Galera
	case err != nil:
		discardConn(conn)
		return fmt.Errorf("the claim connection: asking whether the server is a Galera node (SELECT @@wsrep_on): %w", err)
	}
	// A Galera node's user locks are per node (or refused): its claims
	// take no mutex, rather than learning it from a refusal (takeMutex).
	cs.explicitBegin = wsrep == 1
	cs.mutex = cs.mutex && wsrep != 1
	// The server ends a session idle for wait_timeout seconds (28 800 by
	// default, a URL or the server's settings may make it seconds), and a
	// claimer's session sits idle while every slot of its worker is busy.
	var wait int64
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.wait_timeout").Scan(&wait); err != nil {
		discardConn(conn)
		return fmt.Errorf("the claim connection: reading the server's idle timeout (SELECT @@SESSION.wait_timeout): %w", err)
	}
	cs.idleLimit = claimSessionIdleLimit(time.Duration(wait) * time.Second)
	if !cs.explicitBegin {
		if _, err := conn.ExecContext(ctx, "SET SESSION autocommit = 0"); err != nil {
			discardConn(conn)
			return fmt.Errorf("the claim connection: setting autocommit off: %w", err)
		}
	}
	cs.conn, cs.lastUsed = conn, time.Now()
	return nil
}

// claimSessionIdleLimit is how long a claim session whose server ends
// sessions idle for wait may sit idle before the next claim takes a new
// one: a second less (the server counts from its own receipt of the last
// statement, which came before the claimer's end of it), and at most half
// of a shorter wait. Used past the server's limit, the session was found
// closed by the next claim, which failed ("sql: connection is already
// closed", logged as an error, and claimed again only after a pause).
func claimSessionIdleLimit(wait time.Duration) time.Duration {
	if wait <= 0 {
		return 0
	}
	return max(wait-time.Second, wait/2)
}

// mysqlUnknownSystemVariable is ER_UNKNOWN_SYSTEM_VARIABLE: MySQL's answer
// to SELECT @@wsrep_on without Galera.
const mysqlUnknownSystemVariable = 1193

// The claim mutex: the turn of a busy table's claims on MySQL
// (claim_turns.go). Claims of several claimers (worker processes) on one
// MySQL table fought when they overlapped: a claim's locking SELECT passes
// over the rows that the claims still open hold (SKIP LOCKED), and on
// InnoDB each row it skips costs a lock check against the other
// transaction (on MariaDB 10.11 with bench --processes 4 --workers 16,
// 2.2 to 2.6 skipped rows per job claimed, against none from one process,
// and a third more server CPU per job). So a claim session's claim that
// takes its turn holds a user lock of the table (GET_LOCK, TakeClaimMutex)
// from before its SELECT to after its COMMIT: the busy claims on one table,
// from any process, run one after another and none skips another's rows.
// It is a lock of the session: a crashed or disconnected claimer's goes
// with its connection. A claim waits for it at most claimMutexWait, then
// claims without it, so that a claimer stuck while holding it delays the
// others but never stops them. A server that refuses user locks (some
// Galera nodes: GET_LOCK is not supported while wsrep is on) makes the
// session claim without the mutex from then on; a Galera node, whose user
// locks are at best its own, is known before the first claim (connect) and
// takes no mutex, so that is for a refusal of another kind of server.
// Claims on the pool (no room for a claim session: roomForClaimSession)
// take no mutex.

// claimMutexWait is the longest a claim waits for the claim mutex, in
// seconds (GET_LOCK's unit).
const claimMutexWait = 1

// mysqlNotSupportedYet is ER_NOT_SUPPORTED_YET, MariaDB's answer to
// GET_LOCK on a Galera node.
const mysqlNotSupportedYet = 1235

// mysqlClaimSession is a claimer's own connection, at READ COMMITTED and
// (but on Galera) with autocommit off for the rest of its life (see
// claimSession). It is never handed back to the pool: close discards it, so
// no other user of the pool gets a session whose settings the queue changed.
type mysqlClaimSession struct {
	s    mysqlStore
	conn *sql.Conn

	// explicitBegin: the session runs with autocommit on (a Galera node:
	// connect), so each claim sends START TRANSACTION.
	explicitBegin bool
	mutex         bool      // take the claim mutex around the claims that take their turn
	mutexWait     int32     // seconds (claimMutexWait; tests shorten it)
	stmts         connStmts // the session's statements, prepared on conn
	// turns says whether a claim takes its turn (the mutex), and so also
	// starts from the frontier: after a full claim more jobs are
	// probably due, and other claimers probably claim them too.
	turns claimTurns
	// idleLimit is how long the session may sit idle before a claim takes
	// a new one (claimSessionIdleLimit of the server's wait_timeout; 0:
	// no limit); lastUsed is when its last claim ended.
	idleLimit time.Duration
	lastUsed  time.Time
}

// claim runs a claim on the session, on a new one when the last claim
// dropped the connection or the session has sat idle so long that the
// server may have ended it (idleLimit).
func (cs *mysqlClaimSession) claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	if cs.conn != nil && cs.idleLimit > 0 && time.Since(cs.lastUsed) >= cs.idleLimit {
		cs.close()
	}
	defer func() { cs.lastUsed = time.Now() }()
	if cs.conn == nil {
		// The last claim could not end its transaction or release the
		// mutex and dropped its connection (close): open another like the
		// first.
		if err := cs.connect(ctx); err != nil {
			return nil, err
		}
	}
	held := false
	var err error
	if cs.turns.next(max) {
		if held, err = cs.takeMutex(ctx); err != nil {
			return nil, err
		}
	}
	if held {
		defer cs.releaseMutex(ctx)
	}
	// From here the session's statements are one transaction (autocommit
	// off), which tx ends: claimIn commits it, and anything that fails
	// first rolls it back. A session whose transaction could not be ended
	// is dropped: the server rolls back what it held, and the mutex goes
	// with the session (releaseMutex then has nothing to do).
	tx := &sessionTx{ctx: ctx, conn: cs.conn}
	defer func() {
		if tx.broken {
			cs.close()
		}
	}()
	if cs.explicitBegin {
		if err := tx.begin(); err != nil {
			return nil, err
		}
	}
	if held {
		if after, err = cs.frontier(ctx, types, after); err != nil {
			_ = tx.Rollback() // a failure marks tx broken
			return nil, err
		}
	}
	rows, err := cs.s.claimIn(ctx, cs.s.r.onHeld(cs.conn, &cs.stmts), tx, types, max, token, now, leaseUntil, after)
	cs.turns.record(max, len(rows), err)
	return rows, err
}

// sessionTx is the transaction of a claim on a claim session (autocommit
// off), which the session's statements began: Commit and Rollback send
// COMMIT and ROLLBACK, as a *sql.Tx would, on the held connection. Once
// ended, Rollback does nothing more (claimIn defers it after Commit). A
// ROLLBACK is sent even when ctx has ended (a claim cut off midway); when
// COMMIT or ROLLBACK fails, the session is broken: its transaction may still
// be open, holding row locks and the table's metadata lock, so its
// connection must be dropped.
type sessionTx struct {
	ctx    context.Context
	conn   *sql.Conn
	ended  bool
	broken bool
}

// begin sends START TRANSACTION (a session with autocommit on: Galera).
func (t *sessionTx) begin() error {
	if _, err := t.conn.ExecContext(t.ctx, "START TRANSACTION"); err != nil {
		t.ended, t.broken = true, true
		return err
	}
	return nil
}

// Commit sends COMMIT.
func (t *sessionTx) Commit() error { return t.end(t.ctx, "COMMIT") }

// Rollback sends ROLLBACK, unless the transaction was ended.
func (t *sessionTx) Rollback() error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), dbCallTimeout)
	defer cancel()
	return t.end(ctx, "ROLLBACK")
}

// end ends the transaction with stmt (COMMIT or ROLLBACK), once; a failure
// marks the session broken.
func (t *sessionTx) end(ctx context.Context, stmt string) error {
	if t.ended {
		return sql.ErrTxDone
	}
	t.ended = true
	if _, err := t.conn.ExecContext(ctx, stmt); err != nil {
		t.broken = true
		return err
	}
	return nil
}

// frontier moves a claim's start past the newest job in progress
// (SelectClaimFrontier) when that lies beyond after, the claimer's own
// watermark. The claims of several claimers on one table (worker
// processes, or workers of one process) take turns through the claim
// mutex, so between two claims of one claimer the others claimed their
// batches past its watermark; started there, its locking SELECT passes
// over every entry of those batches, which their claims delete-marked,
// and InnoDB checks such an entry through the clustered index while any
// transaction older than its change runs (the other workers' completions
// nearly always are). bench --processes 4 --workers 16 on MariaDB 10.11,
// 6 rounds alternating with --workers 64, 40 000 jobs: 1.02x its rate
// with the frontier against 0.90-0.92x without, server CPU per job equal
// to one worker's instead of 10-15 % more (docs/performance.md).
//
// Only a claim that takes its turn and holds the mutex does this (a claim
// of at least claimTurnMin jobs after a full claim, a busy table: the
// newest job in progress is then the last claim's, another claimer's or
// its own), and only for every type or one (a claimer of
// several types keeps its watermark). A rescan from the start (after is
// the zero claimPos) stays one. Due jobs the frontier steps over (one
// released, reclaimed or retried behind it, or skipped while another
// transaction held it) are found like any job behind a watermark
// (claim_cursor.go): by the claimer's next rescan, at most
// claimRescanEvery later, or at once when nothing is due past it.
func (cs *mysqlClaimSession) frontier(ctx context.Context, types []string, after claimPos) (claimPos, error) {
	if after.id == 0 || len(types) > 1 {
		return after, nil
	}
	qs := mysqlgen.New(cs.s.r.onHeld(cs.conn, &cs.stmts))
	var f claimPos
	var err error
	if len(types) == 0 {
		var row mysqlgen.SelectClaimFrontierRow
		row, err = qs.SelectClaimFrontier(ctx)
		f = claimPos{at: engine.AsUTC(row.ScheduledAt), id: int64(row.ID)}
	} else {
		var row mysqlgen.SelectClaimFrontierOfTypeRow
		row, err = qs.SelectClaimFrontierOfType(ctx, types[0])
		f = claimPos{at: engine.AsUTC(row.ScheduledAt), id: int64(row.ID)}
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return after, nil // nothing in progress
	case err != nil:
		return after, fmt.Errorf("reading where the claims have reached: %w", err)
	case f.after(after):
		return f, nil
	default:
		return after, nil
	}
}

// takeMutex takes the claim mutex and reports whether it holds it (not
// when the wait ran out or the server refuses user locks).
func (cs *mysqlClaimSession) takeMutex(ctx context.Context) (bool, error) {
	if !cs.mutex {
		return false, nil
	}
	taken, err := mysqlgen.New(cs.s.r.onHeld(cs.conn, &cs.stmts)).TakeClaimMutex(ctx, mysqlgen.TakeClaimMutexParams{
		TableName: cs.s.r.table, WaitSeconds: cs.mutexWait})
	if isMySQLError(err, mysqlNotSupportedYet) {
		cs.mutex = false
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("taking the claim mutex: %w", err)
	}
	return taken == 1, nil
}

// releaseMutex gives the claim mutex back. When that fails (the claim's
// context ended, the connection broke), the claim's result stands and the
// connection is dropped, which gives the lock up with its session; the
// next claim opens another.
func (cs *mysqlClaimSession) releaseMutex(ctx context.Context) {
	if cs.conn == nil {
		return // dropped already: the lock went with its session
	}
	if _, err := mysqlgen.New(cs.s.r.onHeld(cs.conn, &cs.stmts)).ReleaseClaimMutex(ctx, cs.s.r.table); err != nil {
		cs.close()
	}
}

func (cs *mysqlClaimSession) close() {
	cs.stmts.close()
	if cs.conn != nil {
		discardConn(cs.conn)
		cs.conn = nil
	}
}
