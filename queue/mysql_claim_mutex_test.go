package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/db/mysqlgen"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// mutexTestSession opens a claim session on q's table (a MySQL queue) with
// the given wait for the claim mutex, and returns it with its connection id.
// Its claims of any size take their turn after a full claim (claimTurns.min
// 1), and its first does, as after a full claim.
func mutexTestSession(t *testing.T, q *Queue, wait int32) (*mysqlClaimSession, int64) {
	t.Helper()
	ctx := context.Background()
	s, err := q.st.(mysqlStore).claimSession(ctx)
	if err != nil || s == nil {
		t.Fatalf("claimSession = %v, %v; want a session", s, err)
	}
	cs := s.(*mysqlClaimSession)
	t.Cleanup(cs.close)
	cs.mutexWait = wait
	cs.turns = claimTurns{min: 1, full: true}
	var id int64
	if err := cs.conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return cs, id
}

// ownConn takes a connection from db for the rest of the test; it is
// discarded at the end, never handed back to the pool with a lock held.
func ownConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { discardConn(conn) })
	return conn
}

// mutexHolder takes q's claim mutex on a connection of its own, the way a
// claim session does, and returns that connection.
func mutexHolder(t *testing.T, q *Queue, db *sql.DB) *sql.Conn {
	t.Helper()
	ctx := context.Background()
	conn := ownConn(t, db)
	taken, err := mysqlgen.New(q.run.onHeld(conn, &connStmts{})).TakeClaimMutex(ctx, mysqlgen.TakeClaimMutexParams{TableName: q.run.table, WaitSeconds: 0})
	if err != nil || taken != 1 {
		t.Fatalf("TakeClaimMutex = %d, %v; want 1 (the mutex was free)", taken, err)
	}
	return conn
}

// mutexFree reports whether q's claim mutex is free, by taking it at once
// and giving it back.
func mutexFree(t *testing.T, q *Queue, db *sql.DB) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer discardConn(conn)
	qs := mysqlgen.New(q.run.onHeld(conn, &connStmts{}))
	taken, err := qs.TakeClaimMutex(ctx, mysqlgen.TakeClaimMutexParams{TableName: q.run.table, WaitSeconds: 0})
	if err != nil {
		t.Fatal(err)
	}
	if taken == 1 {
		if _, err := qs.ReleaseClaimMutex(ctx, q.run.table); err != nil {
			t.Fatal(err)
		}
	}
	return taken == 1
}

