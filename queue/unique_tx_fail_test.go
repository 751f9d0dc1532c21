package queue

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestUniqueTxKeyWriteFails: on MySQL a keyed enqueue in the caller's
// transaction writes the job, then its key row. When the key row's insert
// fails (here: it waits for another transaction's uncommitted row of the
// same key longer than innodb_lock_wait_timeout, which ends that statement
// alone, not the transaction), the enqueue reports the error and must leave
// nothing in the caller's transaction: a caller that commits its own work
// after the error committed the job without its key row, a second live job
// of the key once the other transaction commits. Both EnqueueTx and
// EnqueueManyTx of one keyed job took that path (EnqueueManyTx sets a
// savepoint only for several jobs).
func TestUniqueTxKeyWriteFails(t *testing.T) {
	ctx := context.Background()
	env := coreEnv(t, engine.MySQL)
	q, _ := coreQueue(t, env)
	other := env.newPool(t) // its sessions wait 1 s for a lock
	cases := []struct {
		name    string
		enqueue func(tx *sql.Tx, key string) error
	}{
		{"EnqueueTx", func(tx *sql.Tx, key string) error {
			_, err := q.EnqueueTx(ctx, tx, testArgs{N: 2}, UniqueKey(key), Type("second"))
			return err
		}},
		{"EnqueueManyTx", func(tx *sql.Tx, key string) error {
			_, err := q.EnqueueManyTx(ctx, tx, []JobArgs{testArgs{N: 2}}, UniqueKey(key), Type("second"))
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env.emptyTable(t)
			key := "held-" + c.name
			first, err := env.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Rollback()
			if _, err := q.EnqueueTx(ctx, first, testArgs{N: 1}, UniqueKey(key)); err != nil {
				t.Fatal(err)
			}
			second, err := other.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer second.Rollback()
			if _, err := second.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
				t.Fatal(err)
			}
			err = c.enqueue(second, key)
			if err == nil || errors.Is(err, ErrDuplicate) {
				t.Fatalf("the enqueue whose key row waited too long = %v; want its error", err)
			}
			// The caller commits its own work after the error.
			if err := second.Commit(); err != nil {
				t.Fatal(err)
			}
			if n := env.countWhere(t, "type = 'second'"); n != 0 {
				t.Errorf("%d jobs committed by the transaction whose enqueue failed, want none", n)
			}
			if err := first.Commit(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
