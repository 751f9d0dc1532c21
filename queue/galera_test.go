package queue

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
)

// TestGalera drains 5 000 jobs with three workers, each on another node of
// a three-node MariaDB Galera cluster (multi-primary), each job exactly
// once: claims and completions that lose a certification conflict (error
// 1213 at commit) are run again, never reported as failures. It asserts
// that the nodes had conflicts to retry (certification failures or
// brute-force aborts), that every job ran exactly once and was claimed
// once, that every node sees all of them completed (none lost, none left
// pending or in progress), and that no worker reported a failure or logged
// a warning or an error (a claim that loses a conflict is run again at
// once, logged at debug level only). The same drain by
// three workers on the single MariaDB test server gives the ratio of the
// drain rates (logged, not asserted).
func TestGalera(t *testing.T) {
	t.Parallel()
	const jobs = 5000
	urls := testdb.Galera(t, 3)
	before := galeraConflicts(t, urls)
	galera := drainAcross(t, "galera", urls, jobs)
	conflicts := galeraConflicts(t, urls) - before
	if conflicts == 0 {
		t.Errorf("the drain had no certification conflict nor brute-force abort on any node: nothing was retried, so the test shows nothing about retries; make the drain contend more (more workers per node, fewer jobs per claim)")
	}
	one := testdb.URL(t, engine.MySQL)
	single := drainAcross(t, "single", []string{one, one, one}, jobs)
	t.Logf("%d certification conflicts and brute-force aborts on the nodes, all retried; drain rate of 3 workers × 8: %.0f jobs/s on Galera (3 nodes), %.0f jobs/s on the single MariaDB (Galera/single %.2f)",
		conflicts, galera, single, galera/single)
}

// galeraCaughtUp waits until db's node has applied every write set the
// cluster committed so far (a causal read: wsrep_sync_wait), the DDL of
// another node's install too, and checks that it has table.
func galeraCaughtUp(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		t.Fatalf("SET SESSION wsrep_sync_wait = 1: %v", err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", table).Scan(&n); err != nil {
		t.Fatalf("looking for table %s: %v", table, err)
	}
	if n != 1 {
		t.Fatalf("table %s is not on the node after a causal read, though another node installed it", table)
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 0"); err != nil {
		t.Fatalf("SET SESSION wsrep_sync_wait = 0: %v", err)
	}
}

// galeraConflicts is the sum over the nodes at urls of their certification
// failures and brute-force aborts so far.
func galeraConflicts(t *testing.T, urls []string) int {
	t.Helper()
	conflicts := 0
	for i, u := range urls {
		db := testdb.OpenURL(t, u)
		for _, v := range []string{"wsrep_local_cert_failures", "wsrep_local_bf_aborts"} {
			var name string
			var n int
			if err := db.QueryRow("SHOW STATUS LIKE '"+v+"'").Scan(&name, &n); err != nil {
				t.Fatalf("node %d: SHOW STATUS LIKE '%s': %v", i+1, v, err)
			}
			conflicts += n
		}
	}
	return conflicts
}

