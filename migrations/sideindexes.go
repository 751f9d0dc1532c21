package migrations

// The indexes of the side tables: Install recreates one that is missing or
// not as internal/ddl declares it, on every engine alike.

import (
	"context"
	"fmt"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// ensureSideIndexes makes every index a side table of t declares
// (ddl.SideTable.Indexes) exist as declared: it creates a missing one and
// rebuilds one of that name that differs (other columns, not unique, …).
// On PostgreSQL and SQLite the side tables' CREATE INDEX IF NOT EXISTS
// creates a missing one already, but on MySQL the index is part of the
// CREATE TABLE IF NOT EXISTS, which leaves an existing table as it is: a
// dropped <table>_unique index would leave unique keys unenforced there.
func ensureSideIndexes(ctx context.Context, ex execQueryer, t engine.Table) error {
	for _, st := range ddl.SideTables() {
		if len(st.Indexes) == 0 {
			continue
		}
		side := ddl.Side(t, st.Suffix)
		have, err := indexes(ctx, ex, side)
		if err != nil {
			return err
		}
		for _, ix := range st.Indexes {
			name := ddl.IndexName(side, ix.Suffix)
			cur, ok := have[indexKey(side, name)]
			if ok && cur.matches(ix.Columns, ix.Unique) {
				continue
			}
			stmts := sideIndexStatements(side, ix, ok)
			if cur.Unhide != "" {
				// MariaDB keeps an ignored index ignored through the rebuild.
				stmts = append(stmts, "ALTER TABLE "+side.Quoted()+" "+cur.Unhide)
			}
			for _, s := range stmts {
				if _, err := ex.ExecContext(ctx, s); err != nil {
					return fmt.Errorf("index %s of side table %s: %w; if it is a unique index, rows of %s that share its columns' values keep it from being built: correct them and run Install again",
						name, side.Name, err, side.Name)
				}
			}
		}
		if err := checkSideIndexes(ctx, ex, side, st.Indexes); err != nil {
			return err
		}
	}
	return nil
}

// checkSideIndexes reads the indexes of the side table side again and
// fails when one of want is still not as declared: on PostgreSQL and
// SQLite, where index names are per schema, an index of another table
// holding its name makes CREATE INDEX IF NOT EXISTS do nothing.
func checkSideIndexes(ctx context.Context, q queryer, side engine.Table, want []ddl.SideIndex) error {
	have, err := indexes(ctx, q, side)
	if err != nil {
		return err
	}
	for _, ix := range want {
		name := ddl.IndexName(side, ix.Suffix)
		if cur, ok := have[indexKey(side, name)]; !ok || !cur.matches(ix.Columns, ix.Unique) {
			return indexTakenError(ctx, q, side, name, ix.Columns, cur.Columns)
		}
	}
	return nil
}

// sideIndexStatements create the index ix of the side table side, after
// dropping the one of its name when exists is true.
func sideIndexStatements(side engine.Table, ix ddl.SideIndex, exists bool) []string {
	name := ddl.QuoteIdent(side.Kind, ddl.IndexName(side, ix.Suffix))
	if side.Kind == engine.MySQL {
		if exists {
			// One statement, so the table is never without the index.
			return []string{"ALTER TABLE " + side.Quoted() + " DROP INDEX " + name + ", ADD " + ix.Clause(side)}
		}
		return []string{"ALTER TABLE " + side.Quoted() + " ADD " + ix.Clause(side)}
	}
	if exists {
		return []string{"DROP INDEX IF EXISTS " + name, ix.Create(side)}
	}
	return []string{ix.Create(side)}
}
