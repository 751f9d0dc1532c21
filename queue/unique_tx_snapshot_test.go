package queue

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestUniqueTxStaleSnapshot: a caller's transaction that read the table
// before the key's holder finished (MySQL's default REPEATABLE READ keeps
// the snapshot of that first read) must still take the free key in
// EnqueueTx and EnqueueManyTx. The key row is read locked, which sees the
// latest row, but the holder's status was read in the snapshot: the
// holder looked pending, and the enqueue was refused as a duplicate of a
// completed job.
func TestUniqueTxStaleSnapshot(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		cases := []struct {
			name    string
			enqueue func(q *Queue, tx *sql.Tx, key string) (int, error)
		}{
			{"EnqueueTx", func(q *Queue, tx *sql.Tx, key string) (int, error) {
				_, err := q.EnqueueTx(ctx, tx, testArgs{N: 2}, UniqueKey(key))
				if err != nil {
					return 0, err
				}
				return 1, nil
			}},
			{"EnqueueManyTx", func(q *Queue, tx *sql.Tx, key string) (int, error) {
				return q.EnqueueManyTx(ctx, tx, []JobArgs{WithOptions(testArgs{N: 2}, UniqueKey(key))})
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				key := "snapshot-" + c.name
				holder := newKeyed(t, q, key, Type(c.name))
				tx, err := env.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				var n int
				if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+env.tbl.Quoted()).Scan(&n); err != nil {
					t.Fatal(err)
				}
				completeJob(t, q, c.name) // after the transaction's first read
				if written, err := c.enqueue(q, tx, key); err != nil || written != 1 {
					t.Fatalf("%s of key %q after its holder %d completed = %d written, %v; want the job written", c.name, key, holder, written, err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if id, dup := enqueueKey(t, q, key); !dup || id == holder {
					t.Fatalf("enqueue of %q after the commit = %d (duplicate %v); want a duplicate of the new job", key, id, dup)
				}
			})
		}
	})
}
