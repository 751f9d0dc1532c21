package queue

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/db/pggen"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestEnqueueEarlyCommit: the first Enqueue after a quiet spell sends its
// insert and FlushCommits in one pipeline (enqueue_postgres_early.go); the job
// is there when Enqueue returns; the connection goes back to the pool as it
// was (no transaction open, synchronous_commit as the server's), also after
// an insert the server refuses; and with FlushCommits refused the insert
// goes alone, as before.
func TestEnqueueEarlyCommit(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	// One connection: the one the pipeline ran on is the one checked after.
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

	// prepared is how many prepared statements of the early insert the
	// connection holds (it keeps one, and drops it after a failure).
	prepared := func(t *testing.T) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%pg_notify%' AND starts_with(name, 'stmt_')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
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
		if n := prepared(t); n != 1 {
			t.Errorf("%d prepared early inserts on the connection, want 1", n)
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
		if n := prepared(t); n != 0 {
			t.Errorf("%d prepared early inserts on the connection after the failure, want 0 (prepared anew next time)", n)
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
		// The first is early; those within announceGap of it leave their
		// NOTIFY to the notifier and commit as before (a loaded machine may
		// stretch the burst past announceGap: those are early again).
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

// TestEnqueueEarlyWakesBeforeFlush: the early insert's COMMIT reaches the
// client before FlushCommits runs (a sync point between them), and this
// process's idle workers are woken then, not after the flush. A proxy in
// front of PostgreSQL holds back what the client sends after the first sync
// point of a pipeline; the wake-up must come while it holds the flush, with
// the job already visible to other sessions.
func TestEnqueueEarlyWakesBeforeFlush(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	u, err := url.Parse(env.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startSyncHoldingProxy(t, u.Host)
	u.Host = proxy.addr
	db := testdb.OpenURL(t, u.String())
	db.SetMaxOpenConns(1)
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()))
	waitNotifierIdle(t, q)
	ctx := context.Background()

	woken := q.wake.wait()
	proxy.arm()
	done := make(chan error, 1)
	go func() {
		_, err := q.Enqueue(ctx, testArgs{N: 1}, Type("a"))
		done <- err
	}()
	select {
	case <-woken:
		if !proxy.holding() {
			t.Error("the workers were woken after the flush was sent, want while the proxy holds it back")
		}
		if n := env.countWhere(t, "true"); n != 1 {
			t.Errorf("%d jobs visible when the workers were woken, want 1", n)
		}
	case err := <-done:
		t.Errorf("Enqueue returned (%v) before the workers were woken", err)
	case <-time.After(20 * time.Second):
		t.Error("the workers were not woken within 20 s")
	}
	proxy.release()
	if err := <-done; err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
}

// syncHoldingProxy forwards PostgreSQL connections; once armed, it holds
// back what a client sends after a Sync message that it wrote together
// with more (the rest of a pipeline), until released.
type syncHoldingProxy struct {
	addr     string
	armed    atomic.Bool
	held     atomic.Bool
	released chan struct{}
}

func (p *syncHoldingProxy) arm()          { p.armed.Store(true) }
func (p *syncHoldingProxy) holding() bool { return p.held.Load() }
func (p *syncHoldingProxy) release()      { close(p.released) }

// startSyncHoldingProxy listens on a free local port and forwards each
// connection to target (PostgreSQL without TLS).
func startSyncHoldingProxy(t *testing.T, target string) *syncHoldingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &syncHoldingProxy{addr: ln.Addr().String(), released: make(chan struct{})}
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return // the listener is closed
			}
			go p.serve(client, target)
		}
	}()
	return p
}

