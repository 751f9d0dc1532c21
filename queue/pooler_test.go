package queue

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestTransactionPooling: a PostgreSQL pool whose pgx exec mode keeps no
// statements in the session (default_query_exec_mode=exec, what pgx needs
// behind PgBouncer) makes the queue pooled: its workers poll and do not
// LISTEN; WithTransactionPooling overrides that either way; jobs run in
// every case. WithTransactionPooling(true) on a pool in pgx's default mode
// warns that pgx still keeps prepared statements in the session (behind
// PgBouncer they then fail now and then): New took the option and said
// nothing.
func TestTransactionPooling(t *testing.T) {
	t.Parallel()
	on, off := true, false
	for _, c := range []struct {
		name    string
		exec    bool  // default_query_exec_mode=exec in the URL
		option  *bool // WithTransactionPooling
		pooled  bool
		listens bool
		// warns: New warns that pgx still keeps prepared statements in
		// the session, which a transaction pooler shares.
		warns bool
	}{
		{"default mode", false, nil, false, true, false},
		{"exec mode detected", true, nil, true, false, false},
		{"exec mode, option false", true, &off, false, true, false},
		{"default mode, option true", false, &on, true, false, true},
		{"exec mode, option true", true, &on, true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, engine.Postgres)
			url := env.url
			if c.exec {
				url += "&default_query_exec_mode=exec"
			}
			log := &testdb.LogRecorder{}
			opts := []Option{WithLogger(slog.New(log))}
			if c.option != nil {
				opts = append(opts, WithTransactionPooling(*c.option))
			}
			q := env.queue(t, testdb.OpenURL(t, url), opts...)
			if q.pooled != c.pooled {
				t.Fatalf("pooled = %v, want %v", q.pooled, c.pooled)
			}
			if n := log.Count(slog.LevelWarn, "default_query_exec_mode=exec"); (n == 1) != c.warns || n > 1 {
				t.Errorf("New warned %d times to add default_query_exec_mode=exec, want %v: %q", n, c.warns, log.Lines(slog.LevelWarn))
			}
			ran := make(chan int64, 1)
			w := q.NewWorker(fastConfig())
			Handle(w, func(ctx context.Context, job *Job[testArgs]) error { ran <- job.ID; return nil })
			startWorker(t, w)
			id := enqueue(t, q, testArgs{})
			if got := waitFor(t, ran, 10*time.Second, "the job to run"); got != id {
				t.Fatalf("job %d ran, want %d", got, id)
			}
			if c.listens {
				listenerPID(t, env, 0)
				return
			}
			waitUntil(t, 30*time.Second, "the worker to say it polls only", func() bool { return log.Count(slog.LevelInfo, "transaction pooler") > 0 })
			if pid := findListener(t, env, 0); pid != 0 {
				t.Errorf("session %d LISTENs for a pooled queue's worker", pid)
			}
		})
	}
}

// TestTransactionPoolingPreparesNothing: WithTransactionPooling(true) turns
// off the statements MySQL and SQLite queues otherwise prepare; the queue
// works the same.
func TestTransactionPoolingPreparesNothing(t *testing.T) {
	t.Parallel()
	for _, kind := range []engine.Kind{engine.MySQL, engine.SQLite} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, kind)
			q := env.queue(t, nil, WithTransactionPooling(true), WithLogger(testdb.QuietLogger()))
			id := enqueue(t, q, testArgs{})
			if got := getJob(t, q, id); got.Status != StatusPending {
				t.Fatalf("job %d is %s, want pending", id, got.Status)
			}
			n := 0
			q.run.stmts.Range(func(any, any) bool { n++; return true })
			if q.run.prepare || n != 0 {
				t.Errorf("a pooled queue prepared %d statements (prepare=%v)", n, q.run.prepare)
			}
		})
	}
}
