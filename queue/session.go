package queue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
)

// Connections held for a session of their own: a claimer's claim session
// (PostgreSQL, MySQL), a listener's LISTEN connection (PostgreSQL) and a
// waiter's wake slot (MySQL, wake_mysql.go). Their session
// state is the queue's, so they are never handed back to the pool.

// claimSessionMinFree is how many connections of a limited pool
// (SetMaxOpenConns) must be free (not in use) for a claimer to hold one for
// its claims (PostgreSQL, MySQL): the listeners, waiters and claim sessions
// of the pool's workers hold theirs for good, and the completers, heartbeats,
// handlers and enqueues need the rest. With fewer free, the claims run on
// the pool.
const claimSessionMinFree = 4

// roomForClaimSession reports whether a pool with the stats st has room for
// a claim session: it is not limited, or claimSessionMinFree of its
// connections are free.
func roomForClaimSession(st sql.DBStats) bool {
	return st.MaxOpenConnections <= 0 || st.MaxOpenConnections-st.InUse >= claimSessionMinFree
}

// sessionConn takes a connection from db and runs the session statements
// on it (session control such as SET, which sqlc does not generate), in
// order. When one fails, the connection is discarded and the error says
// which statement failed.
func sessionConn(ctx context.Context, db *sql.DB, stmts ...string) (*sql.Conn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for _, stmt := range stmts {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			discardConn(conn)
			return nil, fmt.Errorf("setting up a session of its own (%s): %w", stmt, err)
		}
	}
	return conn, nil
}

// discardConn closes conn without handing it back to the pool: the driver
// connection is closed, so no other user of the pool gets a session whose
// state the queue changed.
func discardConn(conn *sql.Conn) {
	spoilConn(conn)
	_ = conn.Close()
}

// spoilConn marks conn's driver connection bad (the error database/sql
// takes for a broken one), so that closing conn closes it instead of
// handing it back to the pool.
func spoilConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}
