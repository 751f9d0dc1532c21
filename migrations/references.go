package migrations

import (
	"context"
	"fmt"

	"github.com/jobqueue/jobqueue/internal/engine"
)

// referencingQueries read, per engine, the foreign keys of other tables
// that reference the table named by the query's arguments (its name; twice
// on MySQL and SQLite), one "table (constraint)" per row: pg_constraint on PostgreSQL (the
// table in the current schema), information_schema.REFERENTIAL_CONSTRAINTS
// on MySQL (the current database), pragma_foreign_key_list of every table
// on SQLite (which names no constraint: the referencing columns instead).
// A table's references to itself are not listed.
var referencingQueries = map[engine.Kind]string{
	engine.Postgres: `SELECT con.conrelid::regclass::text || ' (' || con.conname || ')'
FROM pg_constraint con
JOIN pg_class p ON p.oid = con.confrelid
JOIN pg_namespace n ON n.oid = p.relnamespace
WHERE con.contype = 'f' AND n.nspname = current_schema() AND p.relname = $1
  AND con.conrelid <> con.confrelid
ORDER BY 1`,
	engine.MySQL: `SELECT CONCAT(CONSTRAINT_SCHEMA, '.', TABLE_NAME, ' (', CONSTRAINT_NAME, ')')
FROM information_schema.REFERENTIAL_CONSTRAINTS
WHERE UNIQUE_CONSTRAINT_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME = ?
  AND NOT (CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = ?)
ORDER BY 1`,
	engine.SQLite: `SELECT DISTINCT m.name || ' (' || f."from" || ')'
FROM sqlite_master AS m
JOIN pragma_foreign_key_list(m.name) AS f
WHERE m.type = 'table' AND lower(f."table") = lower(?) AND lower(m.name) <> lower(?)
ORDER BY 1`,
}

// referencingTables lists the foreign keys of other tables that reference
// t, as "table (constraint)" ("table (column)" on SQLite): what makes
// dropping t fail (PostgreSQL, MySQL) or, on SQLite with foreign_keys on,
// run their ON DELETE actions on the rows of those tables.
func referencingTables(ctx context.Context, q queryer, t engine.Table) ([]string, error) {
	query, ok := referencingQueries[t.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: engine %q", engine.ErrUnsupportedDatabase, t.Kind)
	}
	args := []any{t.Name, t.Name}
	if t.Kind == engine.Postgres {
		args = args[:1] // it tells self-references by oid
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the foreign keys referencing table %s: %w", t.Name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("read the foreign keys referencing table %s: %w", t.Name, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the foreign keys referencing table %s: %w", t.Name, err)
	}
	return out, nil
}
