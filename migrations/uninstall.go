package migrations

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jobqueue/jobqueue/internal/ddl"
)

// Uninstall drops the jobs table named table and everything Install creates
// with it (its indexes and side tables), DELETING EVERY JOB IN IT; objects
// already missing are skipped, so it can run again, and a missing table's
// leftover side tables are dropped. It drops exactly what internal/ddl
// defines (the goose file's Down drops the same), whatever jobs the table
// holds, of version 2 or 1: check first that it is the table you mean. A
// table of the name that is not a jobqueue table is refused with an error
// wrapping ErrForeignTable, and nothing is dropped. It is what `jobqueue
// bench` uses to start from a fresh table, and `jobqueue uninstall`. The
// engine is found as Install finds it (WithEngine names it).
func Uninstall(ctx context.Context, db *sql.DB, table string, opts ...Option) error {
	t, err := tableFor(db, table, opts)
	if err != nil {
		return err
	}
	st, err := inspect(ctx, db, t)
	if err != nil {
		return fmt.Errorf("uninstall table %s: %w", t.Name, err)
	}
	if st == tableForeign {
		return foreignError(t)
	}
	objs := ddl.Objects(t)
	for i := len(objs) - 1; i >= 0; i-- {
		if objs[i].Drop == "" {
			continue
		}
		if _, err := db.ExecContext(ctx, objs[i].Drop); err != nil {
			return fmt.Errorf("uninstall table %s: drop %s: %w", t.Name, objs[i].Name, err)
		}
	}
	return nil
}
