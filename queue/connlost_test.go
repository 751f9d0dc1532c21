package queue

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestConnectionLost: the errors of a database that cannot be reached are
// told from those of a database that refused a statement, or of a
// statement out of time.
func TestConnectionLost(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"pg_terminate_backend", &pgconn.PgError{Code: "57P01"}, true},
		{"server starting or stopping", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"bad connection, wrapped", fmt.Errorf("jobqueue: complete: %w", driver.ErrBadConn), true},
		{"MySQL invalid connection", mysql.ErrInvalidConn, true},
		{"MySQL connection killed", &mysql.MySQLError{Number: 1927}, true},
		{"MySQL server shutdown", &mysql.MySQLError{Number: 1053}, true},
		{"connection refused", fmt.Errorf("dial: %w", refused), true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, false},
		{"lock timeout", &pgconn.PgError{Code: "55P03"}, false},
		{"read-only transaction", &pgconn.PgError{Code: "25006"}, false},
		{"MySQL lock wait timeout", &mysql.MySQLError{Number: 1205}, false},
		{"statement out of time", fmt.Errorf("complete: %w", context.DeadlineExceeded), false},
		{"other", errors.New("trigger refused the row"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := connectionLost(c.err); got != c.want {
				t.Errorf("connectionLost(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
