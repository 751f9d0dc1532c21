package queue

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestHeartbeatLeavesLockedRowsAlone: an application's transaction holds
// the row of one running job (SELECT … FOR UPDATE left open) through
// several heartbeats. The worker's other running jobs still have their
// leases renewed and their handlers run to the end; only the held job's
// lease waits. The renewal of the whole batch waited for the held row
// until it ran out of time, every heartbeat, so every running handler of
// the worker was cancelled once its lease neared its end (errLeaseRanOut)
// and its job left to run again. On MySQL the URL sets
// innodb_lock_wait_timeout (README, Running at scale), so the server ends
// the wait; on PostgreSQL the statement sets its own lock_timeout
// (rowLockWait). Before it did, the statement's time ran out, and with
// the held row the last (in id order) it kept the others' rows, locked on
// its way, until pgx's cancel request landed: never without cancel
// requests (behind PgBouncer), so the renewal that leaves locked rows
// alone skipped them too, every heartbeat ("postgres, held last, no cancel
// request" failed: the others' handlers cancelled).
func TestHeartbeatLeavesLockedRowsAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kind     engine.Kind
		heldLast bool // the held job has the highest id, else the lowest
		noCancel bool // pgx sends no cancel requests (PgxWithoutCancelRequests)
	}{
		{name: "postgres, held first", kind: engine.Postgres},
		{name: "postgres, held last", kind: engine.Postgres, heldLast: true},
		{name: "postgres, held last, no cancel request", kind: engine.Postgres, heldLast: true, noCancel: true},
		{name: "mysql, held first", kind: engine.MySQL},
		{name: "mysql, held last", kind: engine.MySQL, heldLast: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testHeartbeatLeavesLockedRowsAlone(t, tc.kind, tc.heldLast, tc.noCancel)
		})
	}
}

// testHeartbeatLeavesLockedRowsAlone is one case of
// TestHeartbeatLeavesLockedRowsAlone.
func testHeartbeatLeavesLockedRowsAlone(t *testing.T, kind engine.Kind, heldLast, noCancel bool) {
	ctx := context.Background()
	env := newTestEnv(t, kind)
	db := env.db
	if kind == engine.MySQL {
		db = testdb.OpenURL(t, env.urlWith(t, "innodb_lock_wait_timeout", "1"))
	}
	if noCancel {
		cfg, err := pgx.ParseConfig(env.url)
		if err != nil {
			t.Fatal(err)
		}
		PgxWithoutCancelRequests(cfg)
		db = stdlib.OpenDB(*cfg)
		t.Cleanup(func() { db.Close() })
	}
	logs := &testdb.LogRecorder{}
	q := env.queue(t, db, WithLogger(slog.New(logs)))
	var held int64
	if !heldLast {
		held = enqueue(t, q, emailArgs{To: "held"})
	}
	others := []int64{enqueue(t, q, emailArgs{To: "b"}), enqueue(t, q, emailArgs{To: "c"})}
	if heldLast {
		held = enqueue(t, q, emailArgs{To: "held"})
	}
	var mu sync.Mutex
	cancelled := map[string]error{}
	running := make(chan struct{}, 3)
	release := make(chan struct{})
	w := q.NewWorker(WorkerConfig{Concurrency: 3, Lease: 6 * time.Second, HeartbeatInterval: 1500 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, MaintenanceInterval: -1, PollOnly: true})
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
		running <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			mu.Lock()
			cancelled[job.Args.To] = context.Cause(ctx)
			mu.Unlock()
			return ctx.Err()
		}
	})
	stop, _ := startWorker(t, w)
	for range 3 {
		waitFor(t, running, 10*time.Second, "the three jobs to run")
	}
	leaseOf := func(id int64) time.Time {
		j := getJob(t, q, id)
		if j.LeaseUntil == nil {
			return time.Time{}
		}
		return *j.LeaseUntil
	}
	before := map[int64]time.Time{}
	for _, id := range others {
		before[id] = leaseOf(id)
	}
	tx, err := env.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := tx.QueryRowContext(ctx, env.sql("SELECT id FROM {t} WHERE id = ? FOR UPDATE"), held).Scan(&got); err != nil {
		t.Fatal(err)
	}
	// Two renewals of the others past the one before the lock (a
	// renewal moves a lease by at least a second: MySQL keeps whole
	// seconds), or a handler of theirs cancelled.
	waitUntil(t, 30*time.Second, "the other jobs' leases renewed twice while the row is held, or their handlers cancelled", func() bool {
		mu.Lock()
		n := len(cancelled)
		mu.Unlock()
		if n > 0 && (cancelled["b"] != nil || cancelled["c"] != nil) {
			return true
		}
		for _, id := range others {
			if !leaseOf(id).After(before[id].Add(2 * time.Second)) {
				return false
			}
		}
		return true
	})
	if err := tx.Rollback(); err != nil && err != sql.ErrTxDone {
		t.Fatal(err)
	}
	close(release)
	waitUntil(t, 20*time.Second, "the other jobs to complete, or be cancelled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return cancelled["b"] != nil || cancelled["c"] != nil ||
			getJob(t, q, others[0]).Status == StatusCompleted && getJob(t, q, others[1]).Status == StatusCompleted
	})
	if err := stop(10 * time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"b", "c"} {
		if err := cancelled[k]; err != nil {
			t.Errorf("the handler of job %s, whose row nobody held, was cancelled: %v; logs: %q", k, err, logs.Lines(slog.LevelWarn))
		}
	}
	for _, id := range others {
		if st := getJob(t, q, id).Status; st != StatusCompleted {
			t.Errorf("job %d is %s, want completed", id, st)
		}
	}
}
