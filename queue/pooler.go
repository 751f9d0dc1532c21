package queue

// Transaction poolers (PgBouncer with pool_mode=transaction): each
// transaction, or each statement outside one, may run on another server
// session, so nothing may rely on session state: no prepared statements
// kept from one transaction to the next (pgx's statement cache, the
// runner's prepared statements), no LISTEN. The user tells pgx with its
// own URL parameter default_query_exec_mode=exec (any mode but the default
// cache_statement); New reads that mode and then keeps no session state of
// its own either. WithTransactionPooling says it explicitly instead.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// errNotPgxConn: the pool's connections do not show pgx's, so its settings
// cannot be read (an opaque wrapper given with WithEngine).
var errNotPgxConn = errors.New("jobqueue: pgx's connection is not at hand")

// WithTransactionPooling tells the queue whether its connections go through
// a transaction pooler such as PgBouncer in transaction pooling mode (or
// ProxySQL's multiplexing on MySQL). A pooled queue keeps no state in a
// database session: it prepares no statements, and its workers poll
// instead of holding a connection to be woken on (PostgreSQL's LISTEN,
// MySQL's wait, SQLite's watch). On MySQL its enqueues interrupt no other
// process's wait either: KILL QUERY names a server session, and ProxySQL
// reads the number as one of its own client sessions; its claimers keep
// their claim sessions, whose settings and user lock ProxySQL keeps for
// them (store_mysql_claim.go). By default New detects it on PostgreSQL: a
// pool whose pgx default_query_exec_mode is not cache_statement (say
// default_query_exec_mode=exec in the URL, which is what pgx needs behind
// PgBouncer) is taken as pooled. Elsewhere the default is false.
func WithTransactionPooling(on bool) Option {
	return func(c *config) error { c.pooled = &on; return nil }
}

// PgxWithoutCancelRequests sets cfg so that pgx never sends a cancel
// request: a query whose context ends is interrupted by closing its
// connection. Use it for a pool of your own behind PgBouncer, before
// stdlib.OpenDB(*cfg): PgBouncer 1.18 (Debian 12's) can crash on cancel
// requests (fixed in 1.20). Setting pgconn's DeadlineContextWatcherHandler
// alone is not enough, since pgx still sends a cancel request when it
// closes a connection in the middle of a query. Over TLS the request is
// encrypted and still goes through. The jobqueue command does this itself
// for a URL with default_query_exec_mode other than cache_statement.
func PgxWithoutCancelRequests(cfg *pgx.ConnConfig) {
	engine.NoCancelRequests(&cfg.Config)
}

// setPooled records whether the queue runs through a transaction pooler;
// a pooled queue prepares no statements.
func (q *Queue) setPooled(on bool) {
	q.pooled = on
	q.run.pooled = on
	if on {
		q.run.prepare = false
	}
}

// pgxUnnamedStatements reports whether db's pgx connections run statements
// without keeping them prepared in the session (any exec mode but
// cache_statement), which is how pgx is told it runs behind a transaction
// pooler.
func pgxUnnamedStatements(ctx context.Context, db *sql.DB) (bool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var mode pgx.QueryExecMode
	err = conn.Raw(func(dc any) error {
		sc, ok := engine.PgxConn(dc)
		if !ok {
			return fmt.Errorf("%w: the driver's connection is %T, neither pgx's *stdlib.Conn nor a wrapper of it with a Raw() method; say whether a transaction pooler is in the way with queue.WithTransactionPooling", errNotPgxConn, dc)
		}
		mode = sc.Conn().Config().DefaultQueryExecMode
		return nil
	})
	return err == nil && mode != pgx.QueryExecModeCacheStatement, err
}
