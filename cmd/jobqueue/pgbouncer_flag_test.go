//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestPgBouncerTransactionPoolingFlag: behind a PgBouncer in transaction
// pooling mode with one server connection, --transaction-pooling alone (no
// default_query_exec_mode in the URL) is enough on PostgreSQL, as its help
// says ("PgBouncer in transaction mode: prepare no statements"): install,
// enqueue, stats, list, a worker and its jobs all work, one command after
// another on the one server session. Before, the flag left pgx's statement
// cache on: the second command met the first one's prepared statement on
// that session ("prepared statement stmtcache_… already exists") and
// failed, every command after it too.
func TestPgBouncerTransactionPoolingFlag(t *testing.T) {
	t.Parallel()
	plain := testdb.PgBouncer(t, 1)
	direct := testdb.Open(t, engine.Postgres)
	c := cli{db: plain, table: testdb.Table(t, direct), timeout: time.Minute}
	c.ok(t, "install", "--transaction-pooling")
	c.ok(t, "install", "--transaction-pooling")
	for range 3 {
		c.ok(t, "enqueue", "--name", "n", "--transaction-pooling")
		c.ok(t, "stats", "--transaction-pooling")
	}
	c.ok(t, "list", "--transaction-pooling")
	r := c.run(t, "work", "--transaction-pooling", "--max-jobs", "3", "--poll-interval", "100ms", "--exec", "true")
	if r.code != 0 || strings.Contains(r.stderr, "prepared statement") {
		t.Fatalf("work --transaction-pooling --max-jobs 3: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	waitStats(t, c, time.Minute, map[string]int64{"completed": 3})
}
