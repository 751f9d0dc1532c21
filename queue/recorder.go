package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The claims of PostgreSQL and MySQL run the generated claim statements
// with their own scan of the rows (claim_postgres.go, claimIn of
// store_mysql_attempts.go): the generated method is called on a
// queryRecorder, which keeps the statement's text and arguments, so that
// SQL still comes only from sqlc.

// errRecorded is what queryRecorder answers: the query was kept, not run.
var errRecorded = errors.New("jobqueue: internal: query recorded, not run")

// recordingFailed is nil when err is errRecorded (the generated method
// only recorded its statement), and otherwise the internal error of
// recording what.
func recordingFailed(what string, err error) error {
	if errors.Is(err, errRecorded) {
		return nil
	}
	return fmt.Errorf("jobqueue: internal: recording %s: %v", what, err)
}

// queryRecorder is a DBTX that runs nothing: it keeps the text and
// arguments of the generated query sent to it.
type queryRecorder struct {
	query string
	args  []any
	// row, when set, is QueryRowContext's answer (runner.recorded, made
	// once per queue); otherwise each call makes one (failedRow), which
	// opens and closes a pool and starts a goroutine: traced in bench's
	// latency phase, some 25 µs of an idle worker's enqueue-to-start.
	row *sql.Row
}

func (r *queryRecorder) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	r.query, r.args = query, args
	return nil, errRecorded
}

func (r *queryRecorder) PrepareContext(context.Context, string) (*sql.Stmt, error) {
	return nil, errRecorded
}

func (r *queryRecorder) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	r.query, r.args = query, args
	return nil, errRecorded
}

func (r *queryRecorder) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	r.query, r.args = query, args
	if r.row != nil {
		return r.row
	}
	return failedRow(ctx, errRecorded)
}