// waitingForMutex waits until connection id waits in GET_LOCK.
func waitingForMutex(t *testing.T, db *sql.DB, id int64) {
	t.Helper()
	waitUntil(t, 10*time.Second, "the claim to wait for the claim mutex", func() bool {
		var n int
		err := db.QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE '%GET_LOCK%'", id).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
}

type claimResult struct {
	rows []*JobRow
	err  error
}

// claimAsync starts a claim of up to max jobs on cs.
func claimAsync(ctx context.Context, q *Queue, cs *mysqlClaimSession, max int) <-chan claimResult {
	done := make(chan claimResult, 1)
	go func() {
		now := q.now()
		rows, err := cs.claim(ctx, nil, max, newClaimToken(), now, now.Add(time.Minute), claimPos{})
		done <- claimResult{rows, err}
	}()
	return done
}

// TestMySQLClaimMutex: a claim session's claims that take their turn
// (claim_turns.go) take turns through the table's claim mutex. While
// another session holds it, such a claim waits (it is seen in GET_LOCK) and
// takes its jobs once the holder gives it back or its connection ends (a
// crashed claimer); a claim whose wait runs out claims without it; the
// mutex of another table does not hold a claim up; after every claim, also
// a failed one, the mutex is free. A claim after a short claim, and a claim
// of fewer than claimTurnMin jobs after a full one, claim at once while the
// mutex is held.
func TestMySQLClaimMutex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newTestEnv(t, engine.MySQL)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	for i := range 20 {
		mustEnqueue(t, q, testArgs{N: i})
	}

	for _, tc := range []struct {
		name string
		// wait is the session's wait for the mutex (seconds); end makes
		// the holder give the mutex up, or is nil when the claim must not
		// wait for it.
		wait int32
		end  func(t *testing.T, holder *sql.Conn)
	}{
		{"holder releases", 30, func(t *testing.T, holder *sql.Conn) {
			if _, err := mysqlgen.New(q.run.onHeld(holder, &connStmts{})).ReleaseClaimMutex(ctx, q.run.table); err != nil {
				t.Fatal(err)
			}
		}},
		{"holder's connection killed", 30, func(t *testing.T, holder *sql.Conn) {
			var id int64
			if err := holder.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			if _, err := env.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
				t.Fatal(err)
			}
		}},
		{"wait runs out", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, id := mutexTestSession(t, q, tc.wait)
			holder := mutexHolder(t, q, env.db)
			done := claimAsync(ctx, q, cs, 2)
			if tc.end != nil {
				waitingForMutex(t, env.db, id)
				select {
				case r := <-done:
					t.Fatalf("the claim returned (%d jobs, %v) while another session held the mutex", len(r.rows), r.err)
				default:
				}
				tc.end(t, holder)
			}
			r := waitFor(t, done, 20*time.Second, "the claim")
			if r.err != nil || len(r.rows) != 2 {
				t.Fatalf("claim = %d jobs, %v; want 2, nil", len(r.rows), r.err)
			}
			if tc.end == nil { // the claim did not wait for it
				if _, err := mysqlgen.New(q.run.onHeld(holder, &connStmts{})).ReleaseClaimMutex(ctx, q.run.table); err != nil {
					t.Fatal(err)
				}
			}
			waitUntil(t, 10*time.Second, "the mutex to be free", func() bool { return mutexFree(t, q, env.db) })
		})
	}

	t.Run("another table's mutex", func(t *testing.T) {
		otherEnv := newTestEnv(t, engine.MySQL)
		other := otherEnv.queue(t, nil, WithLogger(testdb.QuietLogger()))
		mutexHolder(t, other, otherEnv.db)
		cs, _ := mutexTestSession(t, q, 30)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r := waitFor(t, claimAsync(cctx, q, cs, 2), 20*time.Second, "the claim")
		if r.err != nil || len(r.rows) != 2 {
			t.Fatalf("claim = %d jobs, %v; want 2, nil (another table's mutex must not hold it up)", len(r.rows), r.err)
		}
		if !mutexFree(t, q, env.db) {
			t.Error("the claim left its table's mutex taken")
		}
	})

	for _, tc := range []struct {
		name           string
		min            int // claimTurns.min
		asked, claimed int // the session's last claim
	}{
		{"after a short claim", 1, 5, 2},
		{"a small claim after a full one", claimTurnMin, claimTurnMin, claimTurnMin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, id := mutexTestSession(t, q, 30)
			cs.turns.min = tc.min
			cs.turns.record(tc.asked, tc.claimed, nil)
			holder := mutexHolder(t, q, env.db)
			r := waitFor(t, claimAsync(ctx, q, cs, 2), 10*time.Second, "the claim, which must not wait for the mutex")
			if r.err != nil || len(r.rows) != 2 {
				t.Fatalf("claim = %d jobs, %v; want 2, nil", len(r.rows), r.err)
			}
			var waited int
			if err := env.db.QueryRowContext(ctx,
				"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE '%GET_LOCK%'", id).Scan(&waited); err != nil || waited != 0 {
				t.Fatalf("the claim session waits in GET_LOCK after its claim returned (%d, %v)", waited, err)
			}
			if _, err := mysqlgen.New(q.run.onHeld(holder, &connStmts{})).ReleaseClaimMutex(ctx, q.run.table); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("cancelled claim", func(t *testing.T) {
		cs, _ := mutexTestSession(t, q, 30)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		r := waitFor(t, claimAsync(cctx, q, cs, 2), 20*time.Second, "the claim")
		if !errors.Is(r.err, context.Canceled) || len(r.rows) != 0 {
			t.Fatalf("claim = %d jobs, %v; want none and context.Canceled", len(r.rows), r.err)
		}
		if !mutexFree(t, q, env.db) {
			t.Error("the cancelled claim left the mutex taken")
		}
		// The session claims again afterwards.
		r = waitFor(t, claimAsync(ctx, q, cs, 2), 20*time.Second, "the claim after the cancelled one")
		if r.err != nil || len(r.rows) != 2 {
			t.Fatalf("claim after a cancelled one = %d jobs, %v; want 2, nil", len(r.rows), r.err)
		}
	})

	if got := env.countWhere(t, "status = 'in_progress'"); got != 14 {
		t.Errorf("%d jobs in_progress; want the 14 the claims took", got)
	}
}
