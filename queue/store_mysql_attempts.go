package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// The MySQL statements of attempts: the claim that starts them, their
// heartbeats and completions, and the writes of the ends that the outcome
// rule decided (outcome.go), each fenced by the attempts' claim tokens.

func (s mysqlStore) claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	// READ COMMITTED whatever the session's level: under REPEATABLE READ the
	// locking SELECT takes gap locks and concurrent claims deadlock. The
	// driver sets the level before the transaction (one round trip more
	// than a claim session's claims: mysqlClaimSession).
	tx, err := s.r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	return s.claimIn(ctx, tx, types, max, token, now, leaseUntil, after)
}

// claimIn runs a claim in tx, a READ COMMITTED transaction, and ends it.
func (s mysqlStore) claimIn(ctx context.Context, tx *sql.Tx, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	defer tx.Rollback()
	qs := mysqlgen.New(s.r.on(tx))
	alive := nullTime(&now)
	var rows []mysqlgen.Job
	var afterID uint64
	if after.id > 0 {
		afterID = uint64(after.id)
	}
	var err error
	switch len(types) {
	case 0:
		rows, err = qs.SelectDueJobs(ctx, mysqlgen.SelectDueJobsParams{
			Now: now, AfterAt: after.at, AfterID: afterID, DeadlineAfter: alive, Limit: int32(max)})
	case 1:
		rows, err = qs.SelectDueJobsOfType(ctx, mysqlgen.SelectDueJobsOfTypeParams{
			Type: types[0], Now: now, AfterAt: after.at, AfterID: afterID, DeadlineAfter: alive, Limit: int32(max)})
	default:
		rows, err = qs.SelectDueJobsOfTypes(ctx, mysqlgen.SelectDueJobsOfTypesParams{
			Types: types, Now: now, AfterAt: after.at, AfterID: afterID, DeadlineAfter: alive, Limit: int32(max)})
	}
	if err != nil {
		return nil, explainMySQLClaim(err)
	}
	if len(rows) == 0 {
		return nil, tx.Commit()
	}
	ids := make([]uint64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	n, err := qs.MarkClaimed(ctx, mysqlgen.MarkClaimedParams{Token: token, LeaseUntil: nullTime(&leaseUntil), Ids: padIDs(ids)})
	if err != nil {
		return nil, explainMySQLClaim(err)
	}
	if n != int64(len(rows)) {
		return nil, fmt.Errorf("jobqueue: claim marked %d of the %d jobs it locked; nothing was claimed", n, len(rows))
	}
	if err := tx.Commit(); err != nil {
		return nil, explainMySQLClaim(err)
	}
	// The rows were locked from SELECT to COMMIT, so they are what the
	// SELECT read plus what MarkClaimed set (DATETIME keeps whole seconds).
	lease := leaseUntil.UTC().Truncate(time.Second)
	out := mysqlRows(rows)
	for _, j := range out {
		j.Status = StatusInProgress
		j.Attempts++
		j.ClaimToken = attemptToken(token, j.ID)
		l := lease
		j.LeaseUntil = &l
	}
	return out, nil
}

// claimSessionMinConns is the smallest pool limit (SetMaxOpenConns) under
// which a claimer holds a connection of its own for its claims: with fewer,
// the claimer's connection would starve the heartbeats, the completions and
// the handlers, so claims then run on the pool, setting their level each.
const claimSessionMinConns = 4

// claimSession holds a connection from the pool for one claimer's claims,
// its session set to READ COMMITTED once: each claim's transaction then
// begins with START TRANSACTION alone, a round trip less than a claim on
// the pool (BeginTx with an isolation level sends SET TRANSACTION first).
// It returns nil, nil when the pool allows fewer than claimSessionMinConns
// connections.
func (s mysqlStore) claimSession(ctx context.Context) (claimSession, error) {
	if m := s.r.db.Stats().MaxOpenConnections; m > 0 && m < claimSessionMinConns {
		return nil, nil
	}
	conn, err := sessionConn(ctx, s.r.db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
	if err != nil {
		return nil, fmt.Errorf("the claim connection: %w", err)
	}
	return &mysqlClaimSession{s: s, conn: conn, mutex: true, mutexWait: claimMutexWait}, nil
}

// The claim mutex. Claims of several claimers (worker processes) on one
// MySQL table fought when they overlapped: a claim's locking SELECT passes
// over the rows that the claims still open hold (SKIP LOCKED), and on
// InnoDB each row it skips costs a lock check against the other
// transaction (on MariaDB 10.11 with bench --processes 4 --workers 16,
// 2.2 to 2.6 skipped rows per job claimed, against none from one process,
// and a third more server CPU per job). So a claim session's claim holds a
// user lock of the table (GET_LOCK, TakeClaimMutex) from before its SELECT
// to after its COMMIT: claims on one table, from any process, take turns
// and none skips another's rows. It is a lock of the session: a crashed or
// disconnected claimer's goes with its connection. A claim waits for it
// at most claimMutexWait, then claims without it, so that a claimer stuck
// while holding it delays the others but never stops them. A server that
// refuses user locks (Galera: GET_LOCK is not supported while wsrep is on)
// makes the session claim without the mutex from then on. Claims on the
// pool (a pool smaller than claimSessionMinConns) take no mutex.

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

	mutex     bool      // take the claim mutex around each claim
	mutexWait int32     // seconds (claimMutexWait; tests shorten it)
	stmts     connStmts // the mutex's statements, prepared on conn
	// busy: the last claim took as many jobs as it asked for, so more are
	// probably due and other claimers probably claim them too (frontier).
	busy bool
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
	held, err := cs.takeMutex(ctx)
	if err != nil {
		return nil, err
	}
	if held {
		defer cs.releaseMutex(ctx)
		if cs.busy {
			if after, err = cs.frontier(ctx, types, after); err != nil {
				return nil, err
			}
		}
	}
	tx, err := cs.conn.BeginTx(ctx, nil) // the session's level: READ COMMITTED
	if err != nil {
		return nil, err
	}
	rows, err := cs.s.claimIn(ctx, tx, types, max, token, now, leaseUntil, after)
	cs.busy = err == nil && len(rows) == max
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
// to one worker's instead of 10-15 % more (README, Performance).
//
// Only a claim that holds the mutex after a full claim does this (a busy
// table: the newest job in progress is then the last claim's, another
// claimer's or its own), and only for every type or one (a claimer of
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

// binlogStatementErr is ER_BINLOG_STMT_MODE_AND_ROW_ENGINE (MySQL and
// MariaDB): a write at READ COMMITTED cannot be logged as a statement.
const binlogStatementErr = 1665

// explainMySQLClaim says what to do when a claim fails because the binary
// log is statement-based. MySQL refuses every claim then (claims run at READ
// COMMITTED, which InnoDB logs only as rows). MariaDB with the binary log
// off (log_bin=0) ignores binlog_format and claims work.
func explainMySQLClaim(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == binlogStatementErr || strings.Contains(me.Message, "BINLOG_FORMAT = STATEMENT")) {
		return fmt.Errorf("jobqueue: claiming jobs needs binlog_format=ROW or MIXED, but this connection uses STATEMENT: claims run at READ COMMITTED, which InnoDB can only log as rows; run SET GLOBAL binlog_format = 'ROW' (and set it in the server's configuration), or SET SESSION binlog_format = 'ROW' on the queue's connections: %w", err)
	}
	return err
}

func (s mysqlStore) extend(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	qs := s.qs()
	n, err := qs.ExtendLeases(ctx, mysqlgen.ExtendLeasesParams{
		LeaseUntil: nullTime(&leaseUntil), Ids: padIDs(uids(ids)), Tokens: padIDs(mysqlTokens(toks)),
	})
	if err != nil {
		return nil, err
	}
	held := make(map[int64]bool, len(refs))
	if n == int64(len(refs)) {
		for _, id := range ids {
			held[id] = true
		}
		return held, nil
	}
	// Fewer rows changed: some attempts lost their job, or a lease already
	// ended at that second (MySQL counts changed rows). Read the tokens.
	cur, err := qs.SelectTokens(ctx, padIDs(uids(ids)))
	if err != nil {
		return nil, err
	}
	tokenOf := make(map[int64]string, len(cur))
	for _, c := range cur {
		tokenOf[int64(c.ID)] = c.ClaimToken.String
	}
	for _, r := range refs {
		if t, ok := tokenOf[r.ID]; ok && t == r.Token {
			held[r.ID] = true
		}
	}
	return held, nil
}

// lockedUpdate changes the jobs that refs still hold and returns their ids.
// MySQL has no RETURNING, so a batch learns which attempts were stale like
// this: in a short READ COMMITTED transaction it first runs update on all
// refs; when every ref matched (the usual case) it commits. Otherwise it
// rolls back and, in a second transaction, locks the rows the refs still
// hold (LockHeldJobs), updates those and commits.
func (s mysqlStore) lockedUpdate(ctx context.Context, refs []attemptRef, what string, update func(qs *mysqlgen.Queries, ids []uint64, toks []sql.NullString) (int64, error)) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	all := make(map[int64]bool, len(ids))
	for _, id := range ids {
		all[id] = true
	}
	held, err := s.inTx(ctx, func(qs *mysqlgen.Queries) (map[int64]bool, bool, error) {
		n, err := update(qs, padIDs(uids(ids)), padIDs(mysqlTokens(toks)))
		return all, n == int64(len(ids)), err
	})
	if err != nil || held != nil {
		return held, err
	}
	return s.inTx(ctx, func(qs *mysqlgen.Queries) (map[int64]bool, bool, error) {
		locked, err := qs.LockHeldJobs(ctx, mysqlgen.LockHeldJobsParams{Ids: padIDs(uids(ids)), Tokens: padIDs(mysqlTokens(toks))})
		if err != nil {
			return nil, false, err
		}
		held := idSet(locked)
		if len(held) == 0 {
			return held, true, nil
		}
		var hIDs []uint64
		var hToks []sql.NullString
		for _, r := range refs {
			if held[r.ID] {
				hIDs = append(hIDs, uint64(r.ID))
				hToks = append(hToks, nullString(r.Token))
			}
		}
		n, err := update(qs, padIDs(hIDs), padIDs(hToks))
		if err == nil && n != int64(len(hIDs)) {
			err = fmt.Errorf("jobqueue: %s: %d of the %d locked jobs changed; nothing was changed", what, n, len(hIDs))
		}
		return held, err == nil, err
	})
}

