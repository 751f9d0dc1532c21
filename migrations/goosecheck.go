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
