package queue

// Unique jobs (SPEC section 8). A job enqueued with UniqueKey gets a row in
// the side table <table>_unique (created by migrations.Install): its job id,
// its key, and live_key, which is the key while the job holds it. A unique
// index on live_key is the constraint: one row at a time holds a key, on
// every engine, whatever the number of concurrent enqueuers; no read
// before the write decides it.
//
// A row keeps holding its key after its job finished, until an enqueue of
// the same key finds it no longer live (the rule is liveKey below) and
// lets it go (live_key NULL) to take the key itself. So finishing a job
// costs nothing more, and the jobs table and its statements are untouched:
// jobs without a key never read or write the side table.
//
// A keyed enqueue:
//   - tries to insert the job holding the key (PostgreSQL: one statement,
//     the key row first, with the job's id from the table's sequence;
//     SQLite: one statement into the view <table>_keyed, whose trigger
//     writes the job then the key row, unique_sqlite.go; MySQL, and SQLite
//     when that fails, in a transaction: the job then the key row, the job
//     deleted again when the key row conflicts);
//   - on a conflict reads the holder: live → a duplicate, nothing written;
//     not live → in a transaction it locks the holder's key row and job
//     row, checks again, lets the key go and tries the insert again.
//
// Retry locks the job's key row first and, when another job took the key
// meanwhile, refuses while that job is live; enqueues lock the same rows in
// the same order, so a retried job and a new one never hold one key.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/jobtext"
)

// maxUniqueKeyLen is the longest unique key, in characters (the side
// table's VARCHAR(255)).
const maxUniqueKeyLen = jobtext.MaxUniqueKey

// UniqueKey makes the job unique by key: while a job enqueued with the same
// key is pending or in_progress (or within its UniqueFor period), the
// enqueue writes nothing and returns that job's id with an error wrapping
// ErrDuplicate (a *DuplicateError). Once that job has finished, the key is
// free again. The key is one per table, whatever the job's kind or type
// (put them in the key to scope it); 1 to 255 characters of valid UTF-8.
// It needs the side table <table>_unique, which migrations.Install creates.
func UniqueKey(key string) EnqueueOption {
	return func(o *enqueueOpts) { o.uniqueKey = &key }
}

// UniqueFor keeps the key of UniqueKey taken for d after the job was
// enqueued, whether the job has finished or not (while its row exists: a
// job deleted, pruned or deleted on success frees its key). The period's
// end is rounded up to a whole second, as MySQL stores it. d must not be
// negative; 0 is no period.
func UniqueFor(d time.Duration) EnqueueOption {
	return func(o *enqueueOpts) { o.uniqueFor = &d }
}

// ErrDuplicate is wrapped by the error of an enqueue whose unique key
// another live job holds (nothing was written; the returned id is that
// job's), and of a Retry refused because another live job took the
// retried job's key.
var ErrDuplicate = errors.New("jobqueue: duplicate unique key")

// ErrSideTableMissing is wrapped by the error of a call that needs a side
// table the table was installed without (it predates the feature): run
// migrations.Install (or `jobqueue install`), which adds it. Nothing was
// written.
var ErrSideTableMissing = errors.New("jobqueue: side table missing")

// DuplicateError is the error of an enqueue whose unique key is held by
// the live job ID; errors.Is(err, ErrDuplicate) holds for it.
type DuplicateError struct {
	// Key is the unique key of the enqueue.
	Key string
	// ID is the job that holds the key.
	ID int64
}

// Error says which job holds the key.
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("jobqueue: duplicate unique key %q: job %d holds it (pending, running, or within its UniqueFor period); nothing was enqueued", e.Key, e.ID)
}

// Is makes errors.Is(err, ErrDuplicate) true.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// uniqueKey is a job's key as validated at enqueue.
type uniqueKey struct {
	key       string
	heldUntil time.Time // the end of UniqueFor's period (now without one)
}

// keyRow is a row of the side table: the job holding (or, for jobKey,
// owning) a key.
type keyRow struct {
	jobID     int64
	key       string
	live      bool // live_key is set (jobKey only)
	heldUntil time.Time
}

