package engine

import "github.com/jackc/pgx/v5/pgconn"

// pgReadOnly is PostgreSQL's SQLSTATE for a write refused in a read-only
// transaction (read_only_sql_transaction).
const pgReadOnly = "25006"

// closeOnReadOnly sets cfg so that pgx closes a connection whose server
// refused a write as read-only (SQLSTATE 25006), and database/sql then
// discards it instead of handing it out again; the statement's error is
// returned as before. After a failover that keeps the old primary running
// fenced read-only (default_transaction_read_only on), the pool's idle
// connections there refused every write they were given, for good (the
// pool reuses them), while its new connections reach the new primary
// (target_session_attrs=read-write). FATAL errors still close the
// connection, as pgx's default handler does.
func closeOnReadOnly(cfg *pgconn.Config) {
	next := cfg.OnPgError
	cfg.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if e.Code == pgReadOnly {
			return false
		}
		return next == nil || next(c, e)
	}
}
