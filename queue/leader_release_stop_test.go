package queue

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestLeaderReleaseWithinShutdownTime: a leading worker (LeaderLease of a
// minute: it renews every 12 s) stops while another connection holds its
// leader table locked (SQLite: the write lock, BEGIN IMMEDIATE;
// PostgreSQL: LOCK TABLE … IN ACCESS EXCLUSIVE MODE; MySQL: LOCK TABLES
// … WRITE). Its release of the leadership, a write of the shutdown, ends
// with the shutdown's time (here the grace of a second after the stop),
// says that it failed, and Run returns; the next leader takes over once
// the lease passes. Before, the release waited up to LeaderLease/5 on a
// context of its own, whatever the shutdown's time, StopNow's too.
func TestLeaderReleaseWithinShutdownTime(t *testing.T) {
	const (
		abandon = time.Second     // the shutdown's time: ShutdownTimeout is negative
		bound   = 3 * time.Second // that time and slack, under LeaderLease/5
	)
	forEachStop(t, func(t *testing.T, sc stopCase) {
		forEachEngine(t, func(t *testing.T, kind engine.Kind) {
			env := newTestEnv(t, kind)
			gained := make(chan struct{}, 1)
			logs := &testdb.LogRecorder{}
			q := env.queue(t, nil, WithLogger(slog.New(logs)), WithListener(func(ev Event) {
				if ev.Kind == EventLeadershipGained {
					select {
					case gained <- struct{}{}:
					default:
					}
				}
			}))
			cfg := fastConfig()
			cfg.MaintenanceInterval = time.Hour // leads; its one pass runs at once
			cfg.LeaderLease = time.Minute
			cfg.ShutdownTimeout = -1
			w := q.NewWorker(cfg)
			w.abandonGrace = abandon
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { return nil })
			run := startStoppable(t, w)
			waitFor(t, gained, 20*time.Second, "the worker to lead")
			waitUntil(t, 20*time.Second, "the leader's first maintenance pass", func() bool {
				return logs.Count(slog.LevelDebug, "maintenance pass done") > 0
			})

			lock := newTableLock(t, env)
			lock.pgMode = "ACCESS EXCLUSIVE"
			lock.table = ddl.Side(env.tbl, "leader").Quoted()
			if err := lock.lock(); err != nil {
				t.Fatal(err)
			}
			took := run.stop(t, sc, bound, "while the leader table is locked")
			if err := lock.unlock(); err != nil {
				t.Fatal(err)
			}
			if n := logs.Count(slog.LevelWarn, "releasing the leadership failed"); n != 1 {
				t.Errorf("%d warnings that the release failed (Run returned in %v), want 1: %q", n, took, logs.Lines(slog.LevelWarn))
			}
		})
	})
}