// resolveUnique checks the unique options and returns the key, or nil
// when none was given.
func resolveUnique(o *enqueueOpts, now time.Time) (*uniqueKey, error) {
	if o.uniqueKey == nil {
		if o.uniqueFor != nil {
			return nil, fmt.Errorf("%w: UniqueFor is given without UniqueKey; give the key too", ErrInvalidJob)
		}
		return nil, nil
	}
	key := *o.uniqueKey
	if key == "" {
		return nil, fmt.Errorf("%w: the unique key is empty; give 1 to %d characters", ErrInvalidJob, maxUniqueKeyLen)
	}
	if p := textProblem(key, maxUniqueKeyLen); p != "" {
		return nil, fmt.Errorf("%w: the unique key %s", ErrInvalidJob, p)
	}
	// Whole seconds, which every engine stores alike (MySQL's DATETIME
	// keeps no fraction: MariaDB truncates it, MySQL rounds it): without
	// a period the key is held until now at the latest, with one for at
	// least the period.
	k := &uniqueKey{key: key, heldUntil: now.Truncate(time.Second)}
	if o.uniqueFor != nil {
		if *o.uniqueFor < 0 {
			return nil, fmt.Errorf("%w: the UniqueFor period %v is negative", ErrInvalidJob, *o.uniqueFor)
		}
		k.heldUntil = ceilSecond(now.Add(*o.uniqueFor))
		if err := checkYear("end of the UniqueFor period", k.heldUntil); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// ceilSecond is t rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); c.Before(t) {
		return c.Add(time.Second)
	}
	return t
}

// liveKey is the rule of a key's life: the key row of a job holds its key
// while the job exists and is pending or in_progress, or UniqueFor's
// period has not ended. status is "" when the job is gone.
func liveKey(status Status, heldUntil, now time.Time) bool {
	switch status {
	case "":
		return false
	case StatusPending, StatusInProgress:
		return true
	}
	return heldUntil.After(now)
}

// uniqueState tells whether the table's side table of unique keys is known
// to exist (checked lazily, and again while it is missing, since Install
// may add it while the queue runs).
type uniqueState struct{ ok atomic.Bool }

// needUnique returns nil when the side table exists, else an error
// wrapping ErrSideTableMissing that says to run Install.
func (q *Queue) needUnique(ctx context.Context) error { return q.needUniqueIn(ctx, nil) }

// needUniqueIn is needUnique for an enqueue in the caller's transaction tx
// (nil: none). With tx the side table is probed in tx, not on the queue's
// pool, which may have no connection to spare while the callers'
// transactions hold them all (a pool with SetMaxOpenConns, a PgBouncer in
// transaction pooling mode whose server connections the callers'
// transactions hold: the probe waited for one of them to end, and each
// caller's ended only after its enqueue).
func (q *Queue) needUniqueIn(ctx context.Context, tx *sql.Tx) error {
	if q.unique.ok.Load() {
		return nil
	}
	var err error
	if tx != nil {
		err = q.probeUniqueIn(ctx, tx)
	} else {
		err = q.st.probeUnique(ctx, q.run.on(nil))
	}
	if err == nil {
		q.unique.ok.Store(true)
		return nil
	}
	if isMissingTable(err) {
		name := q.table.Name
		return fmt.Errorf("%w: table %q has no side table %s_unique for unique keys (it was installed before them); run migrations.Install(ctx, db, %q) or `jobqueue install --table %s`, which adds it and changes nothing else", ErrSideTableMissing, name, name, name, name)
	}
	return fmt.Errorf("jobqueue: checking the side table %s_unique: %w", q.table.Name, err)
}

// probeSavepoint names the savepoint of probeUniqueIn.
const probeSavepoint = "jobqueue_probe_unique"

