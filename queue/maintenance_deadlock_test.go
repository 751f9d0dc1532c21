package queue

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestManualMaintenanceRetriesDeadlock (MySQL/MariaDB): ExpireOverdue and
// Prune called by hand (the CLI's expire and prune, the dashboard's
// buttons) that lose a deadlock run their statement again, as the
// leader's maintenance does, and end with every due row done; the caller
// gets no error 1213. A deadlock is how InnoDB ends one of two
// transactions that wait on each other, and how a Galera node reports a
// certification conflict, which a statement in an explicit transaction
// (each batch of these runs in one, at READ COMMITTED) is not retried for
// by the server. Here an application's transaction, heavier than the
// batch (it changed more rows first), holds job b while the batch, having
// changed job a, waits for it, then asks for a: InnoDB rolls the batch
// back. Before, ExpireOverdue and Prune returned the deadlock to the
// caller.
func TestManualMaintenanceRetriesDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		// due makes jobs a and b due for the operation.
		due string
		run func(q *Queue) (int64, error)
	}{
		{"expire", "UPDATE {t} SET expires_at = ? WHERE id IN (?, ?)",
			func(q *Queue) (int64, error) { return q.ExpireOverdue(ctx) }},
		{"prune", "UPDATE {t} SET status = 'completed', finished_at = ? WHERE id IN (?, ?)",
			func(q *Queue) (int64, error) { return q.Prune(ctx, time.Hour) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, engine.MySQL)
			q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
			a, b := enqueue(t, q, testArgs{N: 1}), enqueue(t, q, testArgs{N: 2})
			heavy := make([]JobArgs, 50)
			for i := range heavy {
				heavy[i] = testArgs{N: 10 + i}
			}
			if _, err := q.EnqueueMany(ctx, heavy); err != nil {
				t.Fatal(err)
			}
			env.exec(t, c.due, time.Now().UTC().Add(-2*time.Hour), a, b)

			app, err := env.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			if err != nil {
				t.Fatal(err)
			}
			defer app.Rollback()
			if _, err := app.ExecContext(ctx, env.sql("UPDATE {t} SET error = 'mine' WHERE id > ?"), b); err != nil {
				t.Fatal(err)
			}
			var id int64
			if err := app.QueryRowContext(ctx, env.sql("SELECT id FROM {t} WHERE id = ? FOR UPDATE"), b).Scan(&id); err != nil {
				t.Fatal(err)
			}
			type result struct {
				n   int64
				err error
			}
			done := make(chan result, 1)
			go func() {
				n, err := c.run(q)
				done <- result{n, err}
			}()
			waitUntil(t, 10*time.Second, "the batch to wait for job b", func() bool {
				n, err := mysqlLockWaits(ctx, env.db, env.table)
				if err != nil {
					t.Fatal(err)
				}
				return n > 0
			})
			// Job a, which the batch changed: a deadlock, the batch its victim.
			if err := app.QueryRowContext(ctx, env.sql("SELECT id FROM {t} WHERE id = ? FOR UPDATE"), a).Scan(&id); err != nil {
				t.Fatalf("the application's lock of job a: %v", err)
			}
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
			r := waitFor(t, done, 30*time.Second, c.name)
			if r.err != nil || r.n != 2 {
				t.Fatalf("%s beside a deadlock: %d, %v; want 2, nil", c.name, r.n, r.err)
			}
			if got := env.countWhere(t, fmt.Sprintf("id IN (%d, %d)", a, b)); c.name == "prune" && got != 0 {
				t.Errorf("%d of jobs a and b are left after prune", got)
			}
		})
	}
}
