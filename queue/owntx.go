package queue

// Transactions of the queue's own (keyed enqueues, Retry, control
// statements): run again when they fail only because of others.

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// errRollback makes inOwnTx roll back without an error.
var errRollback = errors.New("rollback")

// inOwnTx runs fn in a transaction of the queue's own and commits when it
// returns nil. A deadlock (MySQL) or a busy database (SQLite) runs it
// again, up to ownTxTries times, after a random pause (ownTxPause).
func (q *Queue) inOwnTx(ctx context.Context, fn func(d dbtx) error) error {
	return retryTxWith(ctx, ownTxTries, ownTxPause, func() error { return q.tryTx(ctx, fn) })
}

// ownTxTries bounds the runs of one inOwnTx transaction. Keyed enqueues,
// Retry, Cancel and Delete of the same key deadlock on MySQL/MariaDB
// (InnoDB's gap locks on the side table's unique index: a key row's
// insert against another transaction's FreeKey): under six goroutines on
// one key, five runs 5 to 20 ms apart were seen all to deadlock, each
// run meeting the same rivals again, and the caller got error 1213.
const ownTxTries = 20

// ownTxPause is the pause before run try+1 of an inOwnTx transaction: a
// random time up to 2 ms doubled per run, at most 160 ms, so that the
// transactions that deadlocked do not all start again together.
func ownTxPause(try int) time.Duration {
	ceiling := min(2*time.Millisecond<<(try-1), 160*time.Millisecond)
	return ceiling/4 + rand.N(ceiling*3/4)
}

// retryTx runs tx, a whole transaction, and runs it again (up to 5 times,
// with a short growing pause) while it fails only because of others: a
// MySQL deadlock (also a Galera certification conflict, reported the
// same way), a PostgreSQL deadlock, or SQLite busy. Any other error, or ctx ending, returns at once.
func retryTx(ctx context.Context, tx func() error) error {
	return retryTxWith(ctx, 5, func(try int) time.Duration { return time.Duration(try) * 5 * time.Millisecond }, tx)
}

// retryTxWith is retryTx with at most tries runs and pause(try) between
// run try and the next.
func retryTxWith(ctx context.Context, tries int, pause func(try int) time.Duration, tx func() error) error {
	var err error
	for try := 1; ; try++ {
		err = tx()
		if err == nil || try == tries || !retryableTx(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause(try))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// tryTx runs fn once in a transaction at the session's isolation level:
// asking MySQL for READ COMMITTED costs a round trip of its own (SET
// TRANSACTION before START TRANSACTION), a third of a keyed enqueue's, and
// is not needed: every read of the key rows and of a holder's job row that
// decides something locks, so it sees the latest committed rows at any
// level. A deadlock that REPEATABLE READ's gap locks may cause is retried
// by inOwnTx.
func (q *Queue) tryTx(ctx context.Context, fn func(d dbtx) error) error {
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(q.run.on(tx)); err != nil {
		return err
	}
	return tx.Commit()
}

// connTx runs fn once in a transaction on one connection of the pool,
// begun and ended by BEGIN IMMEDIATE and COMMIT rather than by a
// database/sql Tx (SQLite only: its keyed enqueue). On a loaded machine
// it measured about a third cheaper than the same statements in a Tx,
// which is most of what a keyed enqueue costs over a plain one
// (BenchmarkEnqueueUnique). IMMEDIATE takes the write lock at once, so
// the transaction never has to upgrade a read lock (a busy error then is
// retried as a whole by retryTx). When fn or COMMIT fails it rolls back,
// even when ctx has ended; a connection that cannot be rolled back is
// discarded, never handed back to the pool inside a transaction.
func (q *Queue) connTx(ctx context.Context, fn func(d dbtx) error) error {
	return q.run.connTx(ctx, fn)
}

// connTx is Queue.connTx on r's pool (SQLite's Cancel runs it too).
func (r *runner) connTx(ctx context.Context, fn func(d dbtx) error) (err error) {
	c, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err = fn(r.onConn(c)); err == nil {
		if _, err = c.ExecContext(ctx, "COMMIT"); err == nil {
			return nil
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), newTimeout)
	defer cancel()
	if _, rerr := c.ExecContext(rctx, "ROLLBACK"); rerr != nil {
		spoilConn(c) // closed, not handed back, when the deferred Close runs
	}
	return err
}

// retryableTx reports a transaction that failed only because of others:
// a deadlock (MySQL's 1213, PostgreSQL's 40P01: the server rolled the
// transaction back), or SQLite busy.
func retryableTx(err error) bool {
	var pgErr *pgconn.PgError
	return isMySQLError(err, 1213) || isSQLiteBusy(err) || (errors.As(err, &pgErr) && pgErr.Code == "40P01")
}

// lockWaitEnded reports a statement that the server ended because it
// waited too long for a row lock: MySQL's innodb_lock_wait_timeout (error
// 1205) or PostgreSQL's lock_timeout (SQLSTATE 55P03), when the pool's
// sessions set them.
func lockWaitEnded(err error) bool {
	var pgErr *pgconn.PgError
	return isMySQLError(err, 1205) || (errors.As(err, &pgErr) && pgErr.Code == "55P03")
}

// isMySQLError reports whether err is (or wraps) the MySQL server error
// number.
func isMySQLError(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}
