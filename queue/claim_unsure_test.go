package queue

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// lostCommit is a transaction whose COMMIT is carried out but whose
// answer is lost, as when the server commits and the connection is then
// killed (KILL, a restart) before the client reads the OK.
type lostCommit struct{ tx *sql.Tx }

func (l lostCommit) Commit() error {
	if err := l.tx.Commit(); err != nil {
		return err
	}
	return mysql.ErrInvalidConn
}

func (l lostCommit) Rollback() error { return l.tx.Rollback() }

// commitLostStore claims as mysqlStore.claim does, through lostCommit.
type commitLostStore struct{ s mysqlStore }

func (c commitLostStore) claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	tx, err := c.s.r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	return c.s.claimIn(ctx, c.s.r.on(tx), lostCommit{tx}, types, max, token, now, leaseUntil, after)
}

// TestClaimWhoseCommitWasLostGivenBack: a claim on MySQL whose COMMIT went
// through but whose answer was lost with the connection (a worker's
// sessions killed while it claims: seen in 2 of 7 runs of five rounds of
// KILL against a busy worker) fails, and its jobs are given back at once:
// pending as before the claim, the attempt not counted. They stayed
// in_progress, claimed by nobody, until their lease had passed (5 min by
// default) and Reclaim ran them again, an attempt counted.
func TestClaimWhoseCommitWasLostGivenBack(t *testing.T) {
	env := newTestEnv(t, engine.MySQL)
	logs := &testdb.LogRecorder{}
	q := env.queue(t, nil, WithLogger(slog.New(logs)))
	id := enqueue(t, q, testArgs{N: 1})
	st, ok := q.st.(mysqlStore)
	if !ok {
		t.Fatalf("the MySQL queue's store is %T", q.st)
	}
	rows, err := q.claimAfter(context.Background(), commitLostStore{st}, nil, 10, time.Minute, claimPos{})
	if err == nil {
		t.Fatalf("the claim whose COMMIT answer was lost returned %d rows and no error", len(rows))
	}
	job := getJob(t, q, id)
	if job.Status != StatusPending || job.Attempts != 0 || job.ClaimToken != "" {
		t.Errorf("after a claim whose COMMIT answer was lost (%v): status %s, attempts %d, token %q; want it pending, 0 attempts, no token; logs: %q",
			err, job.Status, job.Attempts, job.ClaimToken, logs.Lines(slog.LevelInfo))
	}
}
