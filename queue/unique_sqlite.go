package queue

// The one-statement keyed enqueue on SQLite: an insert into the view
// <table>_keyed (internal/ddl keyedView), whose INSTEAD OF trigger writes
// the job and its key row. SQLite runs a statement all or nothing, so
// the key row's unique index still decides alone which job holds a key;
// the statement only saves the transaction of four statements
// (BEGIN IMMEDIATE, job, key row, COMMIT) that a keyed enqueue of a free
// key otherwise takes. A key that is held, or a table installed before
// the view (Install adds it), falls back to that transaction (takeKey).

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/jobqueue/jobqueue/db/sqlitegen"
)

// sqliteConstraintUnique is SQLite's extended result code of a unique
// index violation.
const sqliteConstraintUnique = 2067

// keyedViewRecheck is how long a Queue that found no <table>_keyed view
// waits before it looks for it again (Install may add it meanwhile).
const keyedViewRecheck = time.Minute

// keyedView remembers when the table was last found without its view
// <table>_keyed (0: not found missing).
type keyedView struct{ missingSince atomic.Int64 }

// insertKeyedView inserts j holding the free key k in one statement and
// returns its id with ok; ok is false, with no error and nothing written,
// when the key is held or the view is missing: then the caller takes the
// key in a transaction.
func (q *Queue) insertKeyedView(ctx context.Context, j *newJob, k *uniqueKey, now time.Time) (int64, bool, error) {
	// A time found missing after now (the wall clock was stepped back)
	// does not put the next look off.
	if m := q.keyedView.missingSince.Load(); m != 0 {
		if since := now.Sub(time.Unix(0, m)); since >= 0 && since < keyedViewRecheck {
			return 0, false, nil
		}
	}
	arg := sqlitegen.InsertKeyedParams{
		Name: j.name, Type: j.typ, Payload: string(j.payload),
		MaxAttempts: j.maxAttempts, BaseDelay: j.baseDelay, MaxDelay: j.maxDelay,
		ScheduledAt: j.scheduledAt, ExpiresAt: nullTime(j.expiresAt), CreatedAt: now,
		UniqueKey: k.key, HeldUntil: k.heldUntil,
	}
	id, err := busyRetry(ctx, func() (int64, error) { return sqlitegen.New(q.run.on(nil)).InsertKeyed(ctx, arg) })
	var se *sqlite.Error
	switch {
	case err == nil:
		q.keyedView.missingSince.Store(0)
		return id, true, nil
	case errors.As(err, &se) && se.Code() == sqliteConstraintUnique:
		return 0, false, nil // held: nothing was written
	case isMissingTable(err):
		q.keyedView.missingSince.Store(now.UnixNano())
		return 0, false, nil
	}
	return 0, false, err
}
