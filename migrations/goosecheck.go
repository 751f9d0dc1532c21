package migrations

// The goose file cannot run Go, so it cannot call checkSideObjects before
// it creates anything, as Install does. It carries the same rule in SQL: a
// statement per side object that fails the migration, with a message
// saying what to do, when the object's name is held by something that is
// not that side object (another kind of object, or one whose columns are
// not exactly ddl's). Each engine fails a statement its own way, in plain
// SQL (no stored routine, which would need more privileges):
//   - PostgreSQL: a DO block that raises an exception;
//   - MySQL/MariaDB: SET of sql_mode to the message, which the server
//     refuses with "Variable 'sql_mode' can't be set to the value of
//     '<message>'" (SIGNAL cannot run outside a stored routine, nor be
//     prepared, on MySQL), or to sql_mode itself when all is well;
//   - SQLite: an insert into a temporary table whose CHECK constraint is
//     named by the message ("CHECK constraint failed: <message>").

import (
	"fmt"
	"strings"

	"github.com/jobqueue/jobqueue/internal/ddl"
	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/internal/schema"
)

// gooseSideChecks returns the statements that fail the goose migration of
// the jobs table t when the name of its side object o is held by
// something else; none for an object that is not a side table or view.
// The names are checked ones (letters, digits, underscores), so they go
// into string literals as they are.
func gooseSideChecks(t engine.Table, o ddl.Object) []string {
	switch {
	case o.Kind == ddl.SideTableKind || o.Kind == ddl.SideView:
		return gooseFailIf(t, o.Name, sideTakenSQL(o), sideTakenMessage(o))
	case o.Kind == ddl.JobsIndex && t.Kind != engine.MySQL:
		return gooseFailIf(t, o.Name, indexTakenSQL(t, o), indexTakenMessage(o))
	}
	return nil
}

// gooseSideIndexChecks returns the statements that fail the goose
// migration of the jobs table t, on PostgreSQL and SQLite, when an index of
// another table holds the name of an index a side table declares
// (ddl.SideTable.Indexes): CREATE INDEX IF NOT EXISTS would do nothing, and
// Install refuses it (checkSideIndexes).
func gooseSideIndexChecks(t engine.Table) []string {
	if t.Kind == engine.MySQL {
		return nil // index names are per table there
	}
	var out []string
	for _, st := range ddl.SideTables() {
		side := ddl.Side(t, st.Suffix)
		for _, ix := range st.Indexes {
			o := ddl.Object{Kind: ddl.JobsIndex, Table: side, Name: ddl.IndexName(side, ix.Suffix)}
			out = append(out, gooseFailIf(t, o.Name, indexTakenSQL(side, o), indexTakenMessage(o))...)
		}
	}
	return out
}

// gooseFailIf returns the statements that fail the goose migration of t
// with msg when the SQL condition cond is true; name (checked, as cond's
// names are) names SQLite's temporary check table.
func gooseFailIf(t engine.Table, name, cond, msg string) []string {
	switch t.Kind {
	case engine.Postgres:
		return []string{fmt.Sprintf(`DO $$
BEGIN
    IF %s THEN
        RAISE EXCEPTION '%s';
    END IF;
END
$$`, cond, msg)}
	case engine.MySQL:
		return []string{fmt.Sprintf(`SET SESSION sql_mode = (SELECT IF(%s, '%s', @@SESSION.sql_mode))`, cond, msg)}
	default:
		check := engine.Table{Kind: t.Kind, Name: "jobqueue_check_" + name}.Quoted()
		return []string{
			"DROP TABLE IF EXISTS temp." + check,
			fmt.Sprintf(`CREATE TEMP TABLE %s (taken INTEGER CONSTRAINT "%s" CHECK (NOT taken))`, check, msg),
			fmt.Sprintf("INSERT INTO temp.%s (taken) SELECT %s", check, cond),
			"DROP TABLE temp." + check,
		}
	}
}

