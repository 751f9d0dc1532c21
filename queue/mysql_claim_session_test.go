package queue

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestMySQLClaimSession: a claimer's claims on MySQL run on a connection of
// its own whose session it set to READ COMMITTED once (claimSession), on a
// pool whose sessions all start at REPEATABLE READ: inside each claim's
// transaction the session's level is READ COMMITTED, reads see other
// sessions' commits, and the session ran no SET between one claim and the
// next (its Com_set_option count stays put; a claim on the pool sends SET
// TRANSACTION each time), nor START TRANSACTION (autocommit is off on the
// session: Com_begin stays put; a claim on the pool sends one each time). Closing the session discards the connection, so
// every connection of the pool is at REPEATABLE READ again. With a pool of
// fewer than claimSessionMinFree connections the claimer holds none, and
// each claim sets its transaction's level (as TestMySQLClaimsReadCommitted
// checks for Queue.claim).
func TestMySQLClaimSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := coreEnv(t, engine.MySQL)
	levelVar := mysqlLevelVar(t, env.db)
	rrURL := env.urlWith(t, levelVar, "'REPEATABLE-READ'") // every connection starts at REPEATABLE READ
	probe := mysqlProbeTable(t, env, "cs")

	for _, tc := range []struct {
		name       string
		maxConns   int
		wantLevel  string // the session's level inside each claim
		wantSetsBy int    // SET statements the session runs between two claims
		wantBegins int    // START TRANSACTION statements it runs between two claims
	}{
		{name: "own connection", maxConns: claimSessionMinFree, wantLevel: "READ-COMMITTED", wantSetsBy: 0, wantBegins: 0},
		// One connection, so that every claim runs on the same session
		// and its count of SET statements can be compared.
		{name: "pool of one connection", maxConns: 1, wantLevel: "REPEATABLE-READ", wantSetsBy: 1, wantBegins: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testdb.OpenURL(t, rrURL)
			db.SetMaxOpenConns(tc.maxConns)
			var seen []string
			var hookErr error
			hook := func(query string, tx sqlRunner) {
				if tx == nil || !strings.Contains(query, "CONCAT(") || hookErr != nil {
					return
				}
				// Inside the claim's transaction, after its locking SELECT.
				var level string
				var sets, begins int64
				var before, after int
				if hookErr = tx.QueryRowContext(ctx, "SELECT @@"+levelVar).Scan(&level); hookErr != nil {
					return
				}
				if sets, hookErr = mysqlSessionStatus(ctx, tx, "Com_set_option"); hookErr != nil {
					return
				}
				if begins, hookErr = mysqlSessionStatus(ctx, tx, "Com_begin"); hookErr != nil {
					return
				}
				if before, after, hookErr = countAroundCommit(ctx, tx, env.db, probe); hookErr != nil {
					return
				}
				seen = append(seen, fmt.Sprintf("%s %d %d %d", level, sets, begins, after-before))
			}
			q := env.queue(t, db, WithLogger(testdb.QuietLogger()), withStatementHook(hook))
			if _, err := env.db.ExecContext(ctx, "DELETE FROM "+probe); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				mustEnqueue(t, q, testArgs{N: i})
			}
			// The enqueues' wake-ups of other processes use a connection
			// of the pool for a moment: let them end, so that the pool has
			// room for the claim session.
			waitNotifierIdle(t, q)
			cur := &claimCursor{q: q, lease: time.Minute}
			for i := 0; i < 3; i++ {
				jobs, err := cur.claim(ctx, 1)
				if err != nil || len(jobs) != 1 {
					t.Fatalf("claim %d: %d jobs, %v", i, len(jobs), err)
				}
			}
			if hookErr != nil {
				t.Fatal(hookErr)
			}
			if len(seen) != 3 {
				t.Fatalf("the hook ran in %d claims, want 3: %v", len(seen), seen)
			}
			var first, firstBegins int
			for i, s := range seen {
				var level string
				var sets, begins, newRows int
				if _, err := fmt.Sscanf(s, "%s %d %d %d", &level, &sets, &begins, &newRows); err != nil {
					t.Fatal(err)
				}
				if level != tc.wantLevel {
					t.Errorf("claim %d: the session's level was %s, want %s", i, level, tc.wantLevel)
				}
				if newRows != 1 {
					t.Errorf("claim %d: a row another session committed during the claim's transaction was not seen (READ COMMITTED sees it)", i)
				}
				if i == 0 {
					first, firstBegins = sets, begins
					continue
				}
				if d := sets - first; d != i*tc.wantSetsBy {
					t.Errorf("claim %d: the claims' session ran %d SET statements since the first claim, want %d", i, d, i*tc.wantSetsBy)
				}
				if d := begins - firstBegins; d != i*tc.wantBegins {
					t.Errorf("claim %d: the claims' session ran %d START TRANSACTION statements since the first claim, want %d", i, d, i*tc.wantBegins)
				}
			}
			cur.closeSession()
			// Every connection the pool can give is at REPEATABLE READ.
			conns := make([]*sql.Conn, tc.maxConns)
			for i := range conns {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
				var level string
				if err := c.QueryRowContext(ctx, "SELECT @@"+levelVar).Scan(&level); err != nil {
					t.Fatal(err)
				}
				if level != "REPEATABLE-READ" {
					t.Errorf("after the claims, connection %d of the pool is at %s, want REPEATABLE-READ", i, level)
				}
			}
		})
	}
}