// drainAcross installs a table on urls[0], enqueues jobs and drains them
// with one worker (concurrency 8) per URL; it checks that every job ran
// exactly once and was claimed once, that every URL's server sees them all
// completed, that no attempt failed and that no queue logged a warning or
// an error, and returns the drain rate.
func drainAcross(t *testing.T, name string, urls []string, jobs int) float64 {
	t.Helper()
	ctx := context.Background()
	qs := make([]*Queue, len(urls))
	dbs := make([]*sql.DB, len(urls))
	first := testdb.OpenURL(t, urls[0])
	table := testdb.Table(t, first)
	installTestTable(t, first, table)
	for i, u := range urls {
		dbs[i] = first
		if i > 0 {
			dbs[i] = testdb.OpenURL(t, u)
		}
		if u != urls[0] {
			// The table installed on the first node is applied on the
			// others a little later: New on a node without it fails.
			galeraCaughtUp(t, dbs[i], table)
		}
		var failed atomic.Int64
		logs := &testdb.LogRecorder{}
		q, err := New(dbs[i], WithTable(table), WithLogger(slog.New(logs)), WithListener(func(ev Event) {
			if ev.Kind == EventFailed {
				failed.Add(1)
			}
		}))
		if err != nil {
			t.Fatalf("queue.New on %s node %d: %v", name, i+1, err)
		}
		t.Cleanup(func() {
			if err := q.Close(); err != nil {
				t.Errorf("%s node %d: closing the queue: %v", name, i+1, err)
			}
			if n := failed.Load(); n != 0 {
				t.Errorf("%s node %d: %d attempts failed", name, i+1, n)
			}
			// A claim or a completion that loses a conflict is run again
			// (logged at debug level); any warning or error is a failure.
			if l := logs.Lines(slog.LevelWarn); len(l) != 0 {
				t.Errorf("%s node %d: the queue logged %d warnings or errors, want none (a conflict is run again without one): %q", name, i+1, len(l), l)
			}
		})
		qs[i] = q
	}
	// A claim session begins each claim with START TRANSACTION on a Galera
	// node (autocommit on) and takes no claim mutex there (Galera refuses
	// GET_LOCK), and runs with autocommit off and the mutex on a single
	// server (mysqlClaimSession.connect).
	s, err := qs[0].st.(mysqlStore).claimSession(ctx)
	if err != nil || s == nil {
		t.Fatalf("%s: claimSession = %v, %v; want a session", name, s, err)
	}
	if got, want := s.(*mysqlClaimSession).explicitBegin, name == "galera"; got != want {
		t.Errorf("%s: the claim session sends START TRANSACTION: %v, want %v", name, got, want)
	}
	if got, want := s.(*mysqlClaimSession).mutex, name != "galera"; got != want {
		t.Errorf("%s: the claim session takes the claim mutex: %v, want %v", name, got, want)
	}
	s.close()
	for start := 0; start < jobs; start += 1000 {
		batch := make([]JobArgs, min(1000, jobs-start))
		for i := range batch {
			batch[i] = testArgs{N: start + i}
		}
		if _, err := qs[0].EnqueueMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	runs := make(map[int64]int, jobs)
	done := make(chan struct{})
	var finished atomic.Int64
	begin := time.Now()
	for _, q := range qs {
		cfg := fastConfig()
		cfg.Concurrency = 8
		// The leader's statements time out after LeaderLease/5 (1 s by
		// default): while 24 handlers drain on the one server of a loaded
		// 2-core machine, a renewal took longer and was logged as a
		// failure. A longer lease leaves them time; the leader election
		// and its maintenance (every 100 ms) still run on every node.
		cfg.LeaderLease = 30 * time.Second
		w := q.NewWorker(cfg)
		Handle(w, func(ctx context.Context, job *Job[testArgs]) error {
			mu.Lock()
			runs[job.ID]++
			mu.Unlock()
			if finished.Add(1) == int64(jobs) {
				close(done)
			}
			return nil
		})
		startWorker(t, w)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("%d of %d jobs ran within 5 minutes", finished.Load(), jobs)
	}
	want := map[Status]int64{StatusPending: 0, StatusInProgress: 0, StatusCompleted: int64(jobs), StatusFailed: 0, StatusExpired: 0}
	for i, q := range qs {
		// A node applies the others' writes a little later: poll.
		var st map[Status]int64
		var err error
		testwait.Until(t, time.Minute, 10*time.Millisecond, func() bool {
			st, err = q.Stats(ctx, "")
			return err == nil && cmp.Equal(st, want)
		}, func() string {
			return fmt.Sprintf("%s node %d: jobs by status %v (%v) a minute after the drain, want %v", name, i+1, st, err, want)
		})
	}
	rate := float64(jobs) / time.Since(begin).Seconds()
	for i, db := range dbs {
		var claims, rows int64
		if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(attempts), 0), COUNT(*) FROM "+table).Scan(&claims, &rows); err != nil {
			t.Fatalf("%s node %d: reading the attempts: %v", name, i+1, err)
		}
		if claims != int64(jobs) || rows != int64(jobs) {
			t.Errorf("%s node %d: %d rows with %d attempts in all, want %d rows claimed once each", name, i+1, rows, claims, jobs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != jobs {
		t.Errorf("%d distinct jobs ran, want %d", len(runs), jobs)
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
	return rate
}
