package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestPgClaimGenericPlan: a claimer's claim session on PostgreSQL plans
// its statements once (plan_cache_mode = force_generic_plan) and claims
// like the pool does, for each filter; the generic plan of each filter's
// claim statement (ClaimJobs, ClaimJobsOfType, ClaimJobsOfTypes) on a
// table of 20 000 analyzed rows reads the candidate rows from a claim index
// (status_scheduled for every type, type_status_scheduled for one) from
// the watermark on (the row comparison in its Index Cond), and finds the
// rows to update by primary key, never by a scan of the whole table; a
// pool too small, or a queue behind a transaction pooler, gets no session.
func TestPgClaimGenericPlan(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, engine.Postgres)
	var mu sync.Mutex
	claimText := map[string]string{} // by statement name
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()), withStatementHook(func(query string, _ sqlRunner) {
		for _, name := range []string{"ClaimJobs", "ClaimJobsOfType", "ClaimJobsOfTypes"} {
			if strings.Contains(query, "-- name: "+name+" ") {
				mu.Lock()
				claimText[name] = query
				mu.Unlock()
			}
		}
	}))
	ctx := context.Background()
	enqueueSeq(t, q, 10000, Type("a"))
	enqueueSeq(t, q, 10000, Type("b"))
	env.exec(t, "ANALYZE {t}")

	cs, err := q.st.(claimSessions).claimSession(ctx)
	if err != nil || cs == nil {
		t.Fatalf("claimSession = %v, %v, want a session", cs, err)
	}
	defer cs.close()
	var mode string
	if err := cs.(*pgClaimSession).conn.QueryRowContext(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil || mode != "force_generic_plan" {
		t.Fatalf("the claim session's plan_cache_mode is %q (%v), want force_generic_plan", mode, err)
	}
	var sync string
	if err := cs.(*pgClaimSession).conn.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&sync); err != nil || sync != "off" {
		t.Fatalf("the claim session's synchronous_commit is %q (%v), want off (claims do not wait for the WAL flush)", sync, err)
	}
	for _, c := range []struct {
		name  string
		types []string
		want  string // type of the jobs claimed
	}{
		{"every type", nil, "a"},
		{"one type", []string{"b"}, "b"},
		{"several types", []string{"b", "c"}, "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range 7 { // past the statement's first executions
				now := q.now()
				rows, err := cs.claim(ctx, c.types, 3, newClaimToken(), now, now.Add(time.Minute), claimPos{})
				if err != nil || len(rows) != 3 {
					t.Fatalf("claim = %d rows, %v, want 3", len(rows), err)
				}
				for _, r := range rows {
					if r.Type != c.want || r.Status != StatusInProgress || r.Attempts != 1 || !strings.HasSuffix(r.ClaimToken, "-"+fmt.Sprint(r.ID)) {
						t.Fatalf("claimed %+v, want an attempt of a job of type %s", r, c.want)
					}
				}
			}
		})
	}

	// The generic plan, as the session makes it, of the text the queue sends.
	conn, err := env.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		name, args string
		index      string // the claim index the candidates come from
	}{
		{"ClaimJobs", "'tok', now(), now(), '0001-01-01', 0, 8", "status_scheduled"},
		{"ClaimJobsOfType", "'tok', now(), 'b', now(), '0001-01-01', 0, 8", "type_status_scheduled"},
		{"ClaimJobsOfTypes", `'tok', now(), '["b", "c"]', now(), '0001-01-01', 0, 8`, ""},
	} {
		mu.Lock()
		text := claimText[c.name]
		mu.Unlock()
		if text == "" {
			t.Fatalf("the claims sent no %s", c.name)
		}
		stmt := fmt.Sprintf("claim_plan_%d", i)
		if _, err := conn.ExecContext(ctx, "PREPARE "+stmt+" AS "+text); err != nil {
			t.Fatalf("PREPARE %s: %v", c.name, err)
		}
		plan := testdb.Strings(t, conn, "EXPLAIN EXECUTE "+stmt+"("+c.args+")")
		all := strings.Join(plan, "\n")
		if strings.Contains(all, "Seq Scan") || !strings.Contains(all, "Index Scan using "+env.tbl.Name+"_pkey") {
			t.Errorf("generic plan of %s scans the table or does not find the rows by primary key:\n%s", c.name, all)
		}
		// The candidates come from a claim index, read from the
		// watermark: the row comparison is in its index condition, not a
		// filter.
		found := false
		for i, line := range plan {
			for _, ix := range []string{"status_scheduled", "type_status_scheduled"} {
				if !strings.Contains(line, "Index Scan using "+env.tbl.IndexName(ix)+" on ") || (c.index != "" && ix != c.index) {
					continue
				}
				found = true
				if i+1 == len(plan) || !strings.Contains(plan[i+1], "Index Cond:") || !strings.Contains(plan[i+1], "ROW(scheduled_at, id) > ROW(") {
					t.Errorf("generic plan of %s: the scan of %s does not start at the watermark (no row comparison in its Index Cond):\n%s", c.name, ix, all)
				}
			}
		}
		if !found {
			t.Errorf("generic plan of %s reads no candidates from index %q (or, if empty, either claim index):\n%s", c.name, c.index, all)
		}
	}

	t.Run("no session", func(t *testing.T) {
		small := env.newPool(t)
		small.SetMaxOpenConns(claimSessionMinFree - 1)
		// A pool with room for the session, but the connections the
		// workers already hold leave too few free.
		held := env.newPool(t)
		held.SetMaxOpenConns(claimSessionMinFree + 1)
		for range 2 {
			c, err := held.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		pooled := env.queue(t, env.newPool(t), WithLogger(testdb.QuietLogger()), WithTransactionPooling(true))
		for name, st := range map[string]*Queue{
			"small pool":   env.queue(t, small, WithLogger(testdb.QuietLogger())),
			"too few free": env.queue(t, held, WithLogger(testdb.QuietLogger())),
			"pooled":       pooled,
		} {
			if cs, err := st.st.(claimSessions).claimSession(ctx); cs != nil || err != nil {
				t.Errorf("%s: claimSession = %v, %v, want none", name, cs, err)
			}
		}
	})
}