// tableNotV2Message is the error of a goose migration that found a table
// named t that is not a version 2 jobqueue table: version 1, partly
// migrated, another program's, or a view. Up would leave it as it is (CREATE TABLE
// IF NOT EXISTS) and, on MySQL, go through and be recorded as applied, so
// the check refuses it as Install does (ErrOutdatedTable, ErrForeignTable).
// No quotes or commas, and at most 200 characters, as sideTakenMessage.
func tableNotV2Message(t engine.Table) string {
	return fmt.Sprintf("jobqueue: table %s is not a version 2 jobqueue table: migrate a version 1 one with jobqueue migrate or choose another table name", t.Name)
}

// tableNotV2SQL is a boolean SQL expression (on t's engine) that is true
// when the name of t is held by something other than a table
// (notTableSQL), or a table named t exists that schema.Classify would not
// call version 2: one of the version 2 columns is missing, retry_count or
// locked_at is there, or on MySQL the status ENUM lacks 'expired' or
// created_at is not a DATETIME.
func tableNotV2SQL(t engine.Table) string {
	v2 := append(append([]string{}, schema.V2OnlyColumns...), schema.CommonColumns...)
	in := func(names []string) string { return "'" + strings.Join(names, "', '") + "'" }
	var cols, name string
	switch t.Kind {
	case engine.Postgres:
		cols, name = fmt.Sprintf(`FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '%s'`, t.Name), "column_name"
	case engine.MySQL:
		cols, name = fmt.Sprintf(`FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '%s'`, t.Name), "COLUMN_NAME"
	default:
		cols, name = fmt.Sprintf(`FROM pragma_table_info('%s') WHERE 1 = 1`, t.Name), "lower(name)"
	}
	cond := fmt.Sprintf(`EXISTS (SELECT 1 %[1]s)
        AND ((SELECT count(*) %[1]s AND %[2]s IN (%[3]s)) <> %[4]d
             OR EXISTS (SELECT 1 %[1]s AND %[2]s IN (%[5]s))`,
		cols, name, in(v2), len(v2), in(schema.V1OnlyColumns))
	if t.Kind == engine.MySQL {
		cond += fmt.Sprintf(`
             OR (SELECT COUNT(*) %s AND ((COLUMN_NAME = 'status' AND COLUMN_TYPE LIKE '%%''expired''%%')
                                        OR (COLUMN_NAME = 'created_at' AND COLUMN_TYPE = 'datetime'))) <> 2`, cols)
	}
	return "(" + cond + "))\n    OR " + notTableSQL(t)
}

