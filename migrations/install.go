package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
)

// execQueryer is what the DDL code runs on: *sql.DB, *sql.Tx and *sql.Conn
// all have it.
type execQueryer interface {
	queryer
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Install makes sure the version 2 jobs table named table exists in db with
// its four indexes (SPEC section 2) and its side tables (SPEC section 8,
// named <table>_<suffix>): it creates the table when it is missing, creates
// any of the four indexes that is missing and rebuilds any of them whose
// columns differ from the definition (or that is not the plain, valid
// B-tree index the definition is: another access method, collation or
// operator class, unique, partial; on PostgreSQL also a column in
// descending order or with its NULLs placed otherwise than by default, an
// INCLUDE list, NULLS NOT DISTINCT, or left invalid by a failed CREATE
// INDEX CONCURRENTLY; an index made invisible on MySQL, or ignored on
// MariaDB, is made visible again; a right index is left as it is),
// creates missing side tables (CREATE … IF NOT EXISTS) and recreates a
// side table's declared index that is missing or wrong in the same ways. Columns and indexes a user added are left
// alone. A side table's name held by another table (one without exactly
// the side table's columns, another queue's jobs table say) is refused
// with an error wrapping ErrForeignTable, before anything is created; so
// is (ErrSideNameTaken) a missing table whose <table>_unique holds key rows,
// left by a table of that name dropped by hand: they would name the new
// table's jobs (Uninstall drops such leftovers).
// Every statement comes from internal/ddl, which GooseSQL uses too. It is
// idempotent and meant to run on every deploy; concurrent calls on the
// same table wait for each other.
//
// The table name must match [a-zA-Z_][a-zA-Z0-9_]* (ErrInvalidTableName,
// before any SQL runs); PostgreSQL folds it to lower case and allows at
// most 50 characters, MySQL and SQLite 56 (room for the side tables'
// <table>_<suffix>); SQLite refuses sqlite and sqlite_…, names it
// reserves. The engine is detected from db's driver, also under a
// wrapper such as otelsql (ErrUnsupportedDatabase for others), or named with
// WithEngine.
//
// A version 1 table, or one whose migration was interrupted, is refused
// with an error wrapping ErrOutdatedTable and left unchanged: convert it
// once with Migrate (or `jobqueue migrate`). A table of that name that is
// not a jobqueue table is refused too, and so is a view of that name
// (ErrForeignTable both).
//
// Install runs as a goose Go migration with versioning disabled (no goose
// version table is written); on PostgreSQL and SQLite it is one
// transaction.
func Install(ctx context.Context, db *sql.DB, table string, opts ...Option) error {
	t, err := tableFor(db, table, opts)
	if err != nil {
		return err
	}
	k := t.Kind
	err = runGoose(ctx, db, k, func(ctx context.Context, ex execQueryer) error {
		return ensureTable(ctx, ex, t, refuseOutdated(t))
	})
	if err != nil {
		return fmt.Errorf("install table %s: %w", t.Name, err)
	}
	return nil
}

// refuseOutdated is Install's answer to a version 1 or partly migrated
// table: an error naming Migrate, with nothing changed.
func refuseOutdated(t engine.Table) func(context.Context, execQueryer, tableState) error {
	return func(_ context.Context, _ execQueryer, st tableState) error {
		return outdatedError(t, st)
	}
}

// outdatedError says that t is st (version 1 or partly migrated) and how to
// convert it.
func outdatedError(t engine.Table, st tableState) error {
	what := "a version 1 jobqueue table"
	if st == tablePartial {
		what = "a jobqueue table whose migration to version 2 was interrupted"
	}
	return fmt.Errorf("%w: table %s is %s; stop everything that uses it, then convert it once with migrations.Migrate (or `jobqueue migrate --table %s`), which stores a retry policy with every job; Install never migrates on its own",
		ErrOutdatedTable, t.Name, what, t.Name)
}

// foreignError says that t is not a jobqueue table.
func foreignError(t engine.Table) error {
	return fmt.Errorf("%w: table %s exists but is not a jobqueue table (a jobqueue table has the columns %s, and attempts… or retry_count…); choose another table name", ErrForeignTable, t.Name, strings.Join(commonColumns, ", "))
}

// ensureTable brings t to the version 2 layout: under a per-table lock (so
// that concurrent installs wait for each other) it inspects the table and
// refuses, before it changes anything, a table that is not ours or a side
// table's name held by something else (checkSideObjects); then: missing →
// created with its indexes; version 2 → ensureIndexes; version 1 or partly
// migrated → onOutdated, after which the table must be version 2 and its
// indexes are ensured. Last, the side tables are created where missing
// (ensureSideTables).
//
// On MySQL, when ex is a *sql.DB, the work runs on one connection taken
// from it (the lock is a session lock), and onOutdated gets that
// *sql.Conn.
func ensureTable(ctx context.Context, ex execQueryer, t engine.Table, onOutdated func(context.Context, execQueryer, tableState) error) error {
	return underTableLock(ctx, ex, t, func(ctx context.Context, ex execQueryer) error {
		return ensureLocked(ctx, ex, t, onOutdated)
	})
}

// ensureLocked is ensureTable's work, on one session holding the table's
// lock.
func ensureLocked(ctx context.Context, ex execQueryer, t engine.Table, onOutdated func(context.Context, execQueryer, tableState) error) error {
	st, err := inspectOwn(ctx, ex, t)
	if err != nil {
		return err
	}
	if err := refuseView(ctx, ex, t, st); err != nil {
		return err
	}
	switch st {
	case tableMissing:
		if err := refuseLeftoverRows(ctx, ex, t); err != nil {
			return err
		}
		if _, err := ex.ExecContext(ctx, ddl.CreateTable(t, true)); err != nil {
			return fmt.Errorf("create table %s: %w", t.Name, err)
		}
	case tableV2:
	case tableV1, tablePartial:
		if err := onOutdated(ctx, ex, st); err != nil {
			return err
		}
		st, err := inspect(ctx, ex, t)
		if err != nil {
			return err
		}
		if st != tableV2 {
			return fmt.Errorf("%w: table %s is still %s after its migration", ErrOutdatedTable, t.Name, st)
		}
	default:
		return fmt.Errorf("table %s: unexpected state %s", t.Name, st)
	}
	if err := ensureIndexes(ctx, ex, t); err != nil {
		return err
	}
	return ensureSideTables(ctx, ex, t)
}

// underTableLock runs fn on one session of ex (oneSession) holding the
// lock that serializes installs, migrations and uninstalls of t
// (lockTable); an error releasing the lock is returned when fn succeeded.
func underTableLock(ctx context.Context, ex execQueryer, t engine.Table, fn func(context.Context, execQueryer) error) (err error) {
	ex, release, err := oneSession(ctx, t.Kind, ex)
	if err != nil {
		return err
	}
	defer release()
	unlock, err := lockTable(ctx, ex, t)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return fn(ctx, ex)
}

// inspectOwn is inspect for a caller that will touch t or its side
// objects: it refuses, with an error wrapping ErrForeignTable, a table of
// the name that is not a jobqueue table (foreignError) and a side object's
// name held by something else (checkSideObjects).
func inspectOwn(ctx context.Context, q queryer, t engine.Table) (tableState, error) {
	st, err := inspect(ctx, q, t)
	if err != nil {
		return st, err
	}
	if st == tableForeign {
		return st, foreignError(t)
	}
	return st, checkSideObjects(ctx, q, t)
}

// refuseView returns an error wrapping ErrForeignTable (engine.ErrViewName)
// when the name of t, which inspect found in state st, is a view's: its
// columns may be a jobs table's (a view of one), but Install, Migrate and
// Uninstall create indexes on and drop tables, and a view is neither.
func refuseView(ctx context.Context, q queryer, t engine.Table, st tableState) error {
	if st == tableMissing {
		return nil
	}
	kind, err := relationKind(ctx, q, t)
	if err != nil || kind != "view" {
		return err
	}
	return fmt.Errorf("%w: %s is a view, not a table: installing, migrating and uninstalling work on a jobs table itself; name the table the view selects from, or choose another name", engine.ErrViewName, t.Name)
}

// ensureSideTables creates the side tables of t (internal/ddl.SideTables)
// that are missing; their statements are idempotent, so it runs them all
// on every install. Then it makes their declared indexes right
// (ensureSideIndexes).
func ensureSideTables(ctx context.Context, ex execQueryer, t engine.Table) error {
	for _, o := range ddl.SideObjects(t) {
		if _, err := ex.ExecContext(ctx, o.Create); err != nil {
			return fmt.Errorf("create %s %s of table %s: %w", o.Kind, o.Name, t.Name, err)
		}
	}
	return ensureSideIndexes(ctx, ex, t)
}

// refuseLeftoverRows returns an error wrapping ErrSideNameTaken when the
// jobs table t is missing but one of its side tables whose rows name jobs
// (ddl.SideTable.NamesJobs) exists with rows: they were left by a table of
// that name dropped by hand, and would name the jobs of the new one (a
// job would hold a key it was never given). Nothing is created; Uninstall
// drops the leftovers.
func refuseLeftoverRows(ctx context.Context, q queryer, t engine.Table) error {
	for _, st := range ddl.SideTables() {
		if !st.NamesJobs {
			continue
		}
		side := ddl.Side(t, st.Suffix)
		if kind, err := relationKind(ctx, q, side); err != nil || kind != "table" {
			return err // checkSideObjects took any other kind
		}
		var one int
		found, err := queryOne(ctx, q, []any{&one}, "SELECT 1 FROM "+side.Quoted()+" LIMIT 1")
		if err != nil {
			return fmt.Errorf("read side table %s: %w", side.Name, err)
		}
		if found {
			return fmt.Errorf("%w: table %s is missing but its side table %s has rows, left by a table %s dropped by hand; "+
				"they would name the new table's jobs, so nothing was created: drop the leftovers with `jobqueue uninstall --table %s` "+
				"(or migrations.Uninstall), then install again, or choose another table name",
				engine.ErrSideNameTaken, t.Name, side.Name, t.Name, t.Name)
		}
	}
	return nil
}

// oneSession returns ex, or on MySQL, when ex is a *sql.DB, one connection
// taken from its pool: MySQL's table lock (GET_LOCK) and session time zone
// belong to one session. release gives the connection back.
func oneSession(ctx context.Context, k engine.Kind, ex execQueryer) (_ execQueryer, release func(), err error) {
	db, ok := ex.(*sql.DB)
	if k != engine.MySQL || !ok {
		return ex, func() {}, nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("take a connection: %w", err)
	}
	return conn, func() { conn.Close() }, nil
}

// lockTable takes a lock that serializes installs, migrations and
// uninstalls of t, and returns its release:
//   - PostgreSQL: pg_advisory_xact_lock, released when ex's transaction
//     ends (outside a transaction it would end at once: use a *sql.Tx),
//     keyed by the current schema and the table; an error when there is
//     no current schema;
//   - MySQL: GET_LOCK (a session lock: ex must be one session, a *sql.Conn
//     or *sql.Tx), released by the returned func;
//   - SQLite: none needed; the write transaction is the lock.
func lockTable(ctx context.Context, ex execQueryer, t engine.Table) (func() error, error) {
	nop := func() error { return nil }
	switch t.Kind {
	case engine.Postgres:
		// The lock is per schema; without one (no schema of search_path
		// exists) nothing could be created, and the key would be NULL.
		var schema sql.NullString
		var path string
		if _, err := queryOne(ctx, ex, []any{&schema, &path}, `SELECT current_schema(), current_setting('search_path')`); err != nil {
			return nil, fmt.Errorf("lock table %s: read the current schema: %w", t.Name, err)
		}
		if !schema.Valid {
			return nil, fmt.Errorf("the connection has no current schema: no schema of its search_path (%s) exists; create that schema, or set search_path to one that exists (in a pgx URL: search_path=NAME)", path)
		}
		if _, err := ex.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('jobqueue.table:' || current_schema() || '.' || $1::text))`, t.Name); err != nil {
			return nil, fmt.Errorf("lock table %s: %w", t.Name, err)
		}
		return nop, nil
	case engine.MySQL:
		// MySQL lock names are at most 64 characters: hash database.table.
		const name = `CONCAT('jobqueue:', LEFT(SHA2(CONCAT(DATABASE(), '.', ?), 256), 40))`
		rows, err := ex.QueryContext(ctx, `SELECT GET_LOCK(`+name+`, 120)`, t.Name)
		if err != nil {
			return nil, fmt.Errorf("lock table %s: %w", t.Name, err)
		}
		var got sql.NullInt64
		for rows.Next() {
			err = rows.Scan(&got)
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = rows.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("lock table %s: %w", t.Name, err)
		}
		if got.Int64 != 1 {
			return nil, fmt.Errorf("lock table %s: another install, migration or uninstall of it has held the lock for 120 s; try again when it has finished", t.Name)
		}
		return func() error {
			_, err := ex.ExecContext(context.WithoutCancel(ctx), `DO RELEASE_LOCK(`+name+`)`, t.Name)
			return err
		}, nil
	default:
		return nop, nil
	}
}

// ensureIndexes makes the four indexes of t match SPEC section 2: it
// creates the missing ones and rebuilds (drop and create) any of ours whose
// columns differ or that is not a plain valid B-tree (indexInfo.sameAs),
// leaving other indexes alone, then reads the catalog again
// and fails if one is still not right (for example because another table
// owns an index of that name on PostgreSQL or SQLite, where index names are
// per schema). It does not look at the table's columns, so a migration can
// call it on a partly migrated table.
func ensureIndexes(ctx context.Context, ex execQueryer, t engine.Table) error {
	have, err := indexes(ctx, ex, t)
	if err != nil {
		return err
	}
	for _, ix := range ddl.Indexes() {
		name := t.IndexName(ix.Suffix)
		cur, ok := have[indexKey(t, name)]
		if ok && cur.sameAs(ix.Columns) {
			continue
		}
		var stmts []string
		shown := cur
		shown.Invalid = false
		switch {
		case !ok:
			stmts = []string{ddl.CreateIndex(t, ix)}
		case cur.Unhide != "" && shown.sameAs(ix.Columns):
			// Right but hidden from the optimizer (MySQL): show it.
			stmts = []string{"ALTER TABLE " + t.Quoted() + " " + cur.Unhide}
		case cur.Unhide != "":
			// Wrong and hidden: rebuild it, then make sure the new one
			// is not hidden too (MariaDB may keep the flag).
			stmts = []string{"ALTER TABLE " + t.Quoted() + " DROP INDEX " + ddl.QuoteIdent(t.Kind, name) +
				", ADD INDEX " + ddl.QuoteIdent(t.Kind, name) + " (" + strings.Join(ix.Columns, ", ") + ")",
				"ALTER TABLE " + t.Quoted() + " " + cur.Unhide}
		case t.Kind == engine.MySQL:
			// One statement, so the table is never without the index.
			stmts = []string{"ALTER TABLE " + t.Quoted() + " DROP INDEX " + ddl.QuoteIdent(t.Kind, name) +
				", ADD INDEX " + ddl.QuoteIdent(t.Kind, name) + " (" + strings.Join(ix.Columns, ", ") + ")"}
		default:
			stmts = []string{"DROP INDEX IF EXISTS " + ddl.QuoteIdent(t.Kind, name), ddl.CreateIndex(t, ix)}
		}
		for _, s := range stmts {
			if _, err := ex.ExecContext(ctx, s); err != nil && !isDuplicateIndex(t.Kind, err) {
				return fmt.Errorf("index %s of table %s: %w", name, t.Name, err)
			}
		}
	}
	have, err = indexes(ctx, ex, t)
	if err != nil {
		return err
	}
	for _, ix := range ddl.Indexes() {
		name := t.IndexName(ix.Suffix)
		if cur, ok := have[indexKey(t, name)]; !ok || !cur.sameAs(ix.Columns) {
			return indexTakenError(ctx, ex, t, name, ix.Columns, cur.Columns)
		}
	}
	return nil
}

// indexTakenError says why the index name of t, which should be on cols,
// is not (found are its columns on t, if any): on PostgreSQL and SQLite,
// where index names are per schema, another table may hold the name. When
// that table is a jobqueue table (X_type holds X's
// idx_X_type_status_scheduled), the two names cannot both be installed.
func indexTakenError(ctx context.Context, q queryer, t engine.Table, name string, cols, found []string) error {
	want := strings.Join(cols, ", ")
	var owner string
	var query string
	switch t.Kind {
	case engine.Postgres:
		query = `SELECT tablename FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1`
	case engine.SQLite:
		query = `SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ? COLLATE NOCASE`
	}
	if query != "" {
		if _, err := queryOne(ctx, q, []any{&owner}, query, name); err != nil {
			return fmt.Errorf("index %s of table %s is not on (%s) after install; looking up which table holds the name: %w", name, t.Name, want, err)
		}
	}
	if owner == "" || strings.EqualFold(owner, t.Name) {
		return fmt.Errorf("index %s of table %s is not on (%s) after install (found %v); is the name taken by another table's index? drop or rename that one", name, t.Name, want, found)
	}
	other := engine.Table{Kind: t.Kind, Name: owner}
	if st, err := inspect(ctx, q, other); err == nil && st != tableMissing && st != tableForeign {
		return fmt.Errorf("table %s needs the index name %s, which jobqueue table %s holds (index names are per schema on %s): the two table names cannot both be installed here; choose another table name",
			t.Name, name, owner, engineTitle(t.Kind))
	}
	return fmt.Errorf("table %s needs the index name %s, which table %s holds (index names are per schema on %s); drop or rename that index, or choose another table name",
		t.Name, name, owner, engineTitle(t.Kind))
}

// isDuplicateIndex reports MySQL's "duplicate key name" (1061), which a
// concurrent install that created the same index first causes; the check
// after it makes sure the index is right.
func isDuplicateIndex(k engine.Kind, err error) bool {
	var me *mysql.MySQLError
	return k == engine.MySQL && errors.As(err, &me) && me.Number == 1061
}
