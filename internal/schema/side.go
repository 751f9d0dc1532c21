package schema

// The side tables (and SQLite's side view) of a jobs table are named
// <table>_<suffix>, so another program, or another queue, may already have
// a table of that name. Install, Migrate, Check and Uninstall take an
// existing object of the name for the side object only when it is one:
// of the same kind with exactly the columns internal/ddl defines; New
// refuses to run on a table whose side name is held by something else.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// relationKindQueries tell, per engine, what holds a name in the current
// schema (PostgreSQL) or database: "table", "view", or "other" (a
// sequence, an index, …); no row when nothing does.
var relationKindQueries = map[engine.Kind]string{
	engine.Postgres: `SELECT CASE WHEN c.relkind IN ('r', 'p') THEN 'table' WHEN c.relkind = 'v' THEN 'view' ELSE 'other' END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relname = $1`,
	engine.MySQL: `SELECT CASE TABLE_TYPE WHEN 'BASE TABLE' THEN 'table' WHEN 'VIEW' THEN 'view' ELSE 'other' END
FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`,
	engine.SQLite: `SELECT CASE WHEN type IN ('table', 'view') THEN type ELSE 'other' END
FROM sqlite_master
WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view', 'index')`,
}

// RelationKind is what holds the name of t: "table", "view", "other", or
// "" when nothing does.
func RelationKind(ctx context.Context, q Queryer, t engine.Table) (string, error) {
	query, ok := relationKindQueries[t.Kind]
	if !ok {
		return "", fmt.Errorf("%w: engine %q", engine.ErrUnsupportedDatabase, t.Kind)
	}
	rows, err := q.QueryContext(ctx, query, t.Name)
	if err != nil {
		return "", fmt.Errorf("look up %s in the catalog: %w", t.Name, err)
	}
	defer rows.Close()
	var kind string
	if rows.Next() {
		if err := rows.Scan(&kind); err != nil {
			return "", fmt.Errorf("look up %s in the catalog: %w", t.Name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("look up %s in the catalog: %w", t.Name, err)
	}
	return kind, rows.Close()
}

// CheckSideObjects makes sure that every side table and side view of the
// jobs table t (ddl.SideObjects) is either missing or really one: a table
// (a view) with exactly the columns ddl defines for it. Otherwise it
// returns an error wrapping engine.ErrSideNameTaken that names the object
// and says what to do; Install and Uninstall run it before they create or
// drop anything, New before it takes the table.
func CheckSideObjects(ctx context.Context, q Queryer, t engine.Table) error {
	for _, o := range ddl.SideObjects(t) {
		if o.Kind != ddl.SideTableKind && o.Kind != ddl.SideView {
			continue
		}
		if err := checkSideObject(ctx, q, t, o); err != nil {
			return err
		}
	}
	return nil
}

// checkSideObject is CheckSideObjects for one side table or view o of t.
func checkSideObject(ctx context.Context, q Queryer, t engine.Table, o ddl.Object) error {
	kind, err := RelationKind(ctx, q, o.Table)
	if err != nil || kind == "" {
		return err
	}
	want := "table"
	if o.Kind == ddl.SideView {
		want = "view"
	}
	cols, err := Columns(ctx, q, o.Table)
	if err != nil && kind == "view" && want == "view" {
		// SQLite keeps a view whose table was dropped but cannot read
		// its columns: a leftover of a jobs table dropped by hand. It
		// holds no rows; Install makes it work again, Uninstall drops it.
		return nil
	}
	if err != nil {
		return err
	}
	if kind == want && sameColumnSet(cols, o.Columns) {
		return nil
	}
	return sideTakenError(t, o, kind, cols)
}

// sameColumnSet reports whether cols (keyed by lower-case name) are
// exactly the columns named in want.
func sameColumnSet(cols map[string]Column, want []string) bool {
	if len(cols) != len(want) {
		return false
	}
	for _, c := range want {
		if _, ok := cols[c]; !ok {
			return false
		}
	}
	return true
}

// sideTakenError says that the name of t's side object o is held by kind,
// with columns cols, which is not that side object, and what to do.
func sideTakenError(t engine.Table, o ddl.Object, kind string, cols map[string]Column) error {
	what := "a " + kind
	switch st := Classify(t.Kind, cols); {
	case kind == "other":
		what = "another kind of object (an index or a sequence)"
	case kind == "table" && st != Foreign:
		what = "the jobs table of another queue"
	case len(cols) > 0:
		names := make([]string, 0, len(cols))
		for n := range cols {
			names = append(names, n)
		}
		slices.Sort(names)
		what += " with the columns " + strings.Join(names, ", ")
	}
	wantKind := "table"
	if o.Kind == ddl.SideView {
		wantKind = "view"
	}
	return fmt.Errorf("%w: %s is %s, not the %s %s that table %s keeps beside it (a %s with the columns %s); "+
		"nothing was created or dropped: rename %s (or drop it, if nothing needs it), or give the queue another table name",
		engine.ErrSideNameTaken, o.Name, what, o.Kind, o.Name, t.Name, wantKind, strings.Join(o.Columns, ", "), o.Name)
}