// notTableSQL is a boolean SQL expression (on t's engine) that is true
// when the name of t is held by something other than a table (a view, a
// sequence, …), which Install refuses (ErrViewName) and CREATE TABLE IF
// NOT EXISTS would skip.
func notTableSQL(t engine.Table) string {
	switch t.Kind {
	case engine.Postgres:
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relname = '%s' AND c.relkind NOT IN ('r', 'p'))`, t.Name)
	case engine.MySQL:
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM information_schema.TABLES
        WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '%s' AND TABLE_TYPE <> 'BASE TABLE')`, t.Name)
	default:
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM sqlite_master WHERE name = '%s' COLLATE NOCASE AND type <> 'table')`, t.Name)
	}
}

// indexTakenMessage is the error of a goose migration that found the
// name of the jobs table's index o held by an index of another table
// (PostgreSQL and SQLite, where index names are per schema: the jobs table
// X_type holds X's idx_X_type_status_scheduled). No quotes or commas, as
// sideTakenMessage.
func indexTakenMessage(o ddl.Object) string {
	return fmt.Sprintf("jobqueue: the index name %s is held by another table (index names are per schema): choose another table name or drop or rename that index", o.Name)
}

// indexTakenSQL is a boolean SQL expression (PostgreSQL or SQLite) that
// is true when the name of t's index o is held by an index of another
// table.
func indexTakenSQL(t engine.Table, o ddl.Object) string {
	if t.Kind == engine.Postgres {
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = '%s' AND tablename <> '%s')`, o.Name, t.Name)
	}
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = '%s' COLLATE NOCASE AND tbl_name <> '%s' COLLATE NOCASE)`, o.Name, t.Name)
}

// sideTakenMessage is the error of a goose migration that found the name
// of t's side object o held by something else. It has no quotes or commas
// (MySQL would cut the message at a comma) and is at most 200 characters
// long (MySQL's limit for the value it shows) for the longest names.
func sideTakenMessage(o ddl.Object) string {
	return fmt.Sprintf("jobqueue: %s is not the %s jobqueue needs (another object holds the name): rename that object or choose another table name", o.Name, o.Kind)
}

// sideTakenSQL is a boolean SQL expression (on o's engine) that is true
// when o's name is held by an object that is not o: of another kind, or
// without exactly o's columns (schema.CheckSideObjects' rule).
func sideTakenSQL(o ddl.Object) string {
	in := "'" + strings.Join(o.Columns, "', '") + "'"
	n := len(o.Columns)
	switch o.Table.Kind {
	case engine.Postgres:
		kinds := "'r', 'p'"
		if o.Kind == ddl.SideView {
			kinds = "'v'"
		}
		cols := `FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped`
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relname = '%s'
          AND (c.relkind NOT IN (%s)
               OR (SELECT count(*) %s) <> %d
               OR (SELECT count(*) %s AND a.attname IN (%s)) <> %d))`,
			o.Name, kinds, cols, n, cols, in, n)
	case engine.MySQL:
		kind := "BASE TABLE"
		if o.Kind == ddl.SideView {
			kind = "VIEW"
		}
		cols := `FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME`
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM information_schema.TABLES t
    WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = '%s'
      AND (t.TABLE_TYPE <> '%s'
           OR (SELECT COUNT(*) %s) <> %d
           OR (SELECT COUNT(*) %s AND c.COLUMN_NAME IN (%s)) <> %d))`,
			o.Name, kind, cols, n, cols, in, n)
	default:
		kind := "table"
		if o.Kind == ddl.SideView {
			kind = "view"
		}
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM sqlite_master m
    WHERE m.name = '%[1]s' COLLATE NOCASE AND m.type IN ('table', 'view', 'index')
      AND (m.type <> '%[2]s'
           OR (SELECT count(*) FROM pragma_table_info('%[1]s')) <> %[3]d
           OR (SELECT count(*) FROM pragma_table_info('%[1]s') WHERE name IN (%[4]s)) <> %[3]d))`,
			o.Name, kind, n, in)
	}
}

// wrongIndexMessage is the error of a goose migration of the jobs table t
// that found ix, an index of on (t or one of its side tables), missing
// where the file would not create it, or not as jobqueue defines it. No
// quotes or commas, and on MySQL at most 200 characters, as
// sideTakenMessage.
func wrongIndexMessage(t, on engine.Table, ix string) string {
	return fmt.Sprintf("jobqueue: index %s of %s is missing or not as jobqueue defines it: run jobqueue install to rebuild it then goose up again", ix, on.Name)
}

// gooseIndexChecks returns the statements that fail the goose migration of
// the jobs table t when an index of an existing table of it (the jobs
// table's four, a side table's declared ones) is not exactly as Install
// makes it (indexWrongSQL): Up would leave it as it is (on MySQL a missing
// one too, the indexes being part of CREATE TABLE IF NOT EXISTS), where
// Install rebuilds it. SQL cannot rebuild an index only when it is wrong
// on every engine (SQLite has no conditional DDL), so the file refuses and
// names jobqueue install, as it names jobqueue migrate for a version 1
// table.
func gooseIndexChecks(t engine.Table) []string {
	var out []string
	for _, ix := range ddl.Indexes() {
		name := t.IndexName(ix.Suffix)
		out = append(out, gooseFailIf(t, name, indexWrongSQL(t, name, ix.Columns, false), wrongIndexMessage(t, t, name))...)
	}
	for _, st := range ddl.SideTables() {
		side := ddl.Side(t, st.Suffix)
		for _, ix := range st.Indexes {
			name := ddl.IndexName(side, ix.Suffix)
			out = append(out, gooseFailIf(t, name, indexWrongSQL(side, name, ix.Columns, ix.Unique), wrongIndexMessage(t, side, name))...)
		}
	}
	return out
}

