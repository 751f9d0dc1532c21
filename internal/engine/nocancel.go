package engine

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// cancelRequestCode is the code of PostgreSQL's CancelRequest message, in
// bytes 4 to 8 of the 16 a client sends on a connection of its own.
const cancelRequestCode = 80877102

// NoCancelRequests sets cfg so that pgx never sends PostgreSQL a cancel
// request: a query whose context ends is interrupted by closing its
// connection. Behind a transaction pooler that is what a client wants:
// PgBouncer 1.18 (Debian 12's) can crash on cancel requests
// (pgbouncer/pgbouncer#801 and #822, fixed in 1.20), and a pooler's client
// connection is cheap to open again. Setting pgconn's
// DeadlineContextWatcherHandler alone is not enough: when pgx closes a
// connection in the middle of a query it still sends a cancel request
// first, on a connection it dials with cfg.DialFunc. So the connections
// dialed here carry a mark, AfterNetConnect marks those that become
// sessions, and a CancelRequest written on an unmarked one is dropped: the
// connection is closed instead, unsent. Over TLS the request is encrypted
// before it is written and cannot be told apart; it goes through.
func NoCancelRequests(cfg *pgconn.Config) {
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	dial, after := cfg.DialFunc, cfg.AfterNetConnect
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cancelDropConn{Conn: c}, nil
	}
	cfg.AfterNetConnect = func(ctx context.Context, cfg *pgconn.Config, c net.Conn) (net.Conn, error) {
		under := c
		if tc, ok := under.(*tls.Conn); ok {
			under = tc.NetConn()
		}
		if dc, ok := under.(*cancelDropConn); ok {
			dc.session.Store(true)
		}
		if after != nil {
			return after(ctx, cfg, c)
		}
		return c, nil
	}
}

// cancelDropConn is a connection dialed under NoCancelRequests. Until it is
// marked as a session it drops a CancelRequest written on it.
type cancelDropConn struct {
	net.Conn
	session atomic.Bool
}

// Write writes b, unless b is a CancelRequest on a connection that is no
// session: then it closes the connection and reports b written.
func (c *cancelDropConn) Write(b []byte) (int, error) {
	if !c.session.Load() && isCancelRequest(b) {
		c.Conn.Close()
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// isCancelRequest reports whether b is PostgreSQL's CancelRequest message:
// its length, then the cancel code, then the process id and secret key.
func isCancelRequest(b []byte) bool {
	return len(b) >= 16 && int(binary.BigEndian.Uint32(b[0:4])) == len(b) && binary.BigEndian.Uint32(b[4:8]) == cancelRequestCode
}
