package queue

import (
	"database/sql"
	"errors"
	"time"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// The rows that sqlc generates for the three engines have the same columns
// in the same order, in each engine's Go types. The functions below turn
// any engine's rows into the queue's values, once; a store converts a row
// with them rather than field by field (a generic function may not read a
// type parameter's fields, but may convert it to the struct it shares).

// genID is the Go type of the id column: BIGINT, or MySQL's unsigned one.
type genID interface{ ~int64 | ~uint64 }

// genPayload is the Go type of the payload column: JSON or TEXT.
type genPayload interface{ ~string | ~[]byte }

// genCount is the Go type of the attempt and policy columns.
type genCount interface{ ~int32 | ~uint32 | ~int64 }

// genJob is the Job model of db/pggen, db/mysqlgen and db/sqlitegen: I, P,
// S and N are the engine's types of ids, payloads, statuses and counts. A
// column added to the table is added here too (until then jobRow's callers
// do not compile), and to JobRow in jobRow.
type genJob[I genID, P genPayload, S ~string, N genCount] = struct {
	ID          I
	Name        string
	Type        string
	Payload     P
	Status      S
	Attempts    N
	ClaimToken  sql.NullString
	LeaseUntil  sql.NullTime
	MaxAttempts N
	BaseDelay   N
	MaxDelay    N
	Error       sql.NullString
	ScheduledAt time.Time
	ExpiresAt   sql.NullTime
	FinishedAt  sql.NullTime
	CreatedAt   time.Time
}

// jobRow is r, a generated Job of any engine, as a JobRow (times in UTC).
func jobRow[R ~genJob[I, P, S, N], I genID, P genPayload, S ~string, N genCount](r R) *JobRow {
	j := genJob[I, P, S, N](r)
	return &JobRow{
		ID: int64(j.ID), Name: j.Name, Type: j.Type, Payload: []byte(j.Payload), Status: Status(j.Status),
		Attempts: int(j.Attempts), ClaimToken: j.ClaimToken.String, LeaseUntil: timePtr(j.LeaseUntil),
		MaxAttempts: int(j.MaxAttempts), BaseDelay: time.Duration(j.BaseDelay) * time.Second,
		MaxDelay: time.Duration(j.MaxDelay) * time.Second, Error: j.Error.String,
		ScheduledAt: engine.AsUTC(j.ScheduledAt), ExpiresAt: timePtr(j.ExpiresAt),
		FinishedAt: timePtr(j.FinishedAt), CreatedAt: engine.AsUTC(j.CreatedAt),
	}
}

// jobRows is jobRow of each of rows.
func jobRows[R ~genJob[I, P, S, N], I genID, P genPayload, S ~string, N genCount](rows []R) []*JobRow {
	out := make([]*JobRow, len(rows))
	for i, r := range rows {
		out[i] = jobRow(r)
	}
	return out
}

// firstOf returns the first row of a result of at most one row (found
// false when it has none or err is not nil).
func firstOf[T any](rows []T, err error) (first T, found bool, _ error) {
	if err != nil || len(rows) == 0 {
		return first, false, err
	}
	return rows[0], true, nil
}

// genCountRow is a row of a CountByStatus query: a status, in the
// engine's type S, and how many jobs have it.
type genCountRow[S ~string] = struct {
	Status S
	N      int64
}

// countsByStatus is the result of a CountByStatus query (one row a status
// that has jobs) as counts by status; the map is empty, not nil, on error.
func countsByStatus[R ~genCountRow[S], S ~string](rows []R, err error) (map[Status]int64, error) {
	out := make(map[Status]int64, len(rows))
	for _, r := range rows {
		c := genCountRow[S](r)
		out[Status(c.Status)] = c.N
	}
	return out, err
}

// genLeaderRow is the row of a GetLeader query: the role's row and the
// server's time, in the engine's type D.
type genLeaderRow[D any] = struct {
	Holder     string
	Term       int64
	Since      time.Time
	RenewedAt  time.Time
	LeaseUntil time.Time
	DbNow      D
}

// leaderRowOf is r, a GetLeader row of any engine (err its error: nil,
// nil for sql.ErrNoRows, the role has no row), with the server's time
// read by dbNow.
func leaderRowOf[R ~genLeaderRow[D], D any](r R, err error, dbNow func(D) (time.Time, error)) (*leaderRow, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	g := genLeaderRow[D](r)
	now, err := dbNow(g.DbNow)
	if err != nil {
		return nil, err
	}
	return &leaderRow{holder: g.Holder, term: g.Term, since: engine.AsUTC(g.Since), renewedAt: engine.AsUTC(g.RenewedAt),
		leaseUntil: engine.AsUTC(g.LeaseUntil), dbNow: now}, nil
}

// serverTime reads a server's time that the driver returns as a
// time.Time (PostgreSQL, MySQL), in UTC.
func serverTime(t time.Time) (time.Time, error) { return engine.AsUTC(t), nil }

// genStatusRow is a row of a JobStatuses query: a job and its status.
type genStatusRow = struct {
	ID     int64
	Status string
}

// controlRest completes the result of a control statement (cancel,
// deleteJobs) that changed the jobs done among ids: it reads, with
// statuses (given the ids as a JSON array), the status of the others that
// exist.
func controlRest[R ~genStatusRow](ids []int64, done map[int64]bool, statuses func(idsJSON string) ([]R, error)) (map[int64]bool, map[int64]Status, error) {
	left := notIn(ids, done)
	if len(left) == 0 {
		return done, nil, nil
	}
	rows, err := statuses(jsonList(left))
	if err != nil {
		return done, nil, err
	}
	others := make(map[int64]Status, len(rows))
	for _, r := range rows {
		s := genStatusRow(r)
		others[s.ID] = Status(s.Status)
	}
	return done, others, nil
}