// serve forwards one connection, message by message from the client.
func (p *syncHoldingProxy) serve(client net.Conn, target string) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return // the client sees its connection end, and says so
	}
	defer server.Close()
	go func() { io.Copy(client, server); client.Close() }()
	in := bufio.NewReader(client)
	// The startup message: a length, then the rest.
	head := make([]byte, 4)
	if _, err := io.ReadFull(in, head); err != nil {
		return
	}
	rest := make([]byte, binary.BigEndian.Uint32(head)-4)
	if _, err := io.ReadFull(in, rest); err != nil {
		return
	}
	if _, err := server.Write(append(head, rest...)); err != nil {
		return
	}
	for {
		// A message: its type, its length (itself included), the rest.
		head := make([]byte, 5)
		if _, err := io.ReadFull(in, head); err != nil {
			return
		}
		msg := make([]byte, 5+binary.BigEndian.Uint32(head[1:])-4)
		copy(msg, head)
		if _, err := io.ReadFull(in, msg[5:]); err != nil {
			return
		}
		// A Sync that the client wrote together with more (a pipeline
		// goes in one write) ends the part that goes through at once: the
		// proxy holds what follows, marked held before the Sync reaches
		// the server (and so before the client can hear of it).
		hold := msg[0] == 'S' && in.Buffered() > 0 && p.armed.CompareAndSwap(true, false)
		if hold {
			p.held.Store(true)
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
		if hold {
			<-p.released
			p.held.Store(false)
		}
	}
}

// TestEarlyCommitAsksForTheGrant: the early commit runs FlushCommits only
// for a role that may execute pg_logical_emit_message. A queue asks the
// server once (askEarly); a role without the grant gets one Info line that
// says what to grant, and its Enqueues insert and notify as before, the job
// there and claimable; a role with the grant sends FlushCommits. The role
// and its database are the test's own (the grant is per database, and a
// superuser, as the other tests connect, is never refused).
func TestEarlyCommitAsksForTheGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Open(t, engine.Postgres)
	name := strings.ToLower(testdb.Table(t, nil))
	mustExec := func(t *testing.T, db *sql.DB, query string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	mustExec(t, admin, "CREATE ROLE "+name+" LOGIN")
	t.Cleanup(func() {
		if _, err := admin.ExecContext(ctx, "DROP ROLE "+name); err != nil {
			t.Errorf("drop the test's role: %v", err)
		}
	})
	mustExec(t, admin, "CREATE DATABASE "+name+" OWNER "+name)
	t.Cleanup(func() {
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop the test's database: %v", err)
		}
	})
	base, err := url.Parse(testdb.URL(t, engine.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	base.Path = "/" + name
	superuser := testdb.OpenURL(t, base.String()) // the new database, as the admin
	const fn = "FUNCTION pg_logical_emit_message(boolean, text, text)"
	mustExec(t, superuser, "REVOKE EXECUTE ON "+fn+" FROM PUBLIC")
	base.User = url.User(name)
	asRole := base.String()
	table := testdb.Table(t, nil)
	installTestTable(t, testdb.OpenURL(t, asRole), table)

	for _, c := range []struct {
		name      string
		grant     bool
		statement string // the statements of each early Enqueue
		infos     int    // Info lines that name the grant
	}{
		{"not granted", false, "InsertJobNotify", 1},
		{"granted", true, "InsertJobNotify FlushCommits", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.grant {
				mustExec(t, superuser, "GRANT EXECUTE ON "+fn+" TO "+name)
			}
			db := testdb.OpenURL(t, asRole)
			logs := &testdb.LogRecorder{}
			sent := newStatementNames("InsertJobNotify", "InsertJob", "FlushCommits")
			q, err := New(db, WithTable(table), WithLogger(slog.New(logs)), withStatementHook(sent.hook))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			for i := range 2 { // asked at the first, remembered at the second
				waitNotifierIdle(t, q)
				id, err := q.Enqueue(ctx, testArgs{N: i}, Type(c.name))
				if err != nil {
					t.Fatalf("Enqueue %d: %v", i, err)
				}
				if got := strings.Join(sent.take(), " "); got != c.statement {
					t.Errorf("Enqueue %d sent %q, want %q", i, got, c.statement)
				}
				if j := mustClaim(t, q, []string{c.name}, 10, time.Minute); len(j) != 1 || j[0].ID != id {
					t.Errorf("Enqueue %d: claimed %v, want job %d", i, ids(j), id)
				}
			}
			if n := logs.Count(slog.LevelInfo, "GRANT EXECUTE"); n != c.infos {
				t.Errorf("%d log lines name the grant, want %d: %q", n, c.infos, logs.Lines(slog.LevelDebug))
			}
		})
	}
}
