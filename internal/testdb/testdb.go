// Package testdb opens the real databases that tests run against and hands
// each test its own table name, so that tests can run in parallel.
//
// The servers are found through environment variables, with defaults for the
// local development machine:
//
//	JOBQUEUE_TEST_POSTGRES  postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	JOBQUEUE_TEST_MYSQL     mysql://root@127.0.0.1:3306/test
//
// SQLite needs no server: each test gets a database file in its temp dir.
// When a server cannot be reached the test fails if CI is set (or
// JOBQUEUE_TEST_REQUIRE_ALL=1), and is skipped with the reason otherwise.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// Kinds returns every engine (engine.Kinds), a new slice each call, for
// table-driven tests and benchmarks. Most tests want ForEachEngine or
// ForEachKind instead of a loop.
func Kinds() []engine.Kind { return engine.Kinds() }

// Env is one engine's test database, opened for one test.
type Env struct {
	Kind engine.Kind // the engine
	URL  string      // the database URL (for SQLite, a new file in the test's temp dir)
	DB   *sql.DB     // a pool on URL, closed when the test ends
}

// New opens engine k's test database for t; the pool is closed when t ends.
// A server that cannot be reached fails the test in CI and skips it
// elsewhere (see Open).
func New(t testing.TB, k engine.Kind) *Env {
	t.Helper()
	url := URL(t, k)
	return &Env{Kind: k, URL: url, DB: OpenURL(t, url)}
}

// Table returns a fresh table name on the env's database, unique to t and
// dropped when t ends (see the function Table).
func (e *Env) Table(t testing.TB) string {
	t.Helper()
	return Table(t, e.DB)
}

// ForEachKind runs fn as a parallel subtest per engine, named after the
// engine (postgres, mysql, sqlite). Use it when fn opens what it needs
// itself; ForEachEngine also opens the database.
func ForEachKind(t *testing.T, fn func(t *testing.T, k engine.Kind)) {
	t.Helper()
	for _, k := range Kinds() {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			fn(t, k)
		})
	}
}

// ForEachEngine runs fn as a parallel subtest per engine, named after the
// engine, each with its own Env (its own SQLite file); e.Table gives fn as
// many fresh tables as it needs. Subtests fn starts with t.Run share e.
func ForEachEngine(t *testing.T, fn func(t *testing.T, e *Env)) {
	t.Helper()
	ForEachKind(t, func(t *testing.T, k engine.Kind) {
		fn(t, New(t, k))
	})
}

// URL is the database URL tests use for engine k (for SQLite, a new file in
// t's temp dir).
func URL(t testing.TB, k engine.Kind) string {
	t.Helper()
	switch k {
	case engine.Postgres:
		return envOr("JOBQUEUE_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	case engine.MySQL:
		return envOr("JOBQUEUE_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")
	case engine.SQLite:
		return "sqlite:" + filepath.Join(t.TempDir(), "test.db")
	}
	t.Fatalf("testdb: unknown engine %q", k)
	return ""
}

// Open opens the test database of engine k and closes it when t ends. A
// server that cannot be reached fails the test in CI and skips it elsewhere.
func Open(t testing.TB, k engine.Kind) *sql.DB {
	t.Helper()
	return OpenURL(t, URL(t, k))
}

// OpenURL is Open for a given URL (see engine.DriverDSN for the forms).
func OpenURL(t testing.TB, rawURL string) *sql.DB {
	t.Helper()
	db, _, err := engine.Open(context.Background(), rawURL)
	if err != nil {
		if Required() {
			t.Fatalf("testdb: %v (CI requires every engine)", err)
		}
		t.Skipf("testdb: skipping, server not reachable on this machine: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Required reports whether every engine must be reachable (in CI).
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("JOBQUEUE_TEST_REQUIRE_ALL") == "1"
}

// Table returns a table name of the form t_<test>_<random>, unique to this
// test and at most 40 characters long, and drops that table and its side
// tables (best effort, see Drop) from db when the test ends if db is not
// nil.
func Table(t testing.TB, db *sql.DB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, t.Name())
	if len(base) > 28 {
		base = base[len(base)-28:]
	}
	name := "t_" + base + "_" + hex.EncodeToString(b[:])
	if db != nil {
		t.Cleanup(func() { Drop(t, db, name) })
	}
	return name
}

// Drop drops the jobs table name and its side tables from db, the side
// tables first; a statement that fails is logged on t, not fatal.
func Drop(t testing.TB, db *sql.DB, name string) {
	k, err := engine.Detect(db)
	if err != nil {
		t.Logf("testdb: dropping table %s at cleanup: %v", name, err)
		return
	}
	objs := ddl.Objects(engine.Table{Kind: k, Name: name})
	for i := len(objs) - 1; i >= 0; i-- {
		if objs[i].Drop == "" {
			continue
		}
		if _, err := db.ExecContext(context.Background(), objs[i].Drop); err != nil {
			t.Logf("testdb: dropping %s %s at cleanup: %v", objs[i].Kind, objs[i].Name, err)
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
