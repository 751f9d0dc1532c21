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
	return s.claimIn(ctx, s.r.on(tx), tx, types, max, token, now, leaseUntil, after)
}

// txEnder ends a transaction: a *sql.Tx, or a claim session's sessionTx.
type txEnder interface {
	Commit() error
	Rollback() error
}

// claimIn runs a claim on db, in the READ COMMITTED transaction that tx
// ends, and ends it.
func (s mysqlStore) claimIn(ctx context.Context, db dbtx, tx txEnder, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	defer tx.Rollback()
	var afterID uint64
	if after.id > 0 {
		afterID = uint64(after.id)
	}
	alive := nullTime(&now)
	var rec queryRecorder
	var err error
	switch rq := mysqlgen.New(&rec); len(types) {
	case 0:
		_, err = rq.SelectDueJobs(ctx, mysqlgen.SelectDueJobsParams{
			Now: now, AfterAt: after.at, AfterID: afterID, DeadlineAfter: alive, Limit: int32(max)})
	case 1:
		_, err = rq.SelectDueJobsOfType(ctx, mysqlgen.SelectDueJobsOfTypeParams{
			Type: types[0], Now: now, AfterAt: after.at, AfterID: afterID, DeadlineAfter: alive, Limit: int32(max)})
	default:
		_, err = rq.SelectDueJobsOfTypes(ctx, mysqlgen.SelectDueJobsOfTypesParams{
			Types: types, Now: now, AfterAt: after.at, AfterID: afterID, DeadlineAfter: alive, Limit: int32(max)})
	}
	if err := recordingFailed("the claim", err); err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, rec.query, rec.args...)
	if err != nil {
		return nil, explainMySQLClaim(err)
	}
	out, err := scanMySQLClaimed(rows, make([]*JobRow, 0, max))
	if err != nil {
		return nil, explainMySQLClaim(err)
	}
	if len(out) == 0 {
		return nil, tx.Commit()
	}
	ids := make([]uint64, len(out))
	for i, j := range out {
		ids[i] = uint64(j.ID)
	}
	n, err := mysqlgen.New(db).MarkClaimed(ctx, mysqlgen.MarkClaimedParams{Token: token, LeaseUntil: nullTime(&leaseUntil), Ids: padIDs(ids)})
	if err != nil {
		return nil, explainMySQLClaim(err)
	}
	if n != int64(len(out)) {
		return nil, fmt.Errorf("jobqueue: claim marked %d of the %d jobs it locked; nothing was claimed", n, len(out))
	}
	// The rows were locked from SELECT to COMMIT, so they are what the
	// SELECT read plus what MarkClaimed set (DATETIME keeps whole seconds).
	lease := leaseUntil.UTC().Truncate(time.Second)
	for _, j := range out {
		j.Status = StatusInProgress
		j.Attempts++
		j.ClaimToken = attemptToken(token, j.ID)
		l := lease
		j.LeaseUntil = &l
	}
	if err := tx.Commit(); err != nil {
		if connectionLost(err) {
			// The COMMIT may have been carried out: the caller gives
			// the rows back (claimAfter).
			return nil, &claimUnsure{rows: out, err: err}
		}
		return nil, explainMySQLClaim(err)
	}
	return out, nil
}

// scanMySQLClaimed appends the rows of a claim's locking SELECT
// (SelectDueJobs and its two twins: the columns of mysqlgen.Job, in order)
// to out and closes rows. As on PostgreSQL (scanClaimed), the scan targets
// are one mysqlgen.Job declared once per claim, each row made into its
// JobRow as it is read (jobRow): the generated method appended every row
// to a slice of mysqlgen.Job, 200 bytes a row copied again at each growth,
// before the JobRows were made from them (BenchmarkDrain/mysql: half of a
// worker's CPU was the claim's SELECT, a quarter of that growing the
// slice). The payload and the status scan as the []byte and string they
// are, not through database/sql's reflection.
func scanMySQLClaimed(rows *sql.Rows, out []*JobRow) ([]*JobRow, error) {
	defer rows.Close()
	var j mysqlgen.Job
	dest := []any{&j.ID, &j.Name, &j.Type, (*[]byte)(&j.Payload), (*string)(&j.Status), &j.Attempts,
		&j.ClaimToken, &j.LeaseUntil, &j.MaxAttempts, &j.BaseDelay, &j.MaxDelay, &j.Error,
		&j.ScheduledAt, &j.ExpiresAt, &j.FinishedAt, &j.CreatedAt}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return out, err
		}
		out = append(out, jobRow(j))
	}
	return out, rows.Err()
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

// extendSkipLocked moves the leases of the rows that refs still hold and
// no other transaction holds locked (updateLocked with skipLocked) and
// returns their ids. ExtendLeases' count tells nothing (countUnknown):
// MySQL counts only the rows whose values changed, and a lease renewed
// within the same second keeps its value, while the rows locked are known
// to hold their jobs.
func (s mysqlStore) extendSkipLocked(ctx context.Context, refs []attemptRef, leaseUntil time.Time) (map[int64]bool, error) {
	return s.updateLocked(ctx, refs, "extending leases", true, func(qs *mysqlgen.Queries, ids []uint64, toks []sql.NullString) (int64, error) {
		_, err := qs.ExtendLeases(ctx, mysqlgen.ExtendLeasesParams{LeaseUntil: nullTime(&leaseUntil), Ids: ids, Tokens: toks})
		return countUnknown, err
	})
}

// lockedUpdate changes the jobs that refs still hold and returns their ids.
// MySQL has no RETURNING, so a batch learns which attempts were stale like
// this: in a short READ COMMITTED transaction it first runs update on all
// refs; when every ref matched (the usual case) it commits. Otherwise it
// rolls back and, in a second transaction, locks the rows the refs still
// hold (LockHeldJobs), updates those and commits (updateLocked).
func (s mysqlStore) lockedUpdate(ctx context.Context, refs []attemptRef, what string, update mysqlUpdate) (map[int64]bool, error) {
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
	return s.updateLocked(ctx, refs, what, false, update)
}

