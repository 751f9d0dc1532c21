package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestRetryRacesKeyedEnqueue: Retry of a finished job whose key no row
// holds, while a caller's transaction has taken that key (EnqueueTx, not
// yet committed), waits for it; once it commits, Retry is refused with
// ErrDuplicate naming the new holder, as when the holder was committed
// before. On PostgreSQL the locked read of the holder does not see the
// uncommitted key row, the retried job's key row then conflicts with it,
// and Retry returned the raw unique violation (SQLSTATE 23505): an error
// not wrapping ErrDuplicate, which the dashboard answered with a 500.
func TestRetryRacesKeyedEnqueue(t *testing.T) {
	forEachServerEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, _ := coreQueue(t, env)
		// a's key row lets the key go to b; b is deleted with its key row:
		// no row holds the key.
		a := newKeyed(t, q, "k")
		if err := q.Cancel(ctx, a); err != nil {
			t.Fatal(err)
		}
		b := newKeyed(t, q, "k")
		if err := q.Cancel(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := q.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
		tx, err := env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		c, err := q.EnqueueTx(ctx, tx, testArgs{}, UniqueKey("k"))
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			ok  bool
			err error
		}
		done := make(chan result, 1)
		go func() {
			ok, err := q.Retry(ctx, a)
			done <- result{ok, err}
		}()
		// Retry waits for the caller's transaction on a row of the side
		// table.
		side := ddl.Side(env.tbl, "unique").Name
		waiting := "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%" + side + "%' AND pid <> pg_backend_pid()"
		if kind == engine.MySQL {
			// MariaDB lists the waiting locked read neither in innodb_trx
			// nor as a lock wait (its state is "Statistics": the key's row
			// is read while the plan is made), so the processlist is asked
			// for the statement itself.
			waiting = "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE '%KeyHolderForUpdate%' AND info LIKE '%" + side + "%' AND id <> CONNECTION_ID()"
		}
		waitUntil(t, 10*time.Second, "Retry to wait for the caller's transaction", func() bool {
			var n int
			if err := env.db.QueryRowContext(ctx, waiting).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		})
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		r := waitFor(t, done, 10*time.Second, "Retry")
		if r.ok || !errors.Is(r.err, ErrDuplicate) || !strings.Contains(r.err.Error(), fmt.Sprintf("job %d", c)) {
			t.Fatalf("Retry(%d) while job %d took its key = %v, %v; want false and ErrDuplicate naming %d", a, c, r.ok, r.err, c)
		}
		if row := getJob(t, q, a); row.Status != StatusFailed {
			t.Fatalf("the refused Retry changed job %d: %+v", a, row)
		}
		wantDup(t, q, "k", c)
	})
}
