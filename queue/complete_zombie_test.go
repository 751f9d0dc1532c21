package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// zombieCompletions counts the completion statements (CompleteJobs) on
// env's table that run in the server's sessions other than the caller's.
func zombieCompletions(t *testing.T, env *testEnv) int {
	t.Helper()
	var n int
	if err := env.db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND INSTR(INFO, 'CompleteJobs') > 0 AND INSTR(INFO, ?) > 0`,
		env.tbl.Quoted()).Scan(&n); err != nil {
		t.Fatalf("reading the processlist: %v", err)
	}
	return n
}

// TestMySQLTimedOutCompletionCommitsNothing: a completion whose context
// ends while its UPDATE waits for a row lock leaves the statement running
// in the server (go-sql-driver/mysql cancels by closing the connection and
// sends no KILL QUERY), holding the rows it locked before the held one.
// That zombie is harmless: the completion's transaction was never
// committed, so once the lock it waits for is gone and the statement ends,
// the server, finding the connection closed, rolls it back; every job
// stays in_progress with its attempt's token, and the completion tried
// again writes them (the rows the zombie held are only skipped, as busy,
// while it lives).
func TestMySQLTimedOutCompletionCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := coreEnv(t, engine.MySQL)
	q, _ := coreQueue(t, env)
	for i := range 2 {
		mustEnqueue(t, q, testArgs{N: i})
	}
	jobs := mustClaim(t, q, nil, 2, time.Hour)
	if len(jobs) != 2 || jobs[0].ID > jobs[1].ID {
		t.Fatalf("claimed %d jobs, want 2 in the order of their ids", len(jobs))
	}
	refs := []attemptRef{jobs[0].ref(), jobs[1].ref()}
	// The UPDATE locks the first row, then waits for the second.
	unlock := lockRow(t, env.db, env.tbl, jobs[1].ID)
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	_, _, err := q.completeWith(cctx, refs, false)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the completion waiting for a locked row returned %v, want the context's deadline", err)
	}
	if n := zombieCompletions(t, env); n != 1 {
		t.Fatalf("%d completion statements run in the server after their context ended, want the 1 left behind", n)
	}
	// While it lives, the completion tried again leaving locked rows
	// alone finds both rows busy (the zombie's and the application's),
	// not stale, and writes nothing.
	stale, busy, err := q.completeWith(ctx, refs, true)
	if err != nil || len(stale) != 0 || len(busy) != 2 {
		t.Fatalf("completing beside the zombie: stale %v, busy %v, %v; want both busy", stale, busy, err)
	}
	// The lock goes: the zombie's UPDATE gets the row and changes both, in
	// a transaction whose client is gone.
	unlock()
	waitUntil(t, 30*time.Second, "the zombie completion to end", func() bool {
		return zombieCompletions(t, env) == 0
	})
	for _, j := range jobs {
		// A read that waits for the row's lock: it returns once the
		// zombie's transaction has ended.
		var status string
		var token *string
		err := env.db.QueryRowContext(ctx, "SELECT status, claim_token FROM "+env.tbl.Quoted()+" WHERE id = ? FOR UPDATE", j.ID).Scan(&status, &token)
		if err != nil {
			t.Fatal(err)
		}
		if status != string(StatusInProgress) || token == nil || *token != j.ClaimToken {
			t.Errorf("job %d after the zombie ended: %s, token %v; want in_progress with its attempt's token (the zombie's write rolled back)", j.ID, status, token)
		}
	}
	stale, busy, err = q.completeWith(ctx, refs, false)
	if err != nil || len(stale)+len(busy) != 0 {
		t.Fatalf("completing again: stale %v, busy %v, %v", stale, busy, err)
	}
	for _, j := range jobs {
		if got := getJob(t, q, j.ID).Status; got != StatusCompleted {
			t.Errorf("job %d is %s, want completed", j.ID, got)
		}
	}
}
