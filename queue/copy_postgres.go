package queue

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bulk enqueue on PostgreSQL by COPY. EnqueueMany of its own (never in a
// caller's transaction: EnqueueManyTx cannot reach the pgx connection under
// a *sql.Tx) sends its jobs with pgx's binary COPY on a connection of the queue's pool
// (database/sql's Conn.Raw), which spares the server parsing a JSON array
// per chunk and the client building it. COPY is a protocol command, not a
// query sqlc could generate; its columns are those of InsertJobsJSON, and
// rows go in the order of the slice, so ids follow it as they do there.
// A pool whose driver is not pgx's stdlib (nor a wrapper of it whose
// connections show pgx's, see engine.PgxConn) takes the JSON path.

// pgCopyColumns are the columns COPY fills, in the order of pgCopyRow.
var pgCopyColumns = []string{
	"name", "type", "payload", "status", "attempts", "max_attempts", "base_delay",
	"max_delay", "scheduled_at", "expires_at", "created_at",
}

// errNoPgx: the pool's driver is not pgx's stdlib, so pgx's own interface
// (COPY, the claim scanned on pgx: claim_postgres.go) is not at hand and
// the caller takes the database/sql path.
var errNoPgx = errors.New("jobqueue: internal: the pool's driver is not pgx's stdlib; pgx's interface unavailable")

// pgCopySource feeds COPY the jobs as rows of pgCopyColumns. It fills one
// row slice again for each job (pgx encodes a row before it asks for the
// next), and keeps the boxed value of each column that is the same as in
// the row before (a batch's jobs mostly share kind, type, policy and
// times), so that a row costs few allocations.
type pgCopySource struct {
	jobs []*newJob
	now  any // created_at, boxed once
	i    int
	row  [11]any
	prev *newJob
}

func newPgCopySource(jobs []*newJob, now time.Time) *pgCopySource {
	s := &pgCopySource{jobs: jobs, now: now.UTC()}
	s.row[3], s.row[4], s.row[10] = "pending", int32(0), s.now
	return s
}

func (s *pgCopySource) Next() bool { s.i++; return s.i <= len(s.jobs) }

func (s *pgCopySource) Err() error { return nil }

func (s *pgCopySource) Values() ([]any, error) {
	j, p := s.jobs[s.i-1], s.prev
	if p == nil || j.name != p.name {
		s.row[0] = j.name
	}
	if p == nil || j.typ != p.typ {
		s.row[1] = j.typ
	}
	s.row[2] = j.payload
	if p == nil || j.maxAttempts != p.maxAttempts || j.baseDelay != p.baseDelay || j.maxDelay != p.maxDelay {
		s.row[5], s.row[6], s.row[7] = int32(j.maxAttempts), int32(j.baseDelay), int32(j.maxDelay)
	}
	if p == nil || !j.scheduledAt.Equal(p.scheduledAt) {
		s.row[8] = j.scheduledAt.UTC()
	}
	switch {
	case j.expiresAt == nil:
		s.row[9] = nil
	case p == nil || p.expiresAt == nil || !j.expiresAt.Equal(*p.expiresAt):
		s.row[9] = j.expiresAt.UTC()
	}
	s.prev = j
	return s.row[:], nil
}

// copyOwn writes jobs with one COPY on a connection of db, all or none (one
// statement: its own transaction, so no BEGIN and COMMIT round trips). It
// returns errNoPgx, having written nothing, when db's driver is not pgx's
// stdlib.
func (s pgStore) copyOwn(ctx context.Context, db *sql.DB, jobs []*newJob, now time.Time) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return onPgx(conn, func(pc *pgx.Conn) error {
		if s.r.observe != nil {
			s.r.observe("COPY "+s.r.quoted+" ("+strings.Join(pgCopyColumns, ", ")+") FROM STDIN (FORMAT binary)", nil)
		}
		_, err := pc.CopyFrom(ctx, pgx.Identifier{s.channel()}, pgCopyColumns, newPgCopySource(jobs, now))
		return err
	})
}
