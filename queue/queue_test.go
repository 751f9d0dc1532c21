package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/migrations"
)

// coreEnv opens kind's test database with a fresh table installed by
// migrations.Install (dropped when t ends).
func coreEnv(t *testing.T, kind engine.Kind) *testEnv {
	t.Helper()
	url := testdb.URL(t, kind)
	db := testdb.OpenURL(t, url)
	table := testdb.Table(t, db)
	if err := migrations.Install(context.Background(), db, table); err != nil {
		t.Fatalf("migrations.Install(%s): %v", table, err)
	}
	tbl, err := engine.ParseTable(kind, table)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{kind: kind, url: url, db: db, table: table, tbl: tbl}
}

// fixedClock is a queue clock the test sets (whole seconds, so that MySQL's
// DATETIME keeps it exactly).
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFixedClock() *fixedClock { return &fixedClock{t: time.Now().UTC().Truncate(time.Second)} }

func (c *fixedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// coreQueue opens a quiet queue on env's table with a fixed clock.
func coreQueue(t *testing.T, env *testEnv, opts ...Option) (*Queue, *fixedClock) {
	t.Helper()
	clock := newFixedClock()
	base := []Option{withClock(clock.now), WithLogger(testdb.QuietLogger())}
	return env.queue(t, nil, append(base, opts...)...), clock
}

// stmtCounter counts the statements a queue sends (withStatementHook).
type stmtCounter struct {
	mu    sync.Mutex
	texts []string
	hook  func(n int) // called with the statement's number, if set
}

func (c *stmtCounter) observe(q string, _ sqlRunner) {
	c.mu.Lock()
	c.texts = append(c.texts, q)
	n, hook := len(c.texts), c.hook
	c.mu.Unlock()
	if hook != nil {
		hook(n)
	}
}

func (c *stmtCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.texts)
}

// countWith counts the statements whose text contains sub.
func (c *stmtCounter) countWith(sub string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, q := range c.texts {
		if strings.Contains(q, sub) {
			n++
		}
	}
	return n
}

func (c *stmtCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.texts = nil
}

// mustEnqueue enqueues or fails the test.
func mustEnqueue(t *testing.T, q *Queue, args JobArgs, opts ...EnqueueOption) int64 {
	t.Helper()
	id, err := q.Enqueue(context.Background(), args, opts...)
	if err != nil {
		t.Fatalf("Enqueue(%v): %v", args, err)
	}
	return id
}

// mustClaim claims or fails the test.
func mustClaim(t *testing.T, q *Queue, types []string, max int, lease time.Duration) []*JobRow {
	t.Helper()
	jobs, err := q.claim(context.Background(), types, max, lease)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return jobs
}

// rowCount counts the env table's rows.
func rowCount(t *testing.T, env *testEnv) int { return env.countWhere(t, "1=1") }

// testArgs is a job's args in these tests.
type testArgs struct {
	N    int    `json:"n"`
	Text string `json:"text,omitempty"`
}

func (testArgs) Kind() string { return "test" }

// kindArgs lets a test choose the kind.
type kindArgs struct{ K string }

func (a kindArgs) Kind() string { return a.K }

// badArgs cannot be encoded.
type badArgs struct{ C chan int }

func (badArgs) Kind() string { return "bad" }

func TestNewChecksTheTable(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		db := testdb.Open(t, kind)
		tbl, err := engine.ParseTable(kind, testdb.Table(t, db))
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := engine.ParseTable(kind, testdb.Table(t, db))
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name  string
			setup func(t *testing.T)
			table string
			want  error
			text  []string
		}{
			{name: "missing table", table: tbl.Name, want: ErrTableMissing, text: []string{"migrations.Install", "jobqueue install"}},
			// Another program's table: not sent to Migrate, which refuses it.
			{name: "foreign table", table: foreign.Name, want: ErrForeignTable, text: []string{"not a jobqueue table", "another table name"},
				setup: func(t *testing.T) {
					if _, err := db.ExecContext(ctx, "CREATE TABLE "+foreign.Quoted()+" (x INTEGER)"); err != nil {
						t.Fatal(err)
					}
				}},
			{name: "bad name", table: "jobs; drop", want: ErrInvalidTableName},
			{name: "version 1 table", table: tbl.Name, want: ErrOutdatedTable, text: []string{"migrations.Migrate"},
				setup: func(t *testing.T) {
					ddl := "CREATE TABLE " + tbl.Quoted() + " (id INTEGER PRIMARY KEY, name VARCHAR(255) NOT NULL, type VARCHAR(64), payload TEXT, status VARCHAR(20), retry_count INT, error TEXT, scheduled_at TIMESTAMP, locked_at TIMESTAMP NULL, expires_at TIMESTAMP NULL, created_at TIMESTAMP)"
					if _, err := db.ExecContext(ctx, ddl); err != nil {
						t.Fatal(err)
					}
				}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if c.setup != nil {
					c.setup(t)
				}
				q, err := New(db, WithTable(c.table))
				if !errors.Is(err, c.want) || q != nil {
					t.Fatalf("New = %v, %v; want error %v", q, err, c.want)
				}
				for _, s := range c.text {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
			})
		}
	})
}

