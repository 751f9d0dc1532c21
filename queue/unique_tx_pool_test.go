package queue

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestEnqueueTxDuplicateFullPool: on MySQL, an EnqueueTx or EnqueueManyTx
// of a key a live job holds, in a caller's transaction that holds the
// pool's only connection, answers the duplicate. The holder's status (and,
// for a queue that has not checked it yet, the side table) was read on the
// queue's pool, which had no connection to give: the enqueue waited until
// its context ended.
func TestEnqueueTxDuplicateFullPool(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.MySQL)
	ctx := context.Background()
	cases := []struct {
		name    string
		checked bool // the queue has checked the side table before
		enqueue func(ctx context.Context, q *Queue, tx *sql.Tx, key string) (written int, err error)
	}{
		{"EnqueueTx", true, func(ctx context.Context, q *Queue, tx *sql.Tx, key string) (int, error) {
			if _, err := q.EnqueueTx(ctx, tx, testArgs{N: 2}, UniqueKey(key)); err != nil {
				return 0, err
			}
			return 1, nil
		}},
		{"EnqueueManyTx", true, func(ctx context.Context, q *Queue, tx *sql.Tx, key string) (int, error) {
			return q.EnqueueManyTx(ctx, tx, []JobArgs{WithOptions(testArgs{N: 2}, UniqueKey(key))})
		}},
		{"EnqueueTx first keyed call", false, func(ctx context.Context, q *Queue, tx *sql.Tx, key string) (int, error) {
			if _, err := q.EnqueueTx(ctx, tx, testArgs{N: 2}, UniqueKey(key)); err != nil {
				return 0, err
			}
			return 1, nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := env.newPool(t)
			pool.SetMaxOpenConns(1)
			q := env.queue(t, pool, WithLogger(testdb.QuietLogger()))
			key := "full-pool-" + c.name
			holder := newKeyed(t, q, key)
			q.unique.ok.Store(c.checked)
			tx, err := pool.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			// The bound only ends a wait that never would: the answer
			// takes milliseconds.
			bounded, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			written, err := c.enqueue(bounded, q, tx, key)
			var dup *DuplicateError
			switch {
			case c.name == "EnqueueManyTx":
				// EnqueueManyTx skips a duplicate: nothing written, no error.
				if err != nil || written != 0 {
					t.Fatalf("EnqueueManyTx of a key job %d holds, on a full pool = %d written, %v; want the duplicate skipped", holder, written, err)
				}
			case !errors.As(err, &dup) || dup.ID != holder:
				t.Fatalf("%s of a key job %d holds, on a full pool = %v; want a duplicate of %d", c.name, holder, err, holder)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
