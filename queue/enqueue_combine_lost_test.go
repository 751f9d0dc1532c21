package queue

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// errBrokenLink is what a connection of a linkBreaker reads and writes once
// broken.
var errBrokenLink = errors.New("test: the link to the server broke")

// linkBreaker dials the connections of a pool and breaks those dialed so
// far on demand, as a network failure does on the client's side only: they
// read and write errBrokenLink while their sockets stay open, so the
// server, which does not see them end, runs what it was sent to the end.
type linkBreaker struct {
	mu    sync.Mutex
	conns []*breakableConn
}

type breakableConn struct {
	net.Conn
	mu     sync.Mutex
	broken bool
}

func (b *linkBreaker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	bc := &breakableConn{Conn: c}
	b.mu.Lock()
	b.conns = append(b.conns, bc)
	b.mu.Unlock()
	return bc, nil
}

// breakAll breaks the connections dialed so far; a read they are blocked in
// ends at once.
func (b *linkBreaker) breakAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.mu.Lock()
		c.broken = true
		c.mu.Unlock()
		_ = c.Conn.SetReadDeadline(time.Now()) // wakes a blocked read; the socket stays open
	}
}

// closeAll closes every socket (test cleanup).
func (b *linkBreaker) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Conn.Close()
	}
}

func (c *breakableConn) isBroken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

func (c *breakableConn) Read(p []byte) (int, error) {
	if c.isBroken() {
		return 0, errBrokenLink
	}
	n, err := c.Conn.Read(p)
	if err != nil && c.isBroken() {
		return n, errBrokenLink
	}
	return n, err
}

func (c *breakableConn) Write(p []byte) (int, error) {
	if c.isBroken() {
		return 0, errBrokenLink
	}
	return c.Conn.Write(p)
}

// Close leaves a broken connection's socket open (closeAll closes it).
func (c *breakableConn) Close() error {
	if c.isBroken() {
		return nil
	}
	return c.Conn.Close()
}

// TestEnqueueCombinedLostResult: a combined statement whose result is lost
// (the link to the server breaks while the statement waits there, and the
// server then commits it) must not be written again job by job: each of
// its callers is to get an error, as a single Enqueue whose connection
// breaks does, and its job exists once. The combiner wrote every job of a
// failed combined statement again alone, whatever the failure: each caller
// got the id of its second copy and the first copy ran too, a job run
// twice that its caller never heard of. Only a statement the server
// refused (nothing committed) is written again job by job.
//
// A trigger makes the inserts wait at the server for a lock the test holds:
// combineSlots single Enqueues fill the slots, two more wait to be
// combined, the singles' contexts end (the pool sends no cancel requests,
// so their statements stay at the server), which sends the combined
// statement; then every connection dialed so far breaks on the client's
// side, and the lock is released.
func TestEnqueueCombinedLostResult(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.Postgres)
	admin := testdb.Open(t, engine.Postgres)
	cfg, err := pgx.ParseConfig(env.url)
	if err != nil {
		t.Fatal(err)
	}
	links := &linkBreaker{}
	cfg.DialFunc = links.dial
	PgxWithoutCancelRequests(cfg)
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(links.closeAll)
	t.Cleanup(func() { db.Close() })
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()))
	if q.combiner == nil {
		t.Fatal("the queue has no combiner")
	}
	waiting := func(query string) int {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Inserts wait for an advisory lock in a trigger, once they run (a
	// lock on the table would stop them while they are prepared, before
	// they are sent to run).
	fn := `"` + env.table + `_hold"`
	for _, stmt := range []string{
		"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock(hashtext('" + env.table + "')); RETURN NEW; END $$",
		"CREATE TRIGGER hold BEFORE INSERT ON " + env.tbl.Quoted() + " FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
	} {
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP FUNCTION "+fn+"() CASCADE"); err != nil {
			t.Error(err)
		}
	})
	lock, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", env.table); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		id  int64
		err error
	}
	singles := make(chan result, combineSlots)
	sctx, cancelSingles := context.WithCancel(ctx)
	defer cancelSingles()
	for i := range combineSlots {
		go func() {
			id, err := q.Enqueue(sctx, testArgs{N: i})
			singles <- result{i, id, err}
		}()
	}
	waitUntil(t, 10*time.Second, "the single inserts to wait for the lock", func() bool {
		return waiting("%INSERT INTO%") == combineSlots
	})
	combined := make(chan result, 2)
	for _, n := range []int{100, 101} {
		go func() {
			id, err := q.Enqueue(ctx, testArgs{N: n})
			combined <- result{n, id, err}
		}()
	}
	waitUntil(t, 10*time.Second, "two enqueues to wait to be combined", func() bool {
		q.combiner.mu.Lock()
		defer q.combiner.mu.Unlock()
		return len(q.combiner.waiting) == 2
	})
	cancelSingles()
	for range combineSlots {
		if r := waitFor(t, singles, 10*time.Second, "a single enqueue to return"); r.err == nil {
			t.Fatalf("single enqueue %d = %d, nil; want its context's error", r.n, r.id)
		}
	}
	waitUntil(t, 10*time.Second, "the combined statement to wait for the lock", func() bool {
		return waiting("%InsertJobsJSONReturning%") == 1
	})
	links.breakAll()
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	var got []result
	for range 2 {
		got = append(got, waitFor(t, combined, 2*dbCallTimeout, "a combined enqueue to return"))
	}
	waitUntil(t, 10*time.Second, "the inserts to finish at the server", func() bool {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%INSERT INTO%' AND pid <> pg_backend_pid()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	for _, r := range got {
		n := env.countWhere(t, "payload->>'n' = ?", strconv.Itoa(r.n))
		if n != 1 {
			t.Errorf("caller of n %d got %d, %v; the table holds %d jobs of it, want 1", r.n, r.id, r.err, n)
		}
		if r.err == nil {
			var a testArgs
			if err := json.Unmarshal(getJob(t, q, r.id).Payload, &a); err != nil || a.N != r.n {
				t.Errorf("caller of n %d got id %d, whose job is %+v (%v)", r.n, r.id, a, err)
			}
		}
	}
}
