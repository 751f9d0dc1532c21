package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// The claim session on MySQL: a claimer's own connection at READ
// COMMITTED, the table's claim mutex its claims take turns through, and
// the frontier a busy claim starts from. The claim itself (claimIn) is in
// store_mysql_attempts.go.

// claimSession holds a connection from the pool for one claimer's claims,
// its session set to READ COMMITTED once: each claim's transaction then
// begins with START TRANSACTION alone, a round trip less than a claim on
// the pool (BeginTx with an isolation level sends SET TRANSACTION first).
// It returns nil, nil when the pool has too few connections free
// (roomForClaimSession): with fewer, the claimer's connection would starve
// the heartbeats, the completions and the handlers, so claims then run on
// the pool, setting their level each.
func (s mysqlStore) claimSession(ctx context.Context) (claimSession, error) {
	if !roomForClaimSession(s.r.db.Stats()) {
		return nil, nil
	}
	conn, err := sessionConn(ctx, s.r.db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
	if err != nil {
		return nil, fmt.Errorf("the claim connection: %w", err)
	}
	return &mysqlClaimSession{s: s, conn: conn, mutex: true, mutexWait: claimMutexWait, turns: newClaimTurns()}, nil
}

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
// others but never stops them. A server that refuses user locks (Galera:
// GET_LOCK is not supported while wsrep is on) makes the session claim
// without the mutex from then on. Claims on the pool (no room for a claim
// session: roomForClaimSession) take no mutex.

// claimMutexWait is the longest a claim waits for the claim mutex, in
// seconds (GET_LOCK's unit).
const claimMutexWait = 1

// mysqlNotSupportedYet is ER_NOT_SUPPORTED_YET, MariaDB's answer to
// GET_LOCK on a Galera node.
const mysqlNotSupportedYet = 1235

// mysqlClaimSession is a claimer's own connection, at READ COMMITTED for
// the rest of its life (see claimSession). It is never handed back to the
// pool: close discards it, so no other user of the pool gets a session
// whose level the queue changed.
type mysqlClaimSession struct {
	s    mysqlStore
	conn *sql.Conn

	mutex     bool      // take the claim mutex around the claims that take their turn
	mutexWait int32     // seconds (claimMutexWait; tests shorten it)
	stmts     connStmts // the mutex's statements, prepared on conn
	// turns says whether a claim takes its turn (the mutex), and so also
	// starts from the frontier: after a full claim more jobs are
	// probably due, and other claimers probably claim them too.
	turns claimTurns
}

func (cs *mysqlClaimSession) claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	if cs.conn == nil {
		// The last claim could not release the mutex and dropped its
		// connection (releaseMutex): open another like the first.
		conn, err := sessionConn(ctx, cs.s.r.db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
		if err != nil {
			return nil, fmt.Errorf("the claim connection: %w", err)
		}
		cs.conn = conn
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
		if after, err = cs.frontier(ctx, types, after); err != nil {
			return nil, err
		}
	}
	tx, err := cs.conn.BeginTx(ctx, nil) // the session's level: READ COMMITTED
	if err != nil {
		return nil, err
	}
	rows, err := cs.s.claimIn(ctx, tx, types, max, token, now, leaseUntil, after)
	cs.turns.record(max, len(rows), err)
	return rows, err
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
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == mysqlNotSupportedYet {
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