// TestMySQLClaimSessionEndsItsTransaction: a claim session runs with
// autocommit off, so each claim's statements are one transaction that the
// claim itself must end, whatever happens. After a claim that found jobs,
// one that found none, one that took the claim mutex and read the frontier,
// and one cut off before its UPDATE, the session holds nothing: another
// session locks the table for writing at once (an open transaction would
// hold its metadata lock), the claim mutex is free, and a job the cut-off
// claim had locked is claimed from the pool. A claim whose connection died
// midway drops the session's connection, and the next claim opens another.
func TestMySQLClaimSessionEndsItsTransaction(t *testing.T) {
	t.Parallel()
	env := coreEnv(t, engine.MySQL)
	var during func(ctx context.Context, conn sqlRunner) // run before the claim's UPDATE
	hook := func(query string, on sqlRunner) {
		if on != nil && strings.Contains(query, "-- name: MarkClaimed ") && during != nil {
			during(context.Background(), on)
		}
	}
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(hook))

	for _, tc := range []struct {
		name       string
		jobs       int
		after      claimPos                                           // the claimer's watermark: non-zero reads the frontier
		cut        func(t *testing.T, cancel func(), sessionID int64) // run before the UPDATE
		wantErr    bool
		wantJobs   int
		wantPooled int  // jobs a claim from the pool finds afterwards
		wantNewCon bool // the session dropped its connection
		noTurn     bool // the claim does not take its turn (the mutex)
	}{
		{name: "found jobs", jobs: 2, wantJobs: 2,
			// Its SELECT and its UPDATE are one transaction: the jobs stay
			// locked in between.
			cut: func(t *testing.T, _ func(), _ int64) {
				var free int
				err := env.db.QueryRowContext(context.Background(), env.sql(
					"SELECT COUNT(*) FROM (SELECT id FROM {t} WHERE status = 'pending' FOR UPDATE SKIP LOCKED) free")).Scan(&free)
				if err != nil || free != 0 {
					t.Errorf("before the claim's UPDATE another session could lock %d of its jobs (%v); want 0", free, err)
				}
			}},
		{name: "found none", jobs: 0},
		{name: "took the mutex and read the frontier", jobs: 1, after: claimPos{at: time.Unix(1, 0).UTC(), id: 1}, wantJobs: 1},
		// Without the mutex, whose release would fail on the ended context
		// and drop the connection (releaseMutex).
		{name: "cut off before its update", jobs: 1, noTurn: true, wantErr: true, wantPooled: 1,
			cut: func(t *testing.T, cancel func(), _ int64) { cancel() }},
		{name: "its connection killed before its update", jobs: 1, wantErr: true, wantNewCon: true,
			cut: func(t *testing.T, _ func(), id int64) {
				if _, err := env.db.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
					t.Errorf("killing the claim session's connection: %v", err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env.exec(t, "DELETE FROM {t}")
			for i := range tc.jobs {
				mustEnqueue(t, q, testArgs{N: i})
			}
			cs, id := mutexTestSession(t, q, 1)
			if tc.noTurn {
				cs.turns = newClaimTurns()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cut != nil {
				during = func(context.Context, sqlRunner) { tc.cut(t, cancel, id) }
				defer func() { during = nil }()
			}
			now := q.now()
			rows, err := cs.claim(ctx, nil, 5, newClaimToken(), now, now.Add(time.Minute), tc.after)
			during = nil
			if (err != nil) != tc.wantErr || len(rows) != tc.wantJobs {
				t.Fatalf("claim = %d jobs, %v; want %d jobs, error %v", len(rows), err, tc.wantJobs, tc.wantErr)
			}
			if dropped := cs.conn == nil; dropped != tc.wantNewCon {
				t.Fatalf("the session dropped its connection: %v, want %v", dropped, tc.wantNewCon)
			}
			if !tc.wantNewCon {
				lockTableAtOnce(t, env)
			}
			if tc.wantNewCon {
				// The server ends a killed session, and its locks, after
				// KILL returns.
				waitUntil(t, 10*time.Second, "the killed session's mutex to be free", func() bool { return mutexFree(t, q, env.db) })
			} else if !mutexFree(t, q, env.db) {
				t.Fatal("the claim mutex is still held after the claim")
			}
			if tc.wantPooled > 0 {
				if got := mustClaim(t, q, nil, 5, time.Minute); len(got) != tc.wantPooled {
					t.Fatalf("a claim from the pool after the claim found %d jobs, want %d (still locked by the session's transaction?)", len(got), tc.wantPooled)
				}
			}
			if tc.wantNewCon {
				// The next claim opens a connection like the first.
				if _, err := cs.claim(context.Background(), nil, 5, newClaimToken(), now, now.Add(time.Minute), claimPos{}); err != nil {
					t.Fatalf("the claim after the dropped connection: %v", err)
				}
				var newID int64
				if err := cs.conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&newID); err != nil || newID == id {
					t.Fatalf("the session's connection after the drop: %d (%v), the dropped one %d", newID, err, id)
				}
				lockTableAtOnce(t, env)
			}
		})
	}
}

// lockTableAtOnce locks env's table for writing from a session of its own,
// waiting at most a second for its metadata lock (which an open transaction
// that read the table holds), and unlocks it.
func lockTableAtOnce(t *testing.T, env *testEnv) {
	t.Helper()
	ctx := context.Background()
	conn := ownConn(t, env.db)
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+env.tbl.Quoted()+" WRITE"); err != nil {
		t.Fatalf("locking the table from another session: %v (a transaction left open holds its metadata lock)", err)
	}
	if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
}
