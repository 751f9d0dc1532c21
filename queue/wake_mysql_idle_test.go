package queue

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMySQLWakeBellOutlivesIdleTimeout: the second connection of a waiting
// worker holds its wake slot's bell and runs nothing else, so it sits idle
// for as long as the worker runs. A server whose wait_timeout is short (here
// 1 s, from the URL, for every session of the pool) must not end it: the
// bell's session is still there, idle, well past wait_timeout, and the
// worker logs no warning. The server ended it after wait_timeout, which
// freed the bell, ended the wait ("the wake slot's bell was free: its
// session has ended"), and made the worker warn and poll until it waited
// again, every wait_timeout.
func TestMySQLWakeBellOutlivesIdleTimeout(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.MySQL)
	db := testdb.OpenURL(t, env.urlWith(t, "wait_timeout", "1"))
	logs := &testdb.LogRecorder{}
	q := env.queue(t, db, WithLogger(slog.New(logs)))
	w := q.NewWorker(WorkerConfig{Concurrency: 1, PollInterval: time.Minute, MaintenanceInterval: -1})
	w.HandleDefault(func(context.Context, *JobRow) error { return nil })
	stop, _ := startWorker(t, w)
	defer func() {
		if err := stop(10 * time.Second); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// The session that holds a bell of the table.
	var bell int64
	waitUntil(t, 10*time.Second, "a session holding a wake slot's bell", func() bool {
		err := env.db.QueryRowContext(ctx, `WITH RECURSIVE slots (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM slots WHERE n < 63)
			SELECT held FROM (SELECT IS_USED_LOCK(CONCAT('jobqueue bell ', SHA1(CONCAT(DATABASE(), '.', ?)), ' ', n)) AS held FROM slots) AS b
			WHERE held IS NOT NULL LIMIT 1`, env.tbl.Name).Scan(&bell)
		if errors.Is(err, sql.ErrNoRows) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	const idleFor = 3 // seconds, past the wait_timeout of 1
	alive := true
	waitUntil(t, 20*time.Second, "the bell's session to be idle past wait_timeout, or to end", func() bool {
		var idle int
		err := env.db.QueryRowContext(ctx, "SELECT TIME FROM information_schema.PROCESSLIST WHERE ID = ?", bell).Scan(&idle)
		if errors.Is(err, sql.ErrNoRows) {
			alive = false
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		return idle >= idleFor
	})
	if !alive {
		t.Errorf("the server ended the session holding the bell (wait_timeout 1 s); logs: %q", logs.Lines(slog.LevelWarn))
	}
	if n := logs.Count(slog.LevelWarn, ""); n != 0 {
		t.Errorf("%d warnings: %q", n, logs.Lines(slog.LevelWarn))
	}
}
