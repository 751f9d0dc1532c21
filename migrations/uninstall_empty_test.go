package migrations_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
	"github.com/jobqueue/jobqueue/queue"
)

// TestUninstallEmpty: UninstallEmpty refuses a table that holds jobs with
// a *JobsHeldError counting them per status and drops nothing; once the
// table is empty it drops it and its side tables; a missing table is no
// error. With a pool of one connection (MySQL: the same session runs the
// next statement), the session is left usable after a refusal, with no
// table lock held.
func TestUninstallEmpty(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		for _, conns := range []int{0, 1} {
			// A table lock left held would make the statements after
			// it wait (MySQL's lock_wait_timeout is a year): fail
			// instead.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db := testdb.OpenURL(t, e.URL)
			db.SetMaxOpenConns(conns)
			name := e.Table(t)
			if err := migrations.Install(ctx, db, name); err != nil {
				t.Fatal(err)
			}
			// A table of the application's, which no lock of the
			// uninstall's names.
			other := "o_" + name
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+other+" (id INT)"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { testdb.Drop(t, e.DB, other) })
			q, err := queue.New(db, queue.WithTable(name), queue.WithLogger(testdb.QuietLogger()))
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for range 3 {
				id, err := q.Enqueue(ctx, emailJob{To: "a@example.com"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			if err := q.Cancel(ctx, ids[0]); err != nil {
				t.Fatal(err)
			}

			err = migrations.UninstallEmpty(ctx, db, name)
			var held *migrations.JobsHeldError
			if !errors.As(err, &held) || !errors.Is(err, migrations.ErrTableHoldsJobs) {
				t.Fatalf("UninstallEmpty of a table with jobs = %v; want a *JobsHeldError", err)
			}
			want := []migrations.StatusCount{{Status: "pending", Jobs: 2}, {Status: "failed", Jobs: 1}}
			if diff := cmp.Diff(want, held.Counts); diff != "" || held.Total() != 3 {
				t.Fatalf("counts (-want +got):\n%s", diff)
			}
			// Nothing was dropped, and the session is usable.
			if err := migrations.Check(ctx, db, name); err != nil {
				t.Fatalf("Check after the refusal: %v", err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+other).Scan(&n); err != nil {
				t.Fatalf("reading another table after the refusal: %v", err)
			}
			stats, err := q.Stats(ctx, "")
			if err != nil || stats[queue.StatusPending] != 2 {
				t.Fatalf("Stats after the refusal = %v, %v; want the 2 pending jobs", stats, err)
			}

			if _, err := q.DeleteMany(ctx, ids); err != nil {
				t.Fatal(err)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if err := migrations.UninstallEmpty(ctx, db, name); err != nil {
				t.Fatalf("UninstallEmpty of an empty table: %v", err)
			}
			tbl, err := engine.ParseTable(e.Kind, name)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range ddl.Objects(tbl) {
				if _, err := db.ExecContext(ctx, "SELECT 1 FROM "+o.Table.Quoted()+" WHERE 1 = 0"); o.Drop != "" && err == nil {
					t.Errorf("%s %s is still there after UninstallEmpty", o.Kind, o.Name)
				}
			}
			if err := migrations.UninstallEmpty(ctx, db, name); err != nil {
				t.Errorf("UninstallEmpty of a missing table: %v", err)
			}
		}
	})
}