// probeUniqueIn probes the side table of unique keys in the caller's
// transaction tx, inside a savepoint: a probe that fails (the side table
// is missing) is taken back to it, so that the caller's transaction goes
// on (a failed statement aborts a PostgreSQL transaction; MySQL and SQLite
// end only the statement, and the savepoint costs them nothing more than
// its round trips, on the queue's first keyed enqueue only).
func (q *Queue) probeUniqueIn(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+probeSavepoint); err != nil {
		return fmt.Errorf("set a savepoint in your transaction: %w", err)
	}
	err := q.st.probeUnique(ctx, q.run.onCallers(tx))
	if err != nil {
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+probeSavepoint); rerr != nil {
			return errors.Join(err, fmt.Errorf("and your transaction could not be taken back to before the check (roll it back): %w", rerr))
		}
		return err
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+probeSavepoint); err != nil {
		return fmt.Errorf("release the savepoint in your transaction: %w", err)
	}
	return nil
}

// hasUnique reports whether the side table exists (false on any error: the
// callers only tidy it).
func (q *Queue) hasUnique(ctx context.Context) bool { return q.needUnique(ctx) == nil }

// isUniqueViolation reports the engine's error of a write that a unique
// index refused.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	var se *sqlite.Error
	switch {
	case errors.As(err, &pe):
		return pe.Code == "23505"
	case errors.As(err, &me):
		return me.Number == 1062
	case errors.As(err, &se):
		return se.Code() == sqliteConstraintUnique
	}
	return false
}

// isMissingTable reports the engine's "no such table" error.
func isMissingTable(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &pe):
		return pe.Code == "42P01"
	case errors.As(err, &me):
		return me.Number == 1146
	}
	return err != nil && strings.Contains(err.Error(), "no such table")
}

// maxKeyTries bounds the rounds of one keyed enqueue: each round that does
// not end it saw the key change hands concurrently.
const maxKeyTries = 8

// enqueueKeyed writes job j holding key k, in the caller's transaction tx
// or its own, and returns its id, or the id of the live job holding the
// key with a *DuplicateError.
func (q *Queue) enqueueKeyed(ctx context.Context, tx *sql.Tx, j *newJob, k *uniqueKey, now time.Time) (int64, error) {
	if err := q.needUniqueIn(ctx, tx); err != nil {
		return 0, err
	}
	if tx != nil {
		return q.takeKey(ctx, q.run.onCallers(tx), j, k, now)
	}
	switch q.kind {
	case engine.Postgres:
		// One statement, committed on its own, for a free key.
		id, ok, err := q.st.insertUnique(ctx, q.run.on(nil), j, *k, now)
		if err != nil || ok {
			return id, err
		}
	case engine.SQLite:
		// Likewise, through the view <table>_keyed (unique_sqlite.go).
		id, ok, err := q.insertKeyedView(ctx, j, k, now)
		if err != nil || ok {
			return id, err
		}
	}
	var id int64
	take := func(d dbtx) error {
		var err error
		id, err = q.takeKey(ctx, d, j, k, now)
		return err
	}
	if q.kind == engine.SQLite {
		err := retryTx(ctx, func() error { return q.connTx(ctx, take) })
		return id, err
	}
	err := q.inOwnTx(ctx, take)
	return id, err
}

// takeKey inserts j holding k on d, or finds the live job holding k: when
// the holder is not live any more it locks the holder's rows, checks again
// and lets the key go, then tries again.
func (q *Queue) takeKey(ctx context.Context, d dbtx, j *newJob, k *uniqueKey, now time.Time) (int64, error) {
	for range maxKeyTries {
		id, ok, err := q.st.insertUnique(ctx, d, j, *k, now)
		if err != nil || ok {
			return id, err
		}
		holder, live, err := q.keyHolder(ctx, d, k.key, now, false)
		if err != nil {
			return 0, err
		}
		if holder == 0 {
			continue // the holder went away meanwhile
		}
		if live {
			return holder, &DuplicateError{Key: k.key, ID: holder}
		}
		if holder, live, err = q.keyHolder(ctx, d, k.key, now, true); err != nil {
			return 0, err
		}
		if live {
			return holder, &DuplicateError{Key: k.key, ID: holder}
		}
		if holder != 0 {
			if err := q.st.freeKey(ctx, d, holder); err != nil {
				return 0, err
			}
		}
	}
	return 0, fmt.Errorf("jobqueue: the unique key %q changed hands %d times during the enqueue; try again", k.key, maxKeyTries)
}

