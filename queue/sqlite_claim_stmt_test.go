package queue

// The SQLite claim statement at the level of the SQLite library: it must
// stay prepared from one claim to the next (SQLite 3.54 re-prepares a
// statement whose plan depends on a parameter's value when that value
// changes, and the claimer asks for a different number of jobs nearly every
// time), and BenchmarkSQLiteClaimStatement measures what one claim costs
// inside the write lock.

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// liteConn is a connection of the SQLite library itself, with no driver in
// between, so that a test can read a statement's counters.
type liteConn struct {
	tb  testing.TB
	tls *libc.TLS
	db  uintptr
}

func openLite(tb testing.TB, path string) *liteConn {
	tb.Helper()
	c := &liteConn{tb: tb, tls: libc.NewTLS()}
	var db uintptr // written by the library through its address (Go's heap does not move)
	rc := sqlite3.Xsqlite3_open_v2(c.tls, c.cstring(path), uintptr(unsafe.Pointer(&db)), sqlite3.SQLITE_OPEN_READWRITE, 0)
	runtime.KeepAlive(&db)
	c.db = db
	c.check(rc, "open "+path)
	c.exec("PRAGMA busy_timeout = 10000")
	tb.Cleanup(func() {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
		c.tls.Close()
	})
	return c
}

// cstring is s in C memory, freed when the test ends.
func (c *liteConn) cstring(s string) uintptr {
	p, err := libc.CString(s)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(func() { libc.Xfree(c.tls, p) })
	return p
}

func (c *liteConn) check(rc int32, what string) {
	c.tb.Helper()
	if rc != sqlite3.SQLITE_OK && rc != sqlite3.SQLITE_ROW && rc != sqlite3.SQLITE_DONE {
		c.tb.Fatalf("%s: SQLite error %d: %s", what, rc, libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db)))
	}
}

func (c *liteConn) exec(query string) {
	c.tb.Helper()
	c.check(sqlite3.Xsqlite3_exec(c.tls, c.db, c.cstring(query), 0, 0, 0), query)
}

// liteStmt is a prepared statement of a liteConn.
type liteStmt struct {
	c  *liteConn
	st uintptr
}

func (c *liteConn) prepare(query string) *liteStmt {
	c.tb.Helper()
	var st uintptr
	c.check(sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, c.cstring(query), -1, uintptr(unsafe.Pointer(&st)), 0), "prepare")
	runtime.KeepAlive(&st)
	s := &liteStmt{c: c, st: st}
	c.tb.Cleanup(func() { sqlite3.Xsqlite3_finalize(c.tls, s.st) })
	return s
}

// run binds args (nil, int64 or string) by position, steps through every
// row and resets the statement; text arguments are unbound again after it,
// as the driver does. It returns the number of rows.
func (s *liteStmt) run(args ...any) int {
	s.c.tb.Helper()
	tls := s.c.tls
	var texts []int32
	var bufs []uintptr
	for i, a := range args {
		n := int32(i + 1)
		switch v := a.(type) {
		case nil:
			sqlite3.Xsqlite3_bind_null(tls, s.st, n)
		case int64:
			sqlite3.Xsqlite3_bind_int64(tls, s.st, n, v)
		case string:
			p, err := libc.CString(v)
			if err != nil {
				s.c.tb.Fatal(err)
			}
			bufs = append(bufs, p)
			sqlite3.Xsqlite3_bind_text(tls, s.st, n, p, int32(len(v)), 0)
			texts = append(texts, n)
		default:
			s.c.tb.Fatalf("liteStmt.run: argument %d is a %T", n, a)
		}
	}
	rows := 0
	for {
		rc := sqlite3.Xsqlite3_step(tls, s.st)
		if rc != sqlite3.SQLITE_ROW {
			s.c.check(rc, "step")
			break
		}
		rows++
	}
	sqlite3.Xsqlite3_reset(tls, s.st)
	for _, n := range texts {
		sqlite3.Xsqlite3_bind_null(tls, s.st, n)
	}
	for _, p := range bufs {
		libc.Xfree(tls, p)
	}
	return rows
}

// reprepared is how many times SQLite prepared the statement again.
func (s *liteStmt) reprepared() int {
	return int(sqlite3.Xsqlite3_stmt_status(s.c.tls, s.st, sqlite3.SQLITE_STMTSTATUS_REPREPARE, 0))
}

// sqliteClaimText is the claim statement the queue sends to env's table, as
// sent (captured by the statement hook from one claim).
func sqliteClaimText(tb testing.TB, env *testEnv) string {
	tb.Helper()
	var text string
	q := env.queue(tb, nil, WithLogger(testdb.QuietLogger()), withStatementHook(func(query string, _ sqlRunner) {
		if strings.Contains(query, "name: ClaimJobs") {
			text = query
		}
	}))
	if _, err := q.claim(context.Background(), nil, 1, time.Minute); err != nil {
		tb.Fatal(err)
	}
	if text == "" {
		tb.Fatal("the claim sent no statement named ClaimJobs")
	}
	return text
}

// claimArgs are ClaimJobs' arguments (in the order of its parameters) for a
// claim of every type, from the start, of up to max jobs.
func claimArgs(max int) []any {
	now := time.Now()
	return []any{
		newClaimToken(), engine.SQLite.TimeArg(now.Add(time.Minute)), nil, nil,
		engine.SQLite.TimeArg(now), engine.SQLite.TimeArg(time.Time{}), int64(0), int64(max),
	}
}

