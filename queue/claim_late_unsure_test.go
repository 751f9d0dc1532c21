package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
)

// TestStoppedRunLeavesNoUnsureGiveBack (PostgreSQL): an idle worker's claim
// waits for a lock that keeps out reads too (LOCK TABLE … IN ACCESS
// EXCLUSIVE MODE) when the worker stops. The claim is cancelled once sent,
// so it may have committed (claimUnsure), and its give-back looks for its
// jobs (SelectClaimBatch), which waits for the same lock. Run returns
// within a few seconds, the lock still held, and nothing it started still
// runs then: the give-back ended with it. Before, the give-back ran on a
// context of its own (up to dbCallTimeout, 30 s) that Run did not wait
// for: after Run returned it still held a connection, and wrote to the
// database once the lock was gone (or failed, "sql: database is closed",
// when the caller had closed its pool meanwhile). The test is not
// parallel: it counts the goroutines of package queue.
func TestStoppedRunLeavesNoUnsureGiveBack(t *testing.T) {
	const bound = 5 * time.Second    // well under dbCallTimeout, the old give-back's bound
	for _, sc := range stopCases() { // not forEachStop: its subtests are parallel
		t.Run(sc.name, func(t *testing.T) {
			env := newTestEnv(t, engine.Postgres)
			claims := &claimHook{kind: engine.Postgres}
			var lookups atomic.Int32
			hook := func(query string, on sqlRunner) {
				claims.hook(query, on)
				if strings.Contains(query, "-- name: SelectClaimBatch ") {
					lookups.Add(1)
				}
			}
			logs := &testdb.LogRecorder{}
			q := env.queue(t, nil, withStatementHook(hook), WithLogger(slog.New(logs)))
			id := enqueue(t, q, emailArgs{})
			lock := newTableLock(t, env)
			lock.pgMode = "ACCESS EXCLUSIVE"
			if err := lock.lock(); err != nil {
				t.Fatal(err)
			}
			sent := make(chan struct{})
			claims.beforeNext(func() { close(sent) })

			cfg := fastConfig()
			cfg.MaintenanceInterval = -1 // no leader: the claim alone meets the lock
			cfg.ShutdownTimeout = time.Minute
			w := q.NewWorker(cfg)
			w.abandonGrace = time.Minute // the shutdown's time after StopNow
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
				t.Errorf("job %d started in a worker whose claim waits for the lock", job.ID)
				return nil
			})
			run := startStoppable(t, w)
			waitFor(t, sent, 10*time.Second, "the worker's claim to be sent")
			// The hook runs just before the claim goes to the server: a
			// stop before it arrives cancels a claim never sent, whose
			// outcome is known (under the race detector, once in CI). Stop
			// once the server shows it waiting for the lock.
			testwait.Until(t, 10*time.Second, 5*time.Millisecond, func() bool {
				var n int
				if err := env.db.QueryRowContext(context.Background(),
					"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND query LIKE $1",
					"%"+env.table+"%").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n > 0
			}, func() string { return "the worker's claim to wait for the lock on the server" })
			took := run.stop(t, sc, bound, "while its claim waits for the lock")

			var left []string
			testwait.Until(t, bound, 20*time.Millisecond, func() bool {
				left = queueGoroutines(t)
				return len(left) == 0
			}, func() string {
				return fmt.Sprintf("Run returned %v after the stop, and %v later %d goroutine(s) of package queue still run, the lock still held:\n%s",
					took, bound, len(left), strings.Join(left, "\n\n"))
			})
			if lookups.Load() == 0 {
				t.Fatalf("no give-back looked for the jobs of the claim cancelled once sent: the test did not make a claim whose outcome is unknown; logs: %q", logs.Lines(slog.LevelDebug))
			}
			if err := lock.unlock(); err != nil {
				t.Fatal(err)
			}
			if j := getJob(t, q, id); j.Status != StatusPending || j.Attempts != 0 {
				t.Errorf("after the stop the job is %s, attempts %d; want pending, attempts 0", j.Status, j.Attempts)
			}
		})
	}
}
