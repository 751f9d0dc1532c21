package queue

import (
	"context"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// TestMaintenancePrunesWithRetention: a worker's maintenance, as leader,
// prunes when it is given a Retention (SPEC section 9): the jobs that
// finished more than Retention ago by the queue's clock (completed with a
// unique key, failed, expired) go, the key rows of the deleted jobs with
// them; the job that finished since and the pending one stay. Without a
// Retention a pass prunes nothing: two passes' expires done (the first
// pass over), the finished jobs are all there and no Prune statement ran.
// Until now only the soak (not in CI) ran the leader's Prune.
func TestMaintenancePrunesWithRetention(t *testing.T) {
	cases := []struct {
		name      string
		retention time.Duration
		pruned    bool
	}{
		{"no retention", 0, false},
		{"retention 1h", time.Hour, true},
	}
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				env := coreEnv(t, kind)
				var batches batchLog
				q, clock := coreQueue(t, env, withBatchHook(0, batches.hear))

				// Finished two hours before the worker runs.
				start := clock.now()
				done := mustEnqueue(t, q, kindArgs{K: "done"}, Type("old"), UniqueKey("old"))
				completeJob(t, q, "old")
				cancelled := mustEnqueue(t, q, kindArgs{K: "failed"}, Type("old"))
				if err := q.Cancel(ctx, cancelled); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				mustEnqueue(t, q, kindArgs{K: "expired"}, Type("old"), ExpiresAt(start.Add(time.Second)))
				clock.add(2 * time.Second)
				if n, err := q.ExpireOverdue(ctx); err != nil || n != 1 {
					t.Fatalf("ExpireOverdue = %d, %v; want the job with a deadline expired", n, err)
				}
				if n := env.countWhere(t, "status IN ('completed', 'failed', 'expired') AND name IN ('done', 'failed', 'expired')"); n != 3 {
					t.Fatalf("%d of the old jobs finished, want 3", n)
				}
				// Finished within the retention, and not finished.
				clock.add(2 * time.Hour)
				mustEnqueue(t, q, kindArgs{K: "recent"}, Type("new"))
				completeJob(t, q, "new")
				mustEnqueue(t, q, kindArgs{K: "waiting"}, Type("waiting"))

				// keyRows counts the key rows of the completed keyed job.
				keyRows := func() int {
					var n int
					side := ddl.Side(env.tbl, "unique").Quoted()
					if err := env.db.QueryRowContext(ctx, env.sql("SELECT COUNT(*) FROM "+side+" WHERE job_id = ?"), done).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n
				}

				w := q.NewWorker(WorkerConfig{Types: []string{"none"}, MaintenanceInterval: 50 * time.Millisecond, Retention: c.retention})
				stop, _ := startWorker(t, w)
				if c.pruned {
					// Prune deletes the jobs, then the key rows of deleted jobs.
					waitUntil(t, 30*time.Second, "the leader's prune of the jobs finished over an hour ago and of their key rows", func() bool {
						return env.countWhere(t, "name IN ('done', 'failed', 'expired')") == 0 && keyRows() == 0
					})
				} else {
					waitUntil(t, 30*time.Second, "two maintenance passes", func() bool { return len(batches.of("expire")) >= 2 })
				}
				if err := stop(10 * time.Second); err != nil {
					t.Fatalf("Run: %v", err)
				}

				if n := env.countWhere(t, "name IN ('recent', 'waiting')"); n != 2 {
					t.Errorf("%d of the job finished within the retention and the pending one left, want both", n)
				}
				old, prunes := env.countWhere(t, "name IN ('done', 'failed', 'expired')"), len(batches.of("prune"))
				switch {
				case c.pruned && (old != 0 || prunes == 0):
					t.Errorf("with Retention %v: %d old finished jobs left after %d Prune statements; want none left", c.retention, old, prunes)
				case !c.pruned && (old != 3 || prunes != 0):
					t.Errorf("without Retention: %d old finished jobs left after %d Prune statements; want all 3 and no Prune", old, prunes)
				}
				if want := map[bool]int{true: 0, false: 1}[c.pruned]; keyRows() != want {
					t.Errorf("%d key rows of the completed keyed job (pruned %v), want %d", keyRows(), c.pruned, want)
				}
			})
		}
	})
}
