package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// hiddenConn hides every method of the connection but driver.Conn's.
type hiddenConn struct{ driver.Conn }

// hiddenDSNConnector opens pgx's stdlib connections behind hiddenConn,
// which shows neither pgx's connection nor a Raw or Unwrap method: a
// driver the queue cannot see through (engine.PgxConn).
type hiddenDSNConnector struct {
	d   driver.Driver
	dsn string
}

func (c hiddenDSNConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return hiddenConn{conn}, nil
}
func (c hiddenDSNConnector) Driver() driver.Driver { return c.d }

// hiddenPgxPool opens a pool on env's PostgreSQL database whose
// connections are pgx's stdlib ones behind hiddenConn, closed when t ends.
func hiddenPgxPool(t *testing.T, env *testEnv) *sql.DB {
	t.Helper()
	name, dsn, _, err := engine.DriverDSN(env.url)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := sql.Open(name, dsn)
	if err != nil {
		t.Fatal(err)
	}
	hidden := sql.OpenDB(hiddenDSNConnector{d: plain.Driver(), dsn: dsn})
	t.Cleanup(func() { hidden.Close(); plain.Close() })
	return hidden
}

// TestClaimPgxRows (PostgreSQL): the claim scans its rows on pgx's
// connection (claim_postgres.go) into the same JobRows the generated
// queries read back, for every column NULL and set; through a driver that
// hides pgx's connection it takes the generated method, with the same rows.
func TestClaimPgxRows(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	hidden := hiddenPgxPool(t, env)
	for _, c := range []struct {
		name      string
		db        *sql.DB
		wantNoPgx bool
	}{
		{"pgx", nil, false},
		{"hidden driver", hidden, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env.exec(t, "DELETE FROM {t}")
			q := env.queue(t, c.db, WithEngine("postgres"), WithLogger(testdb.QuietLogger()))
			ctx := context.Background()
			at := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
			for i, opts := range [][]EnqueueOption{
				nil,
				{At(at), ExpiresAt(at.Add(time.Hour)), Type("other"), Policy(RetryPolicy{MaxAttempts: 9, BaseDelay: 7 * time.Second, MaxDelay: 70 * time.Second})},
			} {
				if _, err := q.Enqueue(ctx, testArgs{N: i}, opts...); err != nil {
					t.Fatal(err)
				}
			}
			// An earlier attempt's error and finish time stay on the row.
			env.exec(t, "UPDATE {t} SET error = 'boom', finished_at = created_at, attempts = 1 WHERE type = 'other'")
			rows, err := q.claim(ctx, nil, 10, time.Minute)
			if err != nil || len(rows) != 2 {
				t.Fatalf("claim = %d rows, %v; want 2", len(rows), err)
			}
			if got := q.run.noPgx.Load(); got != c.wantNoPgx {
				t.Errorf("claim took the generated method: %v, want %v", got, c.wantNoPgx)
			}
			checkClaimedRows(t, q, rows)
		})
	}
}

// TestWorkerBehindHiddenDriver (PostgreSQL): through a driver that hides
// pgx's connection (as some wrappers do) the queue cannot LISTEN, COPY or
// claim on pgx's interface; it says so once, at Warn, and does the same
// work by other means: the jobs of Enqueue and EnqueueMany are written, the
// worker finds them by polling and completes each exactly once.
func TestWorkerBehindHiddenDriver(t *testing.T) {
	env := coreEnv(t, engine.Postgres)
	hidden := hiddenPgxPool(t, env)
	logs := &testdb.LogRecorder{}
	q := env.queue(t, hidden, WithEngine("postgres"), WithLogger(slog.New(logs)))
	ctx := context.Background()

	var mu sync.Mutex
	runs := map[int]int{}
	w := q.NewWorker(WorkerConfig{Concurrency: 4, PollInterval: 50 * time.Millisecond, MaintenanceInterval: -1})
	Handle(w, func(ctx context.Context, job *Job[testArgs]) error {
		mu.Lock()
		defer mu.Unlock()
		runs[job.Args.N]++
		return nil
	})
	startWorker(t, w)
	waitUntil(t, 10*time.Second, "the warning that the worker polls only", func() bool {
		return logs.Count(slog.LevelWarn, "polls only") > 0
	})
	if _, err := q.Enqueue(ctx, testArgs{N: 0}); err != nil {
		t.Fatal(err)
	}
	if n, err := q.EnqueueMany(ctx, []JobArgs{testArgs{N: 1}, testArgs{N: 2}}); err != nil || n != 2 {
		t.Fatalf("EnqueueMany = %d, %v", n, err)
	}
	waitUntil(t, 10*time.Second, "three completed jobs", func() bool {
		return env.countWhere(t, "status = 'completed'") == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if want := map[int]int{0: 1, 1: 1, 2: 1}; !cmp.Equal(runs, want) {
		t.Errorf("handler runs %v, want each job once: %v", runs, want)
	}
	if n := logs.Count(slog.LevelWarn, "polls only"); n != 1 {
		t.Errorf("%d warnings that the worker polls only, want 1", n)
	}
	if errs := logs.Lines(slog.LevelError); len(errs) != 0 {
		t.Errorf("errors logged: %q", errs)
	}
}
