package queue

import (
	"context"
	"errors"
	"testing"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestKeyedEnqueueEndsItsTransaction: on SQLite a keyed enqueue runs in a
// transaction on one pool connection (connTx) that must end whatever
// happens, committed or rolled back (a duplicate rolls back), before the
// connection goes back to the pool. With a pool of one connection, a
// connection left inside a transaction would make the next statements
// fail (no transaction within a transaction) or stay invisible to other
// connections.
func TestKeyedEnqueueEndsItsTransaction(t *testing.T) {
	env := newTestEnv(t, engine.SQLite)
	pool := env.newPool(t)
	pool.SetMaxOpenConns(1)
	q := env.queue(t, pool, WithLogger(testdb.QuietLogger()))
	ctx := context.Background()
	steps := []struct {
		name string
		opts []EnqueueOption
		dup  bool
	}{
		{name: "keyed", opts: []EnqueueOption{UniqueKey("k")}},
		{name: "duplicate rolls back", opts: []EnqueueOption{UniqueKey("k")}, dup: true},
		{name: "plain after the rollback", opts: nil},
		{name: "another key after the rollback", opts: []EnqueueOption{UniqueKey("k2")}},
	}
	for i, s := range steps {
		_, err := q.Enqueue(ctx, seqArgs{N: i}, s.opts...)
		if got := errors.Is(err, ErrDuplicate); got != s.dup || (err != nil && !s.dup) {
			t.Fatalf("%s: Enqueue = %v; want duplicate %v", s.name, err, s.dup)
		}
	}
	// env.db is another pool: it sees only committed rows.
	if n := env.countWhere(t, "1 = 1"); n != 3 {
		t.Fatalf("another connection sees %d jobs; want 3 committed", n)
	}
}
