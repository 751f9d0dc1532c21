package migrations

// The v1 -> v2 migration on SQLite: SQLite cannot change a column's type or
// drop one in place, so the migration rebuilds the table (SQLite's
// twelve-step recipe) in one transaction: create the version 2 table under
// a temporary name, copy and convert the rows, swap the tables.

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// sqliteSteps are the steps of the conversion on SQLite.
func (c *converter) sqliteSteps() []migrateStep {
	return []migrateStep{
		{"check the foreign keys referencing the table", c.sqliteRefuseForeignKeyActions},
		{"check the times", c.sqliteCheckTimes},
		{"create the version 2 table", c.sqliteCreate},
		{"copy and convert the rows", c.sqliteCopy},
		{"replace the version 1 table", c.sqliteSwap},
		{"create the indexes", func(ctx context.Context, ex execQueryer) error { return ensureIndexes(ctx, ex, c.t) }},
		{"check the references to the new table", c.sqliteForeignKeyCheck},
	}
}

// The rebuild drops the version 1 table. With foreign_keys on, SQLite's
// DROP TABLE first deletes every row, which runs the ON DELETE actions of
// the foreign keys of other tables that reference it: their rows would be
// deleted (CASCADE) or their references changed (SET NULL, SET DEFAULT),
// or the drop fails (RESTRICT, NO ACTION). SQLite's procedure for a
// rebuild therefore turns foreign_keys off before the transaction (it
// cannot change inside one) and runs PRAGMA foreign_key_check before the
// commit. Migrate does so on goose's connection (sqliteForeignKeysOff); a
// service's own goose run (GooseMigrations) cannot, so there the
// migration refuses a referenced table while foreign_keys is on
// (sqliteRefuseForeignKeyActions).

// sqliteForeignKeysOff turns foreign_keys off on the connection that
// Migrate's goose run uses, and back on afterwards. It is given to goose
// as its SessionLocker, whose SessionLock goose calls on that connection
// before it begins the migration's transaction and SessionUnlock after
// the transaction has ended; it locks nothing.
type sqliteForeignKeysOff struct {
	// wasOn is whether foreign_keys was on before SessionLock turned it
	// off; the migration then checks the references (sqliteForeignKeyCheck).
	wasOn bool
}

// SessionLock records whether foreign_keys is on for conn and turns it off.
func (f *sqliteForeignKeysOff) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if err := conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&f.wasOn); err != nil {
		return fmt.Errorf("read PRAGMA foreign_keys: %w", err)
	}
	if !f.wasOn {
		return nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return fmt.Errorf("turn foreign_keys off for the table rebuild: %w", err)
	}
	return nil
}

// SessionUnlock turns foreign_keys on again for conn when SessionLock
// turned it off. When that fails, conn is discarded, so that its pool
// never hands out a connection left without foreign keys; the migration's
// outcome stands.
func (f *sqliteForeignKeysOff) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if !f.wasOn {
		return nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = ON"); err != nil {
		discardConn(conn)
	}
	return nil
}

// sqliteGooseOptions are the goose options Migrate runs with on SQLite:
// foreign_keys off on goose's connection during the migration, recorded in
// o so that the migration checks the references before it commits.
func sqliteGooseOptions(o *migrateOptions) []goose.ProviderOption {
	o.sqliteForeignKeys = &sqliteForeignKeysOff{}
	return []goose.ProviderOption{goose.WithSessionLocker(o.sqliteForeignKeys)}
}

// sqliteRefuseForeignKeyActions refuses, before anything is written, to
// rebuild a table that other tables' foreign keys reference while
// foreign_keys is on for the migration's connection (see above): the
// drop would run their ON DELETE actions.
func (c *converter) sqliteRefuseForeignKeyActions(ctx context.Context, ex execQueryer) error {
	var on bool
	if _, err := queryOne(ctx, ex, []any{&on}, "PRAGMA foreign_keys"); err != nil {
		return fmt.Errorf("read PRAGMA foreign_keys: %w", err)
	}
	if !on {
		return nil
	}
	refs, err := referencingTables(ctx, ex, c.t)
	if err != nil || len(refs) == 0 {
		return err
	}
	return fmt.Errorf("foreign keys of your tables reference table %s (%s) and foreign_keys is on for the migration's connection: "+
		"SQLite migrates by rebuilding the table, and dropping the version 1 table would run their ON DELETE actions (deleting or changing your rows); "+
		"foreign_keys cannot be turned off inside the migration's transaction. Nothing was changed: run the migration on a connection with foreign_keys off "+
		"(for goose, a database URL without _pragma=foreign_keys(1)), or with migrations.Migrate or `jobqueue migrate`, which turn it off on their own connection",
		c.t.Name, strings.Join(refs, ", "))
}

