package queue

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
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
// TRANSACTION each time). Closing the session discards the connection, so
// every connection of the pool is at REPEATABLE READ again. With a pool of
// fewer than claimSessionMinFree connections the claimer holds none, and
// each claim sets its transaction's level (as TestMySQLClaimsReadCommitted
// checks for Queue.claim).
func TestMySQLClaimSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := coreEnv(t, engine.MySQL)
	levelVar := mysqlLevelVar(t, env.db)
	rrURL, err := url.Parse(env.url)
	if err != nil {
		t.Fatal(err)
	}
	query := rrURL.Query()
	query.Set(levelVar, "'REPEATABLE-READ'") // every connection starts at REPEATABLE READ
	rrURL.RawQuery = query.Encode()
	probe := mysqlProbeTable(t, env, "cs")

	for _, tc := range []struct {
		name       string
		maxConns   int
		wantLevel  string // the session's level inside each claim
		wantSetsBy int    // SET statements the session runs between two claims
	}{
		{name: "own connection", maxConns: claimSessionMinFree, wantLevel: "READ-COMMITTED", wantSetsBy: 0},
		// One connection, so that every claim runs on the same session
		// and its count of SET statements can be compared.
		{name: "pool of one connection", maxConns: 1, wantLevel: "REPEATABLE-READ", wantSetsBy: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testdb.OpenURL(t, rrURL.String())
			db.SetMaxOpenConns(tc.maxConns)
			var seen []string
			var hookErr error
			hook := func(query string, tx *sql.Tx) {
				if tx == nil || !strings.Contains(query, "CONCAT(") || hookErr != nil {
					return
				}
				// Inside the claim's transaction, after its locking SELECT.
				var level, name string
				var sets, before, after int
				if hookErr = tx.QueryRowContext(ctx, "SELECT @@"+levelVar).Scan(&level); hookErr != nil {
					return
				}
				if hookErr = tx.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_set_option'").Scan(&name, &sets); hookErr != nil {
					return
				}
				if before, after, hookErr = countAroundCommit(ctx, tx, env.db, probe); hookErr != nil {
					return
				}
				seen = append(seen, fmt.Sprintf("%s %d %d", level, sets, after-before))
			}
			q := env.queue(t, db, WithLogger(testdb.QuietLogger()), withStatementHook(hook))
			if _, err := env.db.ExecContext(ctx, "DELETE FROM "+probe); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				mustEnqueue(t, q, testArgs{N: i})
			}
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
			var first int
			for i, s := range seen {
				var level string
				var sets, newRows int
				if _, err := fmt.Sscanf(s, "%s %d %d", &level, &sets, &newRows); err != nil {
					t.Fatal(err)
				}
				if level != tc.wantLevel {
					t.Errorf("claim %d: the session's level was %s, want %s", i, level, tc.wantLevel)
				}
				if newRows != 1 {
					t.Errorf("claim %d: a row another session committed during the claim's transaction was not seen (READ COMMITTED sees it)", i)
				}
				if i == 0 {
					first = sets
				} else if d := sets - first; d != i*tc.wantSetsBy {
					t.Errorf("claim %d: the claims' session ran %d SET statements since the first claim, want %d", i, d, i*tc.wantSetsBy)
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
