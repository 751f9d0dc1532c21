package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestGalera drains 5 000 jobs with three workers, each on another node of
// a three-node MariaDB Galera cluster (multi-primary), each job exactly
// once: claims and completions that lose a certification conflict (error
// 1213 at commit) are run again, never reported as failures. The same
// drain by three workers on the single MariaDB test server gives the
// ratio of the drain rates (logged, not asserted).
func TestGalera(t *testing.T) {
	t.Parallel()
	const jobs = 5000
	urls := testdb.Galera(t, 3)
	galera := drainAcross(t, urls, jobs)
	conflicts := 0
	for _, u := range urls {
		db := testdb.OpenURL(t, u)
		for _, v := range []string{"wsrep_local_cert_failures", "wsrep_local_bf_aborts"} {
			var name string
			var n int
			if err := db.QueryRow("SHOW STATUS LIKE '"+v+"'").Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			conflicts += n
		}
	}
	one := testdb.URL(t, engine.MySQL)
	single := drainAcross(t, []string{one, one, one}, jobs)
	t.Logf("%d certification conflicts and brute-force aborts on the nodes, all retried; drain rate of 3 workers × 8: %.0f jobs/s on Galera (3 nodes), %.0f jobs/s on the single MariaDB (Galera/single %.2f)",
		conflicts, galera, single, galera/single)
}

// drainAcross installs a table on urls[0], enqueues jobs and drains them
// with one worker (concurrency 8) per URL; it checks that every job ran
// exactly once and completed, none failed, and returns the drain rate.
func drainAcross(t *testing.T, urls []string, jobs int) float64 {
	t.Helper()
	ctx := context.Background()
	dbs := make([]*Queue, len(urls))
	first := testdb.OpenURL(t, urls[0])
	table := testdb.Table(t, first)
	installTestTable(t, first, table)
	for i, u := range urls {
		db := first
		if i > 0 {
			db = testdb.OpenURL(t, u)
		}
		var failed atomic.Int64
		q, err := New(db, WithTable(table), WithLogger(quietTestLogger()), WithListener(func(ev Event) {
			if ev.Kind == EventFailed {
				failed.Add(1)
			}
		}))
		if err != nil {
			t.Fatalf("queue.New on node %d: %v", i+1, err)
		}
		t.Cleanup(func() {
			q.Close()
			if n := failed.Load(); n != 0 {
				t.Errorf("node %d: %d attempts failed", i+1, n)
			}
		})
		dbs[i] = q
	}
	for start := 0; start < jobs; start += 1000 {
		batch := make([]JobArgs, min(1000, jobs-start))
		for i := range batch {
			batch[i] = testArgs{N: start + i}
		}
		if _, err := dbs[0].EnqueueMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	runs := make(map[int64]int, jobs)
	done := make(chan struct{})
	var finished atomic.Int64
	begin := time.Now()
	for _, q := range dbs {
		cfg := fastConfig()
		cfg.Concurrency = 8
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
	waitUntil(t, time.Minute, "every job completed", func() bool {
		st, err := dbs[0].Stats(ctx, "")
		return err == nil && st[StatusCompleted] == int64(jobs)
	})
	rate := float64(jobs) / time.Since(begin).Seconds()
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
