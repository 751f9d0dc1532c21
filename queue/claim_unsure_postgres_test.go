package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/testdb"
)

// connClaimStore claims as pgStore.claimOn does, on conn.
type connClaimStore struct {
	s    pgStore
	conn *sql.Conn
}

func (c connClaimStore) claim(ctx context.Context, types []string, max int, token string, now, leaseUntil time.Time, after claimPos) ([]*JobRow, error) {
	return c.s.claimOn(ctx, c.conn, false, types, max, token, now, leaseUntil, after)
}

// TestPostgresClaimWhoseAnswerWasLostGivenBack: a claim on PostgreSQL that
// the server carried out and committed, but whose answer (the claimed
// rows) was lost with its connection (here a proxy drops the server's
// replies, then cuts the connection), fails, and its jobs are given back
// at once, found by the claim's batch token: pending as before the claim,
// the attempt not counted. They stayed in_progress, claimed by nobody,
// until their lease had passed and Reclaim ran them again, an attempt
// counted; MySQL gave back such a claim's jobs already
// (TestClaimWhoseCommitWasLostGivenBack).
func TestPostgresClaimWhoseAnswerWasLostGivenBack(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.Postgres)
	logs := &testdb.LogRecorder{}
	q := env.queue(t, nil, WithLogger(slog.New(logs))) // gives back on the pool, not through the proxy
	st, ok := q.st.(pgStore)
	if !ok {
		t.Fatalf("the PostgreSQL queue's store is %T", q.st)
	}
	outage, url := testdb.NewOutage(t, engine.Postgres)
	conn, err := testdb.OpenURL(t, url).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
			t.Errorf("closing the claim's connection: %v", err)
		}
	}()
	store := connClaimStore{s: st, conn: conn}
	// A claim with nothing due first: pgx prepares the statement on the
	// connection then, so that the claim below goes out in one message and
	// only its answer is lost.
	if rows, err := q.claimAfter(ctx, store, nil, 10, time.Minute, claimPos{}); err != nil || len(rows) != 0 {
		t.Fatalf("a claim with nothing due: %d rows, %v", len(rows), err)
	}
	id := enqueue(t, q, testArgs{N: 1})
	outage.LoseReplies()
	claimed := make(chan error, 1)
	go func() {
		rows, err := q.claimAfter(ctx, store, nil, 10, time.Minute, claimPos{})
		if err == nil {
			err = errors.New("no error")
			if len(rows) == 0 {
				err = errors.New("no error and no job claimed")
			}
		} else {
			err = nil
		}
		claimed <- err
	}()
	waitUntil(t, 10*time.Second, "the claim to commit on the server", func() bool {
		return getJob(t, q, id).Status == StatusInProgress
	})
	outage.Cut()
	if err := waitFor(t, claimed, 30*time.Second, "the claim to fail with its connection"); err != nil {
		t.Fatalf("the claim whose answer was lost: %v; want its connection's error", err)
	}
	job := getJob(t, q, id)
	if job.Status != StatusPending || job.Attempts != 0 || job.ClaimToken != "" || job.LeaseUntil != nil {
		t.Errorf("after a claim whose answer was lost: status %s, attempts %d, token %q, lease %v; want it pending, 0 attempts, no token, no lease; logs: %q",
			job.Status, job.Attempts, job.ClaimToken, job.LeaseUntil, logs.Lines(slog.LevelInfo))
	}
}

// TestPgClaimMaybeDone: a claim statement's failure leaves it possibly
// committed (its jobs given back) unless the server refused it or pgx sent
// nothing; the errors are pgx's own, from a real connection where they can
// be.
func TestPgClaimMaybeDone(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t, engine.Postgres)
	conn, err := env.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(); err != nil {
			t.Errorf("closing the connection: %v", err)
		}
	}()
	pgxErr := func(ctx context.Context, query string) error {
		t.Helper()
		var qerr error
		if err := onPgx(conn, func(pc *pgx.Conn) error {
			_, qerr = pc.Exec(ctx, query)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if qerr == nil {
			t.Fatalf("%s: no error", query)
		}
		return qerr
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused by the server", pgxErr(ctx, "SELECT 1/0"), false},
		{"context done before it was sent", pgxErr(done, "SELECT 1"), false},
		{"session ended by the server", &pgconn.PgError{Code: "57P01"}, true},
		{"connection broken while waiting for the answer", fmt.Errorf("reading the answer: %w", io.ErrUnexpectedEOF), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := pgClaimMaybeDone(c.err); got != c.want {
				t.Errorf("pgClaimMaybeDone(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
