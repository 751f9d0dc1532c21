package queue

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// handleSlow registers on w a handler of emailArgs that holds the job to
// "slow": it closes started and runs until release is closed (or its
// context ends). Other jobs succeed at once.
func handleSlow(w *Worker) (started <-chan struct{}, release chan<- struct{}) {
	start, rel := make(chan struct{}), make(chan struct{})
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
		if job.Args.To == "slow" {
			close(start)
			select {
			case <-rel:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	return start, rel
}

// TestMySQLClaimSessionIdleTimeout: a claimer's claim session sits idle
// while every slot is busy; a server whose wait_timeout is shorter than
// that ends it. The next claim takes a new session first (the session read
// wait_timeout when it connected): the job runs, and nothing is logged as
// an error. The claim failed instead ("claiming jobs failed", "sql:
// connection is already closed", at error level), and the claimer waited
// 100 ms before it claimed on a new session, after every handler longer
// than wait_timeout (the session is renewed only after a minute,
// claimSessionMaxAge).
func TestMySQLClaimSessionIdleTimeout(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.MySQL)
	// wait_timeout for every session of the pool, the claim session's too.
	db := testdb.OpenURL(t, env.urlWith(t, "wait_timeout", "1"))

	var mu sync.Mutex
	session := int64(0) // the claim session's CONNECTION_ID()
	var hookErr error
	hook := func(query string, on sqlRunner) {
		if on == nil || !strings.Contains(query, "-- name: SelectDueJobs") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if session == 0 && hookErr == nil {
			hookErr = on.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&session)
		}
	}
	logs := &testdb.LogRecorder{}
	q := env.queue(t, db, WithLogger(slog.New(logs)), withStatementHook(hook))
	w := q.NewWorker(WorkerConfig{Concurrency: 1, PollInterval: 50 * time.Millisecond, PollOnly: true, MaintenanceInterval: -1, Lease: time.Minute})
	started, release := handleSlow(w)
	slow := enqueue(t, q, emailArgs{To: "slow"})
	stop, _ := startWorker(t, w)
	waitFor(t, started, 10*time.Second, "the slow job to start")
	fast := enqueue(t, q, emailArgs{To: "fast"})
	mu.Lock()
	id, err := session, hookErr
	mu.Unlock()
	if err != nil || id == 0 {
		t.Fatalf("the claim session's id: %d, %v", id, err)
	}
	waitUntil(t, 20*time.Second, "the server to end the idle claim session", func() bool {
		var n int
		if err := env.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	close(release)
	const failed = "claiming jobs failed"
	waitUntil(t, 20*time.Second, "the fast job to complete, or its claim to fail", func() bool {
		return getJob(t, q, fast).Status == StatusCompleted || logs.Count(slog.LevelError, failed) > 0
	})
	if err := stop(10 * time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, j := range []int64{slow, fast} {
		if st := getJob(t, q, j).Status; st != StatusCompleted {
			t.Errorf("job %d is %s, want completed", j, st)
		}
	}
	if n := logs.Count(slog.LevelError, ""); n != 0 {
		t.Errorf("%d lines logged at error level after the server ended the idle claim session: %q", n, logs.Lines(slog.LevelError))
	}
}

// TestClaimSessionIdleLimit: how long a claim session may sit idle for a
// server's wait_timeout.
func TestClaimSessionIdleLimit(t *testing.T) {
	for _, c := range []struct{ wait, want time.Duration }{
		{0, 0},
		{time.Second, 500 * time.Millisecond},
		{2 * time.Second, time.Second},
		{3 * time.Second, 2 * time.Second},
		{28800 * time.Second, 28799 * time.Second},
	} {
		if got := claimSessionIdleLimit(c.wait); got != c.want {
			t.Errorf("claimSessionIdleLimit(%v) = %v, want %v", c.wait, got, c.want)
		}
	}
}
