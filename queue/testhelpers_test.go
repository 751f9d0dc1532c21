package queue

// Shared helpers for the tests of package queue.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
	"github.com/jobqueue/jobqueue/internal/testwait"
	"github.com/jobqueue/jobqueue/migrations"
)

// installTestTable creates the version 2 table named table in db with
// migrations.Install.
func installTestTable(t testing.TB, db *sql.DB, table string) {
	t.Helper()
	if err := migrations.Install(context.Background(), db, table); err != nil {
		t.Fatalf("migrations.Install(%s): %v", table, err)
	}
}

// testEnv is one engine's database with a fresh table for one test.
type testEnv struct {
	kind  engine.Kind
	url   string
	db    *sql.DB
	table string
	tbl   engine.Table
}

// newTestEnv opens kind's test database and creates a fresh table on it,
// dropped when t ends.
func newTestEnv(t testing.TB, kind engine.Kind) *testEnv {
	t.Helper()
	url := testdb.URL(t, kind)
	db := testdb.OpenURL(t, url)
	table := testdb.Table(t, db)
	installTestTable(t, db, table)
	tbl, err := engine.ParseTable(kind, table)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{kind: kind, url: url, db: db, table: table, tbl: tbl}
}

// freshTable returns an env on a new installed table of e's pool: for
// benchmarks that want a fresh table at every iteration, whose pools (one
// per newTestEnv, closed when the benchmark ends) would otherwise pile up
// to the server's connection limit at -benchtime=Nx.
func (e *testEnv) freshTable(t testing.TB) *testEnv {
	t.Helper()
	table := testdb.Table(t, e.db)
	installTestTable(t, e.db, table)
	tbl, err := engine.ParseTable(e.kind, table)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{kind: e.kind, url: e.url, db: e.db, table: table, tbl: tbl}
}

// queue opens a Queue on the env's table through db (the env's pool when
// nil).
func (e *testEnv) queue(t testing.TB, db *sql.DB, opts ...Option) *Queue {
	t.Helper()
	if db == nil {
		db = e.db
	}
	q, err := New(db, append([]Option{WithTable(e.table)}, opts...)...)
	if err != nil {
		t.Fatalf("queue.New: %v", err)
	}
	// Runs before the pool is closed and the temp dir removed (cleanups run
	// last in, first out): nothing of the queue's may still use them then.
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("closing the queue: %v", err)
		}
	})
	return q
}

// newPool opens another *sql.DB on the env's database, as another process
// would have.
func (e *testEnv) newPool(t testing.TB) *sql.DB {
	t.Helper()
	return testdb.OpenURL(t, e.url)
}

// newPoolWith is newPool with the URL options query added (say
// "_pragma=wal_autocheckpoint(0)" on SQLite).
func (e *testEnv) newPoolWith(t testing.TB, query string) *sql.DB {
	t.Helper()
	sep := "?"
	if strings.Contains(e.url, "?") {
		sep = "&"
	}
	return testdb.OpenURL(t, e.url+sep+query)
}

// urlWith is the env's URL with the options of settings (key, value,
// key, value …) set, replacing the URL's own. A space is sent as %20:
// pgx reads a '+' as itself.
func (e *testEnv) urlWith(t testing.TB, settings ...string) string {
	t.Helper()
	if len(settings)%2 != 0 {
		t.Fatalf("urlWith(%q): settings come in key, value pairs", settings)
	}
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatalf("parsing the test URL: %v", err)
	}
	v := u.Query()
	for i := 0; i < len(settings); i += 2 {
		v.Set(settings[i], settings[i+1])
	}
	u.RawQuery = strings.ReplaceAll(v.Encode(), "+", "%20")
	return u.String()
}

