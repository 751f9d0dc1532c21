package migrations

import (
	"context"
	"database/sql"
	"fmt"
)

// Check reads the catalog of db and tells whether the queue can use the
// table named table, changing nothing: nil for a version 2 table (whatever
// its indexes: Install repairs those); an error wrapping ErrOutdatedTable for
// a version 1 table or one whose migration was interrupted (Migrate converts
// it); an error wrapping ErrTableMissing for a missing table, and one
// wrapping ErrForeignTable for a table that is not a jobqueue table, or
// when one of its side tables' names (<table>_<suffix>) is held by a table
// that is not that side table (Install would refuse it too). A
// half-migrated MySQL table can have every version 2 column, so a query
// that only reads those columns does not tell it apart: Check does.
//
// The table name and the engine are checked as Install checks them
// (ErrInvalidTableName, ErrUnsupportedDatabase), before any SQL runs;
// WithEngine names the engine as it does for Install.
func Check(ctx context.Context, db *sql.DB, table string, opts ...Option) error {
	t, err := tableFor(db, table, opts)
	if err != nil {
		return err
	}
	st, err := inspectOwn(ctx, db, t)
	if err != nil {
		return err
	}
	switch st {
	case tableV2:
		return nil
	case tableV1, tablePartial:
		return outdatedError(t, st)
	case tableMissing:
		return fmt.Errorf("%w: table %s does not exist; create it with migrations.Install (or `jobqueue install --table %s`)", ErrTableMissing, t.Name, t.Name)
	}
	return fmt.Errorf("table %s: unexpected state %s", t.Name, st)
}