// sqliteForeignKeyCheck runs PRAGMA foreign_key_check on the references to
// the rebuilt table when Migrate turned foreign_keys off for the rebuild:
// a row of another table that references no job fails the migration, which
// leaves everything as it was. The rebuild keeps every id, so such a row
// referenced no job before either (it was written while foreign_keys was
// off).
func (c *converter) sqliteForeignKeyCheck(ctx context.Context, ex execQueryer) error {
	if c.o.sqliteForeignKeys == nil || !c.o.sqliteForeignKeys.wasOn {
		return nil
	}
	var table string
	var rowid sql.NullInt64
	found, err := queryOne(ctx, ex, []any{&table, &rowid}, `SELECT "table", rowid FROM pragma_foreign_key_check WHERE lower(parent) = lower(?) LIMIT 1`, c.t.Name)
	if err != nil {
		return fmt.Errorf("PRAGMA foreign_key_check: %w", err)
	}
	if !found {
		return nil
	}
	return fmt.Errorf("PRAGMA foreign_key_check: row %s of your table %s references a job of table %s that does not exist "+
		"(it did not before the migration either: the rebuild keeps every id): correct or delete that row, and any others "+
		"`SELECT * FROM pragma_foreign_key_check(%s)` lists", rowidText(rowid), table, c.t.Name, quoteSQLiteString(table))
}

// rowidText is a rowid for an error message ("?" for a WITHOUT ROWID
// table's row, which has none).
func rowidText(rowid sql.NullInt64) string {
	if !rowid.Valid {
		return "?"
	}
	return strconv.FormatInt(rowid.Int64, 10)
}

// quoteSQLiteString quotes s as an SQLite string literal.
func quoteSQLiteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
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
			return fmt.Errorf("job %d has %s = %q, which SQLite cannot read as a time; correct it (for example to 'YYYY-MM-DD HH:MM:SS' in UTC)", id, col, v)
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
// user's extra columns at the end, each with its whole definition as the
// version 1 table's CREATE TABLE statement spells it (sqliteColumnDefs:
// type, NOT NULL, DEFAULT, CHECK, COLLATE, UNIQUE, REFERENCES); a column
// whose definition cannot be found there is added with its type, default
// and NOT NULL when it has a default. The table constraints follow, as
// the version 1 statement spells them (sqliteKeptConstraints: one that
// uses retry_count or locked_at is refused, a CHECK on status without
// 'expired' dropped).
func (c *converter) sqliteCreate(ctx context.Context, ex execQueryer) error {
	tmp := c.sqliteTemp()
	st, err := inspect(ctx, ex, tmp)
	if err != nil {
		return err
	}
	if st != tableMissing {
		return fmt.Errorf("table %s exists; the migration rebuilds %s under that name: rename or drop it", tmp.Name, c.t.Name)
	}
	extra, err := c.sqliteExtraColumns(ctx, ex)
	if err != nil {
		return err
	}
	defs, constraints, err := sqliteColumnDefs(ctx, ex, c.t)
	if err != nil {
		return err
	}
	constraints, err = sqliteKeptConstraints(c.t, constraints)
	if err != nil {
		return err
	}
	create := ddl.CreateTable(tmp, false)
	var added []columnInfo // those without a definition in defs
	for _, col := range extra {
		def, ok := defs[strings.ToLower(col.Name)]
		if !ok || !strings.HasSuffix(create, "\n)") {
			added = append(added, col)
			continue
		}
		create = strings.TrimSuffix(create, "\n)") + ",\n    " + def + "\n)"
	}
	for _, con := range constraints {
		if !strings.HasSuffix(create, "\n)") {
			return fmt.Errorf("create the version 2 table: cannot add your table constraint %q", con)
		}
		create = strings.TrimSuffix(create, "\n)") + ",\n    " + con + "\n)"
	}
	if _, err := ex.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("create the version 2 table with your columns: %w", err)
	}
	for _, col := range added {
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
// views that depend on the table (sqliteDependents; SQLite's rename refuses
// to run while a view or trigger names a missing table, so they are
// dropped first, as SQLite's guide to table rebuilds does). One that uses
// retry_count or locked_at cannot be recreated: the error says which, and
// the transaction leaves everything as it was.
func (c *converter) sqliteSwap(ctx context.Context, ex execQueryer) error {
	ours := map[string]bool{}
	for _, s := range []string{"status_scheduled", "type", "locked_at", "type_status_scheduled", "status_expires", "lease_until"} {
		ours[strings.ToLower(c.t.IndexName(s))] = true
	}
	objs, err := c.sqliteDependents(ctx, ex)
	if err != nil {
		return err
	}
	var recreate []sqliteObject
	for _, o := range objs {
		ids := sqliteIdentifiers(o.sql)
		usesV1 := ids["retry_count"] || ids["locked_at"]
		if o.typ == "index" && (ours[strings.ToLower(o.name)] || usesV1) {
			continue // ours, or the user's on a column version 2 drops
		}
		if o.typ != "index" && usesV1 {
			return fmt.Errorf("your %s %s uses retry_count or locked_at, which version 2 drops; drop it, and create it for version 2 once the table is migrated", o.typ, o.name)
		}
		recreate = append(recreate, o)
		if o.typ == "view" || o.typ == "trigger" {
			if _, err := ex.ExecContext(ctx, "DROP "+strings.ToUpper(o.typ)+" "+quoteSQLite(o.name)); err != nil {
				return err
			}
		}
	}
	var seq sql.NullInt64
	rows, err := ex.QueryContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = ? COLLATE NOCASE`, c.t.Name)
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
		res, err := ex.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ? COLLATE NOCASE`, seq.Int64, c.t.Name)
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
			return fmt.Errorf("recreate your %s %s on the version 2 table: %w; drop it, and create it for version 2 once the table is migrated", o.typ, o.name, err)
		}
	}
	return nil
}