// takeBackJob deletes (del) the job id that a keyed enqueue inserted
// before its key row's statement failed with err, and returns err. MySQL
// and SQLite end only the failed statement, not the transaction: in the
// caller's transaction (EnqueueTx, EnqueueManyTx) the job would stay, and a
// caller that commits its own work after the error would commit it without
// its key row. The delete runs even when the context ended (within
// dbCallTimeout); when it fails too, the error says to roll back.
func takeBackJob(ctx context.Context, id int64, err error, del func(context.Context) error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbCallTimeout)
	defer cancel()
	if derr := del(dctx); derr != nil {
		return errors.Join(err, fmt.Errorf("and the job (id %d) written before it could not be taken back (roll your transaction back): %w", id, derr))
	}
	return err
}

// keyHolder returns the job holding key (0: none) and whether it is live;
// lock locks the holder's key row and job row until d's transaction ends,
// and reads their latest versions. Without lock, a "live" is final: in a
// caller's transaction it is read locked (MySQL) or checked on the pool
// (PostgreSQL).
func (q *Queue) keyHolder(ctx context.Context, d dbtx, key string, now time.Time, lock bool) (int64, bool, error) {
	h, found, err := q.st.keyHolder(ctx, d, key, lock)
	if err != nil || !found {
		return 0, false, err
	}
	// A caller's transaction may read the job in a snapshot taken before
	// it ended (REPEATABLE READ, MySQL's default). On MySQL the key row
	// was read locked already (KeyHolderForUpdate), so the job row is
	// read locked too, in the caller's transaction: the latest row, in
	// the order Retry locks them (key row, then job row). Reading it on
	// the queue's pool instead waited, until the context ended, for a
	// connection that the callers' transactions held (a pool whose every
	// connection runs such an EnqueueTx).
	lockJob := lock || d.callers && q.kind == engine.MySQL
	st, err := q.st.holderStatus(ctx, d, h.jobID, lockJob)
	if err != nil {
		return 0, false, err
	}
	live := liveKey(st, h.heldUntil, now)
	if live && !lockJob && d.callers && q.kind == engine.Postgres {
		// PostgreSQL: a caller's transaction at REPEATABLE READ (or
		// SERIALIZABLE) reads a snapshot too, and its locked read of a
		// row changed since would fail: the pool reads the latest row.
		// A job the pool does not see (the caller's own, uncommitted)
		// is not live there, and the locked read that follows a "not
		// live" decides. At READ COMMITTED, the default, the statement
		// above read the latest committed row already; the pool is not
		// asked, since it may have no connection to spare while the
		// callers' transactions hold them all (SetMaxOpenConns, a
		// PgBouncer in transaction pooling mode): the enqueue waited
		// for a connection that only its own end would free. (On
		// SQLite the caller's transaction has written the job already,
		// so it reads the latest rows.)
		latest, err := q.st.(pgStore).readsLatest(ctx, d)
		if err != nil {
			return 0, false, err
		}
		if !latest {
			if st, err = q.st.holderStatus(ctx, q.run.on(nil), h.jobID, false); err != nil {
				return 0, false, err
			}
			live = liveKey(st, h.heldUntil, now)
		}
	}
	return h.jobID, live, nil
}

// retakeTries bounds the transactions of one retryKeyed: each one after
// the first saw another job take the key after its locked read.
const retakeTries = 3

