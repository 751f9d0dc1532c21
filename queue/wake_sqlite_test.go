package queue

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/db/sqlitegen"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// Tests of the wake-ups across processes on SQLite (wake_sqlite.go). As in
// notify_postgres_test.go, every worker runs on a pool of its own, as in
// another process (a pool's connections are the processes' connections to
// the file), with a poll interval of a minute: only a wake-up can make it
// claim within the few seconds each test waits.

// dueJobExists runs DueJobExists for types (all when none) on q's pool.
func dueJobExists(t *testing.T, q *Queue, types ...string) bool {
	t.Helper()
	one, many := claimFilter(types)
	due, err := sqlitegen.New(q.run.on(nil)).DueJobExists(context.Background(),
		sqlitegen.DueJobExistsParams{Type: one, Types: many, Now: q.now()})
	if err != nil {
		t.Fatalf("DueJobExists(%v): %v", types, err)
	}
	return due
}

// waitWatching waits until the worker logging to logs watches the data
// version (its session has read it once; the wake-up it sends then, for
// what it may have missed, is taken by the claim that follows).
func waitWatching(t *testing.T, logs *testdb.LogRecorder) {
	t.Helper()
	waitUntil(t, 30*time.Second, "the worker to watch for commits", func() bool {
		return logs.Count(slog.LevelDebug, "started watching for the commits of other processes") > 0
	})
}

