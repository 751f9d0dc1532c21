package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/queue"
)

// noArgs is a job of the uninstall tests.
type noArgs struct{}

func (noArgs) Kind() string { return "no_args" }

// TestUninstallKeepsJobEnqueuedMeanwhile: `jobqueue uninstall` (without
// --force) of an empty table while a producer's transaction is enqueueing
// a job in it: the uninstall waits for that transaction, then counts the
// job and refuses, and the job stays. It counted the jobs first, outside
// any lock, and dropped the table once the transaction committed,
// deleting the job its producer had been told was enqueued.
//
// On PostgreSQL and MySQL the test commits once the uninstall is seen
// waiting for the table's lock (after its count, before the fix); on
// SQLite a connection waiting for the write lock cannot be seen, so it
// commits at once, which shows only that the job is never lost there.
func TestUninstallKeepsJobEnqueuedMeanwhile(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		c := cli{db: e.URL, table: e.Table(t)}
		r, q, id := uninstallDuringEnqueue(t, e, c)
		assertOneLineError(t, r, exitFailure, "holds 1 job (1 pending)", "--force")
		if _, err := q.Get(ctx, id); err != nil {
			t.Fatalf("the job enqueued during the uninstall: %v; want it kept", err)
		}
	})
}

// TestUninstallForceCountsJobEnqueuedMeanwhile: `jobqueue uninstall
// --force` of an empty table while a producer's transaction is enqueueing
// a job in it: the uninstall waits for that transaction, then deletes the
// job with the table and says so ("1 job deleted"). It counted the jobs
// first, outside any lock, and printed "0 jobs deleted" for a table it
// dropped with a job in it.
//
// On PostgreSQL and MySQL the test commits once the uninstall is seen
// waiting for the table's lock (after the count outside the lock, before
// the fix); on SQLite a connection waiting for the write lock cannot be
// seen, so it commits at once, which shows only that the figure is right
// there whenever the uninstall runs.
func TestUninstallForceCountsJobEnqueuedMeanwhile(t *testing.T) {
	t.Parallel()
	testdb.ForEachEngine(t, func(t *testing.T, e *testdb.Env) {
		ctx := context.Background()
		c := cli{db: e.URL, table: e.Table(t)}
		r, _, _ := uninstallDuringEnqueue(t, e, c, "--force")
		if r.code != 0 {
			t.Fatalf("uninstall --force: exit %d, stderr %q", r.code, r.stderr)
		}
		if want := "is uninstalled (" + string(e.Kind) + "); 1 job deleted with it"; !strings.Contains(r.stdout, want) {
			t.Errorf("uninstall --force printed %q, want it to contain %q (the job enqueued meanwhile, deleted with the table)", r.stdout, want)
		}
		tbl := parseTable(t, e.Kind, c.table)
		if _, err := e.DB.ExecContext(ctx, "SELECT 1 FROM "+tbl.Quoted()+" WHERE 1 = 0"); err == nil {
			t.Error("the table is still there after uninstall --force")
		}
	})
}

// uninstallDuringEnqueue installs c's table, opens a producer's
// transaction that enqueues a job in it, runs `jobqueue uninstall` with
// args while that transaction is open, and commits it once the uninstall
// is seen waiting for the table's lock (at once on SQLite, where that
// cannot be seen). It returns the uninstall's result, the producer's queue
// (closed at the test's end) and the job's id.
func uninstallDuringEnqueue(t *testing.T, e *testdb.Env, c cli, args ...string) (result, *queue.Queue, int64) {
	t.Helper()
	ctx := context.Background()
	c.ok(t, "install")
	q, err := queue.New(e.DB, queue.WithTable(c.table), queue.WithLogger(testdb.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Error(err)
		}
	})
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	id, err := q.EnqueueTx(ctx, tx, noArgs{})
	if err != nil {
		t.Fatal(err)
	}
	var r result
	done := make(chan struct{})
	go func() {
		defer close(done)
		r = c.run(t, append([]string{"uninstall"}, args...)...)
	}()
	if waiting := lockWaiters(t, e, c.table); waiting != nil {
		testwait.For(t, time.Minute, 10*time.Millisecond, "the uninstall to wait for the table's lock", waiting)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	<-done
	return r, q, id
}

// lockWaiters returns a condition that holds once a session of e's server
// waits for a lock on table, or nil on SQLite, where that cannot be seen.
func lockWaiters(t *testing.T, e *testdb.Env, table string) func() bool {
	tbl := parseTable(t, e.Kind, table)
	var query string
	var arg any
	switch e.Kind {
	case engine.Postgres:
		query, arg = `SELECT COUNT(*) FROM pg_locks WHERE NOT granted AND relation = to_regclass($1)`, tbl.Quoted()
	case engine.MySQL:
		query, arg = `SELECT COUNT(*) FROM information_schema.processlist WHERE state = 'Waiting for table metadata lock' AND db = DATABASE() AND info LIKE CONCAT('%', ?, '%')`, tbl.Name
	default:
		return nil
	}
	return func() bool {
		var n int
		if err := e.DB.QueryRowContext(context.Background(), query, arg).Scan(&n); err != nil {
			t.Errorf("looking for sessions waiting on %s: %v", table, err)
			return true
		}
		return n > 0
	}
}
