package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestEnqueueEarlyCommit: the first Enqueue after a quiet spell sends its
// insert and FlushCommits in one batch (enqueue_postgres_early.go); the job
// is there when Enqueue returns; the connection goes back to the pool as it
// was (no transaction open, synchronous_commit as the server's), also after
// an insert the server refuses; and with FlushCommits refused the insert
// goes alone, as before.
func TestEnqueueEarlyCommit(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	// One connection: the one the batch ran on is the one checked after.
	db := env.newPool(t)
	db.SetMaxOpenConns(1)
	sent := newStatementNames("InsertJobNotify", "InsertJob", "FlushCommits")
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()), withStatementHook(sent.hook))
	ctx := context.Background()
	quiet := func() { waitNotifierIdle(t, q) }
	taken := func() string { return strings.Join(sent.take(), " ") }
	clean := func(t *testing.T) {
		t.Helper()
		var sc string
		var xid sql.NullInt64
		if err := db.QueryRowContext(ctx, "SELECT current_setting('synchronous_commit'), txid_current_if_assigned()").Scan(&sc, &xid); err != nil {
			t.Fatalf("the pool's connection after the enqueue: %v", err)
		}
		if sc != "on" || xid.Valid {
			t.Errorf("the pool's connection after the enqueue: synchronous_commit %q, transaction %v; want on and none", sc, xid)
		}
	}

	t.Run("early", func(t *testing.T) {
		quiet()
		id, err := q.Enqueue(ctx, testArgs{N: 1}, Type("a"))
		if err != nil {
			t.Fatal(err)
		}
		if got := taken(); got != "InsertJobNotify FlushCommits" {
			t.Errorf("statements %q, want InsertJobNotify FlushCommits", got)
		}
		if j := getJob(t, q, id); j.Status != StatusPending || j.Type != "a" {
			t.Errorf("job %d: status %s type %q, want pending a", id, j.Status, j.Type)
		}
		clean(t)
	})
	t.Run("refused insert", func(t *testing.T) {
		quiet()
		before := env.countWhere(t, "true")
		huge := RawArgs{Name: "raw", Payload: json.RawMessage(`[1e1000000]`)} // JSON, but beyond numeric
		if _, err := q.Enqueue(ctx, huge); !errors.Is(err, ErrPayloadRejected) {
			t.Fatalf("Enqueue of [1e1000000]: %v, want ErrPayloadRejected", err)
		}
		if got := taken(); got != "InsertJobNotify FlushCommits" {
			t.Errorf("statements %q, want InsertJobNotify FlushCommits", got)
		}
		if n := env.countWhere(t, "true"); n != before {
			t.Errorf("%d jobs after the refused enqueue, want %d", n, before)
		}
		clean(t)
	})
	t.Run("FlushCommits refused", func(t *testing.T) {
		quiet()
		q.st.(pgStore).early.state.Store(earlyRefused)
		defer q.st.(pgStore).early.state.Store(earlyAllowed)
		if _, err := q.Enqueue(ctx, testArgs{N: 2}, Type("a")); err != nil {
			t.Fatal(err)
		}
		if got := taken(); got != "InsertJobNotify" {
			t.Errorf("statements %q, want InsertJobNotify alone", got)
		}
		clean(t)
	})
	t.Run("in a burst", func(t *testing.T) {
		quiet()
		for i := range 3 {
			if _, err := q.Enqueue(ctx, testArgs{N: 10 + i}, Type("a")); err != nil {
				t.Fatal(err)
			}
		}
		// The first is early; those within notifyGap of it leave their
		// NOTIFY to the notifier and commit as before (a loaded machine may
		// stretch the burst past notifyGap: those are early again).
		got := taken()
		if !strings.HasPrefix(got, "InsertJobNotify FlushCommits") {
			t.Errorf("statements %q, want InsertJobNotify FlushCommits first", got)
		}
		if n := strings.Count(got, "InsertJob"); n != 3 || strings.Count(got, "FlushCommits") != strings.Count(got, "InsertJobNotify") {
			t.Errorf("statements %q: want 3 inserts, each InsertJobNotify followed by FlushCommits", got)
		}
	})
}

// TestFlushCommitsFlushes: after a commit that did not wait for the WAL
// flush, FlushCommits returns only once the WAL is flushed past it.
func TestFlushCommitsFlushes(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	ctx := context.Background()
	conn, err := env.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer discardConn(conn)
	var ok bool
	if err := conn.QueryRowContext(ctx, "SELECT current_setting('synchronous_commit') = 'on'").Scan(&ok); err != nil || !ok {
		t.Fatalf("the test server's synchronous_commit is not on (%v)", err)
	}
	run := &runner{db: env.db, kind: engine.Postgres, quoted: env.tbl.Quoted()}
	for range 5 {
		if _, err := conn.ExecContext(ctx, "SET synchronous_commit = off"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, env.sql(`INSERT INTO {t} (name, payload, max_attempts, base_delay, max_delay, scheduled_at, created_at)
			VALUES ('x', '{}', 1, 1, 1, now(), now())`)); err != nil {
			t.Fatal(err)
		}
		var written string
		if err := conn.QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&written); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "SET synchronous_commit = on"); err != nil {
			t.Fatal(err)
		}
		if err := pggen.New(rawDBTX{r: run, db: conn}).FlushCommits(ctx); err != nil {
			t.Fatal(err)
		}
		var flushed bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn", written).Scan(&flushed); err != nil {
			t.Fatal(err)
		}
		if !flushed {
			t.Fatalf("the WAL is not flushed up to %s after FlushCommits", written)
		}
	}
}
