package queue

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestKeyedEnqueueTxNeedsNoSecondConnection: the first keyed enqueue of a
// queue in the caller's transaction (EnqueueTx, EnqueueManyTx) checks that
// the side table of unique keys exists in that transaction, not on another
// connection of the pool, which may have none to spare: here the pool
// holds one connection, as a PgBouncer in transaction pooling mode with
// every server connection in the callers' transactions does. On
// PostgreSQL (behind PgBouncer or with SetMaxOpenConns) and SQLite the
// check waited for a second connection that the caller's transaction
// kept busy: the enqueue hung until its context ended. A missing side
// table still says to run Install, and the caller's transaction stays
// usable (on PostgreSQL the failed check is taken back to a savepoint).
// Likewise a key held by a live job: on PostgreSQL the holder's status was
// read again on the pool (for a caller's transaction at REPEATABLE READ,
// whose snapshot may be older than the holder's end), and so the
// duplicate hung too; at READ COMMITTED, the default, the caller's
// transaction reads the latest row itself.
func TestKeyedEnqueueTxNeedsNoSecondConnection(t *testing.T) {
	cases := []struct {
		name    string
		enqueue func(ctx context.Context, q *Queue, tx *sql.Tx) error
	}{
		{"EnqueueTx", func(ctx context.Context, q *Queue, tx *sql.Tx) error {
			_, err := q.EnqueueTx(ctx, tx, testArgs{N: 1}, UniqueKey("k"))
			return err
		}},
		{"EnqueueManyTx", func(ctx context.Context, q *Queue, tx *sql.Tx) error {
			_, err := q.EnqueueManyTx(ctx, tx, []JobArgs{WithOptions(testArgs{N: 1}, UniqueKey("k")), testArgs{N: 2}})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			forEachEngine(t, func(t *testing.T, kind engine.Kind) {
				for _, state := range []string{"present", "missing", "held"} {
					env := newTestEnv(t, kind)
					if state == "missing" {
						env.exec(t, ddl.DropTable(ddl.Side(env.tbl, "unique")))
					}
					db := env.newPool(t)
					db.SetMaxOpenConns(1)
					q := env.queue(t, db, WithLogger(testdb.QuietLogger()))
					if state == "held" {
						enqueue(t, q, testArgs{N: 0}, UniqueKey("k"))
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					err = c.enqueue(ctx, q, tx)
					var want error
					switch {
					case state == "missing":
						want = ErrSideTableMissing
					case state == "held" && c.name == "EnqueueTx":
						want = ErrDuplicate
					}
					if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
						tx.Rollback()
						t.Fatalf("side table %s: %s in a transaction of a pool of one connection: %v; want %v", state, c.name, err, want)
					}
					// The caller's transaction goes on.
					if _, err := q.EnqueueTx(ctx, tx, testArgs{N: 3}); err != nil {
						tx.Rollback()
						t.Fatalf("side table %s: a plain EnqueueTx after the keyed one: %v", state, err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}