// TestNewRefusesHalfMigratedTable: a table that has every version 2 column
// but is not finished (a v1 column left, or on MySQL a status without
// 'expired') passes the probe; New must still refuse it, as Install does.
func TestNewRefusesHalfMigratedTable(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		db := testdb.Open(t, kind)
		cases := []struct {
			name  string
			alter string // %s is the quoted table
			only  engine.Kind
		}{
			{name: "retry_count left", alter: "ALTER TABLE %s ADD COLUMN retry_count INT"},
			{name: "locked_at left", alter: "ALTER TABLE %s ADD COLUMN locked_at TIMESTAMP NULL"},
			{name: "no expired status", only: engine.MySQL,
				alter: "ALTER TABLE %s MODIFY status ENUM('pending','in_progress','completed','failed') NOT NULL DEFAULT 'pending'"},
		}
		for _, c := range cases {
			if c.only != "" && c.only != kind {
				continue // a case of another engine
			}
			t.Run(c.name, func(t *testing.T) {
				tbl, err := engine.ParseTable(kind, testdb.Table(t, db))
				if err != nil {
					t.Fatal(err)
				}
				if err := migrations.Install(ctx, db, tbl.Name); err != nil {
					t.Fatal(err)
				}
				if q, err := New(db, WithTable(tbl.Name)); err != nil {
					t.Fatalf("New on the installed table: %v", err)
				} else if err := q.Close(); err != nil {
					t.Fatalf("closing the queue: %v", err)
				}
				if _, err := db.ExecContext(ctx, fmt.Sprintf(c.alter, tbl.Quoted())); err != nil {
					t.Fatal(err)
				}
				q, err := New(db, WithTable(tbl.Name))
				if !errors.Is(err, ErrOutdatedTable) || q != nil {
					t.Fatalf("New = %v, %v; want ErrOutdatedTable", q, err)
				}
				if !strings.Contains(err.Error(), "migrations.Migrate") {
					t.Errorf("error %q does not name migrations.Migrate", err)
				}
			})
		}
	})
}

func TestSmokeLifecycle(t *testing.T) {
	forEachEngine(t, func(t *testing.T, kind engine.Kind) {
		ctx := context.Background()
		env := coreEnv(t, kind)
		q, clock := coreQueue(t, env)
		id, err := q.Enqueue(ctx, testArgs{N: 1})
		if err != nil {
			t.Fatal(err)
		}
		n, err := q.EnqueueMany(ctx, []JobArgs{testArgs{N: 2}, testArgs{N: 3}})
		if err != nil || n != 2 {
			t.Fatalf("EnqueueMany = %d, %v", n, err)
		}
		jobs, err := q.claim(ctx, nil, 10, time.Minute)
		if err != nil || len(jobs) != 3 {
			t.Fatalf("claim = %d jobs, %v", len(jobs), err)
		}
		if jobs[0].ID != id || jobs[0].Status != StatusInProgress || jobs[0].Attempts != 1 || jobs[0].ClaimToken == "" {
			t.Fatalf("claimed %+v", jobs[0])
		}
		stale, err := q.complete(ctx, []attemptRef{jobs[0].ref(), {ID: jobs[1].ID, Token: "nope"}})
		if err != nil || len(stale) != 1 || stale[0].ID != jobs[1].ID {
			t.Fatalf("complete: stale %v, %v", stale, err)
		}
		st, next, err := q.fail(ctx, jobs[2], errors.New("boom"))
		if err != nil || st != StatusPending || !next.Equal(clock.now().Add(time.Minute)) {
			t.Fatalf("fail = %v %v %v", st, next, err)
		}
		got := getJob(t, q, jobs[0].ID)
		if got.Status != StatusCompleted || got.FinishedAt == nil || !got.FinishedAt.Equal(clock.now()) {
			t.Fatalf("completed job: %+v", got)
		}
		stats, err := q.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[Status]int64{StatusPending: 1, StatusInProgress: 1, StatusCompleted: 1, StatusFailed: 0, StatusExpired: 0}
		for k, v := range want {
			if stats[k] != v {
				t.Errorf("stats %v, want %v", stats, want)
				break
			}
		}
	})
}

// installTable creates another table in env's database with
// migrations.Install.
func installTable(ctx context.Context, env *testEnv, name string) error {
	return migrations.Install(ctx, env.db, name)
}

// openMySQLDSN opens a go-sql-driver DSN, closed when t ends.
func openMySQLDSN(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestNewOnMySQLWithoutParseTime(t *testing.T) {
	t.Parallel()
	env := coreEnv(t, engine.MySQL)
	_, dsn, _, err := engine.DriverDSN(env.url)
	if err != nil {
		t.Fatal(err)
	}
	dsn = strings.Replace(dsn, "parseTime=true", "parseTime=false", 1)
	db := openMySQLDSN(t, dsn)
	q, err := New(db, WithTable(env.table))
	if err == nil || q != nil || !strings.Contains(err.Error(), "parseTime=true") {
		t.Fatalf("New without parseTime = %v, %v; want an error naming parseTime=true", q, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	db := testdb.Open(t, engine.SQLite)
	cases := []struct {
		name string
		opt  Option
		want error
	}{
		{"zero policy", WithRetryPolicy(RetryPolicy{}), ErrInvalidPolicy},
		{"base delay beyond the INT column", WithRetryPolicy(RetryPolicy{MaxAttempts: 1, BaseDelay: (math.MaxInt32 + 1) * time.Second, MaxDelay: time.Hour}), ErrInvalidPolicy},
		{"nil logger", WithLogger(nil), nil},
		{"nil codec", WithCodec(nil), nil},
		{"long name", WithTable(strings.Repeat("x", 65)), ErrInvalidTableName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := New(db, c.opt)
			if err == nil || q != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("New = %v, %v; want error %v", q, err, c.want)
			}
		})
	}
	if _, err := New(nil); !errors.Is(err, ErrUnsupportedDatabase) {
		t.Errorf("New(nil) = %v", err)
	}
}

// migrationsInstall is migrations.Install (for benchmarks, which have no
// testEnv).
func migrationsInstall(ctx context.Context, db *sql.DB, table string) error {
	return migrations.Install(ctx, db, table)
}
