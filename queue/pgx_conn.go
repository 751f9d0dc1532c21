package queue

import (
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// onPgx runs fn on pgx's connection under conn (database/sql's Conn.Raw,
// through wrappers that show it, see engine.PgxConn): the way COPY
// (copy_postgres.go) and the claim scanned on pgx (claim_postgres.go) reach
// pgx's own interface. It returns errNoPgx, having called nothing, when the
// pool's driver is not pgx's stdlib; when fn fails and its failure closed
// the connection, the error makes database/sql discard it. Its error is
// explained (explainErr).
func onPgx(conn *sql.Conn, fn func(pc *pgx.Conn) error) error {
	return explainErr(conn.Raw(func(dc any) error {
		sc, ok := engine.PgxConn(dc)
		if !ok {
			return errNoPgx
		}
		pc := sc.Conn()
		return badConnIfClosed(pc, fn(pc))
	}))
}

// badConnIfClosed returns err, and makes database/sql discard the
// connection when the failure closed it (a cancelled COPY does).
func badConnIfClosed(pc *pgx.Conn, err error) error {
	if err != nil && pc.IsClosed() {
		return errors.Join(err, driver.ErrBadConn)
	}
	return err
}
