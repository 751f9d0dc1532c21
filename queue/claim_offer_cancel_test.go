package queue

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// TestOfferedClaimOutlivesTheCallersContext: the caller's context of an
// Enqueue that took an idle claimer's offer ends while the insert and the
// claim are at the server (here: waiting for a table lock another session
// holds). The server still commits them, and the job must reach the
// claimer. The pipeline ran under the caller's context: pgx closed the
// connection, the Enqueue returned the context's error, the claimer was
// told that nothing was claimed, and the new job sat in_progress under the
// offered claim's token, run by no one until its lease passed (and with
// MaxAttempts 1 Reclaim then failed it, never run). Now, once sent, the
// pipeline is read to its end (at most dbCallTimeout, as a combined
// enqueue waits for its statement): the Enqueue returns the job's id and
// the claimer gets the claimed row. The pool sends no cancel requests, so
// that the server runs the pipeline once the lock is gone whatever the
// client did; a cancel request that arrives after the commit (pgx sends one
// on a new connection, which takes a while) leaves the same state.
func TestOfferedClaimOutlivesTheCallersContext(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.Postgres)
	admin := testdb.Open(t, engine.Postgres)
	cfg, err := pgx.ParseConfig(env.url)
	if err != nil {
		t.Fatal(err)
	}
	PgxWithoutCancelRequests(cfg)
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1) // the warm-up prepares the statements on the connection the test uses
	q := env.queue(t, db, WithLogger(testdb.QuietLogger()))
	post := func() *claimOffer {
		o := newClaimOffer(nil, 5, time.Minute, claimPos{})
		q.offers.post(o)
		return o
	}

	// Warm-up: the early commit asked for and its statements with an
	// offered claim prepared (preparing an insert waits for the lock too).
	waitNotifierIdle(t, q)
	warm := post()
	warmID, err := q.Enqueue(ctx, testArgs{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res := offerOutcome(t, warm); res.err != nil || len(res.rows) != 1 || res.rows[0].ID != warmID {
		t.Fatalf("the warm-up's offer: %d rows, err %v; want job %d", len(res.rows), res.err, warmID)
	}
	waitNotifierIdle(t, q)

	lock, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, "LOCK TABLE "+env.tbl.Quoted()+" IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	o := post()
	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		id, err := q.Enqueue(cctx, testArgs{N: 2})
		done <- result{id, err}
	}()
	var pid int64
	waitUntil(t, 10*time.Second, "the insert to wait for the lock", func() bool {
		err := admin.QueryRowContext(ctx, "SELECT pid FROM pg_locks WHERE NOT granted AND relation = $1::regclass", env.tbl.Quoted()).Scan(&pid)
		return err == nil
	})
	cancel()
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	res := waitFor(t, done, 2*dbCallTimeout, "the Enqueue to return")
	waitUntil(t, 10*time.Second, "the enqueue's session to finish", func() bool {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state <> 'idle'", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	out := offerOutcome(t, o)
	var claimed []int64
	rows, err := admin.QueryContext(ctx, "SELECT id FROM "+env.tbl.Quoted()+" WHERE status = 'in_progress' AND id <> $1 ORDER BY id", warmID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		claimed = append(claimed, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	handed := map[int64]bool{}
	for _, r := range out.rows {
		handed[r.ID] = true
	}
	for _, id := range claimed {
		if !handed[id] {
			t.Errorf("job %d is in_progress under the offered claim, which the claimer was not given (offer outcome: %d rows, err %v)", id, len(out.rows), out.err)
		}
	}
	if res.err != nil || res.id == 0 || !handed[res.id] {
		t.Errorf("Enqueue = %d, %v; offer outcome %d rows, err %v; want the new job's id, claimed for the claimer", res.id, res.err, len(out.rows), out.err)
	}
}