// TestDueJobExists: the watcher's probe finds a job exactly when the claim
// of the same types would take one.
func TestDueJobExists(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.SQLite)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	ctx := context.Background()
	if dueJobExists(t, q) {
		t.Fatal("an empty table has a due job")
	}
	// Jobs that no claim takes now.
	mustEnqueue(t, q, emailArgs{}, Type("later"), Delay(time.Hour))
	expired := mustEnqueue(t, q, emailArgs{}, Type("expired"), ExpiresIn(time.Hour))
	env.exec(t, "UPDATE {t} SET expires_at = ? WHERE id = ?", engine.SQLite.TimeArg(time.Now().Add(-time.Minute)), expired)
	running := mustEnqueue(t, q, emailArgs{}, Type("running"))
	if got := mustClaim(t, q, []string{"running"}, 1, time.Minute); len(got) != 1 || got[0].ID != running {
		t.Fatalf("claimed %v, want job %d", ids(got), running)
	}
	// One job due now, of type email.
	mustEnqueue(t, q, emailArgs{}, Type("email"))
	for _, c := range []struct {
		types []string
		want  bool
	}{
		{nil, true},
		{[]string{"email"}, true},
		{[]string{"sms"}, false},
		{[]string{"later"}, false},
		{[]string{"expired"}, false},
		{[]string{"running"}, false},
		{[]string{"sms", "email"}, true},
		{[]string{"sms", "later", "running", "expired"}, false},
	} {
		if got := dueJobExists(t, q, c.types...); got != c.want {
			t.Errorf("DueJobExists(%v) = %v, want %v", c.types, got, c.want)
		}
		// The claim agrees (and takes nothing: it runs in a transaction
		// rolled back).
		tx, err := env.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		one, many := claimFilter(c.types)
		rows, err := sqlitegen.New(q.run.on(tx)).ClaimJobs(ctx, sqlitegen.ClaimJobsParams{
			Token: nullString("t"), LeaseUntil: nullTime(new(time.Now().Add(time.Minute))), Type: one, Types: many,
			Now: q.now(), AfterAt: time.Time{}, AfterID: 0, MaxJobs: 1,
		})
		if rbErr := tx.Rollback(); rbErr != nil {
			t.Fatal(rbErr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if (len(rows) == 1) != c.want {
			t.Errorf("ClaimJobs(%v) claimed %d jobs, DueJobExists says %v", c.types, len(rows), c.want)
		}
	}
}

// TestSQLiteWakeWorkersOfOtherPools: any commit of another connection that
// leaves a job of the worker's type due makes the idle worker start it at
// once (the queue's enqueues, the caller's transaction at its commit, a
// row inserted by hand); commits that leave none due (another table's
// enqueue, another type, a job for later, a rolled-back transaction) do not
// make it claim.
func TestSQLiteWakeWorkersOfOtherPools(t *testing.T) {
	t.Parallel()
	s := newWakeSetup(t, engine.SQLite, nil)
	ctx := context.Background()
	waitWatching(t, s.warns)
	p := s.producer
	otherTable := s.env.table + "_other"
	installTestTable(t, s.env.db, otherTable)
	other := s.env.queue(t, nil, WithTable(otherTable), WithLogger(testdb.QuietLogger()))
	for _, c := range append(append(ownCommitCases(t, p), callerTxCases(t, s, p)...), []wakeCase{
		{"a row inserted by hand", func() int {
			s.env.exec(t, `INSERT INTO {t} (name, type, payload, status, attempts, max_attempts, base_delay, max_delay, scheduled_at, created_at)
				VALUES ('email', 'email', '{}', 'pending', 0, 3, 1, 1, strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 second'), strftime('%Y-%m-%d %H:%M:%f', 'now'))`)
			return 1
		}},
		{"another table", func() int {
			if _, err := other.Enqueue(ctx, emailArgs{}, Type("email")); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
		{"another type", func() int {
			if _, err := p.Enqueue(ctx, emailArgs{}, Type("sms")); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
		{"a job for later", func() int {
			if _, err := p.Enqueue(ctx, emailArgs{}, Type("email"), Delay(time.Hour)); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
	}...) {
		// Counted before the commit: the wake-up's claim may come before
		// do returns (read after it, a claim already made was missed).
		before := s.claims.n.Load()
		n := c.do()
		if n == 0 {
			s.quiet(t, 300*time.Millisecond, c.name)
			continue
		}
		waitRan(t, s.ran, n, c.name)
		if got := s.claims.n.Load() - before; got < 1 {
			t.Fatalf("%s: the jobs ran after %d claims", c.name, got)
		}
		// Let the run's completion land: it is a commit of another
		// connection too, which must not wake the worker (the quiet cases
		// count claims).
		waitUntil(t, 30*time.Second, "the jobs to complete", func() bool {
			return s.env.countWhere(t, "status = 'in_progress'") == 0
		})
	}
	if n := s.warns.Count(slog.LevelWarn, ""); n != 0 {
		t.Fatalf("the worker logged %d warnings: %v", n, s.warns.Lines(slog.LevelWarn))
	}
}

// rollbackEnv is a testEnv on a new SQLite file in SQLite's default
// rollback journal mode (DELETE; jobqueue's URLs choose WAL), and a second
// pool on it.
func rollbackEnv(t *testing.T) (*testEnv, *sql.DB) {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "rollback.db") + "?_pragma=busy_timeout(10000)&_txlock=immediate"
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	db := open()
	installTestTable(t, db, "jobs")
	tbl, err := engine.ParseTable(engine.SQLite, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{kind: engine.SQLite, db: db, table: "jobs", tbl: tbl}, open()
}

// TestSQLiteWatcherOff: a worker that is PollOnly, whose pool allows one
// connection, whose queue runs through a transaction pooler, or whose
// database is not in WAL mode, does not watch (and says why, but for
// PollOnly) (a job of another pool waits for the poll); a
// watching worker gives its connection back when Run returns.
func TestSQLiteWatcherOff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		edit     func(*testEnv, *WorkerConfig)
		pool1    bool
		pooled   bool // WithTransactionPooling(true)
		rollback bool // the database in a rollback journal mode, not WAL
		watch    bool
		notice   string // what the worker logs at info level about it
	}{
		{"PollOnly", func(_ *testEnv, cfg *WorkerConfig) { cfg.PollOnly = true }, false, false, false, false, ""},
		{"pool of one", nil, true, false, false, false, "the pool allows too few connections"},
		{"transaction pooler", nil, false, true, false, false, "transaction pooler"},
		{"rollback journal", nil, false, false, true, false, "journal mode is delete, not WAL"},
		{"default", nil, false, false, false, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var env *testEnv
			var pool *sql.DB
			if c.rollback {
				env, pool = rollbackEnv(t)
			} else {
				env = newTestEnv(t, engine.SQLite)
				pool = env.newPool(t)
			}
			producer := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
			if c.pool1 {
				pool.SetMaxOpenConns(1)
			}
			logs, claims := &testdb.LogRecorder{}, &claimCounter{}
			wq := env.queue(t, pool, WithLogger(slog.New(logs)), withStatementHook(claims.observe), WithTransactionPooling(c.pooled))
			cfg := fastConfig()
			cfg.Types = []string{"email"}
			cfg.PollInterval = time.Minute
			cfg.MaintenanceInterval = -1
			if c.edit != nil {
				c.edit(env, &cfg)
			}
			w := wq.NewWorker(cfg)
			ran := make(chan int64, 10)
			Handle(w, func(ctx context.Context, job *Job[emailArgs]) error { ran <- job.ID; return nil })
			stop, _ := startWorker(t, w)
			if c.watch {
				waitWatching(t, logs)
				mustEnqueue(t, producer, emailArgs{}, Type("email"))
				waitRan(t, ran, 1, "a job of another pool")
			} else {
				// The claim at the start, and no other: the job of another
				// pool (taken by that claim, or left for the next poll)
				// wakes no one.
				waitUntil(t, 30*time.Second, "the worker's first claim", func() bool { return claims.n.Load() >= 1 })
				mustEnqueue(t, producer, emailArgs{}, Type("email"))
				time.Sleep(300 * time.Millisecond) // a window for a wake-up that must not come
				if n := claims.n.Load(); n != 1 {
					t.Fatalf("the worker claimed %d times, want once (at its start)", n)
				}
			}
			if c.notice != "" {
				// The journal mode's notice comes from the watcher's own
				// goroutine, which may log it after the first claim and
				// the window above: wait for it (the others' come before
				// the first claim).
				waitUntil(t, 30*time.Second, "the notice of not watching", func() bool {
					return logs.Count(slog.LevelInfo, "not watching") > 0
				})
			}
			if got := logs.Count(slog.LevelDebug, "started watching for the commits of other processes"); (got > 0) != c.watch {
				t.Fatalf("watching logged %d times, want watching %v", got, c.watch)
			}
			info := strings.Join(logs.Lines(slog.LevelInfo), "\n")
			if notWatching := strings.Contains(info, "not watching"); notWatching != (c.notice != "") || !strings.Contains(info, c.notice) {
				t.Fatalf("the worker logged at info level:\n%s\nwant a notice of not watching: %q", info, c.notice)
			}
			if err := stop(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			if n := pool.Stats().InUse; n != 0 {
				t.Fatalf("%d connections of the worker's pool still in use after Run returned", n)
			}
		})
	}
}

// BenchmarkSQLiteWatcherCheck is the cost of one check of a watcher
// (dataWatch.check), made every dataVersionInterval for as long as a
// worker runs: "unchanged" reads the data version only (an idle database),
// "changed" also runs the probe, which finds nothing due (another
// connection committed something else: jobs of other types, the
// application's own tables).
func BenchmarkSQLiteWatcherCheck(b *testing.B) {
	ctx := context.Background()
	env := newTestEnv(b, engine.SQLite)
	q := env.queue(b, nil, WithLogger(testdb.QuietLogger()))
	if _, err := q.EnqueueMany(ctx, []JobArgs{emailArgs{}, emailArgs{}}, Type("sms")); err != nil {
		b.Fatal(err)
	}
	conn, err := env.db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	var stmts connStmts
	defer stmts.close()
	w := &sqliteWatcher{q: q, types: []string{"email"}}
	dw, err := w.startWatch(ctx, conn, &stmts)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		changed bool
	}{{"unchanged", false}, {"changed", true}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.changed {
					dw.last = -1 // as if another connection had committed
				}
				due, err := dw.check(ctx)
				if err != nil || due {
					b.Fatalf("check: due %v, %v; want nothing due", due, err)
				}
			}
		})
	}
}

// TestWatchInterval: the watcher checks often while jobs come, less often
// once it has found none due for a while.
func TestWatchInterval(t *testing.T) {
	for _, c := range []struct {
		sinceDue time.Duration
		want     time.Duration
	}{
		{0, dataVersionInterval},
		{500 * time.Millisecond, dataVersionInterval},
		{dataVersionQuietAfter - time.Nanosecond, dataVersionInterval},
		{dataVersionQuietAfter, dataVersionQuietInterval},
		{time.Hour, dataVersionQuietInterval},
	} {
		if got := watchInterval(c.sinceDue); got != c.want {
			t.Errorf("watchInterval(%v) = %v, want %v", c.sinceDue, got, c.want)
		}
	}
}