// retryKeyed is Retry on a table with unique keys, in one transaction: a
// job that owns a key takes it again, unless another live job holds it.
//
// The locked read of the key's holder does not see a key row that another
// transaction inserted and has not committed (PostgreSQL, MySQL in READ
// COMMITTED); the retried job's key row then conflicts with it once it
// commits. The transaction is run again, and its read finds that holder.
func (q *Queue) retryKeyed(ctx context.Context, id int64, now time.Time) (bool, error) {
	for try := 1; ; try++ {
		ok, err := q.retryKeyedOnce(ctx, id, now)
		if !isUniqueViolation(err) {
			return ok, err
		}
		if try == retakeTries {
			return false, fmt.Errorf("%w: job %d's unique key was taken by other jobs %d times during the retry; retry it again (it is refused while a live job holds the key): %v", ErrDuplicate, id, try, err)
		}
	}
}

// retryKeyedOnce is one transaction of retryKeyed.
func (q *Queue) retryKeyedOnce(ctx context.Context, id int64, now time.Time) (bool, error) {
	var ok bool
	err := q.inOwnTx(ctx, func(d dbtx) error {
		k, found, err := q.st.jobKey(ctx, d, id)
		if err != nil {
			return err
		}
		if found && !k.live {
			holder, live, err := q.keyHolder(ctx, d, k.key, now, true)
			if err != nil {
				return err
			}
			if live && holder != id {
				return fmt.Errorf("%w: job %d's unique key %q is held by job %d now; retrying it would make two live jobs with the key (retry it once job %d has finished)", ErrDuplicate, id, k.key, holder, holder)
			}
			if holder != 0 && holder != id {
				if err := q.st.freeKey(ctx, d, holder); err != nil {
					return err
				}
			}
		}
		if ok, err = q.retryOn(ctx, d, id, now); err != nil {
			return err
		}
		if !ok {
			return errRollback // not failed or expired: nothing to do
		}
		if found && !k.live {
			return q.st.retakeKey(ctx, d, id)
		}
		return nil
	})
	if errors.Is(err, errRollback) {
		return false, nil
	}
	return ok, err
}

// tidyKeys deletes the key rows of deleted jobs (their keys are free
// already: a key whose job is gone is not live); a failure is logged.
func (q *Queue) tidyKeys(ctx context.Context, ids []int64) {
	if len(ids) == 0 || !q.hasUnique(ctx) {
		return
	}
	for start := 0; start < len(ids); start += controlBatch {
		if err := q.st.deleteKeys(ctx, ids[start:min(len(ids), start+controlBatch)]); err != nil {
			q.logger.Warn("deleting the unique keys of deleted jobs failed; Prune deletes them later", "err", err)
			return
		}
	}
}

// pruneKeys deletes key rows whose jobs are gone (pruned, deleted on
// success) and returns how many. It examines one window of at most
// MaintenanceBatch key rows (q.batchSize in tests) in job_id order,
// starting after q.keyCursor, and deletes the orphans among them; the
// cursor then moves past the window, and back to 0 once the window
// reaches the end of the key table, where the pass goes on from the first
// key with what is left of the window. So a pass never reads the whole key
// table (a backlog of a million live unique jobs costs a pass one window,
// not a million rows), and an orphan is found within
// ceil(keys/window)+1 passes. A window made only of orphans (after a
// large Prune or Purge) lets the pass go on with a new window, as a full
// batch does for Prune's own statements.
func (q *Queue) pruneKeys(ctx context.Context, f *termFence) (int64, error) {
	if !q.hasUnique(ctx) {
		return 0, nil
	}
	window := q.batchSize
	if window <= 0 {
		window = MaintenanceBatch
	}
	var total int64
	budget := window
	for {
		after := q.keyCursor.Load()
		var seen int
		var n, last int64
		err := q.leaderAct(ctx, f, func(d dbtx) error {
			var err error
			n = 0
			seen, last, err = q.st.keyWindow(ctx, d, after, budget)
			if err != nil || seen == 0 {
				return err
			}
			n, err = q.st.deleteOrphanKeys(ctx, d, after, last)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		q.keyCursor.Store(last)
		if seen < budget {
			// The end of the key table: start again from the first key,
			// in this pass with what is left of the window.
			q.keyCursor.Store(0)
			budget -= seen
			if after == 0 || budget == 0 {
				return total, nil
			}
			continue
		}
		if n < int64(seen) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		budget = window
	}
}
