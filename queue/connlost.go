package queue

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// connectionLost reports an error that says the database could not be
// reached, not that it refused the statement: the connection broke or was
// ended by the server (a restart, a failover, a session killed with
// pg_terminate_backend or KILL, the network down), or no new one could be
// made. A write that failed so can succeed as it is once the server is
// back, so the worker keeps such results instead of giving them up.
func connectionLost(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03": // admin_shutdown (also pg_terminate_backend), crash_shutdown, cannot_connect_now
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection_exception
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true // no connection could be made, for whatever reason
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// A statement out of time (a net.Error too): most likely waiting
		// on a lock, which the callers tell apart.
		return false
	}
	var netErr net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr) ||
		isMySQLError(err, 1927) || // ER_CONNECTION_KILLED
		isMySQLError(err, 1053) // ER_SERVER_SHUTDOWN
}

// manyNotWritten is the error of an EnqueueMany of n jobs in a transaction
// of the queue's own that failed with err: none written when the database
// refused it (or could not be reached at all); when the connection was
// lost, or the call ended, while it waited for the database's answer, the
// commit may have been carried out all the same (a failover, the network
// failing at that moment), and the error says so, so that the caller
// looks before enqueueing the jobs again rather than doubling them.
func (q *Queue) manyNotWritten(n int, err error) error {
	var pgErr *pgconn.PgError
	var myErr *mysql.MySQLError
	var connectErr *pgconn.ConnectError
	if q.kind == engine.SQLite || errors.As(err, &pgErr) || errors.As(err, &myErr) || errors.As(err, &connectErr) {
		return fmt.Errorf("jobqueue: enqueue %d jobs (none written): %w", n, refusedPayload(err))
	}
	return fmt.Errorf("jobqueue: enqueue %d jobs (they may have been written: the database's answer was lost; look for them before enqueueing them again): %w", n, err)
}