// indexWrongSQL is a boolean SQL expression (on on's engine) that is true
// when the table on exists and its index name is not the plain, valid
// B-tree index on exactly cols (unique when unique is) that Install makes
// (indexInfo.matches), or, on MySQL, is missing; on PostgreSQL and SQLite
// a missing one is not wrong (CREATE INDEX IF NOT EXISTS creates it). The
// rule is Install's, in SQL:
//   - PostgreSQL: valid and ready, and pg_get_indexdef is the plain
//     definition (no other method, collation, operator class, order,
//     NULLs placement, INCLUDE, WHERE or NULLS NOT DISTINCT), followed by
//     nothing or by storage parameters (WITH (fillfactor = …)), which
//     Install leaves alone too;
//   - MySQL: a B-tree whose parts are exactly cols, ascending, whole
//     columns, unique as wanted, and not hidden from the optimizer
//     (MySQL's IS_VISIBLE = 'NO', MariaDB's IGNORED = 'YES': the natural
//     join matches whichever column the server has);
//   - SQLite: unique as wanted, not partial, its key columns exactly cols,
//     ascending, with the BINARY collation.
func indexWrongSQL(on engine.Table, name string, cols []string, unique bool) string {
	switch on.Kind {
	case engine.Postgres:
		create := "CREATE INDEX "
		if unique {
			create = "CREATE UNIQUE INDEX "
		}
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM pg_index ix
        JOIN pg_class i ON i.oid = ix.indexrelid
        JOIN pg_class c ON c.oid = ix.indrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relname = '%[2]s' AND i.relname = '%[1]s'
          AND NOT (ix.indisvalid AND ix.indisready
                   AND (SELECT d = plain OR (left(d, length(plain) + 7) = plain || ' WITH (' AND strpos(substr(d, length(plain) + 1), ' WHERE ') = 0)
                        FROM (SELECT pg_get_indexdef(ix.indexrelid) AS d,
                                     '%[3]s' || quote_ident('%[1]s') || ' ON ' || quote_ident(current_schema()) || '.' || quote_ident('%[2]s') || ' USING btree (%[4]s)' AS plain) def)))`,
			name, on.Name, create, strings.Join(cols, ", "))
	case engine.MySQL:
		nonUnique := 1
		if unique {
			nonUnique = 0
		}
		stats := fmt.Sprintf(`FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '%s' AND INDEX_NAME = '%s'`, on.Name, name)
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '%[1]s')
        AND ((SELECT COUNT(*) %[2]s) <> %[3]d
             OR COALESCE((SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX SEPARATOR ',') %[2]s
                 AND NON_UNIQUE = %[4]d AND SUB_PART IS NULL AND INDEX_TYPE = 'BTREE' AND COLLATION = 'A'), '') <> '%[5]s'
             OR EXISTS (SELECT 1 FROM information_schema.STATISTICS NATURAL JOIN (SELECT 'NO' AS IS_VISIBLE, 'YES' AS IGNORED) hidden
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '%[1]s' AND INDEX_NAME = '%[6]s'))`,
			on.Name, stats, len(cols), nonUnique, strings.Join(cols, ","), name)
	default:
		u := 0
		if unique {
			u = 1
		}
		var at []string
		for i, c := range cols {
			at = append(at, fmt.Sprintf("(seqno = %d AND lower(name) = '%s')", i, c))
		}
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = '%[1]s' COLLATE NOCASE AND tbl_name = '%[2]s' COLLATE NOCASE)
        AND NOT (EXISTS (SELECT 1 FROM pragma_index_list('%[2]s') WHERE name = '%[1]s' COLLATE NOCASE AND "unique" = %[3]d AND partial = 0)
                 AND (SELECT count(*) FROM pragma_index_xinfo('%[1]s') WHERE key) = %[4]d
                 AND (SELECT count(*) FROM pragma_index_xinfo('%[1]s') WHERE key AND "desc" = 0 AND upper(coll) = 'BINARY'
                          AND (%[5]s)) = %[4]d)`,
			name, on.Name, u, len(cols), strings.Join(at, " OR "))
	}
}