// sqliteDependents are the schema objects the rebuild of the table must
// drop and recreate, in creation order: its indexes; the triggers on it;
// and the views and triggers whose SQL names it as a whole identifier
// (quoted or bare, in any case: SQLite's names are case-insensitive), or
// names such a view, and so on. A view or trigger of another table whose
// name merely contains the table's name is not one of them.
func (c *converter) sqliteDependents(ctx context.Context, ex execQueryer) ([]sqliteObject, error) {
	all, err := sqliteObjects(ctx, ex, `SELECT type, name, tbl_name, sql FROM sqlite_master
WHERE sql IS NOT NULL AND ((type = 'index' AND tbl_name = ? COLLATE NOCASE) OR type IN ('trigger', 'view'))
ORDER BY rowid`, c.t.Name)
	if err != nil {
		return nil, err
	}
	named := map[string]bool{strings.ToLower(c.t.Name): true} // the table and the views found so far
	picked := make([]bool, len(all))
	for changed := true; changed; {
		changed = false
		for i, o := range all {
			if picked[i] || !sqliteDependsOn(o, c.t.Name, named) {
				continue
			}
			picked[i], changed = true, true
			if o.typ == "view" {
				named[strings.ToLower(o.name)] = true
			}
		}
	}
	var out []sqliteObject
	for i, o := range all {
		if picked[i] {
			out = append(out, o)
		}
	}
	return out, nil
}

// sqliteDependsOn reports whether the schema object o must be recreated
// with the table: an index of it (the query picked only those), a trigger
// on it, or a view or trigger whose SQL names it or a view in named.
func sqliteDependsOn(o sqliteObject, table string, named map[string]bool) bool {
	if o.typ == "index" || o.typ == "trigger" && strings.EqualFold(o.tblName, table) {
		return true
	}
	for id := range sqliteIdentifiers(o.sql) {
		if named[id] {
			return true
		}
	}
	return false
}

// sqliteIdentifiers are the identifiers in the SQL text s, in lower case:
// bare words and "quoted", `quoted` or [quoted] names, not the contents of
// string literals and comments, nor numbers. Keywords and column names
// count too: a column spelled like the table makes a view look dependent,
// which at worst recreates a view that did not need it.
func sqliteIdentifiers(s string) map[string]bool {
	ids := map[string]bool{}
	// quoted reads a quoted name or literal starting at s[i] and ending
	// with end (doubled inside it), and returns it and the index after.
	quoted := func(i int, end byte) (string, int) {
		var b strings.Builder
		for j := i + 1; j < len(s); j++ {
			if s[j] != end {
				b.WriteByte(s[j])
				continue
			}
			if end != ']' && j+1 < len(s) && s[j+1] == end {
				b.WriteByte(end)
				j++
				continue
			}
			return b.String(), j + 1
		}
		return b.String(), len(s)
	}
	isWord := func(ch byte) bool {
		return ch == '_' || ch == '$' || ch >= 0x80 || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
	}
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == '\'':
			_, i = quoted(i, '\'')
		case ch == '"' || ch == '`' || ch == '[':
			end := ch
			if ch == '[' {
				end = ']'
			}
			var id string
			id, i = quoted(i, end)
			ids[strings.ToLower(id)] = true
		case ch == '-' && strings.HasPrefix(s[i:], "--"):
			if n := strings.IndexByte(s[i:], '\n'); n >= 0 {
				i += n + 1
			} else {
				i = len(s)
			}
		case ch == '/' && strings.HasPrefix(s[i:], "/*"):
			if n := strings.Index(s[i+2:], "*/"); n >= 0 {
				i += n + 4
			} else {
				i = len(s)
			}
		case isWord(ch):
			j := i
			for j < len(s) && isWord(s[j]) {
				j++
			}
			if ch < '0' || ch > '9' { // a number is no identifier
				ids[strings.ToLower(s[i:j])] = true
			}
			i = j
		default:
			i++
		}
	}
	return ids
}

// sqliteObject is one row of sqlite_master.
type sqliteObject struct{ typ, name, tblName, sql string }

// sqliteObjects runs a query of sqlite_master returning type, name,
// tbl_name and sql.
func sqliteObjects(ctx context.Context, ex execQueryer, q string, args ...any) ([]sqliteObject, error) {
	rows, err := ex.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqliteObject
	for rows.Next() {
		var o sqliteObject
		if err := rows.Scan(&o.typ, &o.name, &o.tblName, &o.sql); err != nil {
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