// exec runs a statement on the env's table, written with {t} for the quoted
// table name and ? placeholders (rewritten to $n on PostgreSQL).
func (e *testEnv) exec(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	res, err := e.db.ExecContext(context.Background(), e.sql(query), args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sql rewrites {t} and, on PostgreSQL, ? placeholders.
func (e *testEnv) sql(query string) string {
	query = strings.ReplaceAll(query, "{t}", e.tbl.Quoted())
	if e.kind != engine.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// countWhere counts the env table's rows matching a condition.
func (e *testEnv) countWhere(t testing.TB, cond string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRowContext(context.Background(), e.sql("SELECT COUNT(*) FROM {t} WHERE "+cond), args...).Scan(&n); err != nil {
		t.Fatalf("count where %s: %v", cond, err)
	}
	return n
}

// waitUntil polls cond every 10 ms until it holds or timeout passes, then
// fails the test naming what it waited for.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, timeout, 10*time.Millisecond, what, cond)
}

// waitFor receives from ch or fails the test after timeout.
func waitFor[T any](t testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	var zero T
	return zero
}

// startWorker runs w until the returned stop function is called (or the
// test ends); stop cancels Run's context and returns Run's error, failing
// the test if Run does not return within timeout.
func startWorker(t testing.TB, w *Worker) (stop func(timeout time.Duration) error, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	result := make(chan error, 1)
	var runErr error
	go func() {
		runErr = w.Run(ctx)
		close(finished)
		result <- runErr
	}()
	stop = func(timeout time.Duration) error {
		t.Helper()
		cancel()
		select {
		case <-finished:
			return runErr
		case <-time.After(timeout):
			t.Errorf("worker did not stop within %v", timeout)
			return errors.New("Run did not return in time")
		}
	}
	t.Cleanup(func() { stop(10 * time.Second) })
	return stop, result
}

// testClock is a queue clock that runs with real time plus an offset the
// test moves forward (to make retries due without waiting).
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().UTC().Add(c.offset)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// eventLog records what a queue's listener hears.
type eventLog struct {
	mu     sync.Mutex
	events []Event
	ch     chan Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan Event, 10000)} }

// listen is the listener to pass to WithListener.
func (l *eventLog) listen(ev Event) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
	select {
	case l.ch <- ev:
	default:
	}
}

// next waits for the next event of kind k (skipping others).
func (l *eventLog) next(t testing.TB, k EventKind, timeout time.Duration) Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-l.ch:
			if ev.Kind == k {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event within %v", k, timeout)
			return Event{}
		}
	}
}

// count is how many events of kind k were heard.
func (l *eventLog) count(k EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ev := range l.events {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// forEachEngine runs fn as a parallel subtest per engine.
// (fn opens its database with newTestEnv).
func forEachEngine(t *testing.T, fn func(t *testing.T, kind engine.Kind)) {
	t.Helper()
	testdb.ForEachKind(t, fn)
}

// forEachServerEngine is forEachEngine for the engines with a server
// (PostgreSQL and MySQL), for behaviour SQLite, in the process, cannot have.
func forEachServerEngine(t *testing.T, fn func(t *testing.T, kind engine.Kind)) {
	t.Helper()
	for _, k := range testdb.Kinds() {
		if k == engine.SQLite {
			continue
		}
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			fn(t, k)
		})
	}
}

// getJob reads a job through the queue, failing the test on error.
func getJob(t testing.TB, q *Queue, id int64) *JobRow {
	t.Helper()
	row, err := q.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return row
}

// statementNames records, in the order they are sent, which of the named
// generated statements a queue runs: hook is its withStatementHook.
type statementNames struct {
	names []string
	mu    sync.Mutex
	sent  []string
}

// newStatementNames records the statements named names (sqlc's "-- name:").
func newStatementNames(names ...string) *statementNames {
	return &statementNames{names: names}
}

// hook records query when it is one of the named statements.
func (s *statementNames) hook(query string, _ sqlRunner) {
	for _, name := range s.names {
		if strings.Contains(query, "-- name: "+name+" ") {
			s.mu.Lock()
			s.sent = append(s.sent, name)
			s.mu.Unlock()
			return
		}
	}
}

// take returns the names recorded since the last take.
func (s *statementNames) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.sent
	s.sent = nil
	return got
}

// waitNotifierIdle waits until q's announcer (PostgreSQL's notifier,
// MySQL's wake-ups) has nothing in flight (its announceGap after the last
// send included), so that the next Enqueue is the first after a quiet
// spell, and no announcement holds a connection of the pool.
func waitNotifierIdle(t *testing.T, q *Queue) {
	t.Helper()
	waitUntil(t, 30*time.Second, "the announcer to be idle", func() bool {
		q.announcer.mu.Lock()
		defer q.announcer.mu.Unlock()
		return !q.announcer.sending
	})
}