// inTx runs fn in a READ COMMITTED transaction and commits when fn says so
// (returning its result), else rolls back and returns nil. A deadlock (with
// a cancel, another worker's write, or a Galera certification conflict)
// runs the transaction again (retryTx).
func (s mysqlStore) inTx(ctx context.Context, fn func(qs *mysqlgen.Queries) (map[int64]bool, bool, error)) (res map[int64]bool, err error) {
	err = retryTx(ctx, func() error {
		var err error
		res, err = s.inTxOnce(ctx, fn)
		return err
	})
	return res, err
}

// inTxOnce is one try of inTx.
func (s mysqlStore) inTxOnce(ctx context.Context, fn func(qs *mysqlgen.Queries) (map[int64]bool, bool, error)) (map[int64]bool, error) {
	tx, err := s.r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, commit, err := fn(mysqlgen.New(s.r.on(tx)))
	if err != nil || !commit {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

func (s mysqlStore) complete(ctx context.Context, refs []attemptRef, now time.Time, del bool) (map[int64]bool, error) {
	return s.lockedUpdate(ctx, refs, "completing", func(qs *mysqlgen.Queries, ids []uint64, toks []sql.NullString) (int64, error) {
		if del {
			return qs.DeleteCompletedJobs(ctx, mysqlgen.DeleteCompletedJobsParams{Ids: ids, Tokens: toks})
		}
		return qs.CompleteJobs(ctx, mysqlgen.CompleteJobsParams{Now: nullTime(&now), Ids: ids, Tokens: toks})
	})
}

func (s mysqlStore) heldAttempts(ctx context.Context, refs []attemptRef) ([]*JobRow, error) {
	ids, toks := refLists(refs)
	rows, err := s.qs().SelectHeldAttempts(ctx, mysqlgen.SelectHeldAttemptsParams{Ids: padIDs(uids(ids)), Tokens: padIDs(mysqlTokens(toks))})
	return mysqlRows(rows), err
}

func (s mysqlStore) abandoned(ctx context.Context, d dbtx, now time.Time, limit int) ([]*JobRow, error) {
	rows, err := mysqlgen.New(d).SelectAbandoned(ctx, mysqlgen.SelectAbandonedParams{Now: nullTime(&now), Limit: int32(limit)})
	return mysqlRows(rows), err
}

func (s mysqlStore) endAttempts(ctx context.Context, refs []attemptRef, e attemptEnd) (map[int64]bool, error) {
	return s.lockedUpdate(ctx, refs, "ending attempts", func(qs *mysqlgen.Queries, ids []uint64, toks []sql.NullString) (int64, error) {
		return qs.EndAttempts(ctx, mysqlgen.EndAttemptsParams{
			Status: mysqlgen.JobsStatus(e.status), Error: nullString(e.errText),
			RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
			Ids: ids, Tokens: toks,
		})
	})
}

// endAbandoned runs at READ COMMITTED (see readCommitted).
func (s mysqlStore) endAbandoned(ctx context.Context, d dbtx, refs []attemptRef, e attemptEnd, now time.Time) (int64, error) {
	ids, toks := refLists(refs)
	return s.readCommitted(ctx, d, func(qs *mysqlgen.Queries) (int64, error) {
		return qs.EndAbandonedAttempts(ctx, mysqlgen.EndAbandonedAttemptsParams{
			Status: mysqlgen.JobsStatus(e.status), Error: nullString(e.errText),
			RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
			Ids: padIDs(uids(ids)), Tokens: padIDs(mysqlTokens(toks)), Now: nullTime(&now),
		})
	})
}

func (s mysqlStore) fail(ctx context.Context, ref attemptRef, e attemptEnd) (bool, error) {
	n, err := s.qs().FailJob(ctx, mysqlgen.FailJobParams{
		Status: mysqlgen.JobsStatus(e.status), Error: nullString(e.errText),
		RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
		ID: uint64(ref.ID), Token: nullString(ref.Token),
	})
	return n == 1, err
}
