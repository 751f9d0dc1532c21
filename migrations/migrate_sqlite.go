package migrations

// The v1 -> v2 migration on SQLite: SQLite cannot change a column's type or
// drop one in place, so the migration rebuilds the table (SQLite's
// twelve-step recipe) in one transaction: create the version 2 table under
// a temporary name, copy and convert the rows, swap the tables.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// sqliteSteps are the steps of the conversion on SQLite.
func (c *converter) sqliteSteps() []migrateStep {
	return []migrateStep{
		{"check the times", c.sqliteCheckTimes},
		{"create the version 2 table", c.sqliteCreate},
		{"copy and convert the rows", c.sqliteCopy},
		{"replace the version 1 table", c.sqliteSwap},
		{"create the indexes", func(ctx context.Context, ex execQueryer) error { return ensureIndexes(ctx, ex, c.t) }},
	}
}

// SQLite keeps times as text, which the queue compares as text: every time
// is written in the fixed-width UTC form engine.SQLiteTimeFormat. A version
// 1 time may be 'YYYY-MM-DD HH:MM:SS' (CURRENT_TIMESTAMP), have a 'T', a
// fraction, an offset or 'Z', or be a number of Unix seconds; the copy
// rewrites each one to that form (to the millisecond, SQLite's %f, unless it
// already had the form).
const sqliteFixedTimeGlob = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]"

// sqliteTime is the expression that reads the SQLite time column col in
// the fixed-width form (NULL when col is NULL or not a time).
func sqliteTime(col string) string {
	return "(CASE WHEN " + col + " IS NULL THEN NULL" +
		" WHEN typeof(" + col + ") IN ('integer', 'real') THEN strftime('%Y-%m-%d %H:%M:%f', " + col + ", 'unixepoch') || '000'" +
		" WHEN " + col + " GLOB '" + sqliteFixedTimeGlob + "' THEN " + col +
		" ELSE strftime('%Y-%m-%d %H:%M:%f', " + col + ") || '000' END)"
}

// sqliteTimeColumns are the time columns of a version 1 table.
var sqliteTimeColumns = []string{"scheduled_at", "expires_at", "created_at"}

// sqliteCheckTimes refuses a table holding a time SQLite cannot read, before
// anything is written: the copy would lose it.
func (c *converter) sqliteCheckTimes(ctx context.Context, ex execQueryer) error {
	cols, err := columns(ctx, ex, c.t)
	if err != nil {
		return err
	}
	for _, name := range v1OnlyColumns {
		if _, ok := cols[name]; !ok {
			return fmt.Errorf("column %s is missing, but SQLite migrates in one transaction and cannot have left the table like this; restore the version 1 table from your backup", name)
		}
	}
	for _, col := range sqliteTimeColumns {
		q := "SELECT id, CAST(" + col + " AS TEXT) FROM " + c.t.Quoted() +
			" WHERE " + col + " IS NOT NULL AND " + sqliteTime(col) + " IS NULL LIMIT 1"
		rows, err := ex.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		var id int64
		var v string
		found := rows.Next()
		if found {
			err = rows.Scan(&id, &v)
		}
		rows.Close()
		if err != nil {
			return err
		}
		if found {
			return fmt.Errorf("job %d has %s = %q, which SQLite cannot read as a time; correct it (for example to 'YYYY-MM-DD HH:MM:SS' in UTC) and run Migrate again", id, col, v)
		}
	}
	return nil
}

// sqliteTemp is the name of the table SQLite's rebuild fills.
func (c *converter) sqliteTemp() engine.Table {
	return engine.Table{Kind: c.t.Kind, Name: c.t.Name + "__jobqueue_v2"}
}

