package migrations

// The v1 -> v2 migration on PostgreSQL: one transaction (goose's), four
// steps.

import (
	"context"
	"fmt"
	"strings"
)

// postgresSteps are the steps of the conversion on PostgreSQL.
func (c *converter) postgresSteps() []migrateStep {
	return []migrateStep{
		{"add the version 2 columns", c.pgAddColumns},
		{"convert the rows", c.pgConvertRows},
		{"replace the version 1 indexes", c.replaceIndexes},
		{"drop retry_count and locked_at", c.pgFinish},
	}
}

// pgAddColumns adds the missing version 2 columns as nullable columns, and
// drops what version 2 does not have (the times' defaults, a CHECK on
// status without 'expired'), in one ALTER TABLE.
func (c *converter) pgAddColumns(ctx context.Context, ex execQueryer) error {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return err
	}
	var clauses []string
	for _, col := range migratedColumns {
		if _, ok := cols[col.name]; ok {
			continue
		}
		clauses = append(clauses, "ADD COLUMN IF NOT EXISTS "+col.name+" "+col.pgType)
	}
	// Version 2 gives no default to the times; a version 1 table may
	// have had NOW().
	for _, name := range []string{"scheduled_at", "created_at"} {
		if cols[name].Default != "" {
			clauses = append(clauses, "ALTER COLUMN "+name+" DROP DEFAULT")
		}
	}
	// A CHECK on status listing the version 1 statuses would refuse
	// 'expired'; version 2 has none.
	checks, err := c.pgStatusChecks(ctx, ex)
	if err != nil {
		return err
	}
	for _, name := range checks {
		clauses = append(clauses, `DROP CONSTRAINT "`+strings.ReplaceAll(name, `"`, `""`)+`"`)
	}
	return c.alter(ctx, ex, clauses)
}

// pgStatusChecks names the CHECK constraints of the PostgreSQL table that
// mention status but not 'expired'.
func (c *converter) pgStatusChecks(ctx context.Context, ex execQueryer) ([]string, error) {
	rows, err := ex.QueryContext(ctx, `SELECT con.conname FROM pg_constraint con
JOIN pg_class cl ON cl.oid = con.conrelid
JOIN pg_namespace n ON n.oid = cl.relnamespace
WHERE n.nspname = current_schema() AND cl.relname = $1 AND con.contype = 'c'
  AND pg_get_constraintdef(con.oid) LIKE '%status%' AND pg_get_constraintdef(con.oid) NOT LIKE '%expired%'
ORDER BY con.conname`, c.t.Name)
	if err != nil {
		return nil, fmt.Errorf("read the CHECK constraints of table %s: %w", c.t.Name, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// pgConvertRows converts every row not yet converted in one UPDATE, in the
// migration's transaction.
func (c *converter) pgConvertRows(ctx context.Context, ex execQueryer) error {
	q, args, ok, err := c.rowConversion(ctx, ex)
	if err != nil || !ok {
		return err
	}
	_, err = ex.ExecContext(ctx, q, args...)
	return err
}

// pgFinish is finish with PostgreSQL's ALTER COLUMN actions.
func (c *converter) pgFinish(ctx context.Context, ex execQueryer) error {
	return c.finish(ctx, ex, func(col v2Column, ci columnInfo) []string {
		if len(col.pgFinal) == 0 || !ci.Nullable {
			return nil
		}
		var clauses []string
		for _, action := range col.pgFinal {
			clauses = append(clauses, "ALTER COLUMN "+col.name+" "+action)
		}
		return clauses
	})
}