func TestSQLiteClaimNotReprepared(t *testing.T) {
	env := newTestEnv(t, engine.SQLite)
	text := sqliteClaimText(t, env)
	enqueueSeq(t, env.queue(t, nil, WithLogger(testdb.QuietLogger())), 200)
	c := openLite(t, strings.TrimPrefix(env.url, "sqlite:"))
	st := c.prepare(text)
	claimed := 0
	for max := 1; max <= 12; max++ { // a new number of jobs every time, as the claimer asks
		claimed += st.run(claimArgs(max)...)
	}
	if claimed != 78 {
		t.Fatalf("12 claims of 1 to 12 jobs claimed %d jobs, want 78", claimed)
	}
	if n := st.reprepared(); n != 0 {
		t.Fatalf("the claim statement was prepared again %d times in 12 claims, want 0 (a LIMIT or other parameter whose value SQLite plans with? see ClaimJobs in sql/sqlite/queries.sql)", n)
	}
}

// BenchmarkSQLiteClaimStatement runs the claim statement alone, at the
// level of the SQLite library, as the write gate runs it (one claim of 1
// to 64 jobs, as many as a claimer of concurrency 8 has room for, rolled
// back so that the table never drains), and reports its time per claimed
// job and how often SQLite prepared it again (want 0).
func BenchmarkSQLiteClaimStatement(b *testing.B) {
	env := newTestEnv(b, engine.SQLite)
	text := sqliteClaimText(b, env)
	enqueueSeq(b, env.queue(b, nil, WithLogger(testdb.QuietLogger())), 2000)
	c := openLite(b, strings.TrimPrefix(env.url, "sqlite:"))
	st := c.prepare(text)
	begin, rollback := c.prepare("BEGIN IMMEDIATE"), c.prepare("ROLLBACK")
	jobs := 0
	i := 0
	for b.Loop() {
		max := 33 + i%32
		i++
		begin.run()
		if n := st.run(claimArgs(max)...); n != max {
			b.Fatalf("claim of %d jobs claimed %d", max, n)
		}
		rollback.run()
		jobs += max
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(jobs), "ns/job")
	b.ReportMetric(float64(st.reprepared())/float64(i), "reprepares/claim")
}

// TestSQLiteClaimRow checks that a claimed job's row, which the claim
// builds from fewer columns than the table has (it knows what it wrote)
// and from the text of its times, is the row Get reads afterwards.
func TestSQLiteClaimRow(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []EnqueueOption
		set  string // an UPDATE's SET of the job's row before the claim, or ""
	}{
		{name: "plain"},
		{name: "type and deadline", opts: []EnqueueOption{Type("mail"), ExpiresIn(time.Hour)}},
		{name: "an earlier attempt's error", set: "error = 'boom', attempts = 1"},
		{name: "times in other layouts", set: "scheduled_at = '2020-01-02 03:04:05', created_at = '2020-01-02T03:04:05.5Z', finished_at = '2020-01-02 03:04'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv(t, engine.SQLite)
			q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
			id, err := q.Enqueue(ctx, seqArgs{N: 1}, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if c.set != "" {
				env.exec(t, "UPDATE {t} SET "+c.set+" WHERE id = ?", id)
			}
			var types []string
			if len(c.opts) > 0 {
				types = []string{"mail"}
			}
			rows, err := q.claim(ctx, types, 5, time.Minute)
			if err != nil || len(rows) != 1 {
				t.Fatalf("claim: %d rows, %v; want 1 row", len(rows), err)
			}
			got, err := q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rows[0], got) {
				t.Fatalf("the claim returned\n%+v\nGet reads\n%+v", rows[0], got)
			}
		})
	}
}

func TestParseSQLiteTime(t *testing.T) {
	db := testdb.New(t, engine.SQLite).DB
	if _, err := db.Exec("CREATE TABLE times (at DATETIME)"); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{
		"2026-12-02 01:02:03.456789", "2026-12-02 01:02:03.000000", "0001-01-01 00:00:00.000000",
		"2026-12-02 01:02:03", "2026-12-02T01:02:03.5", "2026-12-02 01:02:03.5Z", "2026-12-02 01:02:03+02:00",
		"2026-12-02 01:02", "2026-12-02",
		"2026-02-30 01:02:03.000000", "2026-13-02 01:02:03.000000", "2026-12-02 24:02:03.000000", "yesterday",
	} {
		t.Run(text, func(t *testing.T) {
			if _, err := db.Exec("DELETE FROM times"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("INSERT INTO times VALUES (?)", text); err != nil {
				t.Fatal(err)
			}
			var driver time.Time
			derr := db.QueryRow("SELECT at FROM times").Scan(&driver)
			got, err := parseSQLiteTime(text)
			switch {
			case derr != nil && err == nil:
				t.Fatalf("parseSQLiteTime(%q) = %v; the driver reads no time (%v)", text, got, derr)
			case derr == nil && err != nil:
				t.Fatalf("parseSQLiteTime(%q): %v; the driver reads %v", text, err, driver)
			case derr == nil && !got.Equal(engine.AsUTC(driver)):
				t.Fatalf("parseSQLiteTime(%q) = %v; the driver reads %v (as UTC: %v)", text, got, driver, engine.AsUTC(driver))
			}
		})
	}
}
