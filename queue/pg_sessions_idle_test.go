package queue

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestPgSessionsOutliveIdleTimeout: a worker's own sessions on PostgreSQL
// sit idle by design: the LISTEN session between notifications, the claim
// session while every slot is busy. A server (or URL) that ends idle
// sessions (idle_session_timeout, PostgreSQL 14 and later; here 1.5 s for
// every session of the pool) must not end them: both are still there,
// idle, well past the timeout, the next claim runs on the claim session,
// and the worker logs no warning nor error. The server ended them: the
// listener warned and listened again, with a growing pause, every
// timeout (notifications sent meanwhile lost), and the next claim failed
// ("claiming jobs failed", at error level) and waited 100 ms.
func TestPgSessionsOutliveIdleTimeout(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.Postgres)
	app := strings.ToLower(env.table)
	db := testdb.OpenURL(t, env.urlWith(t, "application_name", app, "options", "-c idle_session_timeout=1500"))
	var timeout string
	if err := db.QueryRowContext(ctx, "SHOW idle_session_timeout").Scan(&timeout); err != nil {
		t.Skipf("the server has no idle_session_timeout (PostgreSQL 14 and later): %v", err)
	}
	logs := &testdb.LogRecorder{}
	q := env.queue(t, db, WithLogger(slog.New(logs)))
	w := q.NewWorker(WorkerConfig{Concurrency: 1, PollInterval: time.Minute, MaintenanceInterval: -1, Lease: time.Minute})
	started, release := handleSlow(w)
	slow := enqueue(t, q, emailArgs{To: "slow"})
	stop, _ := startWorker(t, w)
	waitFor(t, started, 10*time.Second, "the slow job to start")
	waitUntil(t, 20*time.Second, "the LISTEN and claim sessions idle for 3 s, or a warning", func() bool {
		var n int
		if err := env.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND state = 'idle' AND state_change < now() - interval '3 seconds'
			  AND (query LIKE '%ListenJobs%' OR query LIKE '%ClaimJobs%')`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 2 || logs.Count(slog.LevelWarn, "") > 0
	})
	close(release)
	fast := enqueue(t, testQueue(t, env), emailArgs{To: "fast"}) // another pool's enqueue: the NOTIFY wakes the worker
	waitUntil(t, 20*time.Second, "the fast job to complete, or a warning", func() bool {
		return getJob(t, q, fast).Status == StatusCompleted || logs.Count(slog.LevelWarn, "") > 0
	})
	if err := stop(10 * time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, j := range []int64{slow, fast} {
		if st := getJob(t, q, j).Status; st != StatusCompleted {
			t.Errorf("job %d is %s, want completed", j, st)
		}
	}
	if n := logs.Count(slog.LevelWarn, ""); n != 0 {
		t.Errorf("%d warnings and errors with idle_session_timeout %s: %q", n, timeout, logs.Lines(slog.LevelWarn))
	}
}

// testQueue opens a Queue on env's table through env's own pool, quiet.
func testQueue(t *testing.T, env *testEnv) *Queue {
	t.Helper()
	return env.queue(t, nil, WithLogger(testdb.QuietLogger()))
}
