package queue

import (
	"context"
	"errors"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestUniqueKeyClientFoundRows: on a MySQL pool opened with
// clientFoundRows=true (the driver then counts the rows an UPDATE found,
// not those it changed, also in INSERT … ON DUPLICATE KEY UPDATE), a keyed
// enqueue of a key a live job holds is still a duplicate of that job and
// writes nothing, whichever way it is enqueued.
func TestUniqueKeyClientFoundRows(t *testing.T) {
	env := newTestEnv(t, engine.MySQL)
	ctx := context.Background()
	db := env.newPoolWith(t, "clientFoundRows=true")
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()))
	cases := []struct {
		name    string
		enqueue func(t *testing.T, key string) (id int64, dup bool)
	}{
		{"Enqueue", func(t *testing.T, key string) (int64, bool) {
			id, err := q.Enqueue(ctx, testArgs{}, UniqueKey(key))
			if err != nil && !errors.Is(err, ErrDuplicate) {
				t.Fatal(err)
			}
			return id, errors.Is(err, ErrDuplicate)
		}},
		{"EnqueueTx", func(t *testing.T, key string) (int64, bool) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := q.EnqueueTx(ctx, tx, testArgs{}, UniqueKey(key))
			if err != nil && !errors.Is(err, ErrDuplicate) {
				tx.Rollback()
				t.Fatal(err)
			}
			if cerr := tx.Commit(); cerr != nil {
				t.Fatal(cerr)
			}
			return id, errors.Is(err, ErrDuplicate)
		}},
		{"EnqueueMany", func(t *testing.T, key string) (int64, bool) {
			n, err := q.EnqueueMany(ctx, []JobArgs{WithOptions(testArgs{}, UniqueKey(key))})
			if err != nil {
				t.Fatal(err)
			}
			return 0, n == 0
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := "found-rows-" + c.name
			first, err := q.Enqueue(ctx, testArgs{}, UniqueKey(key))
			if err != nil {
				t.Fatal(err)
			}
			before := rowCount(t, env)
			id, dup := c.enqueue(t, key)
			if !dup || (c.name != "EnqueueMany" && id != first) {
				t.Errorf("second enqueue of the live key %q = %d (duplicate %v); want a duplicate of %d", key, id, dup, first)
			}
			if after := rowCount(t, env); after != before {
				t.Errorf("the duplicate wrote %d jobs", after-before)
			}
		})
	}
}
