package queue

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Bulk enqueue on PostgreSQL by COPY. EnqueueMany of its own (never in a
// caller's transaction: EnqueueManyTx cannot reach the pgx connection under
// a *sql.Tx) sends its jobs as one binary COPY on a connection of the
// queue's pool (database/sql's Conn.Raw, pgx's pgconn.CopyFrom), which
// spares the server parsing a JSON array per chunk and the client building
// it. COPY is a protocol command, not a query sqlc could generate; its
// columns are those of InsertJobsJSON, and rows go in the order of the
// slice, so ids follow it as they do there.
//
// pgCopyReader writes the rows in COPY's binary format itself (a few
// appends per column: pgx's generic encoder looked up an encode plan per
// value, most of the client's time per job), in chunks of pgCopyChunk, so
// that the server starts on the first rows while the client encodes the
// next. The format depends on the columns' types, which SPEC section 2
// fixes; the queue checks them once (pgCopyTypes) and takes the JSON path
// for a table whose columns have other types.
//
// A pool whose driver is not pgx's stdlib (nor a wrapper of it whose
// connections show pgx's, see engine.PgxConn) takes the JSON path too.

// pgCopyColumns are the columns COPY fills, in the order of pgCopyReader's
// rows.
var pgCopyColumns = []string{
	"name", "type", "payload", "status", "attempts", "max_attempts", "base_delay",
	"max_delay", "scheduled_at", "expires_at", "created_at",
}

// PostgreSQL type OIDs of the columns COPY fills.
const (
	oidText        = 25
	oidVarchar     = 1043
	oidInt4        = 23
	oidJSONB       = 3802
	oidTimestamp   = 1114
	oidTimestamptz = 1184
)

// pgCopyTypes are the types pgCopyReader's binary encoding fits, per column
// of pgCopyColumns (timestamptz's binary form is timestamp's, UTC).
var pgCopyTypes = [][]uint32{
	{oidVarchar, oidText}, {oidVarchar, oidText}, {oidJSONB}, {oidVarchar, oidText},
	{oidInt4}, {oidInt4}, {oidInt4}, {oidInt4},
	{oidTimestamp, oidTimestamptz}, {oidTimestamp, oidTimestamptz}, {oidTimestamp, oidTimestamptz},
}

// errNoPgx: the pool's driver is not pgx's stdlib, so pgx's own interface
// (COPY, the claim scanned on pgx: claim_postgres.go) is not at hand and
// the caller takes the database/sql path.
var errNoPgx = errors.New("jobqueue: internal: the pool's driver is not pgx's stdlib; pgx's interface unavailable")

// errNoCopy: the table's columns have types the binary COPY does not
// encode (pgCopyTypes); the caller takes the JSON path.
var errNoCopy = errors.New("jobqueue: internal: the table's column types do not fit the binary COPY")

// Copy format states of runner.copyFormat.
const (
	copyUnknown int32 = iota // not checked yet
	copyBinary               // the columns fit pgCopyReader
	copyNone                 // they do not: the JSON path
)

// pgCopyChunk is about how many bytes of rows pgCopyReader encodes before
// it hands them to pgconn (one CopyData message each).
const pgCopyChunk = 16 << 10

// pgEpochMicros is 2000-01-01 00:00:00 UTC in microseconds since 1970, the
// epoch of PostgreSQL's binary timestamps.
const pgEpochMicros = 946684800 * 1000000

// pgCopyReader is the data of one binary COPY of n jobs: the header, one
// row per job in pgCopyColumns' order, the trailer. Read hands out the rows
// encoded so far and encodes the next chunk when they are gone. job gives
// the i-th job: a checked one, or one it checks then (copyStream), whose
// error ends the COPY with nothing written; err keeps that error.
type pgCopyReader struct {
	job     func(i int) (*newJob, error)
	n       int
	now     [8]byte // created_at, encoded once
	next    int     // the next job to encode
	buf     []byte
	off     int // how much of buf Read has handed out
	started bool
	done    bool  // the trailer is in buf
	err     error // the error of job, if any

	// pgx reads the COPY's data in a goroutine of its own, which
	// CopyFrom does not wait for when the connection fails (the context
	// ended, say): mu is held while Read encodes, and once stopped Read
	// encodes nothing more (stop), so that the caller reads the state
	// above, and calls job itself, only once that goroutine is done with
	// them. onStop hears stop begin (tests).
	mu      sync.Mutex
	stopped bool
	onStop  func()
}

// errCopyStopped is what a stopped pgCopyReader reads.
var errCopyStopped = errors.New("jobqueue: internal: the COPY's data is no longer read")

// stop waits for a Read under way to end, and makes Read encode nothing
// more: after it, job is no longer called from pgx's goroutine.
func (r *pgCopyReader) stop() {
	if r.onStop != nil {
		r.onStop()
	}
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// newPgCopyReader is the COPY data of the checked jobs.
func newPgCopyReader(jobs []*newJob, now time.Time) *pgCopyReader {
	return newPgCopyReaderOf(len(jobs), func(i int) (*newJob, error) { return jobs[i], nil }, now)
}

// newPgCopyReaderOf is the COPY data of n jobs that job gives.
func newPgCopyReaderOf(n int, job func(i int) (*newJob, error), now time.Time) *pgCopyReader {
	r := &pgCopyReader{job: job, n: n, buf: make([]byte, 0, pgCopyChunk+1024)}
	binary.BigEndian.PutUint64(r.now[:], uint64(pgMicros(now)))
	return r
}

// pgMicros is t in microseconds since PostgreSQL's epoch, as a binary
// timestamp carries it (UTC).
func pgMicros(t time.Time) int64 {
	return t.Unix()*1000000 + int64(t.Nanosecond()/1000) - pgEpochMicros
}

func (r *pgCopyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return 0, errCopyStopped
	}
	if r.off == len(r.buf) {
		if r.done {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// fill encodes the next chunk of rows into buf (the header before the
// first, the trailer after the last).
func (r *pgCopyReader) fill() error {
	b := r.buf[:0]
	r.off = 0
	if !r.started {
		b = append(b, "PGCOPY\n\377\r\n\000"...)
		b = binary.BigEndian.AppendUint32(b, 0) // flags
		b = binary.BigEndian.AppendUint32(b, 0) // header extension length
		r.started = true
	}
	for ; r.next < r.n && len(b) < pgCopyChunk; r.next++ {
		j, err := r.job(r.next)
		if err == nil {
			b, err = appendPgCopyRow(b, j, r.now[:])
		}
		if err != nil {
			r.err = err
			return err
		}
	}
	if r.next == r.n {
		b = binary.BigEndian.AppendUint16(b, 0xffff) // the trailer: -1 fields
		r.done = true
	}
	r.buf = b
	return nil
}

// appendPgCopyRow appends job j as one row of binary COPY: the field count,
// then each field's length (-1: NULL) and value.
func appendPgCopyRow(b []byte, j *newJob, now []byte) ([]byte, error) {
	if len(j.payload) >= math.MaxInt32 {
		return b, fmt.Errorf("%w: the %s payload has %d bytes, more than PostgreSQL stores", ErrPayloadRejected, j.name, len(j.payload))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(pgCopyColumns)))
	b = appendPgText(b, j.name)
	b = appendPgText(b, j.typ)
	b = binary.BigEndian.AppendUint32(b, uint32(len(j.payload)+1))
	b = append(b, 1) // jsonb's binary format: version 1, then the JSON text
	b = append(b, j.payload...)
	b = appendPgText(b, "pending")
	b = appendPgInt4(b, 0)
	b = appendPgInt4(b, j.maxAttempts)
	b = appendPgInt4(b, j.baseDelay)
	b = appendPgInt4(b, j.maxDelay)
	b = appendPgTimestamp(b, j.scheduledAt)
	if j.expiresAt == nil {
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	} else {
		b = appendPgTimestamp(b, *j.expiresAt)
	}
	b = binary.BigEndian.AppendUint32(b, 8)
	return append(b, now...), nil
}

func appendPgText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// appendPgInt4 appends v, which the job's checks keep within int32.
func appendPgInt4(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 4)
	return binary.BigEndian.AppendUint32(b, uint32(int32(v)))
}

func appendPgTimestamp(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(pgMicros(t)))
}

// copyOwn writes jobs with one COPY on a connection of db, all or none (one
// statement: its own transaction, so no BEGIN and COMMIT round trips). When
// notify is set the same transaction also notifies workers of that payload
// (the jobs' type, or empty for several; see pgNotifier.inline). It returns
// errNoPgx when db's driver is not pgx's stdlib, and errNoCopy when the
// table's columns do not fit the binary format, having written nothing.
func (s pgStore) copyOwn(ctx context.Context, db *sql.DB, jobs []*newJob, now time.Time, notify bool, payload string) error {
	return s.copyRows(ctx, db, newPgCopyReader(jobs, now), notify, payload)
}

// copyRows is copyOwn of the rows of r. When r's jobs fail their checks it
// returns their error (the COPY was aborted).
func (s pgStore) copyRows(ctx context.Context, db *sql.DB, r *pgCopyReader, notify bool, payload string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return onPgx(conn, func(pc *pgx.Conn) error {
		if err := s.checkCopyTypes(ctx, pc); err != nil {
			return err
		}
		query := "COPY " + s.r.quoted + " (" + strings.Join(pgCopyColumns, ", ") + ") FROM STDIN (FORMAT binary)"
		if notify {
			// One simple query of two statements runs as one implicit
			// transaction: the notification rides the COPY's commit.
			query += "; SELECT pg_notify(" + pgQuoteLiteral(s.channel()) + ", " + pgQuoteLiteral(payload) + ")"
		}
		if s.r.observe != nil {
			s.r.observe(query, nil)
		}
		_, err := pc.PgConn().CopyFrom(ctx, r, query)
		r.stop()
		if err != nil && r.err != nil {
			// The server's error names the aborted COPY; the job's says
			// what is wrong.
			return r.err
		}
		return err
	})
}

// checkCopyTypes makes sure, once per queue, that the table's columns have
// the types pgCopyReader encodes: errNoCopy when they do not.
func (s pgStore) checkCopyTypes(ctx context.Context, pc *pgx.Conn) error {
	switch s.r.copyFormat.Load() {
	case copyBinary:
		return nil
	case copyNone:
		return errNoCopy
	}
	sd, err := pc.PgConn().Prepare(ctx, "", "SELECT "+strings.Join(pgCopyColumns, ", ")+" FROM "+s.r.quoted, nil)
	if err != nil {
		return fmt.Errorf("reading the column types of table %s: %w", s.r.quoted, err)
	}
	format := copyBinary
	if !copyTypesFit(sd.Fields) {
		format = copyNone
	}
	s.r.copyFormat.Store(format)
	if format == copyNone {
		return errNoCopy
	}
	return nil
}

// copyTypesFit reports whether the fields (of pgCopyColumns, in order) have
// the types of pgCopyTypes.
func copyTypesFit(fields []pgconn.FieldDescription) bool {
	if len(fields) != len(pgCopyTypes) {
		return false
	}
	for i, f := range fields {
		ok := false
		for _, oid := range pgCopyTypes[i] {
			ok = ok || f.DataTypeOID == oid
		}
		if !ok {
			return false
		}
	}
	return true
}

// pgQuoteLiteral quotes s as an escape string constant (E'…'), which reads
// the same whatever standard_conforming_strings says.
func pgQuoteLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}
