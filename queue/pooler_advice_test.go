package queue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestPoolerErrorsSayWhatToDo: behind a PgBouncer in transaction pooling
// mode without default_query_exec_mode=exec in the URL, pgx's statement
// cache collides with the pooler's sharing of server sessions
// (`prepared statement "stmtcache_…" already exists` or `does not exist`).
// Every such error the queue returns (New, Enqueue) or a worker logs (its
// claims, completions, the leader's statements, the notifications) says
// what to add to the URL. Only New's check of the table said it: an
// Enqueue's error and the worker's log lines were pgx's alone.
func TestPoolerErrorsSayWhatToDo(t *testing.T) {
	const advice = "default_query_exec_mode=exec"
	plain := testdb.PgBouncer(t, 2)
	direct := testdb.Open(t, engine.Postgres)
	table := testdb.Table(t, direct)
	installTestTable(t, direct, table)
	db := testdb.OpenURL(t, plain)
	logs := &testdb.LogRecorder{}
	met := 0 // errors of the statement cache seen
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "stmtcache_") {
			return
		}
		met++
		if !strings.Contains(err.Error(), advice) {
			t.Errorf("%s through PgBouncer: %v; want it to say to add %s", what, err, advice)
		}
	}
	var q *Queue
	for try := 0; q == nil; try++ {
		var err error
		q, err = New(db, WithTable(table), WithLogger(slog.New(logs)))
		check("New", err)
		if err != nil && (try == 10 || !strings.Contains(err.Error(), "stmtcache_")) {
			t.Fatalf("New through PgBouncer, try %d: %v", try+1, err)
		}
	}
	defer q.Close()
	w := q.NewWorker(WorkerConfig{Concurrency: 4, PollInterval: 20 * time.Millisecond})
	var ran atomic.Int32
	Handle(w, func(ctx context.Context, job *Job[emailArgs]) error {
		ran.Add(1)
		return nil
	})
	stop, _ := startWorker(t, w)
	enqueued := 0
	for i := 0; i < 100; i++ {
		_, err := q.Enqueue(context.Background(), emailArgs{To: "a@example.com"})
		check("Enqueue", err)
		if err == nil {
			enqueued++
		}
	}
	logged := func() int { return logs.Count(slog.LevelDebug, "") }
	// The worker has something to check once it met the statement cache's
	// errors (its log lines), or ran every job enqueued: which of the two
	// comes first is the pooler's luck (with 100 enqueues of which none
	// got through, or a worker that met errors on every claim, waiting for
	// both never ended).
	waitUntil(t, time.Minute, "the worker to meet the statement cache's errors or run every job enqueued", func() bool {
		for _, l := range logs.Lines(slog.LevelDebug) {
			if strings.Contains(l, "stmtcache_") {
				return true
			}
		}
		return int(ran.Load()) >= enqueued
	})
	if err := stop(10 * time.Second); err != nil && !errors.Is(err, context.Canceled) {
		check("Run", err)
	}
	for _, l := range logs.Lines(slog.LevelDebug) {
		if strings.Contains(l, "stmtcache_") {
			met++
			if !strings.Contains(l, advice) {
				t.Errorf("the worker logged, through PgBouncer: %s; want it to say to add %s", l, advice)
			}
		}
	}
	if met == 0 {
		t.Errorf("no error of pgx's statement cache met in %d log lines and %d enqueues through PgBouncer; the pooler may not be in transaction mode", logged(), enqueued)
	}
}
