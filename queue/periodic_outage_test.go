package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestPeriodicTickOutlivesOutage: a tick whose enqueue the database fails
// for a moment while the worker leads (a restart, a dropped connection, a
// statement refused: here a trigger refuses the first acts) is enqueued
// once the database takes it again, without waiting for the next tick, and
// once. The leader tried three times back to back and then skipped the
// tick for good, so a failure of a few milliseconds lost it.
func TestPeriodicTickOutlivesOutage(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		for _, refused := range []int{1, 5} {
			t.Run(fmt.Sprintf("%d acts refused", refused), func(t *testing.T) {
				env := newTestEnv(t, kind)
				off := refuseRows(t, env, "INSERT", "NEW.name = 'tick'")
				sched := everyFrom{start: time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute), period: 1000 * time.Hour}
				p := Periodic("outage", sched, kindArgs{K: "tick"}, Type("periodic"))
				logs := &testdb.LogRecorder{}
				var mu sync.Mutex
				fences := 0
				var hookErr error
				hook := func(query string, tx sqlRunner) {
					if !strings.Contains(query, "-- name: FenceLeaderAct ") {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					fences++
					if fences == refused+1 {
						// The database takes the tick again, from this act on
						// (in the act's own transaction: SQLite's write lock).
						if _, err := tx.ExecContext(context.Background(), off); err != nil {
							hookErr = err
						}
					}
				}
				q := env.queue(t, nil, WithLogger(slog.New(logs)), withStatementHook(hook))
				w := q.NewWorker(WorkerConfig{Types: []string{"none"}, MaintenanceInterval: -1, RunMissed: true, Periodic: []PeriodicJob{p}})
				stop, _ := startWorker(t, w)
				const skipped = "the tick is skipped"
				waitUntil(t, 30*time.Second, "the tick enqueued, or skipped", func() bool {
					return env.countWhere(t, "name = 'tick'") == 1 || logs.Count(slog.LevelError, skipped) > 0
				})
				if err := stop(10 * time.Second); err != nil {
					t.Fatalf("Run: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if hookErr != nil {
					t.Fatalf("turning the refusal off: %v", hookErr)
				}
				if n := env.countWhere(t, "name = 'tick'"); n != 1 {
					t.Errorf("%d jobs of the tick after %d refused acts (%d acts in all), want 1; logs: %q", n, refused, fences, logs.Lines(slog.LevelWarn))
				}
				if n := logs.Count(slog.LevelError, skipped); n != 0 {
					t.Errorf("the leader skipped the tick after %d acts: %q", fences, logs.Lines(slog.LevelWarn))
				}
			})
		}
	})
}