// sqliteExtraColumns are the columns of the version 1 table that neither
// version defines (a user's own), with their declarations.
func (c *converter) sqliteExtraColumns(ctx context.Context, ex execQueryer) ([]columnInfo, error) {
	rows, err := ex.QueryContext(ctx, `SELECT name, type, "notnull", COALESCE(dflt_value, '') FROM pragma_table_info(?) ORDER BY cid`, c.t.Name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	known := map[string]bool{}
	for _, list := range [][]string{v1OnlyColumns, v2OnlyColumns, commonColumns} {
		for _, n := range list {
			known[n] = true
		}
	}
	var extra []columnInfo
	for rows.Next() {
		var ci columnInfo
		var notNull bool
		if err := rows.Scan(&ci.Name, &ci.Type, &notNull, &ci.Default); err != nil {
			return nil, err
		}
		ci.Nullable = !notNull
		if !known[strings.ToLower(ci.Name)] {
			extra = append(extra, ci)
		}
	}
	return extra, rows.Err()
}

// sqliteCreate creates the version 2 table under a temporary name, with the
// user's extra columns at the end (their type, default and NOT NULL when it
// has a default; other constraints on them are not carried over).
func (c *converter) sqliteCreate(ctx context.Context, ex execQueryer) error {
	tmp := c.sqliteTemp()
	st, err := inspect(ctx, ex, tmp)
	if err != nil {
		return err
	}
	if st != tableMissing {
		return fmt.Errorf("table %s exists; Migrate rebuilds %s under that name: rename or drop it and run Migrate again", tmp.Name, c.t.Name)
	}
	if _, err := ex.ExecContext(ctx, ddl.CreateTable(tmp, false)); err != nil {
		return err
	}
	extra, err := c.sqliteExtraColumns(ctx, ex)
	if err != nil {
		return err
	}
	for _, col := range extra {
		def := quoteSQLite(col.Name) + " " + col.Type
		if col.Default != "" {
			if !col.Nullable {
				def += " NOT NULL"
			}
			def += " DEFAULT " + col.Default
		}
		if _, err := ex.ExecContext(ctx, "ALTER TABLE "+tmp.Quoted()+" ADD COLUMN "+def); err != nil {
			return fmt.Errorf("copy your column %s: %w", col.Name, err)
		}
	}
	return nil
}

// sqliteCopy fills the new table from the version 1 one in one INSERT …
// SELECT that converts every row.
func (c *converter) sqliteCopy(ctx context.Context, ex execQueryer) error {
	extra, err := c.sqliteExtraColumns(ctx, ex)
	if err != nil {
		return err
	}
	a := &sqlArgs{k: c.t.Kind}
	conv := c.conversion(a, sqliteTime)
	conv["expires_at"] = sqliteTime("expires_at")
	conv["created_at"] = sqliteTime("created_at")
	names := []string{"id", "name", "type", "payload", "error"}
	exprs := []string{"id", "name", "type", "payload", "error"}
	for _, col := range append(conversionOrder, "expires_at", "created_at") {
		names = append(names, col)
		exprs = append(exprs, conv[col])
	}
	for _, col := range extra {
		names = append(names, quoteSQLite(col.Name))
		exprs = append(exprs, quoteSQLite(col.Name))
	}
	q := "INSERT INTO " + c.sqliteTemp().Quoted() + " (" + strings.Join(names, ", ") + ") SELECT " +
		strings.Join(exprs, ", ") + " FROM " + c.t.Quoted() + " ORDER BY id"
	_, err = ex.ExecContext(ctx, q, a.args...)
	return err
}

// sqliteSwap drops the version 1 table, gives the new one its name, keeps
// the AUTOINCREMENT counter (ids are never reused) and recreates the user's
// own indexes (those on the columns that remain), and the triggers and
// views that name the table (SQLite's rename refuses to run while a view
// names a missing table, so they are dropped first, as SQLite's guide to
// table rebuilds does). One that uses retry_count or locked_at cannot be
// recreated: the error says which, and the transaction leaves everything
// as it was.
func (c *converter) sqliteSwap(ctx context.Context, ex execQueryer) error {
	ours := map[string]bool{}
	for _, s := range []string{"status_scheduled", "type", "locked_at", "type_status_scheduled", "status_expires", "lease_until"} {
		ours[c.t.IndexName(s)] = true
	}
	// Schema objects in creation order; LIKE is case-insensitive.
	objs, err := sqliteObjects(ctx, ex, `SELECT type, name, sql FROM sqlite_master
WHERE sql IS NOT NULL AND ((type = 'index' AND tbl_name = ?) OR (type IN ('trigger', 'view') AND (tbl_name = ? OR sql LIKE '%' || ? || '%')))
ORDER BY rowid`, c.t.Name, c.t.Name, c.t.Name)
	if err != nil {
		return err
	}
	var recreate []sqliteObject
	for _, o := range objs {
		if o.typ == "index" && (ours[o.name] || strings.Contains(strings.ToLower(o.sql), "retry_count") || strings.Contains(strings.ToLower(o.sql), "locked_at")) {
			continue // ours, or the user's on a column version 2 drops
		}
		if low := strings.ToLower(o.sql); o.typ != "index" && (strings.Contains(low, "retry_count") || strings.Contains(low, "locked_at")) {
			return fmt.Errorf("your %s %s uses retry_count or locked_at, which version 2 drops; drop it, run Migrate, then create it again for version 2", o.typ, o.name)
		}
		recreate = append(recreate, o)
		if o.typ == "view" || o.typ == "trigger" {
			if _, err := ex.ExecContext(ctx, "DROP "+strings.ToUpper(o.typ)+" "+quoteSQLite(o.name)); err != nil {
				return err
			}
		}
	}
	var seq sql.NullInt64
	rows, err := ex.QueryContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = ?`, c.t.Name)
	if err != nil && !strings.Contains(err.Error(), "no such table") {
		return err
	}
	if err == nil {
		for rows.Next() {
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	stmts := []string{
		"DROP TABLE " + c.t.Quoted(),
		"ALTER TABLE " + c.sqliteTemp().Quoted() + " RENAME TO " + c.t.Quoted(),
	}
	for _, s := range stmts {
		if _, err := ex.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	if seq.Valid {
		res, err := ex.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?`, seq.Int64, c.t.Name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			// The table is empty: the copy left no counter.
			if _, err := ex.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)`, c.t.Name, seq.Int64); err != nil {
				return err
			}
		}
	}
	for _, o := range recreate {
		_, err := ex.ExecContext(ctx, o.sql)
		if err == nil && o.typ == "view" {
			// SQLite checks a view's columns only when it is used.
			var rows *sql.Rows
			if rows, err = ex.QueryContext(ctx, "SELECT * FROM "+quoteSQLite(o.name)+" LIMIT 0"); err == nil {
				err = rows.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("recreate your %s %s on the version 2 table: %w; drop it, run Migrate, then create it again for version 2", o.typ, o.name, err)
		}
	}
	return nil
}

// sqliteObject is one row of sqlite_master.
type sqliteObject struct{ typ, name, sql string }

// sqliteObjects runs a query of sqlite_master returning type, name, sql.
func sqliteObjects(ctx context.Context, ex execQueryer, q string, args ...any) ([]sqliteObject, error) {
	rows, err := ex.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqliteObject
	for rows.Next() {
		var o sqliteObject
		if err := rows.Scan(&o.typ, &o.name, &o.sql); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// quoteSQLite quotes an identifier read from SQLite's catalog.
func quoteSQLite(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
