package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// Bulk enqueue on PostgreSQL by COPY. EnqueueMany's own transaction (never a
// caller's: EnqueueManyTx cannot reach the pgx connection under a *sql.Tx)
// sends its jobs with pgx's binary COPY on a connection of the queue's pool
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

// errNoCopy: the pool's driver is not pgx's stdlib, so COPY is not at hand.
var errNoCopy = errors.New("jobqueue: internal: the pool's driver is not pgx's stdlib; COPY unavailable")

// pgCopyRow is job j as a COPY row of pgCopyColumns.
func pgCopyRow(j *newJob, now time.Time) []any {
	var expires any
	if j.expiresAt != nil {
		expires = j.expiresAt.UTC()
	}
	return []any{
		j.name, j.typ, []byte(j.payload), "pending", int32(0), int32(j.maxAttempts), int32(j.baseDelay),
		int32(j.maxDelay), j.scheduledAt.UTC(), expires, now.UTC(),
	}
}

// copyOwn writes jobs with COPY in one transaction of its own on a
// connection of db, all or none. It returns errNoCopy, having written
// nothing, when db's driver is not pgx's stdlib.
func (s pgStore) copyOwn(ctx context.Context, db *sql.DB, jobs []*newJob, now time.Time) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := engine.PgxConn(dc)
		if !ok {
			return errNoCopy
		}
		pc := sc.Conn()
		tx, err := pc.Begin(ctx)
		if err != nil {
			return badConnIfClosed(pc, err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if s.r.observe != nil {
			s.r.observe("COPY "+s.r.quoted+" ("+strings.Join(pgCopyColumns, ", ")+") FROM STDIN (FORMAT binary)", nil)
		}
		_, err = tx.CopyFrom(ctx, pgx.Identifier{s.channel()}, pgCopyColumns,
			pgx.CopyFromSlice(len(jobs), func(i int) ([]any, error) { return pgCopyRow(jobs[i], now), nil }))
		if err != nil {
			return badConnIfClosed(pc, err)
		}
		return badConnIfClosed(pc, tx.Commit(ctx))
	})
}

// badConnIfClosed returns err, and makes database/sql discard the
// connection when the failure closed it (a cancelled COPY does).
func badConnIfClosed(pc *pgx.Conn, err error) error {
	if err != nil && pc.IsClosed() {
		return errors.Join(err, driver.ErrBadConn)
	}
	return err
}
