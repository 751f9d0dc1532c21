package queue

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobqueue/jobqueue/db/pggen"
)

// The claim on PostgreSQL through pgx's own interface. A claim returns
// whole rows, and through database/sql each of them cost about twenty
// allocations: the generated code's row struct and its slice, database/sql's
// driver values (every time boxed, the payload copied twice), then the
// JobRow made from them. Allocation and the garbage collection it causes
// were the largest part of a worker's CPU per job. So the claim sends the
// generated claim statement (ClaimJobs, ClaimJobsOfType or
// ClaimJobsOfTypes: its text and arguments recorded from the generated
// method, rewritten for the table like every query: SQL still comes only
// from sqlc) on a connection of the queue's pool (database/sql's Conn.Raw,
// as COPY does) and scans each row straight into its JobRow. A pool whose
// driver is not pgx's stdlib (nor a wrapper that shows its connection, see
// engine.PgxConn) runs the generated method as before. A wrapper such as
// otelsql that shows pgx's connection sees no span for the claim, as it
// sees none for COPY (README, wrapped drivers).

// claimPgx runs claim, the claim of the batch token batch, on pgx's
// connection of conn (a claim session's), or of one taken from the pool
// when conn is nil, and returns the rows (up to max). With turn, the claim
// waits for its turn first (LockClaims, sent with it in one pipeline: see
// store_postgres_claim.go). It returns errNoPgx, having sent nothing, when
// the pool's driver is not pgx's stdlib, and a *claimUnsure when the claim
// was sent and may have committed though it failed (pgClaimMaybeDone).
func (s pgStore) claimPgx(ctx context.Context, conn *sql.Conn, claim pgClaim, batch string, max int, turn bool) ([]*JobRow, error) {
	if s.r.noPgx.Load() {
		return nil, errNoPgx
	}
	var rec queryRecorder
	_, err := claim(ctx, pggen.New(&rec))
	if err := recordingFailed("the claim", err); err != nil {
		return nil, err
	}
	text, err := s.r.text(rec.query)
	if err != nil {
		return nil, err
	}
	var lock queryRecorder
	if turn {
		if err := recordingFailed("the claim lock", pggen.New(&lock).LockClaims(ctx, claimLockKey(s.r.quoted))); err != nil {
			return nil, err
		}
		if lock.query, err = s.r.text(lock.query); err != nil {
			return nil, err
		}
	}
	if err := fenced(ctx); err != nil {
		return nil, err
	}
	args := s.r.args(rec.args)
	if conn == nil {
		c, err := s.r.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conn = c
	}
	out := make([]*JobRow, 0, max)
	sent := false
	err = onPgx(conn, func(pc *pgx.Conn) error {
		s.r.on(nil).seen(text)
		sent = true
		var rows pgx.Rows
		if turn {
			// One pipeline, one implicit transaction: the lock is held
			// until the claim commits, and the claim's snapshot is taken
			// once the lock is granted.
			b := &pgx.Batch{}
			b.Queue(lock.query, lock.args...)
			b.Queue(text, args...)
			br := pc.SendBatch(ctx, b)
			defer br.Close()
			if _, err := br.Exec(); err != nil {
				return err
			}
			rows, err = br.Query()
		} else {
			rows, err = pc.Query(ctx, text, args...)
		}
		if err != nil {
			return err
		}
		out, err = scanClaimed(rows, out)
		return err
	})
	if errors.Is(err, errNoPgx) {
		s.r.noPgx.Store(true)
	}
	if err != nil && sent && pgClaimMaybeDone(err) {
		return nil, &claimUnsure{rows: out, batch: batch, err: err}
	}
	return out, err
}

// pgClaimMaybeDone reports whether a claim statement that was sent and
// failed with err may have been carried out all the same: the statement
// commits on its own, before the server sends the end of its answer, so
// unless the server refused it (a *pgconn.PgError other than the end of
// the connection: the statement was rolled back) or pgx tells that nothing
// was sent (pgconn.SafeToRetry), a failure of the connection, of ctx or of
// reading the answer may have lost the answer of a committed claim.
func pgClaimMaybeDone(err error) bool {
	if pgconn.SafeToRetry(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return connectionLost(err)
	}
	return true
}

// scanClaimed appends the rows of a claim statement (RETURNING *, the
// columns of pggen.Job in order) to out and closes rows. Each row is made
// into its JobRow by jobRow, the one mapping of a generated row.
//
// The scan targets are declared once and reused for every row (each row's
// values are copied out of them): taken by address, they live on the heap,
// and declared in the loop they cost fourteen allocations per row. The
// nullable columns scan into pgx's own types, which pgx fills without the
// sql.Scanner of pggen.Job's (measured faster), and the payload as []byte,
// a copy of the jsonb (valid JSON by the column's type), where a
// json.RawMessage target went through json.Unmarshal, which checked it
// byte by byte first. The kind, type and status, which repeat from row to
// row, are made strings once per claim (internTable):
// BenchmarkDrain/postgres 16.3 allocations per job against 19.3.
func scanClaimed(rows pgx.Rows, out []*JobRow) ([]*JobRow, error) {
	defer rows.Close()
	var (
		j                        pggen.Job
		texts                    = internTable{}
		name, typ, status        = internedText{table: texts}, internedText{table: texts}, internedText{table: texts}
		token, errText           pgtype.Text
		payload                  []byte
		lease, expires, finished pgtype.Timestamp
	)
	// The columns of RETURNING * as sqlc spells them out: the order of
	// pggen.Job.
	dest := []any{&j.ID, &name, &typ, &payload, &status, &j.Attempts, &token, &lease,
		&j.MaxAttempts, &j.BaseDelay, &j.MaxDelay, &errText, &j.ScheduledAt, &expires, &finished, &j.CreatedAt}
	for rows.Next() {
		payload = nil // so that no scan plan appends to the last row's payload
		if err := rows.Scan(dest...); err != nil {
			return out, err
		}
		j.Name, j.Type, j.Status, j.Payload = name.s, typ.s, status.s, payload
		j.ClaimToken, j.Error = sql.NullString(token), sql.NullString(errText)
		j.LeaseUntil, j.ExpiresAt, j.FinishedAt = sqlNullTime(lease), sqlNullTime(expires), sqlNullTime(finished)
		out = append(out, jobRow(j))
	}
	return out, rows.Err()
}

// sqlNullTime is t as database/sql's nullable time.
func sqlNullTime(t pgtype.Timestamp) sql.NullTime {
	return sql.NullTime{Time: t.Time, Valid: t.Valid}
}

// internMax is the most distinct values an internTable keeps.
const internMax = 64

// internTable makes each distinct text of a claim's rows a string once:
// a job's kind, type and status repeat from row to row, and pgx made a new
// string of each for every row (three allocations a row of a claim's
// twenty). It keeps at most internMax values; others are made each time.
type internTable map[string]string

// of is b as a string, the same one for the same bytes.
func (m internTable) of(b []byte) string {
	if s, ok := m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(m) < internMax {
		m[s] = s
	}
	return s
}

// internedText scans a NOT NULL text column through its table (pgx hands
// a BytesScanner its own buffer, valid until the next row).
type internedText struct {
	s     string
	table internTable
}

// ScanBytes implements pgtype.BytesScanner.
func (t *internedText) ScanBytes(b []byte) error {
	if b == nil {
		return errors.New("jobqueue: internal: NULL in a NOT NULL text column")
	}
	t.s = t.table.of(b)
	return nil
}
