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

// refuseRows makes the env's table refuse, by a trigger, every write of
// event (INSERT or UPDATE) whose new row meets cond (an SQL condition on
// NEW, the same on every engine) while its control table says so (on at
// first): a database that fails some of the queue's writes for a while, on
// every engine. It returns the statement that turns the refusal off; the
// trigger and the control table go when t ends.
func refuseRows(t *testing.T, env *testEnv, event, cond string) (off string) {
	t.Helper()
	quoted := func(suffix string) string {
		tbl, err := engine.ParseTable(env.kind, env.table+suffix)
		if err != nil {
			t.Fatal(err)
		}
		return tbl.Quoted()
	}
	ctl, trg, fn := quoted("_ctl"), quoted("_trg"), quoted("_fn")
	const msg = "write refused by the test"
	when := cond + " AND (SELECT refuse FROM " + ctl + ") = 1"
	var ddl, drop []string
	switch env.kind {
	case engine.Postgres:
		ddl = []string{
			"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF " + when + " THEN RAISE EXCEPTION '" + msg + "'; END IF; RETURN NEW; END $$",
			"CREATE TRIGGER " + trg + " BEFORE " + event + " ON {t} FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
		}
		drop = []string{"DROP TRIGGER IF EXISTS " + trg + " ON {t}", "DROP FUNCTION IF EXISTS " + fn + "()"}
	case engine.MySQL:
		ddl = []string{
			"CREATE TRIGGER " + trg + " BEFORE " + event + " ON {t} FOR EACH ROW BEGIN IF " + when + " THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" + msg + "'; END IF; END",
		}
		drop = []string{"DROP TRIGGER IF EXISTS " + trg}
	case engine.SQLite:
		ddl = []string{
			"CREATE TRIGGER " + trg + " BEFORE " + event + " ON {t} FOR EACH ROW WHEN " + when + " BEGIN SELECT RAISE(ABORT, '" + msg + "'); END",
		}
		drop = []string{"DROP TRIGGER IF EXISTS " + trg}
	default:
		t.Fatalf("no refusal for engine %s", env.kind)
	}
	ddl = append([]string{"CREATE TABLE " + ctl + " (refuse INT NOT NULL)", "INSERT INTO " + ctl + " VALUES (1)"}, ddl...)
	drop = append(drop, "DROP TABLE IF EXISTS "+ctl)
	t.Cleanup(func() {
		for _, q := range drop {
			if _, err := env.db.ExecContext(context.Background(), env.sql(q)); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	for _, q := range ddl {
		env.exec(t, q)
	}
	return env.sql("UPDATE " + ctl + " SET refuse = 0")
}

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