// mysqlUpdate changes the jobs of ids (padded) fenced by toks and returns
// how many rows changed, or countUnknown.
type mysqlUpdate func(qs *mysqlgen.Queries, ids []uint64, toks []sql.NullString) (int64, error)

// countUnknown is what a mysqlUpdate returns whose statement's count tells
// nothing of the rows it matched; updateLocked then does not check it.
const countUnknown = -1

// updateLocked locks, in one READ COMMITTED transaction, the rows that refs
// still hold (LockHeldJobs; with skipLocked LockHeldJobsSkipLocked, which
// leaves alone the rows another transaction holds), runs update on those
// and commits; it returns their ids.
func (s mysqlStore) updateLocked(ctx context.Context, refs []attemptRef, what string, skipLocked bool, update mysqlUpdate) (map[int64]bool, error) {
	ids, toks := refLists(refs)
	return s.inTx(ctx, func(qs *mysqlgen.Queries) (map[int64]bool, bool, error) {
		lock := qs.LockHeldJobs
		if skipLocked {
			lock = func(ctx context.Context, arg mysqlgen.LockHeldJobsParams) ([]uint64, error) {
				return qs.LockHeldJobsSkipLocked(ctx, mysqlgen.LockHeldJobsSkipLockedParams(arg))
			}
		}
		locked, err := lock(ctx, mysqlgen.LockHeldJobsParams{Ids: padIDs(uids(ids)), Tokens: padIDs(mysqlTokens(toks))})
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
		if err == nil && n != countUnknown && n != int64(len(hIDs)) {
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

// complete writes the batch with lockedUpdate; with skipLocked (a write of
// it ran out of time, or its lock wait did) it locks the rows it can
// (updateLocked) and leaves those another transaction holds alone. A
// statement the completer timed out keeps waiting on the server, and keeps
// the rows it locked before the held one, until innodb_lock_wait_timeout:
// go-sql-driver/mysql closes the connection on a cancel and sends no KILL
// QUERY. Those rows are then skipped too, and written once it has ended;
// an innodb_lock_wait_timeout below the completion's 30 s (README, Running
// at scale) ends such a statement in the server instead, its rows free.
// The left-over statement writes nothing, so no KILL QUERY is sent for it:
// it runs in inTx's transaction, which was not committed, and when it ends
// the server finds the connection closed and rolls the transaction back
// (TestMySQLTimedOutCompletionCommitsNothing). Only a COMMIT whose context
// ended may still take effect, and what it writes is this very completion,
// fenced by the attempts' tokens. (extend's and fail's statements, not in a
// transaction, take effect when they end: what they were sent, fenced by
// the tokens, on rows that no other statement could write while they held
// them locked.)
func (s mysqlStore) complete(ctx context.Context, refs []attemptRef, now time.Time, del, skipLocked bool) (map[int64]bool, error) {
	update := func(qs *mysqlgen.Queries, ids []uint64, toks []sql.NullString) (int64, error) {
		if del {
			return qs.DeleteCompletedJobs(ctx, mysqlgen.DeleteCompletedJobsParams{Ids: ids, Tokens: toks})
		}
		return qs.CompleteJobs(ctx, mysqlgen.CompleteJobsParams{Now: nullTime(&now), Ids: ids, Tokens: toks})
	}
	if skipLocked {
		return s.updateLocked(ctx, refs, "completing", true, update)
	}
	return s.lockedUpdate(ctx, refs, "completing", update)
}

func (s mysqlStore) heldAttempts(ctx context.Context, refs []attemptRef) ([]*JobRow, error) {
	ids, toks := refLists(refs)
	rows, err := s.qs().SelectHeldAttempts(ctx, mysqlgen.SelectHeldAttemptsParams{Ids: padIDs(uids(ids)), Tokens: padIDs(mysqlTokens(toks))})
	return jobRows(rows), err
}

func (s mysqlStore) abandoned(ctx context.Context, d dbtx, now time.Time, limit int) ([]*JobRow, error) {
	rows, err := mysqlgen.New(d).SelectAbandoned(ctx, mysqlgen.SelectAbandonedParams{Now: nullTime(&now), Limit: int32(limit)})
	return jobRows(rows), err
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

func (s mysqlStore) unclaim(ctx context.Context, refs []attemptRef) (map[int64]bool, error) {
	return s.lockedUpdate(ctx, refs, "giving back attempts", func(qs *mysqlgen.Queries, ids []uint64, toks []sql.NullString) (int64, error) {
		return qs.UnclaimJobs(ctx, mysqlgen.UnclaimJobsParams{Ids: ids, Tokens: toks})
	})
}

// endAbandoned runs at READ COMMITTED (see readCommitted).
func (s mysqlStore) endAbandoned(ctx context.Context, d dbtx, refs []attemptRef, e attemptEnd, now time.Time) (int64, error) {
	ids, toks := refLists(refs)
	return s.readCommitted(ctx, d, func(qs *mysqlgen.Queries) (int64, error) {
		return qs.EndAbandonedAttempts(ctx, mysqlgen.EndAbandonedAttemptsParams{
			Status: mysqlgen.JobsStatus(e.status), Error: nullString(e.errText),
			RetryAt: nullTime(nullableTime(e.retryAt)), FinishedAt: nullTime(nullableTime(e.finishedAt)),
			Ids: padIDs(uids(ids)), Tokens: padIDs(mysqlTokens(toks)), Untokened: untokened(refs), Now: nullTime(&now),
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