// TestPgClaimTurns: a claim session's claim of at least claimTurnMin jobs
// after one that took all it asked for (a busy table) waits for its turn,
// the table's advisory lock (LockClaims), and claims once the holder lets
// go; a claim after a short one, a claim of fewer than claimTurnMin jobs,
// and a session's first claim, claim at once while the lock is held;
// the lock of another table holds no claim up; the lock is the claim
// transaction's, free again once the claim returned.
func TestPgClaimTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newTestEnv(t, engine.Postgres)
	q := env.queue(t, nil, WithLogger(testdb.QuietLogger()))
	const turn = claimTurnMin
	enqueueSeq(t, q, 4*turn+11)
	s, err := q.st.(claimSessions).claimSession(ctx)
	if err != nil || s == nil {
		t.Fatalf("claimSession = %v, %v, want a session", s, err)
	}
	defer s.close()
	cs := s.(*pgClaimSession)
	var pid int64
	if err := cs.conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	claim := func(max int) <-chan claimResult {
		done := make(chan claimResult, 1)
		go func() {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			now := q.now()
			rows, err := cs.claim(cctx, nil, max, newClaimToken(), now, now.Add(time.Minute), claimPos{})
			done <- claimResult{rows, err}
		}()
		return done
	}
	// lock takes the advisory lock of key on a connection of its own and
	// returns the function that lets it go.
	lock := func(key string) (unlock func()) {
		conn := ownConn(t, env.db)
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
			t.Fatal(err)
		}
		return func() {
			if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := func(res <-chan claimResult, want int) {
		t.Helper()
		r := <-res
		if r.err != nil || len(r.rows) != want {
			t.Fatalf("claim = %d rows, %v; want %d", len(r.rows), r.err, want)
		}
	}
	key := claimLockKey(q.run.quoted)

	unlock := lock(key)
	got(claim(turn), turn)     // the session's first claim: at once, and full
	got(claim(turn-1), turn-1) // a small claim: at once, after a full one too
	res := claim(turn)         // a large claim after a full one waits for its turn
	waitUntil(t, 10*time.Second, "the busy claim to wait for the advisory lock", func() bool {
		var n int
		if err := env.db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	select {
	case r := <-res:
		t.Fatalf("the busy claim returned (%d rows, %v) while another session held the table's lock", len(r.rows), r.err)
	default:
	}
	unlock()
	got(res, turn)

	// Another table's lock does not hold the busy claim up.
	unlockOther := lock(claimLockKey(q.run.quoted + "_other"))
	got(claim(turn), turn)
	unlockOther()

	// The claim's lock went with its transaction: another session takes it
	// at once.
	var free bool
	if err := env.db.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))", key).Scan(&free); err != nil || !free {
		t.Fatalf("the table's lock after the claims: free %v (%v), want free", free, err)
	}
	got(claim(turn), 12) // busy, the lock free: the 12 jobs left, a short claim
	// After a short claim the next claims at once, the lock held or not.
	unlock = lock(key)
	got(claim(turn), 0)
	unlock()
}
