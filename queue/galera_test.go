package queue

import (
	"context"
	"database/sql"
	"errors"
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

// galeraTable starts a Galera cluster of three nodes (their URLs), opens a
// pool on each and installs a test table through the first, which every
// node has applied when it returns.
func galeraTable(t *testing.T) (urls []string, dbs []*sql.DB, table string) {
	t.Helper()
	urls = testdb.Galera(t, 3)
	dbs = make([]*sql.DB, len(urls))
	for i, u := range urls {
		dbs[i] = testdb.OpenURL(t, u)
	}
	table = testdb.Table(t, dbs[0])
	installTestTable(t, dbs[0], table)
	for _, db := range dbs[1:] {
		galeraCaughtUp(t, db, table)
	}
	return urls, dbs, table
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

// TestGaleraFenceAcrossNodes: on Galera the database's fence of a
// leader's act (fence.go) holds across nodes, although the cluster
// replicates no row locks. The leader's act on node 1 passes its fence and
// pauses (its session is kept: its idle bound is a minute, so that the
// fence alone must refuse it); the lease passes and a worker on node 2
// takes the leadership over at once (nothing on node 2 waits for node 1's
// act); the act goes on and commits. Node 1 is kept from applying the
// takeover until the act's commit has been ordered after it: a session of
// node 1 outside replication (wsrep_on off, which the cluster's applier
// waits for rather than aborts) holds a row that node 3 then changes, and
// node 1's one applier thread applies the write sets in order. Had node 1
// applied the takeover first, its applier had aborted the act on the lock
// of the fence. The act must not land in the new term: it fails with
// errTermEnded and the job it would have expired is still pending on every
// node. Before the fence wrote the leader row (it only locked it, LOCK IN
// SHARE MODE) the act passed certification, its write set sharing no key
// with the takeover's, and the job was expired after the new term began.
func TestGaleraFenceAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	urls, dbs, table := galeraTable(t)
	var appliers int
	if err := dbs[0].QueryRowContext(ctx, "SELECT @@wsrep_slave_threads").Scan(&appliers); err != nil {
		t.Fatal(err)
	}
	if appliers != 1 {
		t.Fatalf("node 1 has %d applier threads; the test needs 1, so that a write set held up holds up the ones after it", appliers)
	}
	open := func(db *sql.DB) *Queue {
		q, err := New(db, WithTable(table), WithLogger(testdb.QuietLogger()))
		if err != nil {
			t.Fatalf("queue.New: %v", err)
		}
		t.Cleanup(func() {
			if err := q.Close(); err != nil {
				t.Errorf("closing the queue: %v", err)
			}
		})
		return q
	}
	qa, qb := open(dbs[0]), open(dbs[1])
	id := mustEnqueue(t, qa, testArgs{}, ExpiresIn(time.Millisecond))
	leaderTable := "`" + table + "_leader`"
	if _, err := dbs[0].ExecContext(ctx, "INSERT INTO "+leaderTable+" (name, holder, term, renewals, since, renewed_at, lease_until) VALUES ('test blocker', '', 0, 0, UTC_TIMESTAMP(), UTC_TIMESTAMP(), UTC_TIMESTAMP())"); err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs[1:] {
		galeraCaughtUp(t, db, table)
	}

	f := takeLease(t, qa, "first", 2*time.Second)
	f.idle = time.Minute
	fenced, resume := make(chan struct{}), make(chan struct{})
	wake := sync.OnceFunc(func() { close(resume) })
	defer wake() // also when the test fails: the act holds a connection
	var tries atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- qa.leaderAct(ctx, f, func(d dbtx) error {
			if tries.Add(1) == 1 {
				close(fenced)
				<-resume // the pause, after the fence passed
			}
			_, err := qa.st.expire(ctx, d, time.Now().Add(time.Hour), MaintenanceBatch)
			return err
		})
	}()
	waitFor(t, fenced, 10*time.Second, "the act's fence")

	// Node 1's applier is held up: its own pool, since the session leaves
	// replication.
	blocker, err := testdb.OpenURL(t, urls[0]).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	for _, q := range []string{"SET SESSION wsrep_on = OFF", "BEGIN", "SELECT name FROM " + leaderTable + " WHERE name = 'test blocker' FOR UPDATE"} {
		if _, err := blocker.ExecContext(ctx, q); err != nil {
			t.Fatalf("node 1: %s: %v", q, err)
		}
	}
	release := sync.OnceFunc(func() {
		if _, err := blocker.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Errorf("node 1: ending the session that held the applier up: %v", err)
		}
	})
	defer release()
	if _, err := dbs[2].ExecContext(ctx, "UPDATE "+leaderTable+" SET renewals = renewals + 1 WHERE name = 'test blocker'"); err != nil {
		t.Fatalf("node 3: %v", err)
	}

	waitUntil(t, 10*time.Second, "the lease to pass by node 2's clock", func() bool {
		ld, err := qb.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ld != nil && !ld.Active
	})
	next := takeLease(t, qb, "second", time.Minute)
	if next.term <= f.term {
		t.Fatalf("term %d after the takeover of term %d", next.term, f.term)
	}
	wake()
	// The act's commit is ordered after the takeover and waits for node
	// 1's applier, which waits for the blocker.
	waitUntil(t, 30*time.Second, "the act's COMMIT to wait for certification on node 1", func() bool {
		var n int
		if err := dbs[0].QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'COMMIT' AND STATE = 'Waiting for certification'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the act ended before node 1 applied the takeover: %v", err)
		default:
		}
		return n == 1
	})
	release()
	if err := waitFor(t, done, 30*time.Second, "the act"); !errors.Is(err, errTermEnded) {
		t.Errorf("the old leader's act, committed after a takeover on another node = %v (%d tries); want errTermEnded", err, tries.Load())
	}
	for i, q := range []*Queue{qa, qb} {
		galeraCaughtUp(t, dbs[i], table)
		j, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != StatusPending {
			t.Errorf("node %d: the job is %s after the old leader's act; want pending (the act landed in the new term)", i+1, j.Status)
		}
	}
}
