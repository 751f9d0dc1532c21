package queue

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The claim session on PostgreSQL. pgx prepares each statement once per
// connection, but PostgreSQL may still plan a claim anew at every
// execution (a custom plan for its parameters, whenever the planner's
// estimate of the generic plan is higher: it was for the single claim
// statement of every filter the queue had before ClaimJobs,
// ClaimJobsOfType and ClaimJobsOfTypes), and that planning took longer
// than running the claim (0.25–0.35 ms against 0.17 ms on a table of
// 20 000 rows: pg_stat_statements with track_planning, EXPLAIN ANALYZE of
// the prepared statement). So each claimer claims on a connection of its
// own whose session plans its statements once (plan_cache_mode =
// force_generic_plan): the generic plan of each claim is the custom one's
// (the index of its filter, in claim order, under LIMIT;
// TestPgClaimGenericPlan), and the UPDATE finds the claimed rows by
// primary key (id = ANY (ARRAY(…))), which a plan made without the LIMIT's
// value keeps (with id IN (…) the generic plan hashed a scan of the whole
// table). The session is discarded, never handed back to
// the pool, so that no other user of the pool gets it.
//
// The session's commits do not wait for the WAL flush (synchronous_commit =
// off): on this machine a claim of one job after an idle spell took
// 0.6-1.0 ms with the flush and 0.35-0.6 ms without (the flush is slow when
// the disk was idle), which is half of an idle worker's enqueue-to-start.
// A claim is the one write that may be lost that way: a server crash within
// wal_writer_delay (x3) of it leaves the job pending as before the claim,
// to be claimed again (SPEC 12: results lost with the server run again,
// duplicates bounded by the attempts in flight), and the handler's result
// is then fenced off by the claim token. Every later write of the job
// (heartbeat, completion) commits synchronously on the pool, which flushes
// the WAL up to it and so the claim too.

// claimSession holds a connection from the pool for one claimer's claims,
// planned once (see above). It returns nil, nil when the queue runs through
// a transaction pooler (which keeps no session) or the pool has too few
// connections free (roomForClaimSession): the claims then run on the pool.
func (s pgStore) claimSession(ctx context.Context) (claimSession, error) {
	if s.r.pooled {
		return nil, nil
	}
	if !roomForClaimSession(s.r.db.Stats()) {
		return nil, nil
	}
	// The settings in one statement: one round trip before a new
	// worker's first claim. The session sits idle while every slot of the
	// worker is busy: a server or URL that ends idle sessions
	// (idle_session_timeout) must not end it (pgKeepIdleSession).
	conn, err := sessionConn(ctx, s.r.db, "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), set_config('synchronous_commit', 'off', false), ("+pgKeepIdleSession+")")
	if err != nil {
		return nil, fmt.Errorf("the claim connection: %w", err)
	}
	return &pgClaimSession{s: s, conn: conn, turns: newClaimTurns()}, nil
}

// pgKeepIdleSession turns idle_session_timeout (PostgreSQL 14 and later;
// on earlier servers it selects no row and sets nothing) off for the
// session: the queue's own sessions, the claim session and the LISTEN
// session, sit idle by design, and a timeout that ended them made the next
// claim fail (logged as an error, claimed again after a pause) and the
// listener warn and listen again, with a growing pause, every timeout,
// losing the notifications sent meanwhile. Session control, like the
// claim session's other settings, on connections never handed back to the
// pool.
const pgKeepIdleSession = "SELECT set_config(name, '0', false) FROM pg_settings WHERE name = 'idle_session_timeout'"

// The claims of a busy table take turns (claim_turns.go): a claim that
// takes its turn sends LockClaims, a transaction-scoped advisory lock named
// after the table, with the claim in one pipeline, so that each runs on a
// snapshot taken after the one before committed. bench --processes 4
// --workers 16 against --workers 64, 20 000 jobs, 8 alternating rounds,
// twice: 0.996x and 0.945x its rate with the turns against 0.945x and 0.93x
// without (the machine's noise is of that size), and 83 000 entries of
// index status_scheduled read per drain instead of 110 000.

// claimLockKey is LockClaims' name of the table quoted: the advisory lock
// is hashtextextended of it, so it differs from table to table and from
// the keys of an application's own advisory locks but by chance.
func claimLockKey(quoted string) string { return "jobqueue claims " + quoted }

// pgClaimSession is a claimer's own connection, whose session plans each
// statement once (see claimSession).
type pgClaimSession struct {
	s     pgStore
	conn  *sql.Conn
	turns claimTurns
}

func (cs *pgClaimSession) claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	rows, err := cs.s.claimOn(ctx, cs.conn, cs.turns.next(max), types, max, token, now, leaseUntil, after)
	cs.turns.record(max, len(rows), err)
	return rows, err
}

func (cs *pgClaimSession) close() { discardConn(cs.conn) }
